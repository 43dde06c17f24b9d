"""The reducers: how a half's samples become the half's answer, one registry of them.

A run asks each half N times (`--samples N`, `runs/sampling.py`); its reducer (`--reducer
NAME`) turns those N samples into what the pair is scored with, as inspect_ai separates
epochs from their reducers. A reducer is one function from a half's samples (the
`decide.HalfResult` of each, in the order asked: `choice` is the option a sample named,
0-based in the test case's order, or None; `distribution` its option probabilities where
the scorer reads them) to

- an option (an int): the half's choice, scored with the test case's metric;
- a `Distribution`: the half's option probabilities, scored by the exact expectation;
- None: the half **abstains** (no answer is scored; the pair's status is `abstained`, a
  result counted apart from failures).

`runs/sampling.py` calls it only when the half has something to reduce: a sample whose call
failed fails the half (a resume asks it again), and a half none of whose samples named an
option (or, for a reducer that `reads` DISTRIBUTIONS, gave probabilities) is unparseable.

Adding a reducer is one function and one `register` call (here for a built-in; a test or a
plugin may call `register` and `unregister` in-process). `--reducer`, the Run and Learn
pages' reducer control and the refusals read this registry; nothing compares names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cogbias.core import probabilities as probs

if TYPE_CHECKING:
    from cogbias.runs.decide import HalfResult

CHOICES = "choices"  # what a reducer reads: the option each sample named (every scorer's)
DISTRIBUTIONS = "distributions"  # ... or each sample's option probabilities (`probabilities`)

# A half's samples -> its choice, its distribution, or None (it abstains).
Reduce = Callable[[Sequence["HalfResult"]], "int | probs.Distribution | None"]


@dataclass(frozen=True)
class Reducer:
    name: str  # stored in a run's spec (when not its scorer's default) and given to --reducer
    help: str  # as `--reducer` and the pages explain it
    reduce: Reduce
    reads: str = CHOICES  # CHOICES, or DISTRIBUTIONS (only a scorer that gives them)
    label: str = ""  # as the pages offer it (default: its name)


_REDUCERS: dict[str, Reducer] = {}
DEFAULT = "mode"


def register(reducer: Reducer) -> Reducer:
    """Add `reducer`; its name is one lower-case word, as a run's spec stores it."""
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", reducer.name):
        raise ValueError(f"a reducer's name is one lower-case word, not {reducer.name[:40]!r}")
    if reducer.name in _REDUCERS and _REDUCERS[reducer.name] is not reducer:
        raise ValueError(f"a reducer named '{reducer.name}' is registered already")
    if reducer.reads not in (CHOICES, DISTRIBUTIONS):
        raise ValueError(f"reducer '{reducer.name}' reads {reducer.reads!r}, which no sample has")
    _REDUCERS[reducer.name] = reducer
    return reducer


def unregister(name: str) -> None:
    """Remove a reducer registered in-process (tests); the built-ins stay."""
    if name in BUILT_IN:
        raise ValueError(f"the built-in reducer '{name}' cannot be removed")
    _REDUCERS.pop(name, None)


def all_reducers() -> tuple[Reducer, ...]:
    """The registered reducers, the default first."""
    return tuple(_REDUCERS.values())


def names() -> tuple[str, ...]:
    return tuple(_REDUCERS)


def unknown(name: str) -> str | None:
    """Why `name` names no reducer, or None."""
    if name in _REDUCERS:
        return None
    return f"unknown reducer {str(name)[:40]!r} (choose {' or '.join(_REDUCERS)})"


def get(name: str) -> Reducer:
    """The reducer called `name`; ValueError naming the choices otherwise."""
    if problem := unknown(name):
        raise ValueError(problem)
    return _REDUCERS[name]


# --------------------------------------------------------------------------- the built-ins


def _votes(samples: Sequence[HalfResult]) -> Counter[int]:
    """How many samples named each option (a sample that named none does not vote)."""
    return Counter(s.choice for s in samples if s.choice is not None)


def mode(samples: Sequence[HalfResult]) -> int | None:
    """The option the most samples named; of tied options, the one named first (the lowest
    sample index), so a resume reduces a half as it was reduced. Self-consistency's rule."""
    votes = _votes(samples)
    if not votes:
        return None
    top = max(votes.values())
    return next(s.choice for s in samples if s.choice is not None and votes[s.choice] == top)


def majority(samples: Sequence[HalfResult]) -> int | None:
    """The option named by strictly more samples than any other (a strict plurality: 2 of 3,
    or 2 of 5 against 1, 1 and 1); when the most-named options tie, the half abstains.
    Samples that named no option do not vote."""
    ranked = _votes(samples).most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def mean_probability(samples: Sequence[HalfResult]) -> probs.Distribution | None:
    """The mean of the samples' option probabilities (those that gave any). A server whose
    probabilities do not vary between calls gives N copies of one distribution, whose mean
    is that distribution: the N samples then differ only in the letter each sampled."""
    dists = [s.distribution for s in samples if s.distribution is not None]
    return probs.mean(dists) if dists else None


BUILT_IN = ("mode", "majority", "mean_probability")
register(
    Reducer(
        "mode",
        "the option most samples named; a tie goes to the option named first (self-consistency)",
        mode,
        label="Mode (a tie goes to the option named first)",
    )
)
register(
    Reducer(
        "majority",
        "the option named by more samples than any other; a tie for the most abstains (the "
        "pair is stored as abstained, counted apart from failures)",
        majority,
        label="Majority (a tie abstains)",
    )
)
register(
    Reducer(
        "mean_probability",
        "the mean of the samples' option probabilities, scored by the exact expectation "
        "(--scoring probabilities only; its default there)",
        mean_probability,
        reads=DISTRIBUTIONS,
        label="Mean probability (the samples' option probabilities averaged)",
    )
)
