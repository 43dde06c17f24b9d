"""The scorers: how a filled pair becomes a decisions row, one registry of them.

A scorer has a name (stored in the run's spec as `scoring`, so it is part of the run's id
when it is not the default), what it needs of a model (`SAMPLED_TEXT` or
`OPTION_PROBABILITIES`), a check of the run's models and test cases (`refusal`, a sentence
naming what is missing) and the function that asks both halves of a pair and returns its
decision (`decide_pair(client, instance, model, ask)`, `ask` a `decide.PairAsk`, built on
`decide.decision_row`). Every list of scoring names (the command's `--scoring`, the pages'
radios, batches, plan estimates) reads this registry; callers ask `get(name)` instead of
comparing names. A new scorer is one module with its `decide_pair` and one `register` call
below (docs/architecture.md, "Add a scorer").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from cogbias.core.errors import UserError
from cogbias.llm.profiles import resolve
from cogbias.runs import consistency, decide, probabilities

if TYPE_CHECKING:
    from cogbias.core.records import Decision, Instance
    from cogbias.llm import LLMClient

CHOICE = "choice"  # the names of the built-in scorers, as stored in specs
PROBABILITIES = probabilities.SCORING
CONSISTENCY = consistency.SCORING
DEFAULT = CHOICE

SAMPLED_TEXT = "sampled text"  # an answer is sampled and read (extraction calls possible)
OPTION_PROBABILITIES = "option probabilities"  # read from the answer's top_logprobs


class DecidePair(Protocol):
    """Ask both halves of `instance` as `ask` says (the run's settings and the pair's repeat,
    `decide.PairAsk`) and score them: one decision. Raises `FatalLLMError` (the run must
    stop) and, in a batch's collecting round, `CacheMiss`."""

    def __call__(
        self, client: LLMClient, instance: Instance, model: str, ask: decide.PairAsk
    ) -> Awaitable[Decision]: ...


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
    # A scorer named with an argument ("consistency:5") says what the argument is ("N") and
    # how it makes the scorer of that name (ValueError naming the bounds otherwise).
    argument: str = ""
    bind: Callable[[Scorer, str], Scorer] | None = None
    # how the pages ask for a whole-number argument: its label and (lowest, default, highest)
    argument_label: str = ""
    argument_range: tuple[int, int, int] = (1, 1, 1)
    samples: int = 1  # answers asked of each half (plan estimates; above 1, a temperature)

    @property
    def spelling(self) -> str:
        """How `--scoring` spells it: its name, with its argument's placeholder if any."""
        return f"{self.name}:{self.argument}" if self.argument else self.name

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
    if name in (CHOICE, PROBABILITIES, consistency.SCORING):
        raise ValueError(f"the built-in scorer '{name}' cannot be removed")
    _SCORERS.pop(name, None)


def names() -> tuple[str, ...]:
    """How `--scoring` spells each scorer ("consistency:N"), default first."""
    return tuple(s.spelling for s in _SCORERS.values())


def all_scorers() -> tuple[Scorer, ...]:
    """The registered scorers, default first (one with an argument stands for all of its)."""
    return tuple(_SCORERS.values())


def _lookup(name: str) -> Scorer | str:
    """The scorer `name` names, or why it names none."""
    base, colon, argument = str(name).partition(":")
    scorer = _SCORERS.get(base)
    choices = " or ".join(s.spelling for s in _SCORERS.values())
    if scorer is None or bool(colon) != bool(scorer.argument):
        return f"unknown scoring {str(name)[:40]!r} (choose {choices})"
    if scorer.bind is None:
        return scorer
    try:
        return scorer.bind(scorer, argument)
    except ValueError as exc:
        return str(exc)


def unknown(name: str) -> str | None:
    """Why `name` names no scorer, or None."""
    found = _lookup(name)
    return found if isinstance(found, str) else None


def get(name: str) -> Scorer:
    """The scorer called `name` ("consistency:5" made from its family); ValueError naming
    the choices otherwise."""
    found = _lookup(name)
    if isinstance(found, str):
        raise ValueError(found)
    return found


def refusal(
    name: str,
    models: Sequence[str],
    api_base: str | None,
    prompting: str,
    option_counts: Mapping[str, int],
) -> str | None:
    """Why a run cannot be scored by `name` (unknown, or its models or test cases cannot
    give what it needs), or None."""
    return unknown(name) or get(name).refusal(models, api_base, prompting, option_counts)


def default_scoring(models: Sequence[str], api_base: str | None, has_options: bool) -> str:
    """The scorer a live question uses when none is chosen (`cogbias pair`, Learn, Preview):
    option probabilities where every model that writes text gives them (its profile lists
    `top_logprobs`: the local model) and the question has options, else the sampled answer.

    A model too weak to answer freely (the 135M local model names two options in one
    sentence) is still measured this way, in one call per half; the paper's reading, a
    sampled answer, stays one choice away. Runs keep `DEFAULT`: their id and design do not
    change with the models asked."""
    writers = []
    for model in models:
        try:
            profile = resolve(model, api_base)
        except (UserError, ValueError):  # an unknown model: asking it says what is wrong
            return DEFAULT
        if profile.writes_text:
            writers.append(profile)
    if has_options and writers and all(p.top_logprobs for p in writers):
        return PROBABILITIES
    return DEFAULT


def temperature_refusal(name: str, temperature: float) -> str | None:
    """Why `name` cannot sample at `temperature`: several samples at 0 are one answer."""
    samples = get(name).samples
    if samples == 1 or temperature > 0:
        return None
    return (
        f"--scoring {name} samples each half {samples} times, and at --temperature 0 every "
        "sample is the most probable answer again: set a temperature above 0 (e.g. "
        "--temperature 0.7)"
    )


def _consistency(family: Scorer, argument: str) -> Scorer:
    n = consistency.sample_count(argument)
    return replace(
        family,
        name=f"{family.name}:{n}",
        argument="",
        argument_label="",
        bind=None,
        samples=n,
        decide_pair=partial(consistency.decide_pair, samples=n),
    )


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
register(
    Scorer(
        name=consistency.SCORING,
        needs=SAMPLED_TEXT,
        label="Self-consistency (N samples, modal answer scored)",
        help=f"each half sampled N times (1 to {consistency.MAX_SAMPLES}) at the run's "
        "--temperature, read as choice reads one answer, and the option named most often "
        "scored; ties go to the option named first; every sample is stored (docs/runs.md)",
        decide_pair=consistency.decide_pair,
        batchable=True,
        argument="N",
        bind=_consistency,
        argument_label="Samples per half",
        argument_range=(2, 5, consistency.MAX_SAMPLES),
    )
)
