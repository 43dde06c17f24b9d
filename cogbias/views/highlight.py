"""Templates and filled pairs as HTML: gaps in their colours, the bias-eliciting difference
marked, every insertion labelled with its source.

Pure functions (no Streamlit), so what the teaching pages show is unit-tested. All text is
escaped (`safe_text.html_text`) before any markup is added.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cogbias.core.records import Instance
from cogbias.core.redact import redactor
from cogbias.core.templates import LLMGap, ValueGap, diff, show_value
from cogbias.library import examples
from cogbias.library.examples import SOURCE_LABELS
from cogbias.library.testcases import TestCase
from cogbias.views.safe_text import html_text

if TYPE_CHECKING:
    import pandas as pd

LLM_COLOR = "#1c7ed6"  # [[gaps]] the generator fills
VALUE_COLOR = "#e03131"  # {{gaps}} from value generators
MARK_COLOR = "#ffe066"  # the bias-eliciting difference
_TOKENS = re.compile(r"(\[\[|\]\]|\{\{|\}\})")
_OPENERS = {"[[": "llm", "{{": "value"}
_CLOSERS = {"]]": "llm", "}}": "value"}


def _span(kind: str) -> str:
    color = LLM_COLOR if kind == "llm" else VALUE_COLOR
    return f'<span class="gap-{kind}" style="color:{color};font-weight:600">'


def _emit(chunks: Iterable[tuple[str, bool]], stack: list[str] | None = None) -> str:
    """HTML for (text, marked) chunks with gaps coloured; tags always nest properly.

    Gap spans are closed at each chunk's end and reopened at the next chunk's start, so a
    highlighted difference inside a gap (or a gap across a difference) stays valid HTML.
    `stack` carries the open gaps from one call to the next (e.g. line by line).
    Unbalanced brackets are shown as plain text; validation reports them separately.
    """
    stack = [] if stack is None else stack
    out: list[str] = []
    for text, marked in chunks:
        if not text:
            continue
        if marked:
            out.append(f'<mark style="background:{MARK_COLOR}">')
        out.extend(_span(kind) for kind in stack)
        for part in _TOKENS.split(text):
            if part in _OPENERS:
                stack.append(_OPENERS[part])
                out.append(_span(stack[-1]) + html_text(part))
            elif part in _CLOSERS and stack and stack[-1] == _CLOSERS[part]:
                out.append(html_text(part) + "</span>")
                stack.pop()
            else:
                out.append(html_text(part))
        out.append("</span>" * len(stack))
        if marked:
            out.append("</mark>")
    return "".join(out)


def highlight_gaps(text: str) -> str:
    """Escaped text with `[[llm gaps]]` and `{{value gaps}}` in their colours."""
    return _emit([(text, False)])


def highlight_source(text: str, problem_lines: Iterable[int] = ()) -> str:
    """A whole file as numbered lines with gaps coloured and problem lines tinted red."""
    bad = set(problem_lines)
    stack: list[str] = []
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        tint = ' style="background:#ffe3e3"' if number in bad else ""
        rows.append(
            f'<div class="src-line"{tint}><span style="color:#868e96;user-select:none">'
            f"{number:>4}  </span>{_emit([(line, False)], stack)}</div>"
        )
    return "".join(rows)


def diff_html(text: str, other: str, side: str) -> str:
    """`text` (the `side` half) with the words that differ from `other` marked, gaps coloured."""
    if side not in ("control", "treatment"):
        raise ValueError("side must be 'control' or 'treatment'")
    ops = diff(text, other) if side == "control" else diff(other, text)
    return _emit([(chunk, op == side) for op, chunk in ops if op in ("equal", side)])


def case_halves_html(case: TestCase) -> dict[str, dict[str, str]]:
    """For each half: situation, prompt and options as HTML with the difference marked."""
    halves = case.templates()
    out: dict[str, dict[str, str]] = {}
    for side, other in (("control", "treatment"), ("treatment", "control")):
        mine, theirs = halves[side], halves[other]
        fields = {
            f: diff_html(getattr(mine, f), getattr(theirs, f), side)
            for f in ("situation", "prompt")
        }
        options = [
            diff_html(opt, theirs.options[i] if i < len(theirs.options) else "", side)
            for i, opt in enumerate(mine.options)
        ]
        fields["options"] = "".join(f"<li>{o}</li>" for o in options)
        out[side] = fields
    return out


# --------------------------------------------------------------------------- filled pairs


def _insertion_span(text: str, source: str, title: str) -> str:
    color = VALUE_COLOR if source == "value" else LLM_COLOR
    return (
        f'<span class="ins-{source}" title="{html.escape(title, quote=True)}" '
        f'style="background:{color}1f;border-bottom:2px solid {color}">{html_text(text)}</span>'
    )


def emphasised(marked: str) -> str:
    """A part of `filled_html`'s output in italics. `marked` must come from `filled_html` or
    `case_halves_html`, whose texts are already escaped for HTML and Markdown alike."""
    return f"<em>{marked}</em>"


def gap_sources(instance: Instance) -> str:
    """Who filled the `[[gaps]]` of this instance, in words, for a legend: the scenario,
    example fills, the generator model (named) or a mix; "nobody yet" when none is filled."""
    found = {i.get("source") for i in instance.insertions if i.get("source") != "value"}
    words = {
        "scenario": "the scenario",
        "example": "example fills (offline)",
        "llm": f"the generator model {instance.generator}",
    }
    named = [words[s] for s in ("scenario", "example", "llm") if s in found]
    if not named:
        return "nobody yet"
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def legend_html(instance: Instance) -> str:
    """The legend above a filled pair: who filled its [[gaps]] (`gap_sources`) and the value
    generators' mark, in the colours the insertions carry."""
    return (
        f'<span style="border-bottom:2px solid {LLM_COLOR}">[[gaps]] from '
        f"{html_text(gap_sources(instance))}</span>"
        f' &nbsp; <span style="border-bottom:2px solid {VALUE_COLOR}">from a value '
        "generator</span> &nbsp; (hover an insertion to see its gap)"
    )


def rejected_fills(instance: Instance) -> list[str]:
    """One sentence per model fill the checker rejected (`examples.ExampleFiller.vet`): which
    gap now holds an example fill, the model's text and why it was not used. Plain text
    (redacted: a model may echo a key), for a page to escape."""
    clean = redactor()
    return [
        f"Example fill for [[{clean(i.get('gap', ''))}]]: {clean(i['note'])}."
        for i in instance.insertions
        if i.get("source") == "example" and i.get("note")
    ]


def filled_html(case: TestCase, instance: Instance, half: str) -> dict[str, str]:
    """A filled half as HTML, every insertion marked with its source (LLM or value generator).

    Walks the template's segments again with the instance's values, so what is marked is
    exactly what was inserted. Gaps the generator has not filled stay visible as `[[...]]`.
    """
    template = case.templates()[half]
    clean = redactor()  # a generator may echo a key into a fill: never show it
    values = {k: clean(v) if isinstance(v, str) else v for k, v in instance.values.items()}
    llm_fills = {  # a rejected fill's note quotes the model's text: redacted like it
        i["gap"]: {**i, "text": clean(i["text"]) or "", "note": clean(i.get("note")) or ""}
        for i in instance.insertions
        if i.get("source") != "value"
    }
    named = case.named_gaps()
    drop_role_noun = examples.drops_role_noun(instance.scenario)  # as generate.fix_role did

    def render(path: str) -> str:
        out: list[str] = []
        after_role = False
        for seg in template.segments(path):
            if isinstance(seg, str):
                if after_role and drop_role_noun and seg.startswith(examples.ROLE_NOUN):
                    seg = seg[len(examples.ROLE_NOUN) :]
                out.append(html_text(seg))
            elif isinstance(seg, ValueGap):
                out.append(_value_gap(seg, values, named, llm_fills))
            else:
                out.append(_llm_gap(seg, values, llm_fills))
            after_role = isinstance(seg, LLMGap) and seg.instruction == examples.ROLE_GAP
        return "".join(out)

    options = "".join(f"<li>{render(f'options[{i}]')}</li>" for i in range(len(template.options)))
    return {"situation": render("situation"), "prompt": render("prompt"), "options": options}


def filled_halves_html(case: TestCase, instance: Instance) -> dict[str, dict[str, str]]:
    """`filled_html` of both halves, as every page that shows a filled pair needs them."""
    return {half: filled_html(case, instance, half) for half in ("control", "treatment")}


def _value_gap(
    seg: ValueGap,
    values: Mapping[str, Any],
    named: Mapping[str, LLMGap],
    fills: Mapping[str, Mapping[str, str]],
) -> str:
    if seg.name not in values:
        return highlight_gaps(f"{{{{{seg.name}}}}}")
    text = show_value(values[seg.name])
    if seg.name in named:
        fill = fills.get(named[seg.name].resolve(values), {"source": "llm"})
        title = f"{_source_label(fill)} (named gap '{seg.name}')"
        return _insertion_span(text, str(fill.get("source", "llm")), title)
    return _insertion_span(text, "value", f"value generator '{seg.name}'")


def _llm_gap(seg: LLMGap, values: Mapping[str, Any], fills: Mapping[str, Mapping[str, str]]) -> str:
    key = seg.resolve(values)
    if key not in fills:
        return highlight_gaps(f"[[{key}]]")
    fill = fills[key]
    title = f"{_source_label(fill)}: {key}"
    return _insertion_span(fill["text"], str(fill.get("source", "llm")), title)


def _source_label(insertion: Mapping[str, str]) -> str:
    """Where an insertion came from, in words (a rejected model fill says so)."""
    source = insertion.get("source", "llm")
    label = SOURCE_LABELS.get(source, source)
    return f"{label} ({insertion['note']})" if insertion.get("note") else label


def insertions_frame(instance: Instance) -> pd.DataFrame:
    """Every insertion of an instance: gap, source and the inserted text (redacted)."""
    # pandas is imported on use: Learn's first page imports this module and shows no table
    # until a pair is run, and pandas takes ~0.3 s to import.
    import pandas as pd

    clean = redactor()
    rows = [
        {
            "source": clean(_source_label(i)),  # a note quotes the model's text
            "gap": i.get("gap", ""),
            "inserted text": clean(i.get("text", "")),
        }
        for i in instance.insertions
    ]
    return pd.DataFrame(rows, columns=["source", "gap", "inserted text"])
