"""Filling and deciding one pair from a page (Learn, Preview), with the store as LLM cache.

Answers are cached in the database like a run's, so showing the same pair again is instant
and costs nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from app_pages._common import api_base_of, get_store
from cogbias.core.records import Decision
from cogbias.library.testcases import TestCase
from cogbias.llm import LLMClient
from cogbias.llm.registry import ModelInfo
from cogbias.runs import live, pipeline, scorers
from cogbias.runs.pipeline import Instance
from cogbias.runs.prompting import BASELINE

FAILURE_HINT = (
    "What to do: check that the model's API key is set (Models page), that its server is "
    "running, or pick the local model or the random baseline."
)


def _client(model: str, infos: list[ModelInfo]) -> AbstractContextManager[LLMClient]:
    return live.cached_client(
        get_store(), concurrency=4, max_retries=2, api_base=api_base_of(model, infos)
    )


def fill_pair(
    case: TestCase,
    scenario: str,
    generator: str | None,
    seed: int,
    infos: list[ModelInfo],
    temperature: float = 0.7,
) -> Instance:
    """Fill every gap; with no generator, value gaps only (LLM gaps stay visible)."""
    if not generator:
        return pipeline.generate_offline(case, scenario, seed=seed)
    with _client(generator, infos) as client:
        return pipeline.run_sync(
            pipeline.generate(
                client,
                case,
                scenario,
                generator=generator,
                seed=seed,
                temperature=temperature,
            )
        )


def probability_problem(instance: Instance, model: str, infos: list[ModelInfo]) -> str | None:
    """Why `model` cannot be asked for option probabilities on this pair (None: it can)."""
    return scorers.refusal(
        scorers.PROBABILITIES,
        [model],
        api_base_of(model, infos),
        BASELINE,
        {instance.test_case: instance.n_options},
    )


def decide(
    instance: Instance,
    model: str,
    infos: list[ModelInfo],
    seed: int = 0,
    temperature: float = 0.0,
    scoring: str = scorers.DEFAULT,
    samples: int = 1,
    reducer: str | None = None,
) -> Decision:
    """Both halves answered by `model` (`samples` times each, reduced by `reducer`) and
    scored by the scorer `scoring` (`runs.scorers`): one decision (not saved to a run). With
    `scoring="probabilities"` it carries both halves' distributions. A model the scorer
    cannot use is refused by name (ValueError)."""
    problem = scorers.refusal(
        scoring,
        [model],
        api_base_of(model, infos),
        BASELINE,
        {instance.test_case: instance.n_options},
    ) or scorers.sampling_refusal(scoring, samples, reducer, temperature)
    if problem:
        raise ValueError(problem)
    ask = pipeline.PairAsk(seed=seed, temperature=temperature, samples=samples, reducer=reducer)
    with _client(model, infos) as client:
        return pipeline.run_sync(scorers.get(scoring).decide(client, instance, model, ask))
