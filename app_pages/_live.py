"""Filling and deciding one pair from a page (Learn, Preview), with the store as LLM cache.

Answers are cached in the database like a run's, so showing the same pair again is instant
and costs nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import streamlit as st

from app_pages._common import api_base_of, get_store, scoring_choice
from cogbias.core.records import Decision
from cogbias.library.testcases import TestCase
from cogbias.llm import LLMClient
from cogbias.llm.registry import ModelInfo
from cogbias.runs import live, pipeline, probabilities, scorers
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


def default_scoring(model: str, infos: list[ModelInfo], n_options: int) -> str:
    """How a live pair of `model` is scored when the reader has not chosen: by option
    probabilities where the model gives them (`scorers.default_scoring`)."""
    has_options = probabilities.letterable(n_options)
    return scorers.default_scoring([model], api_base_of(model, infos), has_options)


BY_PROBABILITIES = (
    "Scored by option probabilities, which this model gives; choose “Sampled answer” for the "
    "paper's reading."
)


def scoring_controls(
    key: str, temperature_key: str, model: str, infos: list[ModelInfo], n_options: int
) -> tuple[str, float]:
    """Learn's and Preview's scoring: the radio, on the model's default until the reader picks
    one (said under it when that is option probabilities), and the temperature of the samples
    for a scorer that samples each half several times (at 0 they would all be one answer).
    Returns (scoring, decision temperature)."""
    by_model = default_scoring(model, infos, n_options)
    scoring = scoring_choice(key, by_model)
    if scoring == by_model == scorers.PROBABILITIES:
        st.caption(BY_PROBABILITIES)
    if scorers.get(scoring).samples == 1:
        return scoring, 0.0
    return scoring, st.slider("Temperature of the samples", 0.1, 1.5, 0.7, 0.1, key=temperature_key)


def decide(
    instance: Instance,
    model: str,
    infos: list[ModelInfo],
    seed: int = 0,
    scoring: str | None = None,
    temperature: float = 0.0,
) -> Decision:
    """Both halves answered by `model` and scored by the scorer `scoring` (`runs.scorers`;
    None: `default_scoring`): one decision (not saved to a run). Scored by probabilities it
    carries both halves' distributions. A model the scorer cannot use is refused by name
    (ValueError)."""
    scoring = scoring or default_scoring(model, infos, instance.n_options)
    problem = scorers.refusal(
        scoring,
        [model],
        api_base_of(model, infos),
        BASELINE,
        {instance.test_case: instance.n_options},
    )
    if problem:
        raise ValueError(problem)
    decide_pair = scorers.get(scoring).decide_pair
    ask = pipeline.PairAsk(seed=seed, temperature=temperature)
    with _client(model, infos) as client:
        return pipeline.run_sync(decide_pair(client, instance, model, ask))
