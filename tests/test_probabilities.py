"""`--scoring probabilities`: option distributions read from OpenAI-shaped `top_logprobs`,
the exact expected score, storage, export, caching and the refusals (docs/runs.md)."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re

import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder

from cogbias.cli.main import main
from cogbias.core import metrics
from cogbias.core.metrics import MetricParams
from cogbias.core.probabilities import Distribution, expected_score, uniform
from cogbias.core.records import Instance
from cogbias.llm import logprobs
from cogbias.runs import deletion, executor, paired_plan, probabilities
from cogbias.store import Store
from cogbias.views import export

# What the scripted server lists at the label position: " A" and "A" are one label, "**B" is
# B, "The" is no option; 0.1 is not listed at all. Which of the two a prompt gets depends on
# its hash, so the halves of one pair may differ; `_listing` says which, for the test too.
LISTINGS = (
    {" A": 0.3, "A": 0.2, "**B": 0.25, "The": 0.15},  # A 2/3, B 1/3; 0.25 outside
    {"B": 0.6, " A": 0.2, "I": 0.1},  # A 1/4, B 3/4; 0.2 outside
)
BY_HAND = (([2 / 3, 1 / 3], 0.25), ([1 / 4, 3 / 4], 0.2))


def _listing(prompt: str) -> int:
    return hashlib.sha256(prompt.encode()).digest()[0] % 2


def _logprobs(listed: dict[str, float]) -> dict:
    top = [{"token": t, "logprob": math.log(p)} for t, p in listed.items()]
    first = top[0]
    return {
        "content": [{"token": first["token"], "logprob": first["logprob"], "top_logprobs": top}]
    }


def _responder(request: dict) -> object:
    if not request.get("logprobs"):
        return default_responder(request)
    assert request["top_logprobs"] == logprobs.TOP_LOGPROBS
    listed = LISTINGS[_listing(_last_user_text(request))]
    return {"content": next(iter(listed)).strip("* "), "logprobs": _logprobs(listed)}


def test_the_expected_score_is_the_hand_computed_sum_over_both_distributions():
    # the anchoring-style metric with k=1, y1=y2=0 on 3 options: score(i, j) = (i - j) / max(i, j)
    params = MetricParams(k=1.0, y1=0.0, y2=0.0)
    control, treatment = Distribution((0.5, 0.5, 0.0)), Distribution((0.0, 0.5, 0.5))
    # pairs with mass: (0,1) -1 · .25, (0,2) -1 · .25, (1,1) 0, (1,2) (1-2)/2 · .25
    assert expected_score(control, treatment, params, 3) == pytest.approx(-0.625)
    # the random baseline's uniform halves give the metric's exact null, not 0 in general
    null = expected_score(uniform(3), uniform(3), params, 3)
    by_hand = sum(metrics.score_pair(i, j, params, 3) for i in range(3) for j in range(3)) / 9
    assert null == pytest.approx(by_hand)


def test_label_spellings_merge_and_the_unlisted_mass_is_kept():
    answer = {"choices": [{"message": {"content": "A"}, "logprobs": _logprobs(LISTINGS[0])}]}
    text, positions = logprobs.decode_answer(logprobs.encode_answer(answer, "m"))
    masses, listed, at = logprobs.option_masses(positions, 2)
    assert text == "A" and at == 0
    assert masses == pytest.approx([0.5, 0.25]) and listed == pytest.approx(0.9)
    # Markdown before the label: the label position is the next one
    bold = [[("**", -0.1)], [("A", math.log(0.7)), ("B", math.log(0.2))]]
    assert logprobs.option_masses(bold, 2)[0] == pytest.approx([0.7, 0.2])
    assert logprobs.label_of("(C)", 3) == 2 and logprobs.label_of("a", 3) is None


def test_a_server_without_logprobs_in_its_answer_is_an_error_naming_the_model():
    answer = {"choices": [{"message": {"content": "A"}}]}
    with pytest.raises(Exception, match="openai/x: the answer carries no token log-prob"):
        logprobs.encode_answer(answer, "openai/x")


def test_a_scripted_server_gives_the_hand_computed_expected_scores(tmp_path):
    with FakeLLMServer(_responder) as server, Store(tmp_path / "p.db") as store:
        run_spec = paired_plan.RunSpec(
            models=["random", "openai/fake"],
            biases=["framing_effect", "loss_aversion"],
            generator="openai/fake",
            api_base=server.base_url,
            scoring="probabilities",
        )
        assert run_spec.canonical()["scoring"] == "probabilities"
        choice = paired_plan.RunSpec(**{**run_spec.__dict__, "scoring": "choice"})
        assert run_spec.run_id != choice.run_id
        run = executor.execute(paired_plan.plan(run_spec, store), store, concurrency=4)
        assert run.status == "done"
        path = tmp_path / "pairs.csv"
        export.export(store, path, run_id=run_spec.run_id)
        rows = list(csv.DictReader(path.open()))
        instances = {
            r["id"]: Instance.from_row(r) for r in store.instances([r["instance_id"] for r in rows])
        }
        calls = server.calls
        # the distributions are cached like any answer: the same run again asks nothing
        server.reset_counts()
        deletion.apply(store, deletion.plan_run(store, run_spec.run_id))
        again = executor.execute(paired_plan.plan(run_spec, store), store, concurrency=4)
        assert again.status == "done" and server.calls == 0 < calls
        export.export(store, tmp_path / "again.csv", run_id=run_spec.run_id)
        scores = {r["decision_id"]: r["score"] for r in rows}
        rerun = csv.DictReader((tmp_path / "again.csv").open())
        assert {r["decision_id"]: r["score"] for r in rerun} == scores
    assert len(rows) == 4
    for row in rows:
        n = int(row["n_options"])
        params = MetricParams(
            k=float(row["k"]), y1=float(row["y1"]), y2=float(row["y2"]),
            flip_control=row["flip_control"] == "true", flip_treatment=row["flip_treatment"] == "true",
        )  # fmt: skip
        dists = {h: json.loads(row[f"{h}_distribution"]) for h in ("control", "treatment")}
        order = json.loads(row["control_order"])
        for half in ("control", "treatment"):
            if row["model"] == "random":
                expected_p, outside = [1 / n] * n, 0.0
            else:
                task = probabilities.render_labelled(
                    instances[row["instance_id"]].half(half), order
                )
                presented, outside = BY_HAND[_listing(probabilities.LABEL_PROMPT.format(task=task))]
                presented = presented + [0.0] * (n - 2)
                expected_p = [0.0] * n
                for k, j in enumerate(order):
                    expected_p[j] = presented[k]
                assert dists[half]["unlisted"] == pytest.approx(0.1)
            assert dists[half]["p"] == pytest.approx(expected_p)
            assert dists[half]["outside"] == pytest.approx(outside)
        by_hand = sum(
            dists["control"]["p"][i]
            * dists["treatment"]["p"][j]
            * metrics.score_pair(i, j, params, n)
            for i in range(n)
            for j in range(n)
        )
        assert row["status"] == "ok" and float(row["score"]) == pytest.approx(by_hand)


def test_a_model_without_logprobs_is_refused_by_name_before_the_run(tmp_path):
    asked = paired_plan.RunSpec(
        models=["random", "anthropic/claude-3-5-haiku-20241022"],
        biases=["framing_effect"],
        scoring="probabilities",
    )
    with pytest.raises(ValueError, match="anthropic/claude-3-5-haiku-20241022 does not expose"):
        paired_plan.plan(asked)


def test_the_default_scoring_leaves_the_spec_and_its_run_id_unchanged():
    asked = paired_plan.RunSpec(models=["random"], biases=["framing_effect"])
    assert "scoring" not in asked.canonical()
    assert paired_plan.RunSpec.from_stored(asked.canonical()).run_id == asked.run_id


def test_the_cli_refuses_a_study_and_a_model_without_logprobs_by_name(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    study = ["run", "study", "biasbuster", "--models", "random", "--db", db]
    assert main([*study, "--scoring", "probabilities"]) == 2
    assert "study 'biasbuster'" in capsys.readouterr().err
    pairs = ["run", "pairs", "--biases", "framing_effect", "--db", db, "--dry-run"]
    claude = "anthropic/claude-3-5-haiku-20241022"
    assert main([*pairs, "--models", claude, "--scoring", "probabilities"]) == 2
    assert f"{claude} does not expose" in capsys.readouterr().err
    assert main([*pairs, "--models", "random", "--scoring", "probabilities"]) == 0


def test_batches_refuse_the_probability_scoring(tmp_path):
    from cogbias.runs import batch

    asked = paired_plan.RunSpec(
        models=["random"], biases=["framing_effect"], scoring="probabilities"
    )
    with Store(tmp_path / "b.db") as store, pytest.raises(ValueError, match="--scoring choice"):
        batch.pending_requests(paired_plan.plan(asked, store), store)


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_both_transports_keep_the_listed_log_probabilities(transport, monkeypatch):
    from cogbias.llm import LLMClient, LLMRequest

    monkeypatch.setenv("COGBIAS_LLM_TRANSPORT", transport)
    with FakeLLMServer(_responder) as server:
        client = LLMClient(api_base=server.base_url, max_retries=0)
        prompt = "A: yes\nB: no\nReply with its letter only."
        request = LLMRequest("openai/fake", [("user", prompt)], max_tokens=4, top_logprobs=20)
        assert server.requests == [] and client.profile("openai/fake").logprobs
        text, positions = logprobs.decode_answer(client.complete_sync(request).text)
    listed = LISTINGS[_listing(prompt)]
    assert text == next(iter(listed)).strip("* ")
    assert dict(positions[0]) == pytest.approx({t: math.log(p) for t, p in listed.items()})


def _vague_or_weak(request: dict) -> object:
    """`vague` uses a word only one option has, without naming any; `weak`, the extractor,
    says Option 1 whatever it reads."""
    if request["model"] == "weak":
        return "Option 1"
    if request["model"] == "vague" and not request.get("response_format"):
        options = re.findall(r"Option \d+: (.+)", _last_user_text(request))
        words = [{w for w in re.findall(r"[a-z]{4,}", o.lower())} for o in options]
        for k, own in enumerate(words):
            rest = set().union(*(w for i, w in enumerate(words) if i != k))
            if own - rest and len(options[k].split()) > 1:
                return f"Mostly {sorted(own - rest)[0]}, I suppose."
        return "Hard to say."
    return _responder(request)


def test_pair_reads_probabilities_and_takes_an_extractor_like_run(tmp_path, capsys):
    # `cogbias pair` is Learn's live pair from the terminal: the same two reading flags as run
    with FakeLLMServer(_vague_or_weak) as server:
        common = ["pair", "status_quo_bias", "--api-base", server.base_url]
        common += ["--db", str(tmp_path / "p.db")]
        assert main([*common, "--models", "openai/fake", "--scoring", "probabilities"]) == 0
        assert capsys.readouterr().out.count("option probabilities 1:") == 2
        # the extractor is asked, and its "Option 1" is not taken: the answer names nothing
        assert main([*common, "--models", "openai/vague", "--extractor", "openai/weak"]) == 0
        out = capsys.readouterr().out
        assert {r["model"] for r in server.requests} >= {"vague", "weak"}
        assert out.count("-> none") == 2 and "score: None" in out
    claude = "anthropic/claude-3-5-haiku-20241022"
    assert main(["pair", "framing_effect", "--models", claude, "--scoring", "probabilities"]) == 2
    assert f"{claude} does not expose" in capsys.readouterr().err
