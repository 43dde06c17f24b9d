"""Importers: the Hub CSV, the paper's code format and generic files; ids, idempotency."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cogbias.datasets import (
    ColumnMapping,
    DatasetError,
    bias_id,
    import_generic,
    import_hub,
    import_malberg,
    parse_prompt,
)
from cogbias.store import Store
from cogbias.studies import analysis
from tests.dataset_helpers import (
    HUB_CSV,
    edited_csv,
    format_copy,
    read_rows,
    snapshot,
    write_rows,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Loss Aversion", "loss_aversion"),
        ("LossAversion", "loss_aversion"),
        ("Status-Quo Bias", "status_quo_bias"),
        ("StatusQuoBias", "status_quo_bias"),
        ("In-Group Bias", "in_group_bias"),
        ("InGroupBias", "in_group_bias"),
        ("Self-Serving Bias", "self_serving_bias"),
        ("SelfServingBias", "self_serving_bias"),
        ("NotInventedHere", "not_invented_here"),
        ("Not Invented Here", "not_invented_here"),
        ("anchoring", "anchoring"),
        ("Sunk Cost Fallacy", "sunk_cost_fallacy"),  # not in the library: snake_case
        ("GamblersFallacy", "gamblers_fallacy"),
    ],
)
def test_bias_names_map_to_library_ids(name, expected):
    assert bias_id(name) == expected


def test_prompts_split_into_situation_prompt_and_options():
    text = "Situation:\nYou run a shop.\nIt is busy.\n\nPrompt:\nHow much?\n\nAnswer Options:\nOption 1: 0%\nOption 2: 10%\nOption 3: 20%\n"
    parsed = parse_prompt(text)
    assert parsed is not None
    assert parsed.situation == "You run a shop.\nIt is busy."
    assert parsed.prompt == "How much?"
    assert parsed.options == ("0%", "10%", "20%")
    bare = parse_prompt("Pick one.\nOption 1: a\nOption 2: b")
    assert bare is not None and (bare.situation, bare.prompt, bare.options) == (
        "",
        "Pick one.",
        ("a", "b"),
    )
    assert parse_prompt("No options here") is None
    assert parse_prompt("Q\nOption 1: a\nOption 3: b") is None  # numbering must run 1..n


def test_hub_import_makes_ready_instances_with_their_own_metric(tmp_path):
    header, rows = read_rows(HUB_CSV)
    with Store(tmp_path / "x.db") as store:
        summary = import_hub(store, HUB_CSV)
        assert (summary.instances, summary.decisions) == (12, 0)
        assert summary.biases == ["anchoring", "framing_effect", "loss_aversion"]
        instances = store.instances(dataset="malberg2024-hub")
    assert [r["instance_index"] for r in instances] == list(range(1, 13))
    for row, stored in zip(rows, instances, strict=True):
        published = eval_free_dict(row["metric_params"])
        metric = json.loads(stored["metric"])
        assert (metric["k"], metric["y1"], metric["y2"]) == (
            published["k"],
            published["x_1"],
            published["x_2"],
        )
        control = json.loads(stored["control"])
        assert tuple(control["options"]) == parse_prompt(row["control"]).options
        assert stored["test_case"] == bias_id(row["bias"])
        assert stored["n_options"] == len(control["options"])


def eval_free_dict(text: str) -> dict:
    """The fixture's metric_params in the test's own way: "{'k': 1, ...}" -> dict of floats."""
    pairs = text.strip("{} ").split(",")
    return {k.strip().strip("'\""): float(v) for k, v in (p.split(":") for p in pairs)}


def test_hub_metric_params_may_be_json(tmp_path):
    def to_json(header, rows):
        for row in rows:
            row["metric_params"] = json.dumps(eval_free_dict(row["metric_params"]))

    path = edited_csv(HUB_CSV, tmp_path / "json.csv", to_json)
    with Store(tmp_path / "x.db") as store:
        assert import_hub(store, path, name="j").instances == 12
        assert json.loads(store.instances(dataset="j")[1]["metric"])["y1"] == 6.0


def test_reimport_is_idempotent_and_other_content_needs_replace(tmp_path):
    db = tmp_path / "x.db"
    with Store(db) as store:
        import_hub(store, HUB_CSV)
    before = snapshot(db)
    with Store(db) as store:
        assert import_hub(store, HUB_CSV).unchanged
    assert snapshot(db) == before

    def drop_last(header, rows):
        rows.pop()

    smaller = edited_csv(HUB_CSV, tmp_path / "smaller.csv", drop_last)
    with Store(db) as store:
        with pytest.raises(DatasetError, match="already exists with other content"):
            import_hub(store, smaller)
        assert snapshot(db) == before
        assert import_hub(store, smaller, replace=True).instances == 11
        assert store.counts()["instances"] == 11


def _format_with_errors(tmp_path: Path) -> Path:
    """The code-format fixture plus ERROR rows and a second model, written as files."""
    folder = format_copy(tmp_path / "fmt")
    results = folder / "decision_results" / "stub-model.csv"

    def add_errors(header, rows):
        for index in (1, 6):
            rows[index].update(
                status="ERROR",
                individual_score="",
                control_decision="",
                treatment_decision="",
                error_message="extraction failed",
            )

    edited_csv(results, results, add_errors)

    def second_model(header, rows):
        for i, row in enumerate(rows):
            row["model"] = "other-model"
            row["individual_score"] = str(round((i - 5) / 7, 6))
        rows[3].update(status="ERROR", individual_score="nan", error_message="timeout")

    edited_csv(results, folder / "decision_results" / "other-model.csv", second_model)
    return folder


def test_code_format_table_equals_published_scores(tmp_path):
    folder = _format_with_errors(tmp_path)
    # expectations straight from the CSVs, without cogbias
    _, tests = read_rows(folder / "full_dataset.csv")
    bias_of = {t["id"]: t["bias"].lower().replace(" ", "_") for t in tests}
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for path in sorted((folder / "decision_results").glob("*.csv")):
        for row in read_rows(path)[1]:
            key = (bias_of[row["id"]], row["model"])
            if row["status"] == "OK":
                scores[key].append(float(row["individual_score"]))
            else:
                errors[key] += 1
    assert sum(errors.values()) == 5  # 2 in stub, the same 2 + 1 in other-model

    with Store(tmp_path / "x.db") as store:
        summary = import_malberg(store, folder)
        assert (summary.instances, summary.decisions) == (12, 24)
        assert summary.models == ["other-model", "stub"]
        table = analysis.summarize(analysis.scores_frame(store.scores(dataset="malberg2024")))
        sql = {(r["bias"], r["model"]): r for r in store.results(dataset="malberg2024")}
    assert len(table) == len(set(scores) | set(errors)) == 6
    for row in table.itertuples():
        key = (row.bias, row.model)
        expected = math.fsum(scores[key]) / len(scores[key])
        assert row.mean == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert sql[key]["mean"] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert row.n == len(scores[key])
        assert row.failures == errors[key] == sql[key]["failures"]


def test_code_format_keeps_answers_orders_and_insertions(tmp_path):
    with Store(tmp_path / "x.db") as store:
        import_malberg(store, format_copy(tmp_path / "fmt"))
        pairs = [p.decision for p in store.pairs(dataset="malberg2024", limit=100)]
        instance = store.instances(dataset="malberg2024")[0]
    second = next(p for p in pairs if p.control_order == list(range(10, -1, -1)))
    assert second.reversed is True
    assert (pairs[0].control_choice, pairs[0].treatment_choice) == (10, 2)
    assert pairs[0].control_extraction == "Option 11"
    assert pairs[0].run_id == "import:malberg2024"
    insertions = json.loads(instance["insertions"])
    assert {"gap": "anchor", "source": "value", "text": "11"} in insertions
    assert instance["metric"] is None  # the format records no metric parameters


def test_code_format_remarks_with_metric_parameters_are_used(tmp_path):
    folder = format_copy(tmp_path / "fmt")

    def remarks(header, rows):
        rows[0]["remarks"] = "{'k': -1, 'x_1': 3, 'x_2': 2, 'note': None}"

    edited_csv(folder / "full_dataset.csv", folder / "full_dataset.csv", remarks)
    with Store(tmp_path / "x.db") as store:
        import_malberg(store, folder)
        first = store.instances(dataset="malberg2024")[0]
    assert json.loads(first["metric"])["k"] == -1.0
    assert json.loads(first["values_json"])["remarks"]["note"] is None


def test_generic_csv_with_answers_scores_with_the_row_metric(tmp_path):
    rows = [
        {
            "b": "Framing Effect",
            "c": "Rate it.\nOption 1: good\nOption 2: ok\nOption 3: bad",
            "t": "Rate it, framed.\nOption 1: good\nOption 2: ok\nOption 3: bad",
            "ca": "Option 1",
            "ta": "Option 3",
            "who": "m1",
        },
        {
            "b": "Framing Effect",
            "c": "Rate it.\nOption 1: good\nOption 2: ok\nOption 3: bad",
            "t": "Rate it, framed.\nOption 1: good\nOption 2: ok\nOption 3: bad",
            "ca": "",
            "ta": "2",
            "who": "m2",
        },
    ]
    path = write_rows(tmp_path / "pairs.csv", list(rows[0]), rows)
    mapping = ColumnMapping.parse(
        [
            "bias=b",
            "control=c",
            "treatment=t",
            "control_answer=ca",
            "treatment_answer=ta",
            "model=who",
        ],
        ["k=-1"],
    )
    with Store(tmp_path / "x.db") as store:
        summary = import_generic(store, path, mapping)
        assert (summary.instances, summary.decisions) == (1, 2)  # both rows: one test case
        decisions = store.query(
            "select model, status, score, control_choice from decisions order by model"
        )
    assert decisions[0] == {"model": "m1", "status": "ok", "score": 1.0, "control_choice": 0}
    assert decisions[1]["status"] == "failed" and decisions[1]["score"] is None


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_generic_jsonl_and_parquet_with_option_lists(tmp_path, suffix):
    records = [
        {"bias": "Anchoring", "q1": "How much?", "q2": "More than 30%? How much?",
         "options": ["0%", "50%", "100%"], "params": {"k": 1, "x_1": 1, "x_2": 1}}
        for _ in range(3)
    ]  # fmt: skip
    records[2]["q2"] = "More than 70%? How much?"
    path = tmp_path / f"set{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        flat = [{**r, "params": json.dumps(r["params"])} for r in records]
        pq.write_table(pa.Table.from_pylist(flat), path)
    mapping = ColumnMapping(
        {"bias": "bias", "control": "q1", "treatment": "q2", "control_options": "options",
         "treatment_options": "options", "metric_params": "params"}
    )  # fmt: skip
    with Store(tmp_path / "x.db") as store:
        assert import_generic(store, path, mapping, name="g").instances == 2
        rows = store.instances(dataset="g")
    assert json.loads(rows[0]["control"])["options"] == ["0%", "50%", "100%"]
    assert json.loads(rows[0]["metric"])["y1"] == 1.0


def test_generic_mapping_mistakes_are_explained(tmp_path):
    path = write_rows(tmp_path / "a.csv", ["x"], [{"x": "1"}])
    with Store(tmp_path / "x.db") as store:
        with pytest.raises(DatasetError, match="needs 'control'"):
            import_generic(store, path, ColumnMapping({"bias": "x", "treatment": "x"}))
        with pytest.raises(DatasetError, match="unknown mapping field 'prompt'"):
            import_generic(store, path, ColumnMapping({"prompt": "x"}))
        with pytest.raises(DatasetError, match="answers need a model"):
            import_generic(
                store,
                path,
                ColumnMapping(
                    {
                        "bias": "x",
                        "control": "x",
                        "treatment": "x",
                        "control_answer": "x",
                        "treatment_answer": "x",
                    }
                ),  # fmt: skip
            )
        assert store.counts()["datasets"] == 0
