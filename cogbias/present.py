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
from typing import Any

import pandas as pd

from .examples import SOURCE_LABELS
from .library import TestCase
from .records import Instance
from .templates import Filled, LLMGap, ValueGap, diff, render_decision_text, show_value

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
                out.append(_span(stack[-1]) + html.escape(part))
            elif part in _CLOSERS and stack and stack[-1] == _CLOSERS[part]:
                out.append(html.escape(part) + "</span>")
                stack.pop()
            else:
                out.append(html.escape(part))
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
        f'style="background:{color}1f;border-bottom:2px solid {color}">{html.escape(text)}</span>'
    )


def filled_html(case: TestCase, instance: Instance, half: str) -> dict[str, str]:
    """A filled half as HTML, every insertion marked with its source (LLM or value generator).

    Walks the template's segments again with the instance's values, so what is marked is
    exactly what was inserted. Gaps the generator has not filled stay visible as `[[...]]`.
    """
    template = case.templates()[half]
    values = instance.values
    llm_fills = {i["gap"]: i for i in instance.insertions if i.get("source") != "value"}
    named = case.named_gaps()

    def render(path: str) -> str:
        out: list[str] = []
        for seg in template.segments(path):
            if isinstance(seg, str):
                out.append(html.escape(seg))
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
    """Every insertion of an instance: gap, source and the inserted text."""
    rows = [
        {
            "source": _source_label(i),
            "gap": i.get("gap", ""),
            "inserted text": i.get("text", ""),
        }
        for i in instance.insertions
    ]
    return pd.DataFrame(rows, columns=["source", "gap", "inserted text"])


# --------------------------------------------------------------------------- scores


def _option(filled: Filled, choice: int | None) -> str:
    if choice is None or not 0 <= choice < len(filled.options):
        return "no option"
    return f"option {choice + 1} “{filled.options[choice]}”"


def explain_score(instance: Instance, row: Mapping[str, Any]) -> str:
    """One sentence saying what the model answered and what the pair's score means."""
    if row.get("status") != "ok" or row.get("score") is None:
        return f"This pair could not be scored: {row.get('error') or 'no answer was extracted'}."
    score = float(row["score"])
    control = _option(instance.control, row.get("control_choice"))
    treatment = _option(instance.treatment, row.get("treatment_choice"))
    if score > 0:
        meaning = "the answers moved in the direction the bias predicts"
    elif score < 0:
        meaning = "the answers moved against the direction the bias predicts (the opposite effect)"
    else:
        meaning = "the bias-eliciting detail made no difference in this pair"
    return (
        f"Without the bias-eliciting detail (control) the model chose {control}; with it "
        f"(treatment) it chose {treatment}. Score {score:+.2f} on a scale from -1 to 1: {meaning}."
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


PAIR_COLUMNS = [
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
    return pd.DataFrame(records, columns=PAIR_COLUMNS)


def _one_based(choice: Any) -> int | None:
    return None if choice is None else int(choice) + 1


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
