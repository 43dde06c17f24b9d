"""Issue 45, point 5: a database whose `meta.schema_version` was set back by hand opens as it
was (a schema-12 file set back to 8 failed every command with "table run_test_cases already
exists": migrations 10-12 kept what was there, 9 did not), and a version that is no number
gets a message that says what to do instead of `invalid literal for int()` or `error: 0`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from batch_helpers import cogbias

from cogbias.core.errors import SchemaError
from cogbias.store import Store
from cogbias.store.migrations import SCHEMA_VERSION


def set_version(path: Path, value: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("update meta set value = ? where key = 'schema_version'", (value,))


def schema(path: Path) -> set[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("select type, name, sql from sqlite_master where name != 'meta'")
        return set(rows.fetchall())


@pytest.mark.parametrize("version", range(SCHEMA_VERSION))
def test_a_version_set_back_reopens_with_its_schema_and_rows_kept(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "x.db"
    with Store(path) as store:
        store.create_run("r1", {"models": ["random"]}, 1, name="kept")
    before = schema(path)
    set_version(path, str(version))
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert [r["name"] for r in store.runs()] == ["kept"]
    assert schema(path) == before


def test_the_cli_opens_a_schema_12_file_set_back_to_8(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    Store(path).close()
    set_version(path, "8")
    done = cogbias("runs", "--db", path)
    assert done.returncode == 0, done.stderr
    assert "already exists" not in done.stderr


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "", "٣"])
def test_a_version_that_is_no_number_says_what_to_do(tmp_path: Path, value: str) -> None:
    path = tmp_path / "x.db"
    Store(path).close()
    set_version(path, value)
    with pytest.raises(SchemaError, match="not a number from 0 to") as caught:
        Store(path)
    assert "set it to 0 and open it again" in str(caught.value)
    done = cogbias("runs", "--db", path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: {path} records its schema version")
    assert "invalid literal" not in done.stderr and "Traceback" not in done.stderr
    set_version(path, "0")  # what the message says to do
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
