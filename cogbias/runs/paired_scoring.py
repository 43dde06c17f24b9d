"""How a paired run that names no scoring is scored: what its models choose.

A paired, dataset or token-bias run whose spec names no scoring (`RunSpec.scoring` None: the
command, the Run page or the Datasets page with nothing chosen) is planned with the one rule
of live pairs and class runs, `scorers.default_for_models`, asked of its models and its test
cases' options; the planned spec names the choice, so the run id is that of what was asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from cogbias.core.reading import READ_ANSWER
from cogbias.library import testcases as library
from cogbias.llm.profiles import resolve
from cogbias.runs import probabilities, scorers
from cogbias.runs import prompting as prompting_methods
from cogbias.studies import interventions

if TYPE_CHECKING:
    from cogbias.store import Store


class Asked(Protocol):
    """The fields of a paired spec (`paired_plan.RunSpec`) the choice reads."""

    models: list[str]
    biases: list[str]
    dataset: str | None
    api_base: str | None
    prompting: str
    reading: str
    extractor: str | None
    samples: int
    reducer: str | None
    reasoning_effort: str | None
    thinking_budget: int | None
    intervention: str


def scoring_by_models(spec: Asked, store: Store | None) -> str:
    """How a run that names no scoring is scored (the Run page's radio shows it until the
    reader picks): option probabilities where every model that writes text gives them and
    every test case has options a letter can name (a small local model's sampled answers are
    often unreadable, its probabilities never), else a sampled answer. A run that asks for
    more than a letter (a prompting method, a reasoning effort or thinking budget, an
    intervention), reads its answers its own way (`--reading extraction`, an `--extractor`)
    or reduces several samples is sampled, as those ask it to be; so is a run of `random`
    alone."""
    asks_text = (
        spec.prompting != prompting_methods.BASELINE
        or spec.reading != READ_ANSWER
        or spec.extractor
        or spec.samples > 1
        or spec.reducer
        or spec.reasoning_effort
        or spec.thinking_budget
        or spec.intervention != interventions.NONE
    )
    if asks_text:
        return scorers.DEFAULT
    counts = option_counts(spec, store)
    lettered = bool(counts) and all(probabilities.letterable(n) for n in counts.values())
    return scorers.default_for_models(spec.models, spec.api_base, lettered)


def option_counts(spec: Asked, store: Store | None) -> dict[str, int]:
    """The number of options of each test case `spec` asks: of its dataset's instances, or
    of the library's test cases it names (all of them when it names none; a name the
    library lacks is refused by the plan). A run stored before keeps its own scoring, so the
    library as it is now is what a new run asks."""
    if spec.dataset:
        counts = store.dataset_option_counts(spec.dataset) if store is not None else {}
        return {b: n for b, n in counts.items() if not spec.biases or b in spec.biases}
    cases = library.load_library()
    wanted = spec.biases or list(cases)
    return {b: cases[b].n_options for b in wanted if b in cases}


def by_probabilities(spec: Asked, choose: str) -> str:
    """What a run scored by option probabilities because its models give them says before it
    starts ("scored by option probabilities, which local/smollm2 gives; choose ..."), the
    way to sampled answers (`choose`) in the words of the face that offers it."""
    writers = _writers(spec.models, spec.api_base)
    gives = "gives" if len(writers) == 1 else "give"
    return (
        f"scored by option probabilities, which {' and '.join(writers)} {gives}; choose "
        f"{choose} for the paper's reading (a sampled answer, read)"
    )


def _writers(models: Sequence[str], api_base: str | None) -> list[str]:
    """The models that write text (not the `random` baseline), asked of their profiles."""
    return [m for m in models if resolve(m, api_base).writes_text]
