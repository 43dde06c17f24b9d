"""`--scoring consistency:N` (self-consistency) end to end: N samples per half with their own
repeat index and seed, the modal answer scored (ties to the option named first), every sample
stored and exported, batches collecting every sample, Learn and Explore showing them."""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from fake_llm_server import FakeHTTPError, FakeLLMServer, _last_user_text, default_responder

from cogbias.cli.main import main
from cogbias.core.records import Instance
from cogbias.llm import LLMRequest, random_provider
from cogbias.runs import batch, decide, paired_plan, reducers, sampling, scorers
from cogbias.store import Store
from tests.test_app_pages import assert_clean, open_page, shown_text


def _seeded(request: dict) -> str:
    """A model that samples: its option depends on the seed it is sent (and the question)."""
    prompt = _last_user_text(request)
    if "Answer options:" not in prompt or "Which option does" in prompt:
        return default_responder(request)
    digest = hashlib.sha256(f"{request.get('seed')}|{prompt}".encode()).digest()
    return f"I choose Option {digest[0] % 3 + 1}."


def _half(choice: int | None, error: str | None = None, kind: str | None = None):
    return decide.HalfResult(
        answer=f"answer {choice}", choice=choice, error=error, failure_kind=kind
    )


def _modal(samples):
    return sampling.half_of(samples, reducers.get("mode"), n_options=5)


def test_the_modal_answer_is_scored_and_a_tie_goes_to_the_option_named_first():
    assert _modal([_half(2), _half(1), _half(1), _half(0)]).choice == 1
    tied = _modal([_half(4), _half(2), _half(2), _half(4)])
    assert tied.choice == 4 and tied.answer == "answer 4" and tied.error is None
    unreadable = _half(None, "no option could be extracted", "unparseable")
    abstained = _modal([unreadable, _half(3), unreadable])
    assert abstained.choice == 3 and abstained.error is None
    nothing = _modal([unreadable, unreadable])
    assert nothing.choice is None and nothing.failure_kind == "unparseable"
    assert "none of the 2 samples named an option" in (nothing.error or "")
    # a call that failed after its retries fails the half so that a resume asks it again
    failed = _modal([_half(1), _half(None, "HTTP 429", "transient"), unreadable])
    assert failed.failure_kind == "transient" and "HTTP 429" in (failed.error or "")


def test_n_is_bounded_and_the_name_is_the_stored_scoring():
    assert scorers.get("consistency:5").samples == 5
    assert scorers.get("consistency:5").name == "consistency:5"
    for bad in ("consistency:0", "consistency:21", "consistency:x", "consistency:", "consistency"):
        assert scorers.unknown(bad), bad
    assert "consistency:N" in scorers.names()
    assert scorers.unknown("choice:3"), "a scorer without an argument takes none"


def test_every_sample_after_the_first_is_sent_its_own_seed_under_the_same_cache_key():
    first = LLMRequest(model="m", messages=(("user", "q"),), temperature=0.7, seed=3)
    assert first.chat_body("m")["seed"] == 3  # the first sample asks as before
    seeds = {
        LLMRequest(**{**first.__dict__, "repeat": r}).chat_body("m")["seed"] for r in range(50)
    }
    assert len(seeds) == 50 and all(0 <= s < 2**31 for s in seeds)
    assert LLMRequest(**{**first.__dict__, "repeat": 4}).request_record()["seed"] == 3


def test_temperature_zero_is_refused_and_the_plan_counts_every_sample(tmp_path):
    spec = paired_plan.RunSpec(models=["openai/m"], biases=["anchoring"], scoring="consistency:4")
    with pytest.raises(ValueError, match="--temperature 0 every sample"):
        paired_plan.plan(spec)
    warm = paired_plan.RunSpec(**{**spec.__dict__, "temperature": 0.7})
    # the spec carries its samples: choice with one of them
    choice = paired_plan.RunSpec(**{**warm.__dict__, "scoring": "choice", "samples": 1})
    calls, once = paired_plan.plan(warm).llm_calls(), paired_plan.plan(choice).llm_calls()
    assert calls["decide"] == 4 * once["decide"] > 0 and calls["extract"] == 4 * once["extract"]


def test_a_cli_run_stores_and_exports_every_sample_and_scores_the_modal_answers(tmp_path):
    db, out = str(tmp_path / "c.db"), tmp_path / "pairs.csv"
    with FakeLLMServer(_seeded) as server:
        argv = ["run", "pairs", "--models", "openai/sampler", "--api-base", server.base_url]
        argv += ["--biases", "anchoring,framing_effect", "--scenarios", "2", "--db", db]
        assert main([*argv, "--scoring", "consistency:3", "--temperature", "0.7"]) == 0
        decisions = [r for r in server.requests if "Answer options:" in _last_user_text(r)]
    with Store(db) as store:
        (run,) = store.runs()
        assert run["status"] == "done"
        rows = [p.decision for p in store.pairs(run_id=run["id"])]
        instances = {
            r["id"]: Instance.from_row(r) for r in store.instances([d.instance_id for d in rows])
        }
    assert main(["export", "--db", db, "--run", run["id"], "-o", str(out)]) == 0
    exported = {r["decision_id"]: r for r in csv.DictReader(out.open())}
    assert json.loads(run["spec"])["scoring"] == "consistency:3"
    assert len(rows) == 4 and len(decisions) == 4 * 2 * 3  # pairs x halves x samples
    # every sample of a half had its own seed, so the samples are distinct draws
    by_question = Counter(_last_user_text(r) for r in decisions)
    assert set(by_question.values()) == {3}
    for question in by_question:
        assert len({r["seed"] for r in decisions if _last_user_text(r) == question}) == 3
    for decision in rows:
        assert decision.status == "ok"
        for half in ("control", "treatment"):
            samples = json.loads(getattr(decision, f"{half}_samples"))
            assert [s["repeat"] for s in samples] == [0, 1, 2]
            choices = [s["choice"] for s in samples]
            top = max(Counter(choices).values())
            modal = next(c for c in choices if choices.count(c) == top)
            assert getattr(decision, f"{half}_choice") == modal
            assert exported[decision.id][f"{half}_samples"] == getattr(decision, f"{half}_samples")
            assert all(s["answer"].startswith("I choose Option") for s in samples)
        instance = instances[decision.instance_id]
        assert decision.score == decide.score_instance(
            instance, decision.control_choice, decision.treatment_choice
        )


def test_one_sample_asks_exactly_what_the_choice_scoring_asks(tmp_path):
    db = str(tmp_path / "one.db")
    with FakeLLMServer(_seeded) as server:
        argv = ["run", "pairs", "--models", "openai/sampler", "--api-base", server.base_url]
        argv += ["--biases", "anchoring", "--scenarios", "2", "--temperature", "0.7", "--db", db]
        assert main(argv) == 0
        asked = server.calls
        assert main([*argv, "--scoring", "consistency:1"]) == 0
        assert server.calls == asked  # every request was in the cache already
    with Store(db) as store:
        choice, one = (
            [p.decision for p in store.pairs(run_id=r["id"])]
            for r in sorted(store.runs(), key=_scoring)
        )
    key = lambda d: d.instance_id  # noqa: E731
    assert [(d.control_choice, d.treatment_choice) for d in sorted(choice, key=key)] == [
        (d.control_choice, d.treatment_choice) for d in sorted(one, key=key)
    ]


def _scoring(run: dict) -> str:
    return json.loads(run["spec"]).get("scoring", "choice")


def test_a_batch_collects_every_sample_with_its_own_repeat_index(tmp_path):
    spec = paired_plan.RunSpec(
        models=["openai/sampler"], biases=["anchoring"], instances=2, temperature=0.7,
        api_base="http://127.0.0.1:9/v1", scoring="consistency:3",
    )  # fmt: skip
    with Store(tmp_path / "b.db") as store:
        pending = batch.pending_requests(paired_plan.plan(spec, store), store)
    decisions = [req for req, _ in pending.values() if batch.round_of(req) == "decide"]
    assert len(decisions) == 2 * 2 * 3
    assert sorted(Counter(r.repeat for r in decisions).items()) == [(0, 4), (1, 4), (2, 4)]


def test_the_random_baseline_draws_each_sample_on_its_own():
    draws = {
        random_provider.choose_option(10, decide.random_draw("r", "i", "control", k, 0))
        for k in range(20)
    }
    assert len(draws) > 1


def test_explore_shows_each_half_s_samples_and_how_they_split(app_db: Path) -> None:
    argv = ["run", "pairs", "--models", "random", "--biases", "framing_effect", "--scenarios", "2"]
    argv += ["--scoring", "consistency:5", "--temperature", "0.7", "--db", str(app_db)]
    assert main(argv) == 0
    with Store(app_db) as store:
        (run,) = store.runs()
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run['id']}").run()
    at.selectbox(key="explore_bias").set_value("framing_effect")
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    text = shown_text(at)
    assert "Samples" in text and "the modal answer the score uses" in text
    assert (
        len([d for d in at.dataframe if list(d.value.columns) == ["sample", "chose", "answer"]])
        == 4
    )


def test_learn_offers_self_consistency_with_n_and_a_temperature(app_db: Path) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("framing_effect")
    at.selectbox(key="learn_model").set_value("random")
    at.radio(key="learn_scoring").set_value("choice").run()
    at.number_input(key="learn_scoring_samples").set_value(4).run()
    assert at.selectbox(key="learn_scoring_reducer").value == "mode"
    assert at.slider(key="learn_temperature").value == 0.7
    at.button(key="learn_run").click().run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    tables = [
        d.value for d in at.dataframe if list(d.value.columns) == ["sample", "chose", "answer"]
    ]
    assert [len(t) for t in tables] == [4, 4]
    assert "samples chose" in shown_text(at)


def test_a_failed_sample_is_retried_on_resume_and_the_others_come_from_the_cache(tmp_path):
    failing = {"left": 1}

    def once_broken(request: dict) -> str:
        if "Answer options:" in _last_user_text(request) and failing["left"]:
            failing["left"] -= 1
            raise FakeHTTPError(503, "overloaded")
        return _seeded(request)

    db = str(tmp_path / "r.db")
    with FakeLLMServer(once_broken) as server:
        argv = ["run", "pairs", "--models", "openai/sampler", "--api-base", server.base_url]
        argv += ["--biases", "anchoring", "--scenarios", "1", "--db", db, "--max-retries", "0"]
        argv += ["--scoring", "consistency:3", "--temperature", "0.7"]
        main(argv)
        with Store(db) as store:
            (run,) = store.runs()
            (first,) = (p.decision for p in store.pairs(run_id=run["id"]))
        assert first.status == "failed" and "a sample's call failed" in first.error
        assert first.failure_kind == "transient"
        server.reset_counts()
        assert main(["resume", run["id"], "--db", db]) == 0
        assert server.calls == 1  # the failed sample; the five others come from the cache
    with Store(db) as store:
        (again,) = (p.decision for p in store.pairs(run_id=run["id"]))
    assert again.status == "ok" and len(json.loads(again.control_samples)) == 3
