"""Capabilities that tell the truth (issue 31): a registry entry overrides only what it
states, and may state every capability of a profile; `logprobs` (the sampled token's) and
`top_logprobs` (the alternatives beside it, what probability scoring reads) are separate; a
model that writes no text is the random baseline because its profile says so, not its name.

Before: an entry without `max_temperature` got 1.0 in place of its provider's 2.0, and a
wrong one 1.0 too; `batchable` and `writes_text` in an entry were ignored; a model with log-
probabilities but no alternatives was taken for probability scoring; `runs/probabilities`
asked `model == "random"`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.core.probabilities import NotADistribution
from cogbias.llm import logprobs, registry, settings
from cogbias.llm.profiles import ModelProfile, resolve
from cogbias.runs import executor, paired_plan, probabilities, scorers
from cogbias.store import Store
from tests.test_hostile_logprobs import _one_pair_run

SERVER = "http://127.0.0.1:9/v1"


def _entries(text: str) -> list[registry.ModelInfo]:
    """The user's registry holding `text` (so every resolve reads it), as read."""
    path = settings.user_models_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return registry.load_models(path)


def _profile(entry: str, model: str) -> ModelProfile:
    _entries(f'[[models]]\nid = "{model}"\nname = "Mine"\n{entry}\n')
    return resolve(model)


# --------------------------------------------------------------------------- overriding


@pytest.mark.parametrize(
    ("model", "provider"),
    [("openai/mine", 2.0), ("anthropic/claude-mine", 1.0), ("deepinfra/mine", 2.0)],
)
def test_an_entry_without_max_temperature_keeps_the_providers(model, provider) -> None:
    assert _profile(f'api_base = "{SERVER}"', model).max_temperature == provider  # before: 1.0
    assert _profile("max_temperature = 1.5", model).max_temperature == 1.5


def test_a_wrong_max_temperature_is_reported_and_the_providers_is_used() -> None:
    (info,) = _entries('[[models]]\nid = "openai/mine"\nmax_temperature = -1\nbatchable = "no"')
    assert info.max_temperature is None and info.batchable is None
    assert resolve("openai/mine").max_temperature == 2.0 and resolve("openai/mine").batchable
    problems = registry.registry_problems(settings.user_models_path())
    assert any(
        "'max_temperature' must be a finite number >= 0; the provider's" in p for p in problems
    )
    assert any("'batchable' must be true or false; the provider's is used" in p for p in problems)


def test_batchable_can_be_overridden_both_ways() -> None:
    assert resolve("openai/mine", registry=[]).batchable  # the provider's
    assert not _profile("batchable = false", "openai/mine").batchable
    assert not resolve("deepinfra/mine", registry=[]).batchable
    assert _profile("batchable = true", "deepinfra/mine").batchable


# Each capability stated as the opposite of what the provider (`openai/`, at SERVER) gives.
OPPOSITES = {
    "json_schema": False,
    "max_temperature": 0.5,
    "batchable": False,
    "logprobs": False,
    "top_logprobs": False,
    "probabilities_first": True,
    "grammar": True,
    "prefix_cache": True,
    "writes_text": False,
    "reasoning": True,
    "thinking_temperature": 1.0,
}


@pytest.mark.parametrize("capability", list(OPPOSITES))
def test_every_capability_an_entry_states_is_the_profiles(capability) -> None:
    plain = resolve("openai/mine", SERVER, registry=[])
    value = OPPOSITES[capability]
    assert getattr(plain, capability) != value
    stated = f"{capability} = {str(value).lower()}"
    profile = _profile(f'api_base = "{SERVER}"\n{stated}', "openai/mine")
    assert getattr(profile, capability) == value
    # the rest keep the provider's (no alternatives without log-probabilities, though)
    others = (
        set(OPPOSITES) - {capability} - ({"top_logprobs"} if capability == "logprobs" else set())
    )
    assert {k: getattr(profile, k) for k in others} == {k: getattr(plain, k) for k in others}


def test_the_registry_lists_every_capability_of_a_profile() -> None:
    assert set(registry.CAPABILITIES) == set(OPPOSITES)
    assert set(registry.CAPABILITIES) <= set(ModelProfile.__dataclass_fields__)


# --------------------------------------------------------------------------- log-probabilities


def test_logprobs_and_top_logprobs_are_separate_capabilities() -> None:
    sampled_only = _profile("logprobs = true", "deepinfra/mine")
    assert sampled_only.logprobs and not sampled_only.top_logprobs
    listing = _profile("top_logprobs = true", "deepinfra/mine")
    assert listing.logprobs and listing.top_logprobs  # alternatives come with log-probabilities
    silent = _profile("logprobs = false", "openai/mine")
    assert not silent.logprobs and not silent.top_logprobs


def test_logprobs_without_top_logprobs_is_refused_for_probability_scoring_by_name() -> None:
    _entries(
        '[[models]]\nid = "deepinfra/sampled-only"\nlogprobs = true\n\n'
        f'[[models]]\nid = "openai/sampled-only"\napi_base = "{SERVER}"\ntop_logprobs = false\n'
    )
    for model in ("deepinfra/sampled-only", "openai/sampled-only"):
        asked = paired_plan.RunSpec(
            models=["random", model], biases=["framing_effect"], scoring="probabilities"
        )
        with pytest.raises(ValueError, match=f"{model} does not list them") as refused:
            paired_plan.plan(asked)  # before: planned, and its halves read as one-hot
        assert "logprobs but no top_logprobs" in str(refused.value)


def test_an_answer_without_alternatives_never_becomes_a_distribution(tmp_path: Path) -> None:
    # A server that sends the sampled token's log-probability and nothing beside it (no
    # `top_logprobs` key at all), though its profile said it lists alternatives.
    alone = {"content": [{"token": "A", "logprob": -0.01}]}
    answer = {"choices": [{"message": {"content": "A"}, "logprobs": alone}]}
    with pytest.raises(NotADistribution, match="listed 1 token"):
        probabilities.read_half(logprobs.encode_answer(answer, "openai/fake"), 2)
    run, row = _one_pair_run(tmp_path, {"content": "A", "logprobs": alone})
    assert run.failed == 1 and row["failure_kind"] == "unparseable" and row["score"] is None
    assert row["control_distribution"] is None and row["treatment_distribution"] is None


# --------------------------------------------------------------------------- the random baseline


def test_the_random_baseline_is_recognised_by_its_profile_not_its_name(tmp_path: Path) -> None:
    # A registry entry that writes no text is a random baseline under another name: drawn
    # uniformly, never called (no server at all), and scored by probabilities as uniform.
    _entries('[[models]]\nid = "mine/coin"\nname = "Coin"\nwrites_text = false\n')
    assert not resolve("mine/coin").writes_text
    assert scorers.refusal("probabilities", ["mine/coin"], None, "baseline", {}) is None
    with Store(tmp_path / "coin.db") as store:
        asked = paired_plan.RunSpec(
            models=["mine/coin"], biases=["framing_effect"], scenarios=1,
            generator="examples", scoring="probabilities",
        )  # fmt: skip
        run = executor.execute(paired_plan.plan(asked, store), store, concurrency=2)
        (row,) = store.query("select * from decisions")
    assert run.status == "done" and run.failed == 0, run
    assert row["status"] == "ok"
    for half in ("control_distribution", "treatment_distribution"):
        p = json.loads(row[half])["p"]
        assert p == pytest.approx([1 / len(p)] * len(p))  # uniform


CLAUDE = "anthropic/claude-haiku-4-5"  # Anthropic's API takes temperatures up to 1


def test_a_paired_run_above_a_models_temperature_is_refused_before_any_call(tmp_path: Path) -> None:
    """A paired run at 1.5 of a model whose profile stops at 1 is refused when planned,
    naming the bound, before a run is stored (so before any call), with a key set."""
    db = tmp_path / "t.db"
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "pairs", "--models", CLAUDE, "--temperature",
         "1.5", "--biases", "anchoring", "--generator", "examples", "--db", str(db)],
        env={**os.environ, "ANTHROPIC_API_KEY": "dummy-key-of-the-test"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{CLAUDE} accepts temperatures up to 1, not 1.5" in done.stderr
    assert "Traceback" not in done.stderr
    with Store(db) as store:
        assert not store.has_runs()


@pytest.mark.parametrize("dataset", [None, "some-dataset"], ids=["library", "dataset"])
def test_every_paired_kind_plans_only_temperatures_its_models_accept(
    tmp_path: Path, dataset
) -> None:
    """The library, dataset and token-bias kinds plan through one check (a dataset's pairs are
    never looked for when a model cannot take the temperature); the bound itself plans."""
    with Store(tmp_path / "t.db") as store:
        for temperature in (1.01, 2.0):
            asked = paired_plan.RunSpec(
                models=["random", CLAUDE], biases=["anchoring"], generator="examples",
                temperature=temperature, dataset=dataset,
            )  # fmt: skip
            with pytest.raises(ValueError, match=f"{CLAUDE} accepts temperatures up to 1, not"):
                paired_plan.plan(asked, store)
        bound = paired_plan.RunSpec(models=[CLAUDE], biases=["anchoring"], generator="examples",
                                    temperature=1.0)  # fmt: skip
        assert paired_plan.plan(bound, store).spec.temperature == 1.0
