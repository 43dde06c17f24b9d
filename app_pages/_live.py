"""Filling and deciding one pair from a page (Learn, Preview), with the store as LLM cache,
and the scoring controls of Learn, Preview and Run (on the models' default until the reader
picks one).

Answers are cached in the database like a run's, so showing the same pair again is instant
and costs nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import streamlit as st

from app_pages._common import api_base_of, get_store, scoring_choice
from cogbias.core.records import Decision
from cogbias.library.testcases import TestCase
from cogbias.llm import LLMClient
from cogbias.llm.registry import ModelInfo
from cogbias.runs import live, paired_scoring, pipeline, probabilities, scorers
from cogbias.runs.paired_plan import RunSpec
from cogbias.runs.pipeline import Instance
from cogbias.runs.prompting import BASELINE
from cogbias.store import Store
from cogbias.views.safe_text import escape_markdown

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


def default_scoring(model: str, infos: list[ModelInfo], n_options: int) -> str:
    """How a live pair of `model` is scored when the reader has not chosen: by option
    probabilities where the model gives them (`scorers.default_scoring`)."""
    has_options = probabilities.letterable(n_options)
    return scorers.default_for_models([model], api_base_of(model, infos), has_options)


BY_PROBABILITIES = (
    "Scored by option probabilities, which this model gives; choose “Sampled answer” for the "
    "paper's reading."
)


def scoring_controls(
    key: str, temperature_key: str, model: str, infos: list[ModelInfo], n_options: int
) -> tuple[dict[str, Any], float]:
    """Learn's and Preview's scoring: the radio, on the model's default until the reader picks
    one (said under it when that is option probabilities), the samples and reducer, and the
    temperature of the samples when each half is asked several times (at 0 they would all be
    one answer). Returns (scoring, samples and reducer as `decide` takes them, decision
    temperature)."""
    by_model = default_scoring(model, infos, n_options)
    sampled = scoring_choice(key, by_model)
    if sampled["scoring"] == by_model == scorers.PROBABILITIES:
        st.caption(BY_PROBABILITIES)
    if sampled["samples"] == 1:
        return sampled, 0.0
    return sampled, st.slider("Temperature of the samples", 0.1, 1.5, 0.7, 0.1, key=temperature_key)


def run_scoring_controls(key: str, asked: RunSpec, store: Store) -> dict[str, Any]:
    """The Run page's scoring, samples and reducer: the radio shows what the models and test
    cases of `asked` choose (`paired_scoring.scoring_by_models`, the command's default too)
    until the reader picks, and says so when that is option probabilities."""
    by_models = paired_scoring.scoring_by_models(asked, store)
    scoring = scoring_choice(key, by_models)
    if scoring["scoring"] == by_models == scorers.PROBABILITIES:
        said = paired_scoring.by_probabilities(asked, "“Sampled answer”")
        st.caption(escape_markdown(said[0].upper() + said[1:] + "."))
    return scoring


def decide(
    instance: Instance,
    model: str,
    infos: list[ModelInfo],
    seed: int = 0,
    temperature: float = 0.0,
    scoring: str | None = None,
    samples: int = 1,
    reducer: str | None = None,
) -> Decision:
    """Both halves answered by `model` (`samples` times each, reduced by `reducer`) and
    scored by the scorer `scoring` (`runs.scorers`; None: `default_scoring`): one decision
    (not saved to a run). Scored by probabilities it carries both halves' distributions. A
    model the scorer cannot use is refused by name (ValueError)."""
    scoring = scoring or default_scoring(model, infos, instance.n_options)
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
