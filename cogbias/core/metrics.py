"""The bias metric of Malberg et al. (2024) and its relatives. Pure functions.

Answers are 0-based option indices in the template's *original* option order; option-order
reversal happens only when presenting, and answers are mapped back before scoring.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricParams:
    """Resolved metric parameters of one test instance (see `library.TestCase.metric`)."""

    k: float = 1.0
    y1: float = 0.0
    y2: float = 0.0
    flip_control: bool = False
    flip_treatment: bool = False


def param_problem(key: str, value: object, n_options: int, off_scale: bool = False) -> str | None:
    """Why a metric parameter is unusable, or None: the bounds documented in docs/format.md.

    `k` scales the score, so it lies in [-1, 1] (the score then stays in [-1, 1]); `y1` and
    `y2` are reference points on the 0-based option positions, in [0, n_options - 1]. Every
    value must be a finite number. With `off_scale` (test case files, and results of runs made
    from them) a reference point may lie up to a whole scale beyond either end,
    [-(n_options - 1), 2 * (n_options - 1)]: the paper's planning-fallacy design measures from a
    point below the first option. Imported datasets keep the on-scale bounds.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key} must be a number, not {_short(value)}"
    try:
        number = float(value)
    except OverflowError:
        return f"{key} = {_short(value)} is far too large"
    if not math.isfinite(number):
        return f"{key} must be a finite number, not {value}"
    if key == "k" and not -1 <= number <= 1:
        return f"k must lie in [-1, 1], not {_short(value)}"
    last = max(n_options - 1, 0)
    low, high = (-last, 2 * last) if off_scale else (0, last)
    if key in ("y1", "y2") and not low <= number <= high:
        if off_scale:
            return f"{key} = {_short(value)} is not a reference point between {low} and {high}"
        return f"{key} = {_short(value)} is not an option index between 0 and {last} (0-based)"
    return None


def params_problem(params: MetricParams, n_options: int, off_scale: bool = False) -> str | None:
    """The first unusable parameter of `params` (see `param_problem`), or None."""
    for key in ("k", "y1", "y2"):
        problem = param_problem(key, getattr(params, key), n_options, off_scale)
        if problem:
            return problem
    return None


def _short(value: object) -> str:
    text = (
        repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "a huge number"
    )
    return text if len(text) <= 60 else text[:57] + "..."


def bias_score(a1: float, a2: float, k: float = 1.0, y1: float = 0.0, y2: float = 0.0) -> float:
    """Equation (1): k * (|a1 - y1| - |a2 - y2|) / max(|a1 - y1|, |a2 - y2|), in [-1, 1].

    Both distances zero means the two answers sit on the reference point alike: no bias, 0.
    """
    d1, d2 = abs(a1 - y1), abs(a2 - y2)
    largest = max(d1, d2)
    if largest == 0:
        return 0.0
    return k * (d1 - d2) / largest


def simplified_score(a1: float, a2: float, k: float = 1.0) -> float:
    """Equation (2): k * (a1 - a2) / max(a1, a2), for answers on a positive scale (1..n)."""
    largest = max(a1, a2)
    if largest == 0:
        return 0.0
    return k * (a1 - a2) / largest


def score_pair(control: int, treatment: int, params: MetricParams, n_options: int) -> float:
    """Score one answered pair with its test case's parameters, applying option flips."""
    a1 = n_options - 1 - control if params.flip_control else control
    a2 = n_options - 1 - treatment if params.flip_treatment else treatment
    return bias_score(a1, a2, params.k, params.y1, params.y2)


def hub_score(a_control: int, a_treatment: int, k: float, x_1: float, x_2: float) -> float:
    """The published dataset card's form: the same metric with a 1e-8 guard in the denominator."""
    d1, d2 = abs(a_control - x_1), abs(a_treatment - x_2)
    return k * (d1 - d2) / (max(d1, d2) + 1e-8)


def option_order(n_options: int, reverse: bool) -> list[int]:
    """Original option indices in the order they are presented."""
    order = list(range(n_options))
    return order[::-1] if reverse else order


def should_reverse(*key: object) -> bool:
    """Seeded coin flip: reverse the options of half of all pairs, both halves alike.

    Keyed on stable identifiers (not Python's salted hash) so a resumed run decides the same.
    """
    digest = hashlib.sha256(repr(key).encode()).digest()
    return digest[0] % 2 == 1


# How a run orders each pair's options (`RunSpec.option_order`): as the test case or the
# dataset writes them, or reversed in the seeded half of the pairs `should_reverse` picks, so
# a preference for a position cancels out over many pairs.
AS_WRITTEN = "as_written"
HALF_REVERSED = "half_reversed"
OPTION_ORDERS = (AS_WRITTEN, HALF_REVERSED)


def order_problem(choice: object) -> str | None:
    """Why `choice` is not an option order, or None."""
    if choice in OPTION_ORDERS:
        return None
    return f"unknown option order {str(choice)[:40]!r}: use {' or '.join(OPTION_ORDERS)}"


def presented_order(n_options: int, choice: str, *key: object) -> list[int]:
    """The order one pair's options are shown in under a run's `choice` of option order;
    `key` seeds the coin flip of `half_reversed` (the instance id and the run's seed)."""
    problem = order_problem(choice)
    if problem:
        raise ValueError(problem)
    return option_order(n_options, choice == HALF_REVERSED and should_reverse(*key))


def to_original(presented_index: int, order: Sequence[int]) -> int:
    """Map a 0-based presented option index back to the original order."""
    return order[presented_index]


def mean(scores: Iterable[float]) -> float:
    values = [s for s in scores if s is not None and not math.isnan(s)]
    return sum(values) / len(values) if values else math.nan


def mean_abs(scores: Iterable[float]) -> float:
    """Average absolute biasedness: how strongly, regardless of direction."""
    return mean(abs(s) for s in scores if s is not None)


def random_choice(n_options: int, rng: random.Random) -> int:
    """The paper's Random baseline: one option uniformly."""
    return rng.randrange(n_options)
