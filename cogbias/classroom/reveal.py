"""What the reveal calls things, in one place: each condition's options, the chart's axis,
its rows, the numbers read out, and the sentences around them. The teacher's page, the
projector, the report, the command, the CSV and the participants' result page all take
their words from here, so a change of wording is made once.

A condition is never labelled with another condition's words: in the Asian disease the
"lives lost" version's first option says "400 people will die" and the "lives saved"
version's says "200 people will be saved". Where the original study names its options
neutrally ("the sure programme", its reference's `[options]`), every condition uses that
name; otherwise each condition shows its own option text.
"""

from __future__ import annotations

import math

from cogbias.core.class_question import Question
from cogbias.studies.condition_summary import CLASS, HUMANS, POOLED

__all__ = ["CLASS", "HUMANS", "POOLED"]

SHARE, POSITION, MEDIAN = "share", "mean position", "median"
INTERVAL = "95% interval"
# the participants' result page, above each version's block
PARTICIPANT_INTRO = (
    "Each person was given one version of the question. Here is how each version was "
    "answered: compare them."
)
RESULT_HEADING = "Result (95% interval)"
# the report's paragraph above the chart
REPORT_NOTE = (
    "Per condition, the original study's people (where the question is one of theirs), your "
    "classes pooled (where other sessions asked the same question), this class and each model "
    "asked the same words, each with its 95% interval: Wilson's for a share, a t-interval for "
    "a mean position, a distribution-free one for a median. A model's option probabilities "
    "(one call) have no interval. Each option is named as its own condition words it, or by "
    "the original study's neutral name for it."
)
POOL_NOTE = "your classes: {sessions} sessions of this question, {n} answers, {first} to {last}"


def measure_of(question: Question) -> str:
    """What a row's value is: a share, a mean position on the scale, or a median."""
    return {"number": MEDIAN, "scale": POSITION}.get(question.kind, SHARE)


def option_labels(question: Question) -> dict[str, tuple[str, ...]]:
    """Per condition, what the reveal calls each option (in key order): the original
    study's neutral name where its reference gives one, else that condition's own text."""
    from cogbias.studies.references import load_references

    reference = load_references().get(question.reference or "")
    neutral = reference.options if reference is not None else {}
    out = {}
    for condition in question.conditions:
        own = question.options.get(condition, ())
        out[condition] = tuple(
            neutral.get(key) or (own[i] if i < len(own) else key.upper())
            for i, key in enumerate(question.keys)
        )
    return out


def shared_option(question: Question, index: int) -> str | None:
    """What option `index` is called in every condition alike, or None where the
    conditions word it differently (each row then names its own)."""
    labels = {names[index] for names in option_labels(question).values() if index < len(names)}
    return labels.pop() if len(labels) == 1 else None


def row_label(condition: str, option: str | None) -> str:
    """A chart row: the condition, and the option it shows when that differs by condition."""
    return f"{condition}: {option}" if option else condition


def axis_title(question: Question, option: str | None, several: bool) -> str:
    """The value axis: what the share is of (`option` shared by every condition; None
    when each row names its own; `several` options shown), a scale's ends, or a median."""
    measure = measure_of(question)
    if measure == SHARE:
        if several or option is None:
            return f"share choosing the option named on the left ({INTERVAL})"
        return f"share choosing “{option}” ({INTERVAL})"
    if measure == POSITION:
        n = len(question.keys)
        first, last = shared_option(question, 0), shared_option(question, n - 1)
        if first and last:
            return f"mean position: 1 = {first} … {n} = {last} ({INTERVAL})"
        return f"mean position on the scale from 1 to {n} ({INTERVAL})"
    what = question.number_label.rstrip(":").strip().lower() or "answer"
    return f"median {what} ({INTERVAL})"


def readable(value: float | None, measure: str) -> str:
    """A number as a teacher reads it out: a share as a whole percentage, others with
    thousands separated and at most two decimals ("1,234.5"); "–" for none."""
    if value is None or not math.isfinite(value):
        return "–"
    if measure == SHARE:
        return f"{value * 100:.0f}%"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def with_interval(value: float, low: float, high: float, measure: str) -> str:
    """'72% [64%, 79%]'; the value alone where there is no interval (a single call)."""
    text = readable(value, measure)
    if text == "–" or math.isnan(low) or math.isnan(high) or (low, high) == (value, value):
        return text
    return f"{text} [{readable(low, measure)}, {readable(high, measure)}]"
