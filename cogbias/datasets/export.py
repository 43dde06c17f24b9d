"""Export a run or a dataset to CSV, JSONL or Parquet with stable, documented columns.

The columns are a contract (docs/datasets.md): analyses written against an export keep
working when the store's internals change. Answers are 0-based option indices in the
*original* option order, whatever order the model saw, so `score` can be recomputed from
`control_answer`, `treatment_answer` and the metric columns alone.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..store import Store
from ..templates import Filled, render_decision_text

FORMATS = ("csv", "jsonl", "parquet")
PAIR_COLUMNS: dict[str, str] = {
    # name -> type (for Parquet): str, int, float, bool, list
    "dataset": "str",
    "run_id": "str",
    "decision_id": "str",
    "instance_id": "str",
    "bias": "str",
    "model": "str",
    "temperature": "float",
    "repeat": "int",
    "scenario": "str",
    "variant": "str",
    "control_text": "str",
    "treatment_text": "str",
    "control_options": "list",
    "treatment_options": "list",
    "n_options": "int",
    "control_order": "list",
    "treatment_order": "list",
    "reversed": "bool",
    "control_raw_answer": "str",
    "treatment_raw_answer": "str",
    "control_extraction": "str",
    "treatment_extraction": "str",
    "control_answer": "int",
    "treatment_answer": "int",
    "k": "float",
    "y1": "float",
    "y2": "float",
    "flip_control": "bool",
    "flip_treatment": "bool",
    "score": "float",
    "status": "str",
    "error": "str",
}
INSTANCE_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "instance_id": "str",
    "bias": "str",
    "scenario": "str",
    "variant": "str",
    "control_text": "str",
    "treatment_text": "str",
    "control_options": "list",
    "treatment_options": "list",
    "n_options": "int",
    "k": "float",
    "y1": "float",
    "y2": "float",
    "flip_control": "bool",
    "flip_treatment": "bool",
    "status": "str",
    "error": "str",
}


def _half(text: str | None) -> Filled | None:
    if not text:
        return None
    data = json.loads(text)
    return Filled(data["situation"], data["prompt"], tuple(data["options"]))


def _metric(text: str | None) -> dict[str, Any]:
    data = json.loads(text) if text else None
    if not data:
        return {k: None for k in ("k", "y1", "y2", "flip_control", "flip_treatment")}
    return {
        "k": data.get("k"),
        "y1": data.get("y1"),
        "y2": data.get("y2"),
        "flip_control": bool(data.get("flip_control")),
        "flip_treatment": bool(data.get("flip_treatment")),
    }


def _texts(row: dict[str, Any], control_key: str, treatment_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for half, key in (("control", control_key), ("treatment", treatment_key)):
        filled = _half(row.get(key))
        out[f"{half}_text"] = render_decision_text(filled) if filled else None
        out[f"{half}_options"] = list(filled.options) if filled else None
    return out


def pair_record(row: dict[str, Any]) -> dict[str, Any]:
    """One exported pair from a `Store.iter_pairs` row."""
    return {
        "dataset": row.get("dataset"),
        "run_id": row["run_id"],
        "decision_id": row["id"],
        "instance_id": row["instance_id"],
        "bias": row["test_case"],
        "model": row["model"],
        "temperature": row["temperature"],
        "repeat": row["repeat"],
        "scenario": row["scenario"],
        "variant": row["variant"],
        **_texts(row, "control_half", "treatment_half"),
        "n_options": row["n_options"],
        "control_order": json.loads(row["control_order"]) if row["control_order"] else None,
        "treatment_order": json.loads(row["treatment_order"]) if row["treatment_order"] else None,
        "reversed": None if row["reversed"] is None else bool(row["reversed"]),
        "control_raw_answer": row["control_answer"],
        "treatment_raw_answer": row["treatment_answer"],
        "control_extraction": row["control_extraction"],
        "treatment_extraction": row["treatment_extraction"],
        "control_answer": row["control_choice"],
        "treatment_answer": row["treatment_choice"],
        **_metric(row["metric"]),
        "score": row["score"],
        "status": row["status"],
        "error": row["error"],
    }


def instance_record(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "dataset": row["dataset"],
        "instance_id": row["id"],
        "bias": row["test_case"],
        "scenario": row["scenario"],
        "variant": row["variant"],
        **_texts(row, "control", "treatment"),
        "n_options": row["n_options"],
        **_metric(row["metric"]),
        "status": row["status"],
        "error": row["error"],
    }


def records(
    store: Store,
    run_id: str | None = None,
    dataset: str | None = None,
    what: str = "pairs",
    model: str | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Batches of export records: the pairs of a run or dataset, or a dataset's test cases."""
    if what == "instances":
        if not dataset:
            raise ValueError("exporting test cases needs a dataset")
        for batch in store.iter_instances(dataset):
            yield [instance_record(r) for r in batch]
        return
    if what != "pairs":
        raise ValueError(f"export 'pairs' or 'instances', not {what!r}")
    if not run_id and not dataset:
        raise ValueError("export needs a run id or a dataset name")
    for batch in store.iter_pairs(run_id=run_id, dataset=dataset, model=model):
        yield [pair_record(r) for r in batch]


def format_of(path: str | Path, fmt: str | None = None) -> str:
    fmt = (fmt or Path(path).suffix.lstrip(".")).lower()
    fmt = {"ndjson": "jsonl", "pq": "parquet"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def write(
    batches: Iterable[list[dict[str, Any]]],
    path: str | Path,
    fmt: str | None = None,
    columns: dict[str, str] = PAIR_COLUMNS,
) -> int:
    """Write record batches to a file; returns the number of rows written."""
    path = Path(path)
    fmt = format_of(path, fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        return _parquet(batches, path, columns)
    count = 0
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns)) if fmt == "csv" else None
        if writer:
            writer.writeheader()
        for batch in batches:
            for record in batch:
                if writer:
                    writer.writerow(_csv_row(record, columns))
                else:
                    ordered = {name: record.get(name) for name in columns}
                    handle.write(json.dumps(ordered, ensure_ascii=False) + "\n")
            count += len(batch)
    return count


def _csv_row(record: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """Lists as JSON arrays, booleans as true/false, missing values as empty cells."""
    out: dict[str, Any] = {}
    for name, kind in columns.items():
        value = record.get(name)
        if value is None:
            out[name] = ""
        elif kind == "list":
            out[name] = json.dumps(value, ensure_ascii=False)
        elif kind == "bool":
            out[name] = "true" if value else "false"
        else:
            out[name] = value
    return out


def _parquet(batches: Iterable[list[dict[str, Any]]], path: Path, columns: dict[str, str]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "list": None,
    }
    fields = []
    for name, kind in columns.items():
        if kind == "list":
            item = pa.int64() if name.endswith("_order") else pa.string()
            fields.append(pa.field(name, pa.list_(item)))
        else:
            fields.append(pa.field(name, types[kind]))
    schema = pa.schema(fields)
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        for batch in batches:
            table = pa.Table.from_pylist(
                [{name: r.get(name) for name in columns} for r in batch], schema=schema
            )
            writer.write_table(table)
            count += len(batch)
    return count


def export(
    store: Store,
    path: str | Path,
    run_id: str | None = None,
    dataset: str | None = None,
    what: str = "pairs",
    fmt: str | None = None,
    model: str | None = None,
) -> int:
    """Export pairs (of a run or dataset) or test cases (of a dataset) to a file."""
    columns = INSTANCE_COLUMNS if what == "instances" else PAIR_COLUMNS
    format_of(path, fmt)  # fail before touching the store on a bad format
    return write(records(store, run_id, dataset, what, model), path, fmt, columns)


def export_bytes(
    store: Store,
    fmt: str,
    run_id: str | None = None,
    dataset: str | None = None,
    what: str = "pairs",
    model: str | None = None,
) -> bytes:
    """The export as bytes (for the app's download buttons)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"export.{format_of('x', fmt)}"
        export(store, path, run_id, dataset, what, fmt, model)
        return path.read_bytes()
