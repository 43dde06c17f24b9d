"""The scorers: how a filled pair becomes a decisions row, one registry of them.

A scorer has a name (stored in the run's spec as `scoring`, so it is part of the run's id
when it is not the default), what it needs of a model (`SAMPLED_TEXT` or
`OPTION_PROBABILITIES`), a check of the run's models and test cases (`refusal`, a sentence
naming what is missing) and the function that asks both halves of a pair and returns its
decisions row (`decide_pair`, built on `decide.decision_row`). Every list of scoring names
(the command's `--scoring`, the pages' radios, batches, plan estimates) reads this registry;
callers ask `get(name)` instead of comparing names. A new scorer is one module with its
`decide_pair` and one `register` call below (docs/architecture.md, "Add a scorer").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cogbias.core import metrics
from cogbias.core.reading import READ_ANSWER
from cogbias.runs import decide, probabilities
from cogbias.runs.prompting import BASELINE

if TYPE_CHECKING:
    from cogbias.core.records import Instance
    from cogbias.llm import LLMClient

CHOICE = "choice"  # the names of the built-in scorers, as stored in specs
PROBABILITIES = probabilities.SCORING
DEFAULT = CHOICE

SAMPLED_TEXT = "sampled text"  # an answer is sampled and read (extraction calls possible)
OPTION_PROBABILITIES = "option probabilities"  # read from the answer's top_logprobs


class DecidePair(Protocol):
    """Ask both halves of `instance` and score them: one decisions row. Raises
    `FatalLLMError` (the run must stop) and, in a batch's collecting round, `CacheMiss`."""

    def __call__(
        self,
        client: LLMClient,
        instance: Instance,
        model: str,
        run_id: str = "",
        temperature: float = 0.0,
        repeat: int = 0,
        seed: int = 0,
        prompting: str = BASELINE,
        extractor: str | None = None,
        option_order: str = metrics.HALF_REVERSED,
        reading: str = READ_ANSWER,
    ) -> Awaitable[dict[str, Any]]: ...


# Why a run's models (with its api_base), prompting method and test cases (name -> number of
# options) cannot be scored this way, or None.
Refusal = Callable[[Sequence[str], str | None, str, Mapping[str, int]], str | None]


def no_refusal(
    models: Sequence[str], api_base: str | None, prompting: str, counts: Mapping[str, int]
) -> None:
    """Every model and test case can be scored (a scorer of sampled answers)."""
    return None


@dataclass(frozen=True)
class Scorer:
    name: str
    needs: str  # SAMPLED_TEXT or OPTION_PROBABILITIES
    label: str  # as the pages offer it
    help: str  # as `--scoring` explains it
    decide_pair: DecidePair
    refusal: Refusal = no_refusal
    # Whether a batch can ask its calls: collected on a cache miss and answered from the
    # cache (runs/batch.py), which holds no log-probabilities.
    batchable: bool = False

    @property
    def reads_answers(self) -> bool:
        """Whether it reads a sampled answer, so `--reading` and `--extractor` apply."""
        return self.needs == SAMPLED_TEXT


_SCORERS: dict[str, Scorer] = {}


def register(scorer: Scorer) -> Scorer:
    """Add `scorer` (after the others: the first registered is the default)."""
    if scorer.name in _SCORERS and _SCORERS[scorer.name] is not scorer:
        raise ValueError(f"a scorer named '{scorer.name}' is registered already")
    if scorer.needs not in (SAMPLED_TEXT, OPTION_PROBABILITIES):
        raise ValueError(f"scorer '{scorer.name}' needs {scorer.needs!r}, which nothing gives")
    _SCORERS[scorer.name] = scorer
    return scorer


def unregister(name: str) -> None:
    """Remove a scorer registered in-process (tests); the built-ins stay."""
    if name in (CHOICE, PROBABILITIES):
        raise ValueError(f"the built-in scorer '{name}' cannot be removed")
    _SCORERS.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_SCORERS)


def all_scorers() -> tuple[Scorer, ...]:
    return tuple(_SCORERS.values())


def unknown(name: str) -> str | None:
    """Why `name` names no scorer, or None."""
    if name in _SCORERS:
        return None
    return f"unknown scoring {str(name)[:40]!r} (choose {' or '.join(_SCORERS)})"


def get(name: str) -> Scorer:
    """The scorer called `name`; ValueError naming the choices otherwise."""
    problem = unknown(name)
    if problem:
        raise ValueError(problem)
    return _SCORERS[name]


def refusal(
    name: str,
    models: Sequence[str],
    api_base: str | None,
    prompting: str,
    option_counts: Mapping[str, int],
) -> str | None:
    """Why a run cannot be scored by `name` (unknown, or its models or test cases cannot
    give what it needs), or None."""
    return unknown(name) or _SCORERS[name].refusal(models, api_base, prompting, option_counts)


register(
    Scorer(
        name=CHOICE,
        needs=SAMPLED_TEXT,
        label="Sampled answer (read, then scored)",
        help="a sampled answer, read and scored (the paper's)",
        decide_pair=decide.decide_pair,
        batchable=True,
    )
)
register(
    Scorer(
        name=PROBABILITIES,
        needs=OPTION_PROBABILITIES,
        label="Option probabilities (expected score)",
        help="each half's option probabilities from the model's token log-probabilities, "
        "scored by the exact expectation (models with log-probabilities only; docs/runs.md)",
        decide_pair=probabilities.decide_pair,
        refusal=probabilities.refusal,
    )
)
