"""The template language: `[[instruction]]` gaps for the generator LLM, `{{name}}` value gaps.

A gap may be named (`[[metric: name a metric in percent]]`) so that its filled text can be
reused as `{{metric}}` elsewhere, including inside another gap's instruction. That is how a
treatment can ask for "the opposite of the metric chosen in the control".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_LABEL_RE = re.compile(r"^\s*([a-z][a-z0-9_]*):\s+")
_BRACKET_RE = re.compile(r"\[\[|\]\]|\{\{|\}\}")


class TemplateSyntaxError(ValueError):
    """A malformed template string; `offset` is 0-based within that string."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class ValueGap:
    """`{{name}}`: filled from a value generator, a derived value or a named LLM gap."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class LLMGap:
    """`[[instruction]]` or `[[name: instruction]]`, filled by the generator LLM."""

    instruction: str
    name: str | None
    start: int
    end: int
    refs: tuple[ValueGap, ...] = ()

    def resolve(self, values: Mapping[str, Any]) -> str:
        """The instruction with its `{{refs}}` replaced, as the generator LLM sees it.

        References not (yet) in `values` stay visible as `{{name}}`.
        """
        return substitute(self.instruction, values)


Segment = str | LLMGap | ValueGap


def parse(text: str) -> list[Segment]:
    """Split a template string into literal text and gaps, checking brackets as it goes."""
    segments: list[Segment] = []
    pos = 0
    while True:
        match = _BRACKET_RE.search(text, pos)
        if match is None:
            if pos < len(text):
                segments.append(text[pos:])
            return segments
        token, start = match.group(), match.start()
        if token in ("]]", "}}"):
            opener = "[[" if token == "]]" else "{{"
            raise TemplateSyntaxError(
                f"'{token}' closes a gap that was never opened with '{opener}'", start
            )
        if start > pos:
            segments.append(text[pos:start])
        if token == "{{":
            gap, pos = _parse_value_gap(text, start)
        else:
            gap, pos = _parse_llm_gap(text, start)
        segments.append(gap)


def _parse_value_gap(text: str, start: int) -> tuple[ValueGap, int]:
    end = text.find("}}", start + 2)
    if end < 0:
        raise TemplateSyntaxError("'{{' is never closed with '}}'", start)
    inner = text[start + 2 : end]
    if "[[" in inner or "{{" in inner or "]]" in inner:
        raise TemplateSyntaxError("'{{' is never closed with '}}' before another bracket", start)
    name = inner.strip()
    if not NAME_RE.fullmatch(name):
        raise TemplateSyntaxError(
            f"'{{{{{inner}}}}}' is not a value name: use lower-case letters, digits and '_', "
            "starting with a letter",
            start,
        )
    return ValueGap(name, start, end + 2), end + 2


def _parse_llm_gap(text: str, start: int) -> tuple[LLMGap, int]:
    refs: list[ValueGap] = []
    pos = start + 2
    body_start = pos
    while True:
        match = _BRACKET_RE.search(text, pos)
        if match is None:
            raise TemplateSyntaxError("'[[' is never closed with ']]'", start)
        token = match.group()
        if token == "[[":
            raise TemplateSyntaxError(
                "a '[[' gap cannot contain another '[[' gap (is a ']]' missing?)", start
            )
        if token == "}}":
            raise TemplateSyntaxError(
                "'}}' closes a value gap that was never opened", match.start()
            )
        if token == "{{":
            ref, pos = _parse_value_gap(text, match.start())
            refs.append(ref)
            continue
        end = match.start()
        break
    body = text[body_start:end]
    name = None
    label = _LABEL_RE.match(body)
    if label:
        name = label.group(1)
        shift = label.end()
        body = body[shift:]
        body_start += shift
    refs = [ValueGap(r.name, r.start - body_start, r.end - body_start) for r in refs]
    instruction = body.strip()
    if not instruction:
        raise TemplateSyntaxError(
            "empty gap '[[ ]]': write an instruction for the generator", start
        )
    strip_shift = len(body) - len(body.lstrip())
    refs = [ValueGap(r.name, r.start - strip_shift, r.end - strip_shift) for r in refs]
    return LLMGap(instruction, name, start, end + 2, tuple(refs)), end + 2


def substitute(text: str, values: Mapping[str, Any]) -> str:
    """Replace each known `{{name}}` by its value (lists are joined with ', ')."""
    return _REF_RE.sub(
        lambda m: show_value(values[m.group(1)]) if m.group(1) in values else m.group(0), text
    )


_REF_RE = re.compile(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}")


def show_value(value: Any) -> str:
    """How a sampled value reads in a template: lists joined, 40.0 as 40."""
    if isinstance(value, list | tuple):
        return ", ".join(show_value(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Template:
    """One half of a test case: situation, prompt and answer options, each a template string."""

    situation: str
    prompt: str
    options: tuple[str, ...]
    parsed: dict[str, list[Segment]] = field(default_factory=dict, compare=False, repr=False)

    def fields(self) -> Iterable[tuple[str, str]]:
        """(field path, text) pairs in reading order; options are `options[i]`."""
        yield "situation", self.situation
        yield "prompt", self.prompt
        for i, option in enumerate(self.options):
            yield f"options[{i}]", option

    def segments(self, path: str) -> list[Segment]:
        if path not in self.parsed:
            self.parsed[path] = parse(dict(self.fields())[path])
        return self.parsed[path]

    def llm_gaps(self) -> list[LLMGap]:
        return [
            s for path, _ in self.fields() for s in self.segments(path) if isinstance(s, LLMGap)
        ]

    def value_gaps(self) -> list[ValueGap]:
        """Value gaps in the text and inside gap instructions."""
        found: list[ValueGap] = []
        for path, _ in self.fields():
            for s in self.segments(path):
                if isinstance(s, ValueGap):
                    found.append(s)
                elif isinstance(s, LLMGap):
                    found.extend(s.refs)
        return found


SECTIONS = "sections"  # "Situation: … Prompt: … Answer options: Option 1: …" (Malberg et al.)
LETTERED = "lettered"  # the question, then "(a) …", "(b) …" as presented (the token-bias items)
QUESTION = "question"  # the question alone: its options are not written out (Yes/No, a number)
LAYOUTS = (SECTIONS, LETTERED, QUESTION)


@dataclass(frozen=True)
class Filled:
    """A template with every gap filled: what a decision model is asked.

    `layout` says how the text is shown (one of LAYOUTS): each study shows its items as its
    paper did, and the option labels always follow the order presented.
    """

    situation: str
    prompt: str
    options: tuple[str, ...]
    layout: str = SECTIONS


GapFiller = Callable[[LLMGap], str | None]


def fill(template: Template, values: Mapping[str, Any], llm_fill: GapFiller) -> Filled:
    """Fill all gaps. `llm_fill` returns the text for an LLM gap, or None to leave it visible."""

    def render(path: str) -> str:
        out: list[str] = []
        for seg in template.segments(path):
            if isinstance(seg, str):
                out.append(seg)
            elif isinstance(seg, ValueGap):
                out.append(substitute(f"{{{{{seg.name}}}}}", values))
            else:
                text = llm_fill(seg)
                out.append(text if text is not None else f"[[{seg.resolve(values)}]]")
        return "".join(out)

    return Filled(
        render("situation"),
        render("prompt"),
        tuple(render(f"options[{i}]") for i in range(len(template.options))),
    )


def render_decision_text(filled: Filled, order: Sequence[int] | None = None) -> str:
    """The text a decision model sees; `order` lists original option indices as presented.

    No section is written without content: an empty situation or prompt has no header.
    """
    order = list(range(len(filled.options))) if order is None else list(order)
    situation, prompt = filled.situation.strip(), filled.prompt.strip()
    if filled.layout in (LETTERED, QUESTION):
        lines = [text for text in (situation, prompt) if text]
        if filled.layout == LETTERED:
            lines += [f"({chr(ord('a') + i)}) {filled.options[j]}" for i, j in enumerate(order)]
        return "\n".join(lines)
    blocks = [f"Situation: {situation}"] if situation else []
    blocks += [f"Prompt: {prompt}"] if prompt else []
    if order:
        options = [f"Option {i + 1}: {filled.options[j]}" for i, j in enumerate(order)]
        blocks.append("\n".join(["Answer options:", *options]))
    return "\n\n".join(blocks)


def render_options(options: Sequence[str], order: Sequence[int] | None = None) -> str:
    """Just the numbered options, as the extraction prompt shows them."""
    order = list(range(len(options))) if order is None else list(order)
    return "\n".join(f"Option {i + 1}: {options[j]}" for i, j in enumerate(order))


_TOKEN_RE = re.compile(r"\s+|\w+|[^\w\s]")


def diff(control: str, treatment: str) -> list[tuple[str, str]]:
    """Word-level difference as (op, text) with op in 'equal', 'control', 'treatment'.

    Teaching pages highlight the bias-eliciting detail; words are the unit people read.
    """
    a, b = _TOKEN_RE.findall(control), _TOKEN_RE.findall(treatment)
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("control", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("treatment", "".join(b[j1:j2])))
    return out
