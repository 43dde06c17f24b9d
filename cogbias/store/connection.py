"""The connection every repository shares: opening the file, pragmas, busy timeout,
read-only / corrupt / locked handling, transactions and the schema check.

One file in WAL mode, so the app can read while a run writes. Writes are grouped in
transactions (`atomic`): a failure midway leaves no partial rows. `StoreBase` is the base
of every repository mixin (`cogbias.store.runs`, ...); `cogbias.store.Store` combines them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from cogbias.core.errors import SchemaError, StoreError
from cogbias.core.safetext import shown
from cogbias.store.migrations import MIGRATIONS, SCHEMA_VERSION


def _import_sqlite_utils() -> Any:
    """sqlite-utils imports pandas and numpy at import time when they are installed, only to
    recognise their value types in inserted rows (we never insert any). That costs ~0.5 s on
    every `cogbias` command, so when neither is loaded yet they are hidden during the import
    (pandas still imports normally afterwards)."""
    hidden = [m for m in ("pandas", "numpy") if m not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` fail
    try:
        import sqlite_utils
    finally:
        for name in hidden:
            del sys.modules[name]
    return sqlite_utils


sqlite_utils = _import_sqlite_utils()

LOCK_TIMEOUT = 30.0  # seconds to wait for another process's write lock before giving up


def cogbias_home() -> Path:
    """`COGBIAS_HOME`, default ~/.cogbias: user test cases, models, downloads, the database."""
    return Path(os.environ.get("COGBIAS_HOME", Path.home() / ".cogbias"))


def default_path() -> Path:
    """The database the CLI and the app share: `COGBIAS_DB`, else `COGBIAS_HOME/cogbias.db`."""
    configured = os.environ.get("COGBIAS_DB")
    return Path(configured) if configured else cogbias_home() / "cogbias.db"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def record_rows(records: Sequence[Any], kind: type) -> list[dict[str, Any]]:
    """The stored rows of `records` (their `to_row()`), refusing anything but `kind` records:
    a dict or a tuple would pass the record's codec by (its types, its field names), which is
    how one row came to have three shapes. TypeError names the first stranger and where."""
    for at, record in enumerate(records):
        if not isinstance(record, kind):
            raise TypeError(f"{kind.__name__} records only: item {at} is a {type(record).__name__}")
    return [record.to_row() for record in records]


class StoreBase:
    """A cogbias database file. Cheap to open; safe to use from one thread at a time.

    A file the user may not write (or in a folder they may not write) is opened read-only,
    so the reading commands and pages still work on it; writing then fails with a clear
    `StoreError`-style message rather than half-way.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.read_only = False
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(describe_error(self.path, exc)) from None
        # The connection, for the store package only: every other module asks a repository
        # method (`cogbias.store.*`), so SQL and the schema stay in one place.
        self.db = sqlite_utils.Database(conn)
        try:
            self._check_readable()
            if not self.read_only:
                with self.db.ensure_autocommit_on():
                    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                        conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(describe_error(self.path, exc)) from None
        except StoreError:
            conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        """Read-write when we may write the file and its folder (WAL needs both), else
        read-only: SQLite's `mode=ro` URI, so nothing, not even a journal, is written."""
        path = self.path
        if path.is_dir():
            raise StoreError(f"{path} is a folder, not a database file; give a file name")
        folder = path.parent
        if not path.exists():
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder {folder} for the database ({exc.strerror}); "
                    "choose a database path in a folder you can write"
                ) from None
            if not os.access(folder, os.W_OK):
                raise StoreError(
                    f"{path} does not exist and the folder {folder} is read-only, so it cannot "
                    "be created; choose a database path in a folder you can write"
                )
        writable = os.access(path, os.W_OK) if path.exists() else True
        if writable and os.access(folder, os.W_OK):
            return sqlite3.connect(path, timeout=LOCK_TIMEOUT, check_same_thread=False)
        self.read_only = True
        uri = path.resolve().as_uri()
        conn = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, timeout=LOCK_TIMEOUT, check_same_thread=False
        )
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            # A WAL database in a folder we cannot write: SQLite cannot create the shared
            # memory file a reader needs. Nobody can write the folder's files through us,
            # so read the file as it stands (`immutable`: no locks, no WAL index).
            conn.close()
            return sqlite3.connect(
                f"{uri}?immutable=1", uri=True, timeout=LOCK_TIMEOUT, check_same_thread=False
            )

    def _check_readable(self) -> None:
        """Touch the schema now, so a file that is not a database fails on open, not later."""
        self.db.execute("select count(*) from sqlite_master").fetchone()

    def close(self) -> None:
        self.db.close()

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another process's transaction before "locked"."""
        self.db.execute(f"pragma busy_timeout = {int(seconds * 1000)}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema

    @property
    def schema_version(self) -> int:
        if "meta" not in self.db.table_names():
            return 0
        row = self.db.execute("select value from meta where key = 'schema_version'").fetchone()
        if not row:
            return 0
        text = str(row[0]).strip()
        if not text.isdecimal() or not text.isascii():  # "abc", "-1", "1.5", a NULL
            raise SchemaError(
                f"{self.path} records its schema version (meta.schema_version) as "
                f"'{shown(row[0], 40)}', which is not a number from 0 to {SCHEMA_VERSION}: the "
                "file was edited by hand or damaged. If its tables are cogbias's, set it to 0 "
                f"and open it again (sqlite3 {self.path} \"update meta set value = '0' where "
                "key = 'schema_version'\"): every migration is checked again and what is there "
                "is kept. Otherwise restore the file from a copy"
            )
        return int(text)

    def _migrate(self) -> None:
        current = self.schema_version
        if current > SCHEMA_VERSION:
            raise SchemaError(
                f"{self.path} was written by a newer cogbias (schema {current}, this version "
                f"knows {SCHEMA_VERSION}); upgrade cogbias to open it"
            )
        if current == SCHEMA_VERSION:
            return
        if self.read_only:
            raise StoreError(
                f"{self.path} needs an upgrade to schema {SCHEMA_VERSION} (it has {current}) "
                "but it, or its folder, is read-only; make both writable or copy the file to "
                "a folder you can write, and open it there once"
            )
        with self.atomic():
            # Another process may have migrated while we waited for the write lock.
            # A number left unused (numbers are handed out before the work lands) is skipped.
            start = self.schema_version
            for version in sorted(v for v in MIGRATIONS if start < v <= SCHEMA_VERSION):
                if "meta" not in self.db.table_names():
                    self.db["meta"].create({"key": str, "value": str}, pk="key")
                MIGRATIONS[version](self.db)
                self.db["meta"].upsert({"key": "schema_version", "value": str(version)}, pk="key")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Self]:
        """All writes inside commit together or not at all (nested blocks use savepoints).

        The outermost block takes the write lock up front (BEGIN IMMEDIATE): a deferred
        transaction that reads first and writes later fails at once with "database is
        locked" when another process (a background run, the app) writes meanwhile.
        """
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield self
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------------ reads

    def query(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[dict[str, Any]]:
        """Rows of a read statement as dicts: for the store package's repositories only.

        Code outside `cogbias.store` asks a named repository method instead (tests may
        inspect a database with it). `cogbias.runs` still calls it until its SQL moves into
        `cogbias.store.execution`."""
        cursor = self.db.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def _existing(self, table: str, ids: Iterable[str]) -> set[str]:
        found: set[str] = set()
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            found |= {
                r[0]
                for r in self.db.execute(f"select id from {table} where id in ({marks})", chunk)
            }
        return found

    def counts(self) -> dict[str, int]:
        return {t: self.db[t].count for t in self.db.table_names()}

    SNAPSHOT_TABLES = ("test_cases", "scenarios", "datasets", "instances", "runs", "decisions")

    def dump_tables(
        self, tables: Sequence[str] = SNAPSHOT_TABLES
    ) -> dict[str, list[dict[str, Any]]]:
        """Every row of `tables` (not the LLM cache), e.g. to ship a small demo database."""
        return {t: self.query(f"select * from [{t}] order by rowid") for t in tables}

    def load_tables(self, data: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Insert rows dumped by `dump_tables`, all in one transaction; existing keys win."""
        unknown = set(data) - set(self.SNAPSHOT_TABLES)
        if unknown:
            raise ValueError(f"not a cogbias table: {', '.join(sorted(unknown))}")
        with self.atomic():
            for table, rows in data.items():
                if rows:
                    self.db[table].insert_all(rows, ignore=True)


def disk_full(exc: BaseException) -> bool:
    """Whether a failed write ran out of room: SQLite's "database or disk is full" (the disk,
    or the file's `max_page_count`), or the system's "no space left" / quota exceeded."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def describe_error(path: str | Path, exc: sqlite3.Error) -> str:
    """What went wrong with the database at `path`, in words, with what to do."""
    text = str(exc)
    if disk_full(exc):
        return (
            f"{path} could not be written: its disk is full ({text}); free some space and "
            "run the command again (a run continues where it stopped with "
            "`cogbias resume RUN_ID`)"
        )
    if "locked" in text or "busy" in text:
        return (
            f"{path} is locked by another process (a run or the app writing to it); wait "
            "for it to finish or stop it, then try again"
        )
    if "readonly" in text or "read-only" in text:
        return (
            f"{path} is read-only ({text}); make the file and its folder writable, or "
            "point at a copy in a folder you can write"
        )
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "disk image" in text
    ):
        return (
            f"{path} is not a cogbias database, or it is corrupt or truncated ({text}); "
            "move it away (or point at another file) to start afresh, or restore a backup"
        )
    if "unable to open" in text:
        return (
            f"{path} cannot be opened ({text}); check that the path and its folder exist "
            "and that you may read them"
        )
    return f"{path} cannot be used ({text})"
