"""Presentation helpers shared by the app pages: HTML highlighting, score sentences, tables.

Pure functions (no Streamlit), so every piece of logic the pages show is unit-tested. All user
and model text is HTML-escaped here before any markup is added: a template or an LLM answer
is data, never markup.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from cogbias.core.records import Instance, decode_filled
from cogbias.core.redact import Redactor, redactor
from cogbias.core.templates import Filled, LLMGap, ValueGap, diff, render_decision_text, show_value
from cogbias.library.examples import SOURCE_LABELS
from cogbias.library.testcases import TestCase

LLM_COLOR = "#1c7ed6"  # [[gaps]] the generator fills
VALUE_COLOR = "#e03131"  # {{gaps}} from value generators
MARK_COLOR = "#ffe066"  # the bias-eliciting difference
_TOKENS = re.compile(r"(\[\[|\]\]|\{\{|\}\})")
_OPENERS = {"[[": "llm", "{{": "value"}
_CLOSERS = {"]]": "llm", "}}": "value"}


# Characters Markdown would act on, as numeric entities: the pages pass this HTML through
# `st.markdown`, which parses Markdown around (and, outside HTML blocks, between) the tags.
# An entity is never Markdown syntax, and the browser shows it as the character itself.
_MARKDOWN_ENTITIES = {c: f"&#{ord(c)};" for c in "\\`*_[]!$~:|#"}
_MARKDOWN_CHARS = re.compile("[" + re.escape("".join(_MARKDOWN_ENTITIES)) + "]")


def html_text(text: str) -> str:
    """`text` safe inside HTML that goes through Markdown: HTML-escaped, and Markdown's
    characters as entities, so `![x](http://host/p.png)` in an answer is shown, not fetched."""
    escaped = html.escape(text, quote=False)  # quote=True would add "&#x27;" and its "#"
    return _MARKDOWN_CHARS.sub(lambda m: _MARKDOWN_ENTITIES[m.group()], escaped)


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


def filled_html(case: TestCase, instance: Instance, half: str) -> dict[str, str]:
    """A filled half as HTML, every insertion marked with its source (LLM or value generator).

    Walks the template's segments again with the instance's values, so what is marked is
    exactly what was inserted. Gaps the generator has not filled stay visible as `[[...]]`.
    """
    template = case.templates()[half]
    clean = redactor()  # a generator may echo a key into a fill: never show it
    values = {k: clean(v) if isinstance(v, str) else v for k, v in instance.values.items()}
    llm_fills = {
        i["gap"]: {**i, "text": clean(i["text"]) or ""}
        for i in instance.insertions
        if i.get("source") != "value"
    }
    named = case.named_gaps()

    def render(path: str) -> str:
        out: list[str] = []
        for seg in template.segments(path):
            if isinstance(seg, str):
                out.append(html_text(seg))
            elif isinstance(seg, ValueGap):
                out.append(_value_gap(seg, values, named, llm_fills))
            else:
                out.append(_llm_gap(seg, values, llm_fills))
        return "".join(out)

    options = "".join(f"<li>{render(f'options[{i}]')}</li>" for i in range(len(template.options)))
    return {"situation": render("situation"), "prompt": render("prompt"), "options": options}


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
    clean = redactor()
    rows = [
        {
            "source": _source_label(i),
            "gap": i.get("gap", ""),
            "inserted text": clean(i.get("text", "")),
        }
        for i in instance.insertions
    ]
    return pd.DataFrame(rows, columns=["source", "gap", "inserted text"])


# --------------------------------------------------------------------------- scores


def _chose(half: ShownHalf) -> str:
    picked = half.presented_choice
    if picked is None or half.choice is None:
        return "no option"
    text = f"“{half.canonical_options[half.choice]}”"
    if not half.order_known:
        return f"{text} (option {half.choice + 1} in the test case's order)"
    if half.reversed:
        return f"{text} (shown as Option {picked + 1}; option {half.choice + 1} in the test case)"
    return f"{text} (Option {picked + 1})"


def explain_score(instance: Instance, row: Mapping[str, Any]) -> str:
    """One sentence saying what the model answered and what the pair's score means.

    Options are named by their text and by the number the model saw; when the options were
    reversed, the test case's own number is given too.
    """
    clean = redactor()
    if row.get("status") != "ok" or row.get("score") is None:
        return (
            "This pair could not be scored: "
            f"{clean(row.get('error')) or 'no answer was extracted'}."
        )
    pair = shown_pair(instance.control, instance.treatment, row, clean)
    assert pair is not None  # both halves are Filled objects
    score = float(row["score"])
    if score > 0:
        meaning = "the answers moved in the direction the bias predicts"
    elif score < 0:
        meaning = "the answers moved against the direction the bias predicts (the opposite effect)"
    else:
        meaning = "the bias-eliciting detail made no difference in this pair"
    return (
        f"Without the bias-eliciting detail (control) the model chose {_chose(pair.control)}; "
        f"with it (treatment) it chose {_chose(pair.treatment)}. Score {score:+.2f} on a scale "
        f"from -1 to 1: {meaning}."
    )


# --------------------------------------------------------------------------- pairs tables


def _half_text(raw: str | None) -> str:
    """The decision text of a stored half (JSON of situation, prompt, options)."""
    if not raw:
        return ""
    try:
        data = json.loads(raw)
        filled = Filled(data["situation"], data["prompt"], tuple(data["options"]))
    except (ValueError, KeyError, TypeError):
        return str(raw)
    return render_decision_text(filled)


PAIR_VIEW_COLUMNS = [
    "bias",
    "model",
    "score",
    "status",
    "scenario",
    "control_text",
    "control_answer",
    "control_extraction",
    "control_choice",
    "treatment_text",
    "treatment_answer",
    "treatment_extraction",
    "treatment_choice",
    "error",
    "run_id",
    "dataset",
    "instance_id",
    "repeat",
]


def pairs_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Paired responses (as `Store.pairs` returns them) flattened for reading and CSV export.

    Choices are 1-based option numbers in the original option order, as people count.
    """
    records = []
    for r in rows:
        records.append(
            {
                "bias": r.get("test_case"),
                "model": r.get("model"),
                "score": r.get("score"),
                "status": r.get("status"),
                "scenario": r.get("scenario"),
                "control_text": _half_text(r.get("control_template")),
                "control_answer": r.get("control_answer"),
                "control_extraction": r.get("control_extraction"),
                "control_choice": _one_based(r.get("control_choice")),
                "treatment_text": _half_text(r.get("treatment_template")),
                "treatment_answer": r.get("treatment_answer"),
                "treatment_extraction": r.get("treatment_extraction"),
                "treatment_choice": _one_based(r.get("treatment_choice")),
                "error": r.get("error"),
                "run_id": r.get("run_id"),
                "dataset": r.get("dataset"),
                "instance_id": r.get("instance_id"),
                "repeat": r.get("repeat"),
            }
        )
    return pd.DataFrame(records, columns=PAIR_VIEW_COLUMNS)


def _one_based(choice: Any) -> int | None:
    return None if choice is None else int(choice) + 1


# --------------------------------------------------------------------------- pairs as seen
# A decision model sees the options in the order the run presented them (half of all pairs
# reversed, so position bias cancels out); the stored choice is mapped back to the test
# case's own order for scoring. Pages show both, from these functions, so the prompt, the
# raw answer, the extracted option and the scored choice can never disagree on screen.

_OPTION_MENTION = re.compile(r"\b[Oo]ption\s+(\d+)\b")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>~$:&])")
_LINE_START = re.compile(r"^(\s*|\s*\d+)([#>+\-=|.)])")  # a heading, quote, list item


def escape_markdown(text: Any) -> str:
    """`text` with every Markdown/HTML-significant character backslash-escaped.

    For untrusted text (answers, names, imported fields) that must sit inside a Streamlit
    caption, label or header: `![x](http://host/p.png)` then shows as those characters and
    the browser fetches nothing. Escaped: brackets (links, images, Streamlit's `:red[...]`),
    `<` `>` (HTML), emphasis and code marks, `$` (math), `:` (icon and emoji codes), `&`
    (entities), and a block marker at the start. Newlines become spaces (a label is one line).
    """
    flat = " ".join(str(text if text is not None else "").split())
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", flat)
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)


def escape_paragraphs(text: Any) -> str:
    """Like `escape_markdown`, keeping blank-line paragraph breaks (for descriptions)."""
    paragraphs = re.split(r"\n\s*\n", str(text if text is not None else ""))
    return "\n\n".join(escape_markdown(p) for p in paragraphs if p.strip())


def parse_order(raw: Any, n_options: int) -> list[int] | None:
    """A stored presented order (JSON list of canonical indices), or None if it is missing
    or not a permutation of the options (then the order the model saw is unknown)."""
    if raw is None or raw == "":
        return None
    try:
        order = json.loads(raw) if isinstance(raw, str) else list(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(order, list) or sorted(order) != list(range(n_options)):
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in order):
        return None
    return order


@dataclass(frozen=True)
class ShownHalf:
    """One half of a decided pair as the decision model saw it, with what became of it.

    `options` are in presented order and `order[i]` is the test case's (canonical, 0-based)
    index of presented option i. `choice` is the canonical 0-based option the score used.
    Every text is already redacted; it is still untrusted and must be shown as plain text.
    """

    name: str
    situation: str
    prompt: str
    order: tuple[int, ...]
    canonical_options: tuple[str, ...]
    order_known: bool
    answer: str
    extraction: str
    choice: int | None

    @property
    def options(self) -> tuple[str, ...]:
        """The options in the order the model saw them."""
        return tuple(self.canonical_options[i] for i in self.order)

    @property
    def reversed(self) -> bool:
        return self.order_known and list(self.order) != sorted(self.order)

    @property
    def presented_choice(self) -> int | None:
        """0-based position of the scored choice in the presented list."""
        if self.choice is None or self.choice not in self.order:
            return None
        return self.order.index(self.choice)

    def option_lines(self) -> list[str]:
        """ "Option N: text" as the model read them; the scored choice marked with an arrow."""
        picked = self.presented_choice
        return [
            f"Option {i + 1}: {text}" + ("   ◀ chosen" if i == picked else "")
            for i, text in enumerate(self.options)
        ]

    def decision_text(self) -> str:
        """The whole prompt half as the model read it (situation, prompt, options)."""
        filled = Filled(self.situation, self.prompt, self.canonical_options)
        return render_decision_text(filled, self.order)

    def choice_sentence(self) -> str:
        """Which option was extracted, as presented and in the test case's order."""
        picked = self.presented_choice
        if picked is None or self.choice is None:
            return "No option was extracted from this answer, so the pair has no score."
        text = self.canonical_options[self.choice]
        if not self.order_known:
            return (
                f"Chose “{text}”: option {self.choice + 1} in the test case's order (the order "
                "shown to the model was not recorded)."
            )
        where = (
            f"shown to the model as Option {picked + 1}, which is option {self.choice + 1} in "
            "the test case's order"
            if self.reversed
            else f"Option {picked + 1}"
        )
        return f"Chose “{text}” ({where}); the score uses this choice."

    def answer_disagreement(self) -> str | None:
        """A note when the raw answer plainly disagrees with itself or with the extraction.

        The extraction step is a second LLM call, and a small model can misread "100%" as
        "Option 10" or answer "Option 7: Very good" when Option 7 reads "Very poor". When the
        answer names one option by number and another by text, or names exactly one option
        and that is not the extracted one, say so: the score still uses the extraction, and
        the reader should know.
        """
        numbers, texts = _named_options(self.answer, self.options)
        picked = self.presented_choice
        if picked is None:
            return None
        if len(numbers) == 1 and len(texts) == 1 and numbers != texts:
            (number,), (text,) = numbers, texts
            return (
                f"The answer says Option {number + 1} but quotes “{self.options[text]}”, "
                f"which is Option {text + 1} as shown; the extraction step read Option "
                f"{picked + 1}, and the score uses that."
            )
        named = numbers | texts
        if len(named) != 1 or picked in named:
            return None
        (only,) = named
        return (
            f"The answer's text names “{self.options[only]}” (Option {only + 1} as shown), but "
            f"the extraction step read it as Option {picked + 1}; the score uses the extraction."
        )


def _named_options(answer: str, options: Sequence[str]) -> tuple[set[int], set[int]]:
    """Presented positions an answer names by "Option N", and by an option's whole text.

    An option's text counts only where it is not part of a longer option's match ("Agree"
    inside "Strongly agree"), and only at word edges ("10%" is not inside "100%").
    """
    numbers = {int(m) - 1 for m in _OPTION_MENTION.findall(answer) if 1 <= int(m) <= len(options)}
    spans: list[tuple[int, int, int]] = []
    for i, text in enumerate(options):
        if not text.strip():
            continue
        pattern = re.compile(rf"(?<!\w){re.escape(text.strip())}(?!\w)", re.IGNORECASE)
        spans += [(m.start(), m.end(), i) for m in pattern.finditer(answer)]
    texts = {
        i
        for start, end, i in spans
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in spans)
    }
    return numbers, texts


def _filled_of(raw: Any) -> Filled | None:
    if isinstance(raw, Filled):
        return raw
    try:
        return decode_filled(raw)
    except (ValueError, KeyError, TypeError):
        return None


def shown_half(filled: Filled, row: Mapping[str, Any], half: str, clean: Redactor) -> ShownHalf:
    """One half of a decisions row (`row`) over its filled text, as the model saw it."""
    n = len(filled.options)
    order = parse_order(row.get(f"{half}_order"), n)
    choice = row.get(f"{half}_choice")
    choice = int(choice) if choice is not None and 0 <= int(choice) < n else None
    return ShownHalf(
        name=half,
        situation=clean(filled.situation) or "",
        prompt=clean(filled.prompt) or "",
        order=tuple(order if order is not None else range(n)),
        canonical_options=tuple(clean(o) or "" for o in filled.options),
        order_known=order is not None,
        answer=clean(row.get(f"{half}_answer")) or "",
        extraction=clean(row.get(f"{half}_extraction")) or "",
        choice=choice,
    )


@dataclass(frozen=True)
class ShownPair:
    """Both halves of a decided pair, as shown on every page that shows a pair."""

    control: ShownHalf
    treatment: ShownHalf
    score: float | None
    status: str
    error: str

    @property
    def halves(self) -> tuple[ShownHalf, ShownHalf]:
        return (self.control, self.treatment)

    def order_note(self) -> str | None:
        """A visible note when the model did not see the options in the test case's order."""
        c, t = self.control, self.treatment
        if not (c.order_known and t.order_known):
            return (
                "The order in which the options were shown to the model was not recorded; "
                "they are listed in the test case's order."
            )
        if c.reversed and t.reversed:
            return (
                "The options were shown to the model in reverse order (both halves alike, as "
                "for half of all pairs, so that a preference for the first or last position "
                "cancels out). They are listed here as the model saw them."
            )
        if c.reversed or t.reversed:
            which = "control" if c.reversed else "treatment"
            return (
                f"The {which}'s options were shown to the model in reverse order; each half "
                "is listed here as the model saw it."
            )
        return None


def shown_pair(
    control: Any, treatment: Any, row: Mapping[str, Any], clean: Redactor | None = None
) -> ShownPair | None:
    """A pair from its two filled halves (`Filled` or their stored JSON) and a decisions row.

    None when a half's stored text cannot be read (then there is nothing faithful to show).
    """
    clean = clean or redactor()
    halves = [_filled_of(control), _filled_of(treatment)]
    if halves[0] is None or halves[1] is None:
        return None
    score = row.get("score")
    return ShownPair(
        control=shown_half(halves[0], row, "control", clean),
        treatment=shown_half(halves[1], row, "treatment", clean),
        score=None if score is None else float(score),
        status=str(row.get("status") or ""),
        error=clean(row.get("error")) or "",
    )


def shown_stored_pair(row: Mapping[str, Any], clean: Redactor | None = None) -> ShownPair | None:
    """A pair from a `Store.pairs` row (the halves are stored as JSON with the instance)."""
    return shown_pair(row.get("control_template"), row.get("treatment_template"), row, clean)


def preview_text(text: str, limit: int = 600) -> tuple[str, bool]:
    """The first `limit` characters of a long text and whether it was cut (show the rest
    collapsed: a 5 MB answer must not be laid out in full by the browser)."""
    if len(text) <= limit:
        return text, False
    return text[:limit].rstrip() + " …", True


# --------------------------------------------------------------------------- authoring

BLANK_TEST_CASE = '''id = "my_bias"
name = "My Bias"
description = """Say in two to four sentences what the bias is and how this test elicits it."""
references = [
  "Author, A. (Year). Title. Journal.",
]

[scale]
kind = "likert7"
options = ["Strongly disagree", "Disagree", "Somewhat disagree", "Neutral", "Somewhat agree", "Agree", "Strongly agree"]

[values.amount]
type = "int"
min = 10
max = 90
step = 10

[control]
situation = """Suppose you are [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]."""
prompt = "Do you agree that this is a good decision?"

[treatment]
situation = """Suppose you are [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]. {{amount}}% of your peers have already made this decision."""
prompt = "Do you agree that this is a good decision?"

[metric]
# m = k (|a1 - y1| - |a2 - y2|) / max(|a1 - y1|, |a2 - y2|); a1, a2: 0-based answers
k = 1
y1 = 6
y2 = 6
'''


def copy_id(case_id: str, taken: Iterable[str]) -> str:
    """A free id for a copy of `case_id` (`x_copy`, `x_copy2`, ...)."""
    taken = set(taken)
    base = f"{case_id}_copy"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}{n}"
    return candidate
