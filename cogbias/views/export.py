"""Export a run, a dataset or a table a page shows to CSV, JSONL or Parquet.

One writer per format (`write`: a file whole or not at all, through `core.outputs.replacing`;
`frame_bytes`: a page's table as a download, through the same writers), every CSV cell through
`core.safetext.csv_cell`. A run's and a dataset's columns are a contract (docs/datasets.md):
analyses written against an export keep working when the store's internals change. Answers
are 0-based option indices in the *original* option order, whatever order the model saw, so
`score` can be recomputed from `control_answer`, `treatment_answer` and the metric columns
alone.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from cogbias.core.export_columns import PAIR_COLUMNS
from cogbias.core.outputs import check_output, replacing
from cogbias.core.run_record import Run
from cogbias.core.safetext import csv_cell
from cogbias.runs import kinds
from cogbias.runs.read_side import ExportTable
from cogbias.store import Store
from cogbias.views.dataset_export import dataset_table
from cogbias.views.numbers import MISSING, gap

FORMATS = ("csv", "jsonl", "parquet")


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


def frame_columns(frame: Any) -> dict[str, str]:
    """A shown table's columns with their export types (as in `core/export_columns.py`),
    read from the values: whole numbers "int", other numbers "float", true/false "bool",
    anything else "str" (a list or a date as its text)."""
    import pandas as pd

    types: dict[str, str] = {}
    for name in frame.columns:
        values = [v for v in (_plain(x) for x in frame[name]) if v is not None]
        if values and all(isinstance(v, bool) for v in values):
            kind = "bool"
        elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            kind = "int"
        elif values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            kind = "float"
        elif not values and pd.api.types.is_numeric_dtype(frame[name].dtype):
            kind = "float"  # a column of numbers that has none yet
        else:
            kind = "str"
        types[str(name)] = kind
    return types


def frame_records(frame: Any, columns: dict[str, str]) -> list[dict[str, Any]]:
    """A shown table's rows as export records: plain Python values of each column's type,
    a missing value (None, NaN, or the "–" a page shows for it) as None."""
    names = [str(c) for c in frame.columns]
    out = []
    for values in frame.itertuples(index=False, name=None):
        record: dict[str, Any] = {}
        for name, raw in zip(names, values, strict=True):
            value = _plain(raw)
            if value is not None and columns[name] == "float":
                value = float(value)
            elif value is not None and columns[name] == "str" and not isinstance(value, str):
                value = json.dumps(value) if isinstance(value, list | dict) else str(value)
            record[name] = value
        out.append(record)
    return out


def _plain(value: Any) -> Any:
    """A table cell as a plain Python value: numpy scalars unwrapped, a missing value (None,
    NaN, pandas' NA or NaT, the "–" a page shows) None."""
    if gap(value) or (isinstance(value, str) and value == MISSING):
        return None
    if hasattr(value, "item") and not isinstance(value, list | tuple | dict | str):
        try:
            value = value.item()
        except (ValueError, TypeError):  # an array or a timestamp: its text
            value = str(value)
    return list(value) if isinstance(value, tuple) else value


def frame_bytes(frame: Any, fmt: str) -> bytes:
    """A shown table as a file's bytes in `fmt` (csv, jsonl, parquet), written as `cogbias
    export` writes its rows (the same writers): what every table on a page downloads as."""
    fmt = format_of("x", fmt)
    columns = frame_columns(frame)
    return _frame_file([frame_records(frame, columns)], fmt, columns)


def frame_files(frame: Any) -> dict[str, bytes]:
    """`frame_bytes` in every format (FORMATS), the table's cells read once for all three."""
    columns = frame_columns(frame)
    batches = [frame_records(frame, columns)]
    return {fmt: _frame_file(batches, fmt, columns) for fmt in FORMATS}


def _frame_file(batches: list[list[dict[str, Any]]], fmt: str, columns: dict[str, str]) -> bytes:
    if fmt == "parquet":
        buffer = io.BytesIO()
        _parquet(batches, buffer, columns)
        return buffer.getvalue()
    handle = io.StringIO(newline="")
    _write_text(handle, batches, fmt, columns)
    return handle.getvalue().encode("utf-8")


def _parquet(
    batches: Iterable[list[dict[str, Any]]], path: Path | IO[bytes], columns: dict[str, str]
) -> int:
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
    what: str | None = None,
    fmt: str | None = None,
    model: str | None = None,
    force: bool = False,
) -> int:
    """Export a run's rows (the first table its kind exports: a paired run's pairs, a study
    run's turns), or one of a dataset's tables (`what`: its name, as
    `dataset_export.dataset_tables` lists them; None: the first it holds, a thesis
    dataset's effect sizes, another's pairs), to a file. Never over the store's own
    database; over an existing file only with `force`."""
    format_of(path, fmt)  # fail before touching the store on a bad format
    protect = (store.path,)
    check_output(path, force, protect)  # before reading anything: a refusal costs nothing
    if run_id:
        if what not in (None, "pairs"):
            raise ValueError(f"a run exports its own rows; the {what} table is a dataset's")
        run = kinds.stored(store, run_id)
        table = run_export(run)
        return write(table.rows(store, run, model), path, fmt, table.columns, force, protect)
    if not dataset:
        raise ValueError("export needs a run id or a dataset name")
    chosen = dataset_table(store, dataset, what)
    return write(chosen.rows(store, dataset, model), path, fmt, chosen.columns, force, protect)


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
    what: str | None = None,
    model: str | None = None,
) -> bytes:
    """The export as bytes (for the app's download buttons)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"export.{format_of('x', fmt)}"
        export(store, path, run_id, dataset, what, fmt, model)
        return path.read_bytes()
