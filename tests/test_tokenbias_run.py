"""Running the token-bias study: prompting methods, the CLI, and tables recomputed from exports."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, default_responder

from cogbias.cli.main import main
from cogbias.core import metrics, records
from cogbias.core.records import Instance
from cogbias.datasets import tokenbias_study
from cogbias.runs import executor, paired_plan, pipeline, prompting
from cogbias.store import Store
from cogbias.studies import tokenbias

QUESTION = pipeline.DEC_PROMPT


def test_baseline_messages_are_the_standard_decision_prompt():
    assert prompting.decision_messages("TASK", "baseline", QUESTION) == (
        ("user", QUESTION.format(task="TASK")),
    )
    (only,) = prompting.decision_messages("TASK", "zs_cot", QUESTION)
    # the paper's words (Jiang et al. 2024, Section 4): "Let us think step by step"
    assert only == ("user", QUESTION.format(task="TASK") + "\n\nLet us think step by step.")


@pytest.mark.parametrize(
    ("method", "shots"), [("one_shot", 1), ("few_shot", 3), ("few_shot_cot", 3)]
)
def test_shots_come_first_as_earlier_turns(method, shots):
    messages = prompting.decision_messages("TASK", method, QUESTION)
    assert len(messages) == 2 * shots + 1
    assert [role for role, _ in messages] == ["user", "assistant"] * shots + ["user"]
    exemplars = prompting.load_exemplars()
    for i in range(shots):
        assert exemplars[i].situation in messages[2 * i][1]
        reply = messages[2 * i + 1][1]
        assert reply.endswith(f"Option {exemplars[i].answer + 1}.")
        assert (exemplars[i].reasoning in reply) == method.endswith("cot")
    assert messages[-1][1].startswith(QUESTION.format(task="TASK"))


def test_one_shot_can_rename_the_exemplars_protagonist():
    (user, assistant, _) = prompting.decision_messages("TASK", "one_shot_cot@Bob", QUESTION)
    assert "Linda" not in user[1] + assistant[1]
    # the paper's own Bob version (Appendix A), not "Linda" renamed ("Bob ... She majored")
    assert "Bob works for a renewable energy company." in user[1]
    assert "Bob is 29 years old" in user[1] and "She " not in user[1]
    assert assistant[1].endswith("So the answer is Option 2.")
    # a name the data has no version for is swapped in the first example
    (user, _, _) = prompting.decision_messages("TASK", "one_shot@Maria", QUESTION)
    assert "Maria is a bank teller." in user[1] and "Linda" not in user[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("few_shots", "unknown prompting method 'few_shots'; use one of baseline, zs_cot"),
        ("zs_cot@Bob", "only methods with examples can rename one"),
        ("one_shot@<b>", "the new name must be letters"),
    ],
)
def test_bad_prompting_methods_are_refused(text, message, tmp_path, capsys):
    with pytest.raises(ValueError, match=message):
        prompting.parse(text)
    code = main(
        [
            "run",
            "--study",
            "tokenbias",
            "--models",
            "random",
            "--prompting",
            text,
            "--db",
            str(tmp_path / "r.db"),
        ]
    )
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()


def test_prompting_enters_the_run_and_decision_identity_but_baseline_keeps_old_ids():
    base = paired_plan.RunSpec(models=["random"], dataset="tokenbias")
    assert "prompting" not in base.canonical()  # so the ids of earlier runs stay valid
    cot = paired_plan.RunSpec(models=["random"], dataset="tokenbias", prompting="zs_cot")
    assert cot.run_id != base.run_id and cot.canonical()["prompting"] == "zs_cot"
    assert paired_plan.RunSpec.from_stored(cot.canonical()) == cot
    old = records.stable_id("decision", "r", "i", "m", 0, 0.0)
    assert records.decision_id("r", "i", "m", 0, 0.0) == old
    assert records.decision_id("r", "i", "m", 0, 0.0, "zs_cot") != old


def test_the_chosen_prompting_method_reaches_the_model(tmp_path: Path):
    seen: list[list[dict]] = []

    def responder(request):
        seen.append(request["messages"])
        return default_responder(request)

    with FakeLLMServer(responder) as server, Store(tmp_path / "r.db") as store:
        tokenbias_study.materialise(store)
        spec = paired_plan.RunSpec(
            models=["openai/fake"],
            dataset="tokenbias",
            per_bias=1,
            api_base=server.base_url,
            prompting="one_shot@Bob",
        )
        outcome = executor.execute(paired_plan.plan(spec, store), store, concurrency=4)
        assert outcome.status == "done" and outcome.done == 6
        halves = set()
        asked = "select i.* from instances i join decisions d on d.instance_id = i.id"
        for row in store.query(asked):
            instance = Instance.from_row(row)
            order = metrics.option_order(2, False)  # token-bias items: as written by default
            halves |= {instance.decision_text(h, order) for h in ("control", "treatment")}
    decisions = [m for m in seen if len(m) == 3]  # the extraction step is a single turn
    # 6 pairs x 2 halves, each distinct text asked once (H5's P is H4's P': chained, and asked
    # once when both are shown in the same order; the second comes from the cache)
    assert sorted(m[-1]["content"] for m in decisions) == sorted(halves)
    for messages in decisions:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert "Bob works for a renewable energy company." in messages[0]["content"]


def _export_rows(db: Path, tmp_path: Path) -> list[dict[str, str]]:
    out = tmp_path / "pairs.csv"
    assert main(["export", "--db", str(db), "--dataset", "tokenbias", "-o", str(out)]) == 0
    with out.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_random_run_gives_the_table_its_exported_answers_give(tmp_path: Path, capsys):
    db = tmp_path / "r.db"
    args = ["--models", "random", "--prompting", "baseline,zs_cot", "--db", str(db)]
    assert main(["run", "--study", "tokenbias", *args]) == 0
    capsys.readouterr()
    assert main(["results", "--study", "tokenbias", "--db", str(db), "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    with Store(db) as store:
        prompting_of = {
            r["id"]: json.loads(r["spec"]).get("prompting", "baseline") for r in store.runs()
        }
    counts: dict[tuple[str, str, str], dict[str, int]] = {}
    for row in _export_rows(db, tmp_path):
        assert row["status"] == "ok"
        original = int(row["control_answer"]) == int(float(row["y1"]))
        perturbed = int(row["treatment_answer"]) == int(float(row["y2"]))
        cell = {(1, 1): "n11", (1, 0): "n12", (0, 1): "n21", (0, 0): "n22"}[(original, perturbed)]
        key = (row["bias"], row["model"], prompting_of[row["run_id"]])
        counts.setdefault(key, {"n11": 0, "n12": 0, "n21": 0, "n22": 0})[cell] += 1
        # the engine's own score is (P' correct) - (P correct)
        assert float(row["score"]) == int(perturbed) - int(original)
    assert len(table) == len(counts) == 6 * 2
    study = tokenbias.load_study()
    for result in table:
        key = (result["hypothesis"], result["model"], result["prompting"])
        assert {c: result[c] for c in ("n11", "n12", "n21", "n22")} == counts[key]
        assert result["n"] == study.items and result["n_star"] == result["n12"] + result["n21"]
    # the printed layout: one block per hypothesis, the paper's columns
    assert main(["results", "--study", "tokenbias", "--db", str(db)]) == 0
    printed = capsys.readouterr().out
    assert "model   prompting  n12  n21  n_star  z" in printed
    assert printed.count("tb_h") == 6 and "p_adjusted  reject" in printed


def test_results_of_an_unknown_study_say_what_exists(tmp_path: Path, capsys):
    code = main(["results", "--study", "nope", "--db", str(tmp_path / "r.db")])
    assert code == 2 and "no study or dataset 'nope'" in capsys.readouterr().err


@pytest.mark.local_model
def test_the_study_runs_offline_on_the_local_model(tmp_path: Path, capsys):
    """The acceptance command, on one pair per hypothesis to keep a 2-core machine usable."""
    pytest.importorskip("xllamacpp")
    db = tmp_path / "r.db"
    args = ["--models", "random,local/smollm2", "--prompting", "zs_cot", "--per-bias", "1"]
    assert main(["run", "--study", "tokenbias", *args, "--db", str(db)]) == 0
    with Store(db) as store:
        rows = store.query("select model, status, failure_kind, control_answer from decisions")
    assert len(rows) == 12 and {r["model"] for r in rows} == {"random", "local/smollm2"}
    # an answer is scored or, when it names no option, unreadable (issue 20: the extraction
    # may say "none" instead of guessing); nothing fails otherwise, and random always answers
    assert all(r["status"] == "ok" or r["failure_kind"] == "unparseable" for r in rows), rows
    assert all(r["status"] == "ok" for r in rows if r["model"] == "random"), rows
    assert all(r["control_answer"] for r in rows if r["model"] != "random")  # it did answer
    capsys.readouterr()
    assert main(["results", "--study", "tokenbias", "--db", str(db), "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    # a model is in the table with the pairs it answered readably (SmolLM2 may have none)
    read = {r["model"] for r in rows if r["status"] == "ok"}
    assert {(r["model"], r["prompting"]) for r in table} == {(m, "zs_cot") for m in read}
    assert all(r["n"] == 1 for r in table if r["model"] == "random")
