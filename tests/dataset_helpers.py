"""Shared helpers for the dataset tests: fixture paths, CSV rewriting, database snapshots."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

# The tests own their fixtures: small files in the published formats, inside the repository,
# so that a clone anywhere runs the suite (see tests/fixtures/*/README.md for each layout).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
HUB_CSV = FIXTURES / "malberg2024-hub" / "dataset.csv"
FORMAT_DIR = FIXTURES / "malberg2024-format"
MOHR_DIR = FIXTURES / "mohr2025-format"
TOKENBIAS_DIR = FIXTURES / "tokenbias-format"

# The papers' real released data is never committed (its licences are not ours): a test that
# reproduces a paper's table from it reads the folder this variable names (`.ci/run` sets it
# when CI has a copy of the shared folder beside the clone) and skips when it is unset.
RELEASED_ENV = "COGBIAS_RELEASED"

csv.field_size_limit(2**31 - 1)


def released(name: str) -> Path:
    """The released data set `name` (e.g. "mohr2025"), or skip saying which variable to set."""
    base = os.environ.get(RELEASED_ENV, "")
    if not base:
        pytest.skip(f"the papers' released data is not in the repository: set {RELEASED_ENV} "
                    "to its folder (one subfolder per paper) to run this reproduction test")  # fmt: skip
    folder = Path(base) / name
    if not folder.is_dir():
        pytest.skip(f"{RELEASED_ENV}={base} has no {name}/ folder")
    return folder


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def write_rows(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def edited_csv(
    source: Path, target: Path, edit: Callable[[list[str], list[dict[str, str]]], None]
) -> Path:
    """A copy of `source` with `edit(header, rows)` applied in place."""
    header, rows = read_rows(source)
    edit(header, rows)
    return write_rows(target, header, rows)


def format_copy(target: Path) -> Path:
    """A writable copy of the code-format fixture folder."""
    shutil.copytree(FORMAT_DIR, target)
    for path in target.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    return target


def snapshot(db: Path) -> tuple[dict[str, int], str]:
    """Row counts per table and a hash of the whole content (schema and rows)."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        counts = {t: conn.execute(f"select count(*) from [{t}]").fetchone()[0] for t in tables}
        digest = hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()
    return counts, digest
