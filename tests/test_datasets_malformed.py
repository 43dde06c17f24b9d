"""Malformed files: a message naming file, row and column, and a database left exactly as it was.

Every test starts from a database that already holds an import (so "unchanged" is not
trivially true of an empty file), imports a damaged file and compares row counts and a hash of
the whole database content before and after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cogbias.datasets import ColumnMapping, DatasetError, import_generic, import_hub, import_malberg
from cogbias.store import Store
from tests.dataset_helpers import HUB_CSV, edited_csv, format_copy, snapshot, write_rows


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "x.db"
    with Store(path) as store:
        import_hub(store, HUB_CSV, name="existing")
    return path


def assert_refused(db: Path, do_import, *fragments: str) -> str:
    before = snapshot(db)
    with Store(db) as store, pytest.raises(DatasetError) as caught:
        do_import(store)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert snapshot(db) == before
    return message


def hub(path: Path, name: str = "new"):
    return lambda store: import_hub(store, path, name=name)


# ------------------------------------------------------------------ the Hub CSV


def test_missing_column(db, tmp_path):
    def drop(header, rows):
        header.remove("metric_params")
        for row in rows:
            del row["metric_params"]

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", drop)
    assert_refused(
        db, hub(path), "hub.csv", "header (line 1)", "column 'metric_params'", "missing column"
    )


def test_unparsable_metric_params_on_the_last_row(db, tmp_path):
    def damage(header, rows):
        rows[-1]["metric_params"] = "{'k': 1, 'x_1': 3,"

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", damage)
    # eleven good rows were already written inside the transaction: all rolled back
    assert_refused(db, hub(path), "hub.csv", "row 12", "column 'metric_params'", "cannot be read")


def test_metric_params_missing_a_key(db, tmp_path):
    def damage(header, rows):
        rows[4]["metric_params"] = "{'k': -1, 'x_1': 0}"

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", damage)
    assert_refused(db, hub(path), "row 5", "column 'metric_params'", "no 'x_2'")


def test_metric_params_of_the_wrong_type(db, tmp_path):
    def damage(header, rows):
        rows[2]["metric_params"] = json.dumps({"k": "one", "x_1": 0, "x_2": 0})
        rows[3]["metric_params"] = "[1, 0, 0]"

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", damage)
    assert_refused(db, hub(path), "row 3", "column 'metric_params'", "'k' must be a number")


def test_prompt_without_answer_options(db, tmp_path):
    def damage(header, rows):
        rows[6]["treatment"] = rows[6]["treatment"].split("Answer Options:")[0]

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", damage)
    assert_refused(db, hub(path), "row 7", "column 'treatment'", "no answer options")


def test_truncated_inside_a_quoted_field(db, tmp_path):
    data = HUB_CSV.read_bytes()
    path = tmp_path / "hub.csv"
    path.write_bytes(data[: int(len(data) * 0.7)])
    message = assert_refused(db, hub(path), "hub.csv", "row ", "truncated")
    assert "line" in message


def test_truncated_row_with_too_few_fields(db, tmp_path):
    path = tmp_path / "hub.csv"
    path.write_bytes(HUB_CSV.read_bytes() + b"Anchoring,some scenario\n")
    assert_refused(db, hub(path), "row 13", "has 2 fields but the header has 5")


def test_wrong_encoding(db, tmp_path):
    text = HUB_CSV.read_text(encoding="utf-8")
    lines = text.split("\n")
    target = next(i for i, line in enumerate(lines) if line.startswith("Framing Effect"))
    lines[target] = lines[target].replace("Framing Effect", "Framing Effect caf\u00e9", 1)
    path = tmp_path / "hub.csv"
    path.write_bytes("\n".join(lines).encode("latin-1"))
    assert_refused(db, hub(path), "hub.csv", "row 5", f"line {target + 1}", "not UTF-8")


def test_utf16_file(db, tmp_path):
    path = tmp_path / "hub.csv"
    path.write_bytes(HUB_CSV.read_text(encoding="utf-8").encode("utf-16"))
    assert_refused(db, hub(path), "hub.csv", "line 1", "not UTF-8")


def test_a_new_name_is_needed_for_other_content(db, tmp_path):
    def change(header, rows):
        rows[0]["scenario"] = "another scenario"

    path = edited_csv(HUB_CSV, tmp_path / "hub.csv", change)
    assert_refused(db, hub(path, name="existing"), "hub.csv", "already exists", "--replace")


# ------------------------------------------------------------------ the paper's code format


def malberg(folder: Path):
    return lambda store: import_malberg(store, folder, name="paper")


def edit_results(folder: Path, edit) -> Path:
    path = folder / "decision_results" / "stub-model.csv"
    return edited_csv(path, path, edit)


def test_decision_for_an_unknown_test_case(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[5].update(id="9999"))
    assert_refused(db, malberg(folder), "stub-model.csv", "row 6", "column 'id'", "'9999'")


def test_invalid_status(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[-1].update(status="MAYBE"))
    assert_refused(
        db, malberg(folder), "stub-model.csv", "row 12", "column 'status'", "OK or ERROR"
    )


def test_decision_of_the_wrong_type(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[2].update(treatment_decision="ten"))
    assert_refused(db, malberg(folder), "row 3", "column 'treatment_decision'", "expected a number")


def test_decision_outside_the_options(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[4].update(control_decision="7.0"))  # 7 options
    assert_refused(db, malberg(folder), "row 5", "column 'control_decision'", "outside 0..6")


def test_score_outside_minus_one_to_one(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[0].update(individual_score="1.5"))
    assert_refused(db, malberg(folder), "row 1", "column 'individual_score'", "outside [-1, 1]")


def test_unparsable_remarks(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    path = folder / "full_dataset.csv"
    edited_csv(path, path, lambda h, rows: rows[8].update(remarks="{'k': __import__('os')}"))
    assert_refused(db, malberg(folder), "full_dataset.csv", "row 9", "column 'remarks'")


def test_bias_names_that_disagree(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[0].update(bias="LossAversion"))
    assert_refused(db, malberg(folder), "row 1", "column 'bias'", "does not match")


def test_duplicate_test_case_id(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    path = folder / "full_dataset.csv"
    edited_csv(path, path, lambda h, rows: rows[3].update(id=rows[0]["id"]))
    assert_refused(db, malberg(folder), "full_dataset.csv", "row 4", "column 'id'", "twice")


def test_option_order_that_is_not_a_permutation(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    edit_results(folder, lambda h, rows: rows[1].update(control_option_order="[0, 0, 1]"))
    assert_refused(db, malberg(folder), "row 2", "column 'control_option_order'", "permutation")


# ------------------------------------------------------------------ generic files

MAPPING = ColumnMapping(
    {"bias": "bias", "control": "c", "treatment": "t", "control_answer": "a1",
     "treatment_answer": "a2", "model": "m"}
)  # fmt: skip


def generic_rows(n: int = 5) -> list[dict]:
    return [
        {"bias": "Anchoring", "c": f"Q{i}\nOption 1: x\nOption 2: y", "t": f"Q{i}!\nOption 1: x\nOption 2: y",
         "a1": 0, "a2": 1, "m": "model-a"}
        for i in range(n)
    ]  # fmt: skip


def generic(path: Path):
    return lambda store: import_generic(store, path, MAPPING, name="g")


def test_jsonl_truncated_last_line(db, tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in generic_rows())
    path = tmp_path / "set.jsonl"
    path.write_text(text[:-25], encoding="utf-8")
    assert_refused(db, generic(path), "set.jsonl", "row 5", "line 5", "not valid JSON", "cut off")


def test_parquet_truncated(db, tmp_path):
    path = tmp_path / "set.parquet"
    pq.write_table(pa.Table.from_pylist(generic_rows()), path)
    path.write_bytes(path.read_bytes()[:-100])
    assert_refused(db, generic(path), "set.parquet", "not a readable Parquet file")


def test_parquet_missing_mapped_column(db, tmp_path):
    rows = [{k: v for k, v in r.items() if k != "m"} for r in generic_rows()]
    path = tmp_path / "set.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert_refused(db, generic(path), "set.parquet", "column 'm'", "missing column")


def test_csv_answer_that_is_not_an_option(db, tmp_path):
    rows = generic_rows()
    rows[3]["a2"] = 5
    path = write_rows(tmp_path / "set.csv", list(rows[0]), rows)
    assert_refused(db, generic(path), "set.csv", "row 4", "column 'a2'", "does not exist")


def test_a_model_decided_twice_across_files(db, tmp_path):
    folder = format_copy(tmp_path / "fmt")
    results = folder / "decision_results"
    (results / "stub-again.csv").write_bytes((results / "stub-model.csv").read_bytes())
    assert_refused(db, malberg(folder), "stub-model.csv", "row 1", "column 'id'", "second decision")
