"""Samples and reducers (`--samples N`, `--reducer NAME`; `runs/sampling.py`,
`runs/reducers.py`): a run asks each half N times and its reducer makes the samples into the
half's answer, as inspect_ai separates epochs from reducers. `majority` abstains on a tie, an
abstained pair is counted apart from failures everywhere its run's numbers are shown, a
reducer is one function and one `register` line, and one experiment has one spelling (issue
45.6: `consistency:3`, `:03`, `:٣` and `:𝟑` were four runs)."""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder

from cogbias.cli.main import main
from cogbias.core import probabilities as probs
from cogbias.core.records import DecisionStatus, Instance
from cogbias.library import testcases as library
from cogbias.runs import batch, decide, paired_plan, reducers, sampling, scorers
from cogbias.store import Store
from cogbias.studies import cells
from tests.test_app_pages import assert_clean, open_page, shown_text

# The id cogbias gave `run pairs --models random --biases anchoring --temperature 0.7
# --scoring consistency:3` before --samples existed (computed on that version, not here).
CONSISTENCY_3 = "run-273bd816228f"
ANCHORING = ["run", "pairs", "--models", "random", "--biases", "anchoring"]


def _samples(*choices: int | None) -> list[decide.HalfResult]:
    unread = {"error": "no option could be read", "failure_kind": "unparseable"}
    return [
        decide.HalfResult(answer=f"answer {c}", choice=c, **({} if c is not None else unread))
        for c in choices
    ]


def test_majority_is_a_strict_plurality_and_abstains_on_a_tie_where_mode_picks_the_first():
    assert reducers.majority(_samples(1, 1, 0)) == 1
    assert reducers.majority(_samples(2, 0, 1, 2, 3)) == 2  # 2 of 5 against 1, 1 and 1
    assert reducers.majority(_samples(0, 1, 2)) is None  # 1-1-1
    assert reducers.majority(_samples(0, 1, 1, 0, 2)) is None  # 2-2-1
    assert reducers.majority(_samples(None, 1, None)) == 1  # unread samples do not vote
    assert reducers.mode(_samples(2, 0, 1)) == 2 and reducers.mode(_samples(0, 1, 1, 0)) == 0
    majority, mode = reducers.get("majority"), reducers.get("mode")
    tied = sampling.half_of(_samples(0, 1), majority, n_options=3)
    assert tied.abstained and tied.choice is None and tied.error is None
    assert not sampling.half_of(_samples(0, 1), mode, n_options=3).abstained
    unread = sampling.half_of(_samples(None, None), majority, n_options=3)
    assert unread.failure_kind == "unparseable" and not unread.abstained


def test_an_abstained_half_makes_an_unscored_abstained_pair_and_a_failure_still_fails_it():
    case = library.get_test_case("anchoring")
    from cogbias.runs import pipeline

    instance = pipeline.generate_offline(case, library.load_scenarios()[0].text)
    ask, order = decide.PairAsk(run_id="run-x"), list(range(instance.n_options))
    answered, silent = decide.HalfResult(choice=0), decide.HalfResult(abstained=True)
    row = decide.decision_row(instance, "m", ask, order, answered, silent)
    assert (row.status, row.score, row.error, row.failure_kind) == (
        DecisionStatus.ABSTAINED,
        None,
        None,
        None,
    )
    broken = decide.HalfResult(error="HTTP 503", failure_kind="transient")
    assert decide.decision_row(instance, "m", ask, order, broken, silent).status == "failed"


def test_the_mean_probability_is_the_mean_of_the_samples_distributions():
    a, b = probs.Distribution((0.5, 0.5, 0.0), 0.2), probs.Distribution((0.0, 0.25, 0.75), 0.4)
    mean = reducers.mean_probability(
        [decide.HalfResult(distribution=a), decide.HalfResult(), decide.HalfResult(distribution=b)]
    )
    assert mean is not None
    assert mean.p == pytest.approx((0.25, 0.375, 0.375)) and mean.outside == pytest.approx(0.3)
    assert reducers.mean_probability([decide.HalfResult(distribution=a)] * 3) == a


# ------------------------------------------------------------ a reducer is one function


def _last_named(samples):
    """A reducer in one function: the option the last sample named."""
    return next((s.choice for s in reversed(samples) if s.choice is not None), None)


@pytest.fixture
def last_named() -> Iterator[None]:
    reducers.register(reducers.Reducer("last", "the option the last sample named", _last_named))
    yield
    reducers.unregister("last")


def test_a_reducer_registered_in_one_function_scores_a_run_its_cells_and_export_show(
    last_named, tmp_path
):
    db, out = str(tmp_path / "r.db"), tmp_path / "pairs.csv"
    argv = [*ANCHORING[:-1], "anchoring,framing_effect", "--scenarios", "3", "--db", db]
    assert main([*argv, "--samples", "5", "--reducer", "last", "--temperature", "0.7"]) == 0
    with Store(db) as store:
        (run,) = store.runs()
        summary = cells.heatmap_summary(store, run_id=run["id"])
        rows = [p.decision for p in store.pairs(run_id=run["id"])]
        instances = {
            r["id"]: Instance.from_row(r) for r in store.instances([d.instance_id for d in rows])
        }
    spec = json.loads(run["spec"])
    assert (spec["scoring"], spec["reducer"], run["status"]) == ("consistency:5", "last", "done")
    assert main(["export", "--db", db, "--run", run["id"], "-o", str(out)]) == 0
    exported = list(csv.DictReader(out.open()))
    assert len(exported) == 6
    differs = 0
    scores: dict[str, list[float]] = {}
    for row in exported:
        for half in ("control", "treatment"):
            named = [s["choice"] for s in json.loads(row[f"{half}_samples"])]
            assert int(row[f"{half}_answer"]) == named[-1]  # the last sample's, not the mode's
            differs += named[-1] != max(named, key=named.count)
        instance = instances[row["instance_id"]]
        score = decide.score_instance(
            instance, int(row["control_answer"]), int(row["treatment_answer"])
        )
        assert float(row["score"]) == pytest.approx(score) and row["status"] == "ok"
        scores.setdefault(row["bias"], []).append(score)
    assert differs, "no half where the last sample and the modal one differ: the test shows nothing"
    for _, cell in summary.iterrows():
        assert cell["n"] == 3 and cell["abstained"] == 0
        assert cell["mean"] == pytest.approx(sum(scores[cell["bias"]]) / 3)


# ------------------------------------------------------------ majority's abstentions


def _tied(request: dict) -> str:
    """Each question's odd-numbered answer is Option 2, its even-numbered one Option 1: any
    two samples of a half split one to one."""
    prompt = _last_user_text(request)
    if "Answer options:" not in prompt or "Which option does" in prompt:
        return default_responder(request)
    _tied.asked[prompt] = _tied.asked.get(prompt, 0) + 1  # type: ignore[attr-defined]
    return f"I choose Option {_tied.asked[prompt] % 2 + 1}."  # type: ignore[attr-defined]


def test_majority_abstains_on_tied_samples_and_every_count_keeps_them_apart(tmp_path, capsys):
    _tied.asked = {}  # type: ignore[attr-defined]
    db, out = str(tmp_path / "m.db"), tmp_path / "pairs.csv"
    with FakeLLMServer(_tied) as server:
        argv = ["run", "pairs", "--models", "openai/tied", "--api-base", server.base_url]
        argv += ["--biases", "anchoring,framing_effect", "--db", db, "--temperature", "0.7"]
        assert main([*argv, "--samples", "2", "--reducer", "majority"]) == 0
        asked = server.calls
        assert main([*argv, "--samples", "2"]) == 0  # mode: the same requests, from the cache
        assert server.calls == asked
    with Store(db) as store:
        runs = {json.loads(r["spec"]).get("reducer", "mode"): r for r in store.runs()}
        majority, mode = runs["majority"]["id"], runs["mode"]["id"]
        assert runs["majority"]["status"] == "done" and runs["majority"]["failed"] == 0
        statuses = {p.decision.status for p in store.pairs(run_id=majority)}
        assert statuses == {DecisionStatus.ABSTAINED}
        assert {p.decision.status for p in store.pairs(run_id=mode)} == {"ok"}
        summary = cells.heatmap_summary(store, run_id=majority)
    assert list(summary["abstained"]) == [1, 1] and list(summary["failures"]) == [0, 0]
    assert list(summary["n"]) == [0, 0] and list(summary["failure_rate"]) == [0.0, 0.0]
    capsys.readouterr()
    assert main(["results", "run", majority, "--db", db, "--format", "json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [(r["n"], r["failures"], r["abstained"]) for r in results] == [(0, 0, 1)] * 2
    assert main(["export", "--db", db, "--run", majority, "-o", str(out)]) == 0
    exported = list(csv.DictReader(out.open()))
    assert {r["status"] for r in exported} == {DecisionStatus.ABSTAINED}
    assert {r["score"] for r in exported} == {""} and {r["failure_kind"] for r in exported} == {""}
    report = tmp_path / "report.html"
    assert main(["report", "--run", majority, "--db", db, "-o", str(report)]) == 0
    html = report.read_text()
    assert "abstained 2" in html and "2 sample(s) a half, reduced by majority" in html


def test_a_batch_collects_every_sample_of_a_sampled_run_whatever_its_reducer(tmp_path):
    spec = paired_plan.RunSpec(
        models=["openai/sampler"], biases=["anchoring"], instances=2, temperature=0.7,
        api_base="http://127.0.0.1:9/v1", samples=3, reducer="majority",
    )  # fmt: skip
    with Store(tmp_path / "b.db") as store:
        pending = batch.pending_requests(paired_plan.plan(spec, store), store)
    decisions = [req for req, _ in pending.values() if batch.round_of(req) == "decide"]
    assert len(decisions) == 2 * 2 * 3
    assert sorted({r.repeat for r in decisions}) == [0, 1, 2]


# ------------------------------------------------------------ option probabilities sampled


def _varying_logprobs(request: dict) -> object:
    """Option probabilities that differ between calls: A's share depends on the seed sent."""
    if not request.get("logprobs"):
        return default_responder(request)
    digest = hashlib.sha256(f"{request.get('seed')}|{_last_user_text(request)}".encode())
    a = 0.2 + 0.6 * digest.digest()[0] / 255
    top = [{"token": "A", "logprob": math.log(a)}, {"token": "B", "logprob": math.log(1 - a)}]
    first = top[0]
    return {
        "content": "A",
        "logprobs": {"content": [{**first, "top_logprobs": top}]},
    }


def test_sampled_option_probabilities_are_scored_by_the_mean_of_their_distributions(tmp_path):
    with FakeLLMServer(_varying_logprobs) as server, Store(tmp_path / "p.db") as store:
        spec = paired_plan.RunSpec(
            models=["openai/fake"], biases=["framing_effect"], scenarios=2,
            api_base=server.base_url, scoring="probabilities", samples=3, temperature=0.7,
        )  # fmt: skip
        assert spec.reducer is None and spec.canonical()["samples"] == 3
        assert "reducer" not in spec.canonical()  # mean_probability: the scorer's own
        from cogbias.runs import executor

        run = executor.execute(paired_plan.plan(spec, store), store, concurrency=4)
        assert run.status == "done"
        pairs = list(store.pairs(run_id=spec.run_id))
        rows = store.instances([p.decision.instance_id for p in pairs])
        instances = {r["id"]: Instance.from_row(r) for r in rows}
    assert len(pairs) == 2
    for pair in pairs:
        d = pair.decision
        means = {}
        for half in ("control", "treatment"):
            samples = json.loads(getattr(d, f"{half}_samples"))
            dists = [s["distribution"]["p"] for s in samples]
            assert len(samples) == 3 and len({tuple(p) for p in dists}) > 1
            p = [sum(column) / 3 for column in zip(*dists, strict=True)]
            mean = probs.Distribution.from_json(getattr(d, f"{half}_distribution"))
            assert mean is not None and list(mean.p) == pytest.approx(p)
            means[half] = mean
        instance = instances[d.instance_id]
        expected = probs.expected_score(
            means["control"], means["treatment"], instance.metric, instance.n_options
        )
        assert d.status == "ok" and d.score == pytest.approx(expected)


# ------------------------------------------------------------ one experiment, one spelling


def test_every_spelling_of_three_samples_is_one_run_with_the_id_it_always_had(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    spellings = (
        ["--scoring", "consistency:3"],
        ["--scoring", "consistency:03"],
        ["--samples", "3"],
        ["--samples", "003"],
        ["--scoring", "consistency:3", "--samples", "3"],
        ["--samples", "3", "--reducer", "mode"],
    )
    for spelling in spellings:
        assert main([*ANCHORING, "--temperature", "0.7", "--db", db, *spelling]) == 0, spelling
    with Store(db) as store:
        assert [r["id"] for r in store.runs()] == [CONSISTENCY_3]
    capsys.readouterr()
    assert main(["results", "pairs", "--db", db, "--format", "json"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)
    assert cell["n"] == 1  # one pair, not one per spelling
    same = paired_plan.RunSpec(models=["random"], scoring="consistency:03").run_id
    assert same == paired_plan.RunSpec(models=["random"], samples=3).run_id


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--scoring", "consistency:٣"], "--scoring consistency:N takes a whole number"),
        (["--scoring", "consistency:𝟑"], "--scoring consistency:N takes a whole number"),
        (["--scoring", "consistency:²"], "--scoring consistency:N takes a whole number"),
        (["--samples", "٣"], "--samples takes a whole number"),
        (["--samples", "²"], "--samples takes a whole number"),
        (["--samples", "21"], "--samples takes a whole number"),
        (["--samples", "0" * 5000 + "3"], None),  # leading zeros: still 3, no int() limit
    ],
)
def test_other_digits_are_refused_naming_the_flag_and_its_range(tmp_path, capsys, flags, said):
    argv = [*ANCHORING, "--temperature", "0.7", "--db", str(tmp_path / "d.db"), *flags]
    if said is None:
        assert main(argv) == 0
        return
    with pytest.raises(SystemExit) as refused:
        main(argv)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and said in err, err
    assert "from 1 to 20, written with the digits 0-9" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--reducer", "majority"], "--reducer majority reduces a half's samples"),
        (
            ["--samples", "3", "--reducer", "mean_probability", "--temperature", "0.7"],
            "--reducer mean_probability reduces option probabilities, which --scoring choice "
            "does not give: choose mode or majority",
        ),
        (["--samples", "3"], "at --temperature 0 every sample is the most probable answer"),
        (
            ["--scoring", "consistency:3", "--samples", "5", "--temperature", "0.7"],
            "--scoring consistency:3 asks 3 samples a half and --samples 5 asks 5",
        ),
    ],
)
def test_a_sampling_that_cannot_be_is_refused_by_name(tmp_path, capsys, flags, said):
    assert main([*ANCHORING, "--db", str(tmp_path / "x.db"), *flags]) == 2
    assert said in capsys.readouterr().err


def test_a_study_refuses_samples_and_reducers_by_name(tmp_path, capsys):
    argv = ["run", "study", "biasbuster", "--models", "random", "--db", str(tmp_path / "s.db")]
    assert main([*argv, "--samples", "3"]) == 2
    assert "--samples does not apply to the study 'biasbuster'" in capsys.readouterr().err


# ------------------------------------------------------------ the pages read the registry


def test_the_run_page_offers_samples_and_the_registry_s_reducers(last_named, app_db: Path):
    at = open_page("run")
    at.multiselect(key="run_biases").set_value(["framing_effect"])
    at.multiselect(key="run_models").set_value(["random"])
    at.slider(key="run_temperature").set_value(0.7).run()
    at.number_input(key="run_scoring_samples").set_value(3).run()
    assert_clean(at)
    reducer = at.selectbox(key="run_scoring_reducer")
    fitting = scorers.reducers_for(scorers.get("choice"))
    assert [r.name for r in fitting] == ["mode", "majority", "last"]  # no mean_probability
    assert reducer.options == [r.label or r.name for r in fitting] and reducer.value == "mode"
    at.radio(key="run_scoring").set_value("probabilities").run()
    assert_clean(at)
    assert at.selectbox(key="run_scoring_reducer").value == "mean_probability"


def test_explore_counts_abstained_pairs_apart_in_its_numbers_and_its_cell(app_db: Path) -> None:
    argv = ["run", "pairs", "--models", "random", "--biases", "framing_effect", "--scenarios", "3"]
    argv += ["--samples", "2", "--reducer", "majority", "--temperature", "0.7"]
    assert main([*argv, "--db", str(app_db)]) == 0
    with Store(app_db) as store:
        (run,) = store.runs()
        abstained = store.run_abstained(run["id"])
    assert abstained, "two draws of the random model never differed: the test shows nothing"
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run['id']}").run()
    at.selectbox(key="explore_bias").set_value("framing_effect")
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    (numbers,) = [d.value for d in at.dataframe if "failure rate" in d.value.columns]
    assert list(numbers["abstained"]) == [abstained] and list(numbers["failures"]) == [0]
    assert f"0 failed, {abstained} abstained" in shown_text(at)
