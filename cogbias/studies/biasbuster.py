"""BiasBuster's metrics (Echterhoff et al. 2024), one per bias. Pure functions.

BiasBuster does not score pairs; it compares *rates* between conditions:
- framing: admission rate when asked "will you admit?" minus when asked "will you reject?"
  (both as admission decisions, 1 = admitted), e.g. GPT-4 0.375 - 0.780 = -0.405;
- group attribution: rate judged "good at math" for female minus male profiles;
- status quo: how often the status-quo option is chosen, against 1/k for k options;
- primacy: share of choices among the first half of positions against the second half;
- anchoring (sequential): how far each student's admission rate over many presentation orders
  is from the model's overall admission rate (normalised Euclidean distance, Eq. 1);
- self-help on sequential tests: the share of decisions the model changes when it may revise;
- degenerate: the "(*)" of Table 3, a model that admits (or rejects) almost nobody.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DEGENERATE_THRESHOLD = 0.01  # Table 3's "(*)": below 1% admission or rejection


def rate(decisions: Iterable[bool | int]) -> float:
    """Share of positive decisions (admit / yes = 1, reject / no = 0)."""
    values = [_binary(d) for d in decisions]
    if not values:
        raise ValueError("a rate needs at least one decision")
    return sum(values) / len(values)


def _binary(value: bool | int) -> int:
    if value not in (0, 1):  # True/False compare equal to 1/0
        raise ValueError(f"decisions must be 0/1 or booleans, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RateDifference:
    """Two conditions' rates and their difference `a - b`; `degenerate` marks Table 3's (*)."""

    a: float
    b: float

    @property
    def delta(self) -> float:
        return self.a - self.b

    @property
    def degenerate(self) -> bool:
        return degenerate([self.a, self.b])


def framing_difference(
    admit_frame: Iterable[bool | int], reject_frame: Iterable[bool | int]
) -> RateDifference:
    """Admission rate under "will you admit?" minus under "will you reject?".

    Both lists hold admission decisions (1 = the student is admitted), so a "yes" to "will you
    reject this student?" is a 0. An unbiased model gives 0.
    """
    return RateDifference(rate(admit_frame), rate(reject_frame))


def group_attribution_difference(
    female: Iterable[bool | int], male: Iterable[bool | int]
) -> RateDifference:
    """Rate of "good at math" for female profiles minus for the identical male profiles."""
    return RateDifference(rate(female), rate(male))


def degenerate(rates: Sequence[float], threshold: float = DEGENERATE_THRESHOLD) -> bool:
    """True when every condition admits fewer than 1% or every condition rejects fewer than 1%.

    The model then no longer follows the task (it answers the same whatever the student), and
    a difference of rates says nothing about bias. Table 3 marks such rows with (*).
    """
    if not rates:
        return False
    return all(r < threshold for r in rates) or all(1 - r < threshold for r in rates)


@dataclass(frozen=True)
class ShareVsChance:
    """`share` of decisions against the `expected` share of an unbiased chooser."""

    share: float
    expected: float
    n: int

    @property
    def excess(self) -> float:
        return self.share - self.expected


def status_quo_share(chosen: Sequence[int], status_quo: Sequence[int], k: int) -> ShareVsChance:
    """How often the status-quo option was chosen, against 1/k.

    `chosen[i]` and `status_quo[i]` are the (0-based) option the model chose and the option that
    was the status quo in decision i; since every student is shown at every position, an
    unbiased model picks the status quo 1/k of the time.
    """
    if len(chosen) != len(status_quo):
        raise ValueError(f"{len(chosen)} choices but {len(status_quo)} status-quo positions")
    if not chosen:
        raise ValueError("no decisions")
    _check_positions(chosen, k)
    hits = sum(1 for c, s in zip(chosen, status_quo, strict=True) if c == s)
    return ShareVsChance(hits / len(chosen), 1 / k, len(chosen))


def _check_positions(positions: Sequence[int], k: int) -> None:
    if k < 2:
        raise ValueError(f"need at least 2 options, got k={k}")
    bad = [p for p in positions if not 0 <= p < k]
    if bad:
        raise ValueError(f"option position {bad[0]} is outside 0..{k - 1}")


@dataclass(frozen=True)
class Primacy:
    """Shares of choices among the first and the second half of the presented positions.

    With an odd k the middle position belongs to neither half. An unbiased model, shown every
    item at every position, gives `early == late`.
    """

    early: float
    late: float
    n: int

    @property
    def difference(self) -> float:
        return self.early - self.late


def primacy(positions: Sequence[int], k: int) -> Primacy:
    """(n_first_half / n, n_second_half / n) of the presented positions chosen (0-based)."""
    if not positions:
        raise ValueError("no decisions")
    _check_positions(positions, k)
    half = k // 2
    early = sum(1 for p in positions if p < half)
    late = sum(1 for p in positions if p >= k - half)
    return Primacy(early / len(positions), late / len(positions), len(positions))


def position_distribution(positions: Sequence[int], k: int) -> list[float]:
    """Share of choices at each presented position (Figure 3's bars)."""
    if not positions:
        raise ValueError("no decisions")
    _check_positions(positions, k)
    return [sum(1 for p in positions if p == i) / len(positions) for i in range(k)]


def anchoring_distance(decisions_by_student: Mapping[str, Sequence[bool | int]]) -> float:
    """Eq. 1: mean over students of the normalised distance between the student's admit/reject
    distribution across presentation orders and the model's overall one.

    With S_i = [r_i, 1 - r_i] and A = [r_sel, 1 - r_sel], ||S_i - A|| / sqrt(2) equals
    |r_i - r_sel|: 0 when each student is admitted at the overall rate (the order decided), high
    when the model decides each student the same way whatever came before.
    """
    if not decisions_by_student:
        raise ValueError("no students")
    pooled: list[int] = []
    rates: list[float] = []
    for student, decisions in decisions_by_student.items():
        if not decisions:
            raise ValueError(f"student {student!r} has no decisions")
        values = [_binary(d) for d in decisions]
        pooled.extend(values)
        rates.append(sum(values) / len(values))
    selection = sum(pooled) / len(pooled)
    overall = (selection, 1 - selection)
    distances = [math.dist((r, 1 - r), overall) / math.sqrt(2) for r in rates]
    return math.fsum(distances) / len(distances)


def change_rate(before: Sequence[bool | int], after: Sequence[bool | int]) -> float:
    """Share of decisions a model changed when allowed to revise them (self-help, Table 4)."""
    if len(before) != len(after):
        raise ValueError(f"{len(before)} decisions before but {len(after)} after the revision")
    if not before:
        raise ValueError("no decisions")
    changed = sum(1 for x, y in zip(before, after, strict=True) if _binary(x) != _binary(y))
    return changed / len(before)
