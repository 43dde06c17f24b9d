"""One summary per condition of a class's question, whoever answered it: the class, the
original study's people, or a model (sampled, or read as option probabilities).

The reveal sets them side by side on one scale, so they are one record (`ConditionSummary`)
built by one set of functions from the same intervals a study beside the humans uses
(`reference_stats`: Wilson for a share, the distribution-free interval of a median;
`analysis.t_interval` for a mean):

- choices: the count and share of each option with its Wilson 95 % interval, and for a scale
  the mean 1-based position with its t interval, held to the scale's ends;
- numbers: the mean with its t interval (held to the question's bounds) and the median with
  its distribution-free interval (the originals report medians);
- option probabilities: the mean of the model's distributions (one call per condition has
  no sampling spread: `low` = `high` = the probability), and for a scale the expected position;
- the humans: the shares the original reports, with Wilson intervals from its n, or its median;
- several classes that answered the same question (`pooled`): their answers together, as one
  group, with each class's n.

Answers that could not be read are counted with their reasons (`n_unreadable`,
`unreadable`), so a page can say "3 answers could not be read: …".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cogbias.core.class_question import Question
from cogbias.studies.reference_stats import median, median_interval, wilson_interval
from cogbias.studies.references import HumanCondition

CLASS = "this class"
HUMANS = "humans (original study)"
POOLED = "your classes (pooled)"
SAMPLE = "sample"  # how a model was asked: sampled answers...
PROBABILITIES = "probabilities"  # ... or its option probabilities, read from one call
SHOWN_REASONS = 3  # the most frequent reasons a sentence names


@dataclass(frozen=True)
class ConditionSummary:
    """Who answered one condition, summarised: n readable answers (the humans' n, None where
    the paper gives none), per option its count, share and 95 % interval, the mean (position
    on a scale, or number) and median with theirs, and the answers that could not be read
    with why. `model`, `mode` and `temperature` say which model and how it was asked (empty
    for the class and the humans)."""

    condition: str
    label: str
    who: str
    n: int | None
    counts: list[int] = field(default_factory=list)
    shares: list[float | None] = field(default_factory=list)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    mean: float | None = None
    mean_low: float | None = None
    mean_high: float | None = None
    median: float | None = None
    median_low: float | None = None
    median_high: float | None = None
    n_unreadable: int = 0
    unreadable: list[tuple[str, int]] = field(default_factory=list)  # (why, how many)
    model: str = ""
    mode: str = ""
    temperature: float | None = None
    parts: list[int] = field(default_factory=list)  # pooled: each group's n, in order

    def unreadable_text(self) -> str:
        """'3 answers could not be read: found no number (2); …', or '' when all were read."""
        if not self.n_unreadable:
            return ""
        reasons = "; ".join(f"{why} ({k})" for why, k in self.unreadable[:SHOWN_REASONS])
        more = len(self.unreadable) - SHOWN_REASONS
        reasons += f"; {more} other reason(s)" if more > 0 else ""
        answers = "answer" if self.n_unreadable == 1 else "answers"
        return f"{self.n_unreadable} {answers} could not be read: {reasons}"

    def to_json(self) -> dict[str, Any]:
        """As JSON-able data: NaN and infinities as null, reasons as {why, n} objects."""
        data = asdict(self)
        data["unreadable"] = [{"why": why, "n": k} for why, k in self.unreadable]
        return _finite(data)


def model_who(model: str, mode: str, temperature: float | None) -> str:
    """How a chart's legend and a table name a model's answers: 'model gpt-4o (T 0.7)';
    a model that uses no temperature (the `random` baseline: None) is named alone."""
    if mode == PROBABILITIES:
        return f"model {model} (probabilities)"
    return f"model {model}" if temperature is None else f"model {model} (T {temperature:g})"


def _reasons(unreadable: Iterable[str]) -> tuple[int, list[tuple[str, int]]]:
    counted = Counter(unreadable)
    return sum(counted.values()), counted.most_common()


def _start(
    question: Question, condition: str, who: str, unreadable: Iterable[str], about: dict[str, Any]
) -> dict[str, Any]:
    n_unreadable, reasons = _reasons(unreadable)
    base = {"condition": condition, "label": question.label(condition), "who": who}
    return base | {"n_unreadable": n_unreadable, "unreadable": reasons} | about


def _mean(
    values: Sequence[float], bounds: tuple[float, float]
) -> tuple[float | None, float | None, float | None]:
    """The mean with its t interval held to `bounds` (None below one value; the interval
    None below two)."""
    import numpy as np

    from cogbias.studies.analysis import t_interval  # scipy: only once results are read

    if not values:
        return None, None, None
    low, high = t_interval(np.asarray(values, dtype=float), bounds=bounds)
    return math.fsum(values) / len(values), _number(low), _number(high)


def _number(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def of_choices(
    question: Question,
    condition: str,
    who: str,
    chosen: Sequence[int],
    unreadable: Iterable[str] = (),
    **about: Any,
) -> ConditionSummary:
    """The options chosen (0-based positions): counts, shares with Wilson intervals, and on
    a scale the mean position with its t interval."""
    n_options, n = len(question.keys), len(chosen)
    counts = [sum(1 for c in chosen if c == i) for i in range(n_options)]
    shares = [count / n if n else math.nan for count in counts]
    intervals = [wilson_interval(share, n) for share in shares]
    fields = _start(question, condition, who, unreadable, about)
    fields |= {"n": n, "counts": counts, "shares": shares}
    fields |= {"low": [i[0] for i in intervals], "high": [i[1] for i in intervals]}
    if question.kind == "scale":
        positions = [c + 1.0 for c in chosen]
        mean, low, high = _mean(positions, (1.0, float(n_options)))
        fields |= {"mean": mean, "mean_low": low, "mean_high": high}
    return ConditionSummary(**fields)


def of_numbers(
    question: Question,
    condition: str,
    who: str,
    values: Sequence[float],
    unreadable: Iterable[str] = (),
    **about: Any,
) -> ConditionSummary:
    """Numbers given: the mean with its t interval and the median with its interval."""
    bounds = (
        -math.inf if question.low is None else question.low,
        math.inf if question.high is None else question.high,
    )
    mean, low, high = _mean(values, bounds)
    fields = _start(question, condition, who, unreadable, about)
    fields |= {"n": len(values), "mean": mean, "mean_low": low, "mean_high": high}
    if values:
        fields["median"] = median(values)
        fields["median_low"], fields["median_high"] = median_interval(values)
    return ConditionSummary(**fields)


def of_probabilities(
    question: Question,
    condition: str,
    who: str,
    distributions: Sequence[Sequence[float]],
    unreadable: Iterable[str] = (),
    **about: Any,
) -> ConditionSummary:
    """A model's option probabilities (one distribution per call): their mean, with no
    interval (`low` = `high`), and on a scale the expected position."""
    n_options = len(question.keys)
    rows = [p for p in distributions if len(p) == n_options]
    shares = [math.fsum(p[i] for p in rows) / len(rows) for i in range(n_options)] if rows else []
    fields = _start(question, condition, who, unreadable, about)
    fields |= {"n": len(rows), "shares": shares, "low": list(shares), "high": list(shares)}
    if question.kind == "scale" and shares:
        expected = math.fsum((i + 1) * p for i, p in enumerate(shares))
        fields |= {"mean": expected, "mean_low": expected, "mean_high": expected}
    return ConditionSummary(**fields)


def of_reference(question: Question, condition: str, human: HumanCondition) -> ConditionSummary:
    """The original study's people in the condition that asked the same question: the
    shares it reports (None for an option it does not), Wilson intervals from its n."""
    shares = [human.shares.get(key) for key in question.keys]
    intervals = [
        wilson_interval(s, human.n) if s is not None and human.n else (None, None) for s in shares
    ]
    return ConditionSummary(
        condition=condition,
        label=human.label,
        who=HUMANS,
        n=human.n,
        shares=shares,
        low=[i[0] for i in intervals],
        high=[i[1] for i in intervals],
        median=human.median,
    )


def pooled(
    question: Question, condition: str, who: str, parts: Sequence[Sequence[float]]
) -> ConditionSummary:
    """Several groups' answers to the same question as one group (every answer counts
    once, whichever group gave it): option positions (0-based) or numbers, summarised as one
    class's are, with each group's n in `parts`."""
    values = [value for part in parts for value in part]
    if question.kind == "number":
        row = of_numbers(question, condition, who, values)
    else:
        row = of_choices(question, condition, who, [int(v) for v in values])
    return replace(row, parts=[len(part) for part in parts])


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
