"""The scorers: how a filled pair becomes a decisions row, one registry of them.

A scorer has a name (stored in the run's spec as `scoring`, so it is part of the run's id
when it is not the default), what it needs of a model (`SAMPLED_TEXT` or
`OPTION_PROBABILITIES`), a check of the run's models and test cases (`refusal`, a sentence
naming what is missing) and the function that asks both halves of a pair and returns its
decision (`decide_pair(client, instance, model, ask)`, `ask` a `decide.PairAsk`, built on
`decide.decision_row`). A scorer that gives how it asks one half (`ask_half`) can be asked
N times a half (`--samples N`), its samples reduced by a reducer (`runs/reducers.py`);
`Scorer.decide` is the one door that asks a pair either way. Every list of scoring names
(the command's `--scoring`, the pages' radios, batches, plan estimates) reads this
registry; callers ask `get(name)` instead of comparing names. A new scorer is one module
with its `decide_pair` and one `register` call below (docs/architecture.md, "Add a scorer
or reducer").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from cogbias.core.errors import UserError
from cogbias.llm.profiles import resolve
from cogbias.runs import decide, probabilities, reducers, sampling

if TYPE_CHECKING:
    from cogbias.core.records import Decision, Instance
    from cogbias.llm import LLMClient
    from cogbias.llm.profiles import ModelProfile

CHOICE = "choice"  # the names of the built-in scorers, as stored in specs
PROBABILITIES = probabilities.SCORING
CONSISTENCY = "consistency"  # `consistency:N`: choice asked N times a half, by mode
DEFAULT = CHOICE  # what a spec stored without `scoring` asked (a new run: `default_scoring`)

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
    decide_pair: DecidePair  # one answer a half
    refusal: Refusal = no_refusal
    # Whether a batch can ask its calls: collected on a cache miss and answered from the
    # cache (runs/batch.py), which holds no log-probabilities.
    batchable: bool = False
    # A scorer named with an argument ("consistency:5") says what the argument is ("N") and
    # how it makes the scorer of that name (ValueError naming the bounds otherwise).
    argument: str = ""
    bind: Callable[[Scorer, str], Scorer] | None = None
    samples: int = 1  # answers asked of each half by a scorer that names them (consistency:N)
    # How it asks one half once, so a run can ask each half N times (`--samples N`,
    # `runs.sampling`); None: it cannot be sampled.
    ask_half: sampling.AskHalf | None = None
    reducer: str = reducers.DEFAULT  # what reduces its samples unless a run names another
    # The scorer this family is a sampled spelling of ("consistency:N" is "choice" asked N
    # times): every run of it is sampled and stores its samples, and the pages offer it as
    # that scorer with a number of samples rather than in their radio.
    samples_of: str = ""

    @property
    def spelling(self) -> str:
        """How `--scoring` spells it: its name, with its argument's placeholder if any."""
        return f"{self.name}:{self.argument}" if self.argument else self.name

    @property
    def reads_answers(self) -> bool:
        """Whether it reads a sampled answer, so `--reading` and `--extractor` apply."""
        return self.needs == SAMPLED_TEXT

    def sampled(self, samples: int) -> bool:
        """Whether a run asking `samples` answers a half is asked through `runs.sampling`."""
        return self.ask_half is not None and (bool(self.samples_of) or samples > 1)

    def decide(
        self, client: LLMClient, instance: Instance, model: str, ask: decide.PairAsk
    ) -> Awaitable[Decision]:
        """Ask and score one pair as `ask` says: `ask.samples` answers a half reduced by
        `ask.reducer` (this scorer's own when None) for a sampled run, else `decide_pair`.
        What every caller asks (runs, batches, `cogbias pair`, Learn)."""
        if self.samples_of:  # its name says how many
            ask = replace(ask, samples=self.samples)
        if self.ask_half is not None and self.sampled(ask.samples):
            sampled_ask = replace(ask, reducer=ask.reducer or self.reducer)
            return sampling.decide_pair(client, instance, model, sampled_ask, self.ask_half)
        return self.decide_pair(client, instance, model, ask)


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
    if name in (CHOICE, PROBABILITIES, CONSISTENCY):
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


def offered() -> tuple[Scorer, ...]:
    """The scorers the pages' radios offer: every one but a sampled spelling of another
    (`consistency:N` is offered as `choice` with N samples), default first."""
    return tuple(s for s in _SCORERS.values() if not s.samples_of)


def reducers_for(scorer: Scorer) -> tuple[reducers.Reducer, ...]:
    """The reducers that can reduce `scorer`'s samples (one of distributions needs a scorer
    that gives probabilities), the default first."""
    return tuple(r for r in reducers.all_reducers() if _fits(r, scorer))


def _fits(reducer: reducers.Reducer, scorer: Scorer) -> bool:
    return reducer.reads == reducers.CHOICES or scorer.needs == OPTION_PROBABILITIES


def spelled(name: str, samples: int = 1, reducer: str | None = None) -> tuple[str, int, str | None]:
    """One spelling of how a run scores: (the scorer's name as stored, answers a half, the
    reducer or None for the scorer's own). `consistency:03` is `consistency:3`; `choice`
    with 3 samples is `consistency:3` (today's spelling, so such runs keep their ids); a
    reducer that is the scorer's own is None. What names no scorer is returned as it is
    (planning refuses it by name); ValueError when the scoring names one number of samples
    and `samples` another."""
    found = _lookup(name)
    if isinstance(found, str):
        return name, samples, reducer
    if found.samples_of:
        if samples not in (1, found.samples):
            raise ValueError(
                f"--scoring {found.name} asks {found.samples} samples a half and --samples "
                f"{samples} asks {samples}: give one of them"
            )
        samples = found.samples
    elif samples > 1:
        family = next((s for s in _SCORERS.values() if s.samples_of == found.name), None)
        if family is not None and 1 <= samples <= sampling.MAX_SAMPLES:
            found = get(f"{family.name}:{samples}")
    return found.name, samples, None if reducer == found.reducer else reducer


def sampling_refusal(
    name: str, samples: int, reducer: str | None, temperature: float
) -> str | None:
    """Why a run scored by `name` cannot ask `samples` answers a half and reduce them by
    `reducer` (None: the scorer's own) at `temperature`, or None."""
    if problem := unknown(name) or (reducer and reducers.unknown(reducer)):
        return problem
    scorer = get(name)
    if not 1 <= samples <= sampling.MAX_SAMPLES:
        return f"--samples takes 1 to {sampling.MAX_SAMPLES} samples a half, not {samples}"
    if samples > 1 and scorer.ask_half is None:
        return f"--scoring {name} cannot ask a half more than once: leave out --samples"
    if reducer and not scorer.sampled(samples):
        return (
            f"--reducer {reducer} reduces a half's samples, and this run asks one answer a "
            "half: add --samples N (2 or more)"
        )
    if reducer and not _fits(reducers.get(reducer), scorer):
        fit = " or ".join(r.name for r in reducers_for(scorer))
        return (
            f"--reducer {reducer} reduces option probabilities, which --scoring "
            f"{scorer.samples_of or name} does not give: choose {fit}"
        )
    if samples == 1 or temperature > 0:
        return None
    return (
        f"--samples {samples} asks each half {samples} times, and at --temperature 0 every "
        "sample is the most probable answer again: set a temperature above 0 (e.g. "
        "--temperature 0.7)"
    )


def gives_probabilities(models: Sequence[str], api_base: str | None) -> bool:
    """Whether every model named that writes text lists its most probable tokens (option
    probabilities would read it), whether or not they are its default; False for a model
    that cannot be resolved (asking it says what is wrong)."""
    profiles = _resolved(models, api_base)
    writers = [p for p in profiles or () if p.writes_text]
    return bool(writers) and all(p.top_logprobs for p in writers)


def default_for_models(models: Sequence[str], api_base: str | None, has_options: bool) -> str:
    """`default_scoring` for models named by their strings (`cogbias pair`, Learn, Preview,
    a paired run that names no scoring: `paired_scoring`); an unknown model gets the sampled
    answer, and asking it says what is wrong."""
    profiles = _resolved(models, api_base)
    return DEFAULT if profiles is None else default_scoring(profiles, has_options)


def _resolved(models: Sequence[str], api_base: str | None) -> list[ModelProfile] | None:
    """The models' profiles, or None when one cannot be resolved."""
    try:
        return [resolve(model, api_base) for model in models]
    except (UserError, ValueError):
        return None


def default_scoring(profiles: Sequence[ModelProfile], has_options: bool) -> str:
    """How models are asked a question when the user names no way: `PROBABILITIES` when it
    has options (a letter each, at most `logprobs.LABELS`) and every model that writes text
    lists its most probable tokens and is read by them first (its profile's `top_logprobs` and
    `probabilities_first`: the local model, or a small model of your own the registry says
    so of), else `CHOICE` (sampled answers: the paper's reading, which a capable model gives
    readably). Probabilities take one call per question, give the
    model's exact preference and leave no answer that cannot be read, which a small local
    model's sampled answers often are. The `random` baseline writes no text and fits both;
    models that are all `random` are sampled (their spread is the baseline's). One rule, so
    the class kind and the paired runs default alike."""
    writers = [p for p in profiles if p.writes_text]
    if has_options and writers and all(p.top_logprobs and p.probabilities_first for p in writers):
        return PROBABILITIES
    return CHOICE


def _consistency(family: Scorer, argument: str) -> Scorer:
    n = sampling.sample_count(argument, f"--scoring {family.name}:N")
    return replace(
        family,
        name=f"{family.name}:{n}",
        argument="",
        bind=None,
        samples=n,
        decide_pair=partial(_n_samples, n),
    )


def _n_samples(
    n: int, client: LLMClient, instance: Instance, model: str, ask: decide.PairAsk
) -> Awaitable[Decision]:
    """`consistency:N`'s pair: `choice` asked N times a half (whatever `ask.samples` says)."""
    return sampling.decide_pair(client, instance, model, replace(ask, samples=n))


register(
    Scorer(
        name=CHOICE,
        needs=SAMPLED_TEXT,
        label="Sampled answer (read, then scored)",
        help="a sampled answer, read and scored (the paper's)",
        decide_pair=decide.decide_pair,
        batchable=True,
        ask_half=decide.decide_half,
    )
)
register(
    Scorer(
        name=PROBABILITIES,
        needs=OPTION_PROBABILITIES,
        label="Option probabilities (expected score)",
        help="each half's option probabilities from the model's token log-probabilities, "
        "scored by the exact expectation (models with log-probabilities only; docs/runs.md); "
        "with --samples N their mean (--reducer mean_probability)",
        decide_pair=probabilities.decide_pair,
        refusal=probabilities.refusal,
        ask_half=probabilities.decide_half,
        reducer="mean_probability",
    )
)
register(
    Scorer(
        name=CONSISTENCY,
        needs=SAMPLED_TEXT,
        label="Self-consistency (N samples, modal answer scored)",
        help=f"self-consistency: the same as --samples N (1 to {sampling.MAX_SAMPLES}) with "
        "choice, the option named most often scored (--reducer mode: ties go to the option "
        "named first); every sample is stored (docs/runs.md)",
        decide_pair=sampling.decide_pair,  # bound to its N by `_consistency`
        batchable=True,
        argument="N",
        bind=_consistency,
        ask_half=decide.decide_half,
        samples_of=CHOICE,
    )
)
