"""Export a run or a dataset to CSV, JSONL or Parquet with stable, documented columns.

The columns are a contract (docs/datasets.md): analyses written against an export keep
working when the store's internals change. Answers are 0-based option indices in the
*original* option order, whatever order the model saw, so `score` can be recomputed from
`control_answer`, `treatment_answer` and the metric columns alone.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from cogbias.core.export_columns import (
    INSTANCE_EXPORT_COLUMNS,
    PAIR_COLUMNS,
    instance_record,
    pair_record,
)
from cogbias.core.outputs import check_output, replacing
from cogbias.core.run_record import Run
from cogbias.core.safetext import csv_cell
from cogbias.runs import kinds
from cogbias.runs.read_side import ExportTable
from cogbias.store import Store

FORMATS = ("csv", "jsonl", "parquet")


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
    force: bool = False,
    protect: tuple[str | Path | None, ...] = (),
) -> int:
    """Write record batches to a file; returns the number of rows written.

    The file appears whole or not at all (`core.outputs.replacing`): never over a database
    in `protect`, and over an existing file only with `force`."""
    fmt = format_of(path, fmt)
    with replacing(path, force, protect) as temporary:
        if fmt == "parquet":
            return _parquet(batches, temporary, columns)
        with temporary.open("w", encoding="utf-8", newline="") as handle:
            return _write_text(handle, batches, fmt, columns)


def csv_bytes(pairs: Iterable[dict[str, Any]]) -> bytes:
    """Exported pairs as CSV bytes: the app's download has exactly `cogbias export`'s columns."""
    handle = io.StringIO(newline="")
    _write_text(handle, [list(pairs)], "csv", PAIR_COLUMNS)
    return handle.getvalue().encode("utf-8")


def _write_text(
    handle: IO[str], batches: Iterable[list[dict[str, Any]]], fmt: str, columns: dict[str, str]
) -> int:
    count = 0
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
    """Lists as JSON arrays, booleans as true/false, missing values as empty cells, and text
    that a spreadsheet would run as a formula neutralised (`core.safetext.csv_cell`)."""
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
            out[name] = csv_cell(value)
    return out


def frame_csv(frame: Any, handle: IO[str] | None = None) -> str | None:
    """A table (pandas) as CSV with its text cells and column names neutralised as in
    `cogbias export` (numbers stay numbers); to `handle`, or returned as a string."""
    safe = frame.rename(columns=csv_cell).map(csv_cell)
    return safe.to_csv(handle, index=False)  # type: ignore[no-any-return]


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
    force: bool = False,
) -> int:
    """Export a run's rows (the first table its kind exports: a paired run's pairs, a study
    run's turns), or a dataset's pairs or test cases, to a file. Never over the store's own
    database; over an existing file only with `force`."""
    format_of(path, fmt)  # fail before touching the store on a bad format
    protect = (store.path,)
    check_output(path, force, protect)  # before reading anything: a refusal costs nothing
    if run_id and what == "pairs":
        run = kinds.stored(store, run_id)
        table = run_export(run)
        return write(table.rows(store, run, model), path, fmt, table.columns, force, protect)
    columns = INSTANCE_EXPORT_COLUMNS if what == "instances" else PAIR_COLUMNS
    rows = records(store, run_id, dataset, what, model)
    return write(rows, path, fmt, columns, force, protect)


def run_export(run: Run) -> ExportTable:
    """The table a run's export writes: the first its kind exports (ValueError when its kind
    exports none)."""
    exports = kinds.of(run).exports
    if not exports:
        raise ValueError(f"run {run.id} is {kinds.described(run)}, whose rows are not exported")
    return exports[0]


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
