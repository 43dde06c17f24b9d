"""Reading tables row by row: CSV (via `common.CsvFile`), JSONL and Parquet.

Each reader yields (row, line, record) and raises `DatasetError` naming the file, row, line
and column of the first problem, so every importer reports damage the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cogbias.core.limits import TooDeep, loads_json
from cogbias.datasets.common import CsvFile, DatasetError, Progress


def read_table(
    path: Path, columns: list[str], progress: Progress | None = None
) -> Iterator[tuple[int, int | None, dict[str, Any]]]:
    """(row, line, record) from a CSV, JSONL or Parquet file, by its extension."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        yield from _jsonl(path, columns)
    elif suffix in (".parquet", ".pq"):
        yield from _parquet(path, columns)
    else:
        for record in CsvFile(path, columns, progress).records():
            yield record.row, record.line, record.values


def _jsonl(path: Path, columns: list[str]) -> Iterator[tuple[int, int | None, dict[str, Any]]]:
    row = 0
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    path.name,
                    f"is not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8",
                    row=row + 1,
                    line=line_number,
                ) from None
            if not text.strip():
                continue
            row += 1
            try:
                record = loads_json(text)
            except (TooDeep, RecursionError):
                raise DatasetError(
                    path.name, "is nested too deeply to be read", row=row, line=line_number
                ) from None
            except ValueError as exc:
                if not isinstance(exc, json.JSONDecodeError):  # a lone surrogate, located
                    raise DatasetError(path.name, str(exc), row=row, line=line_number) from None
                problem = "the line is cut off (truncated file?)" if not raw.endswith(b"\n") else ""
                raise DatasetError(
                    path.name,
                    f"is not valid JSON ({exc}){'; ' + problem if problem else ''}",
                    row=row,
                    line=line_number,
                ) from None
            if not isinstance(record, dict):
                raise DatasetError(
                    path.name, "each line must be a JSON object", row=row, line=line_number
                )
            for column in columns:
                if column not in record:
                    raise DatasetError(
                        path.name, "is missing", row=row, column=column, line=line_number
                    )
            yield row, line_number, record


def _parquet(path: Path, columns: list[str]) -> Iterator[tuple[int, int | None, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(path.name, f"is not a readable Parquet file ({exc})") from None
    names = table.schema_arrow.names
    for column in columns:
        if column not in names:
            raise DatasetError(
                path.name, f"missing column (the file has: {', '.join(names)})", column=column
            )
    row = 0
    try:
        for batch in table.iter_batches(batch_size=2000, columns=columns):
            for record in batch.to_pylist():
                row += 1
                yield row, None, record
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(path.name, f"cannot be read ({exc})", row=row + 1) from None


def columns_of(path: str | Path) -> list[str]:
    """The column names of a CSV / JSONL / Parquet file (for a mapping form)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return list(pq.ParquetFile(path).schema_arrow.names)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(path.name, f"is not a readable Parquet file ({exc})") from None
    if suffix in (".jsonl", ".ndjson"):
        for _, _, record in _jsonl(path, []):
            return list(record)
        return []
    csv_file = CsvFile(path, [])
    for _ in csv_file.records():
        break
    return csv_file.header
