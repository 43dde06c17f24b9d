"""A model's answers beside the humans', in the original's own unit.

The originals report a share per condition (Asian disease: 72 % chose the sure programme) or a
median per condition (the mug: sellers $7.12). The model's answers are summarised the same
way, condition by condition, and set beside the human figure with:

- for shares: Wilson 95 % intervals of each share, the difference model − humans with
  Newcombe's interval (built from the two Wilson intervals), and Cohen's h (the difference of
  arcsine-transformed shares, 2·asin√p₁ − 2·asin√p₂, with its large-sample 95 % interval);
- for medians: the distribution-free 95 % interval of the model's median (order statistics of
  the binomial), the difference model − humans; the humans' medians come without spread, so
  they get no interval;
- with two conditions or more, the effect as the original shows it (first condition minus the
  second, for both), and for shares the effect's Cohen's h for humans and model; the gap
  between the two effects gets a MOVER interval (Newcombe 2012) built from theirs. An
  experiment with one condition shows shares only, no effect.

Pure functions of numbers and answers: the run's side is `cogbias.studies.reference_tables`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from cogbias.studies.references import HumanCondition, Reference, Use

Z95 = 1.959963984540054
COLUMNS = [
    "kind",  # condition | effect
    "condition",
    "label",
    "option",
    "humans",
    "humans_n",
    "humans_low",
    "humans_high",
    "model_value",
    "model_n",
    "model_low",
    "model_high",
    "difference",
    "difference_low",
    "difference_high",
    "h",
    "h_low",
    "h_high",
    "humans_h",
    "model_h",
]


def wilson_interval(share: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a share of n: never outside [0, 1], sensible at 0 % and 100 %
    (where the Wald interval collapses to a point)."""
    if n <= 0:
        return (math.nan, math.nan)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_interval(p1: float, n1: int, p2: float, n2: int) -> tuple[float, float]:
    """95 % interval of p1 − p2 (Newcombe 1998, method 10: from the two Wilson intervals)."""
    l1, u1 = wilson_interval(p1, n1)
    l2, u2 = wilson_interval(p2, n2)
    d = p1 - p2
    return (
        d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2),
    )


def cohens_h(p1: float, p2: float) -> float:
    """Cohen's h between two shares: 0.2 small, 0.5 medium, 0.8 large (Cohen 1988)."""
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def h_interval(h: float, *ns: int) -> tuple[float, float]:
    """Large-sample 95 % interval of an h (or of a sum or difference of h's): each share's
    arcsine term has variance 1/n."""
    se = math.sqrt(sum(1 / n for n in ns))
    return (h - Z95 * se, h + Z95 * se)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95 % interval of a median: the order statistics j < k with
    P(j ≤ B < k) ≥ 0.95 for B ~ Binomial(n, ½); the sample range below 6 answers."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return (math.nan, math.nan)
    if n < 6:
        return (float(ordered[0]), float(ordered[-1]))
    j = max(0, math.floor(n / 2 - Z95 * math.sqrt(n) / 2))
    k = min(n - 1, math.ceil(n / 2 + Z95 * math.sqrt(n) / 2))
    return (float(ordered[j]), float(ordered[k]))


def _row(**values: Any) -> dict[str, Any]:
    return {column: values.get(column) for column in COLUMNS}


def compare(
    reference: Reference,
    use: Use,
    answers: Mapping[str, Sequence[Any]],
    letters: str = "",
    asked: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Rows (COLUMNS) setting the model's answers beside the humans': one per condition of the
    reference the study asks, then the effect between the first two of them.

    `answers` maps a *study* condition to its readable answers: a chosen letter's 0-based
    position in `letters` (choice questions) or the number given (medians). `asked`, the
    study test's conditions, leaves out a reference condition the test does not ask.
    """
    rows = []
    shown: list[tuple[HumanCondition, list[Any], float | None]] = []
    for name, human in reference.conditions.items():
        study_condition = use.study_condition(name)
        if study_condition is None or (asked is not None and study_condition not in asked):
            continue
        values = list(answers.get(study_condition, []))
        if reference.measure == "share":
            row = _share_row(reference, human, values, letters)
        else:
            row = _median_row(human, values)
        rows.append(row)
        shown.append((human, values, row["model_value"]))
    if len(shown) >= 2:
        effect = _share_effect if reference.measure == "share" else _median_effect
        rows.append(effect(reference, shown[0], shown[1]))
    return rows


def _share_row(
    reference: Reference, human: HumanCondition, values: list[Any], letters: str
) -> dict[str, Any]:
    option = reference.focus_option
    p_human = human.shares.get(option, 0.0)
    n_human = human.n or 0
    h_low, h_high = wilson_interval(p_human, n_human)
    row = _row(
        kind="condition",
        condition=human.name,
        label=human.label,
        option=reference.options.get(option, option),
        humans=p_human,
        humans_n=human.n,
        humans_low=h_low,
        humans_high=h_high,
        model_n=len(values),
    )
    if not values or option not in letters:
        return row
    p_model = sum(1 for v in values if v == letters.index(option)) / len(values)
    m_low, m_high = wilson_interval(p_model, len(values))
    d_low, d_high = newcombe_interval(p_model, len(values), p_human, n_human)
    h = cohens_h(p_model, p_human)
    hl, hh = h_interval(h, len(values), n_human)
    row.update(
        model_value=p_model, model_low=m_low, model_high=m_high, difference=p_model - p_human
    )
    row.update(difference_low=d_low, difference_high=d_high, h=h, h_low=hl, h_high=hh)
    return row


def _median_row(human: HumanCondition, values: list[Any]) -> dict[str, Any]:
    numbers = [float(v) for v in values]
    row = _row(
        kind="condition",
        condition=human.name,
        label=human.label,
        option="median",
        humans=human.median,
        humans_n=human.n,
        model_n=len(numbers),
    )
    if not numbers:
        return row
    m = median(numbers)
    low, high = median_interval(numbers)
    row.update(model_value=m, model_low=low, model_high=high)
    row["difference"] = m - human.median if human.median is not None else None
    return row


Asked = tuple[HumanCondition, list[Any], Any]


def _effect_start(first: Asked, second: Asked) -> dict[str, Any]:
    return _row(
        kind="effect",
        condition=f"{first[0].name} − {second[0].name}",
        label=f"{first[0].name} − {second[0].name}".replace("_", " "),
        humans_n=(first[0].n or 0) + (second[0].n or 0) or None,
        model_n=len(first[1]) + len(second[1]),
    )


def _share_effect(reference: Reference, first: Asked, second: Asked) -> dict[str, Any]:
    """The original's effect, the first condition's share minus the second's, for humans and
    model, with each one's Cohen's h; `h` is the model's h minus the humans'."""
    option = reference.focus_option
    row = _effect_start(first, second)
    row["option"] = reference.options.get(option, option)
    (h1, _, m1), (h2, _, m2) = first, second
    p1, p2, n1, n2 = h1.shares.get(option, 0.0), h2.shares.get(option, 0.0), h1.n or 0, h2.n or 0
    row["humans"] = p1 - p2
    row["humans_low"], row["humans_high"] = newcombe_interval(p1, n1, p2, n2)
    row["humans_h"] = cohens_h(p1, p2)
    if m1 is None or m2 is None:
        return row
    k1, k2 = len(first[1]), len(second[1])
    row["model_value"] = m1 - m2
    row["model_low"], row["model_high"] = newcombe_interval(m1, k1, m2, k2)
    row["model_h"] = cohens_h(m1, m2)
    row["difference"] = row["model_value"] - row["humans"]
    # MOVER (Newcombe 2012): the difference of two effects from each effect's own interval
    row["difference_low"] = row["difference"] - math.hypot(
        row["model_value"] - row["model_low"], row["humans_high"] - row["humans"]
    )
    row["difference_high"] = row["difference"] + math.hypot(
        row["model_high"] - row["model_value"], row["humans"] - row["humans_low"]
    )
    row["h"] = row["model_h"] - row["humans_h"]
    row["h_low"], row["h_high"] = h_interval(row["h"], n1, n2, k1, k2)
    return row


def _median_effect(reference: Reference, first: Asked, second: Asked) -> dict[str, Any]:
    """The first condition's median minus the second's, for humans and model (the model's with
    a bootstrap interval: a difference of medians has no simple formula)."""
    del reference
    row = _effect_start(first, second)
    row["option"] = "median"
    (h1, v1, m1), (h2, v2, m2) = first, second
    if h1.median is not None and h2.median is not None:
        row["humans"] = h1.median - h2.median
    if m1 is None or m2 is None:
        return row
    row["model_value"] = m1 - m2
    row["model_low"], row["model_high"] = median_difference_interval(v1, v2)
    if row["humans"] is not None:
        row["difference"] = row["model_value"] - row["humans"]
    return row


def median_difference_interval(
    first: Sequence[float], second: Sequence[float], draws: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of median(first) − median(second), seeded so the
    same answers always give the same interval."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = np.asarray(first, dtype=float)
    b = np.asarray(second, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return (math.nan, math.nan)
    size = max(1, min(draws, 20_000_000 // max(len(a), len(b))))  # bounded memory
    diffs = np.median(rng.choice(a, (size, len(a))), axis=1) - np.median(
        rng.choice(b, (size, len(b))), axis=1
    )
    low, high = np.quantile(diffs, [0.025, 0.975])
    return (float(low), float(high))
