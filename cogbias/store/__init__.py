"""The SQLite store: schema, migrations, writes and queries. The only module that writes SQL.

One file in WAL mode, so the app can read while a run writes. Every row a run writes has a
deterministic key, which makes re-running idempotent and a killed run resumable. Writes are
grouped in transactions (`Store.atomic`): a failure midway leaves no partial rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cogbias.core.errors import SchemaError, StoreError
from cogbias.core.records import dumps
from cogbias.core.redact import redact, redactor
from cogbias.store.execution import ExecutionQueries

__all__ = ["SchemaError", "Store", "StoreError"]


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

SCHEMA_VERSION = 6
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


def _schema_v1(db: sqlite_utils.Database) -> None:
    db["test_cases"].create(
        {"hash": str, "id": str, "name": str, "source": str, "created_at": str}, pk="hash"
    )
    db["scenarios"].create(
        {"id": int, "industry_group": str, "position": str, "decision": str, "text": str}, pk="id"
    )
    db["datasets"].create(
        {"name": str, "kind": str, "source": str, "rows": int, "meta": str, "imported_at": str},
        pk="name",
    )
    db["instances"].create(
        {
            "id": str,
            "test_case": str,  # bias id, e.g. "anchoring"
            "test_case_hash": str,
            "dataset": str,  # set for imported instances
            "scenario_id": int,
            "scenario": str,
            "instance_index": int,
            "generator": str,
            "temperature": float,
            "seed": int,
            "variant": str,
            "values_json": str,
            "insertions": str,
            "control": str,  # JSON {situation, prompt, options}
            "treatment": str,
            "n_options": int,
            "metric": str,  # JSON {k, y1, y2, flip_control, flip_treatment}
            "status": str,  # ok | failed
            "error": str,
            "created_at": str,
        },
        pk="id",
    )
    db["runs"].create(
        {
            "id": str,
            "name": str,
            "spec": str,
            "status": str,  # planned | running | done | cancelled | failed
            "planned": int,
            "done": int,
            "failed": int,
            "tokens": int,
            "cost": float,
            "created_at": str,
            "started_at": str,
            "finished_at": str,
            "heartbeat_at": str,
            "pid": int,
            "cancel_requested": int,
            "error": str,
        },
        pk="id",
    )
    db["decisions"].create(
        {
            "id": str,
            "run_id": str,
            "instance_id": str,
            "test_case": str,
            "model": str,
            "temperature": float,
            "repeat": int,
            "reversed": int,
            "control_order": str,
            "treatment_order": str,
            "control_answer": str,
            "treatment_answer": str,
            "control_extraction": str,
            "treatment_extraction": str,
            "control_choice": int,  # 0-based, original option order
            "treatment_choice": int,
            "score": float,
            "status": str,  # ok | failed
            "error": str,
            "tokens": int,
            "cost": float,
            "created_at": str,
        },
        pk="id",
    )
    db["llm_calls"].create(
        {
            "key": str,
            "model": str,
            "api_base": str,
            "request": str,
            "response": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "latency_s": float,
            "created_at": str,
        },
        pk="key",
    )
    db["decisions"].create_index(["run_id", "status"])
    db["decisions"].create_index(["test_case", "model"])
    db["instances"].create_index(["dataset"])
    db["instances"].create_index(["test_case"])


def _schema_v2(db: sqlite_utils.Database) -> None:
    """Covering indexes for per-cell aggregates (Explore): with status and score in the index,
    summarising 600,000 decisions reads only the index, never the wide decision rows. They
    replace the narrower indexes with the same leading columns, which they also serve."""
    db.execute("drop index if exists idx_decisions_test_case_model")
    db.execute("drop index if exists idx_decisions_run_id_status")
    db["decisions"].create_index(["test_case", "model", "status", "score"], if_not_exists=True)
    db["decisions"].create_index(
        ["run_id", "test_case", "model", "status", "score"], if_not_exists=True
    )


def _schema_v3(db: sqlite_utils.Database) -> None:
    """Runs also report instance generation, so progress moves before the first decision."""
    db["runs"].add_column("generated", int)
    db["runs"].add_column("to_generate", int)


def _schema_v4(db: sqlite_utils.Database) -> None:
    """Runs you can trust: failure kinds, a worker lease, honest cost, accumulated duration."""
    runs = db["runs"]
    for column, kind in (
        ("spec_version", int),
        ("lease_owner", str),
        ("duration_s", float),
        ("cost_saved", float),
        ("waiting", int),
        ("wait_reason", str),
    ):
        runs.add_column(column, kind)
    for column, kind in (("failure_kind", str), ("truncated", int), ("cached", int)):
        db["decisions"].add_column(column, kind)
    db["decisions"].add_column("cost_saved", float)
    db["instances"].add_column("failure_kind", str)
    db["llm_calls"].create_index(["model"], if_not_exists=True)
    db["llm_calls"].create_index(["created_at"], if_not_exists=True)


def _schema_v5(db: sqlite_utils.Database) -> None:
    """Requests handed to a batch engine, so that its answers can be checked and cached."""
    db["batch_requests"].create(
        {"key": str, "run_id": str, "model": str, "api_base": str, "request": str,
         "round": str, "batch_id": str, "attempts": int, "created_at": str},
        pk="key",
    )  # fmt: skip
    db["batches"].create(
        {"id": str, "run_id": str, "model": str, "api_base": str, "round": str, "status": str,
         "total": int, "completed": int, "failed": int, "input_file": str, "output_file": str,
         "error_file": str, "expected_at": str, "created_at": str, "updated_at": str},
        pk="id",
    )  # fmt: skip
    db["batches"].create_index(["run_id", "status"])
    # where an answer came from: NULL (an interactive call) or "batch" (charged at batch prices)
    db["llm_calls"].add_column("source", str)


def _schema_v6(db: sqlite_utils.Database) -> None:
    """Study runs: one row per model call (a turn of a conversation), and the study sources
    runs were planned from (so a run resumes with the words it started with)."""
    db["study_sources"].create(
        {"hash": str, "study": str, "source": str, "created_at": str}, pk="hash"
    )
    db["study_calls"].create(
        {"id": str, "run_id": str, "conversation": str, "turn": int, "role": str, "test": str,
         "bias": str, "condition": str, "model": str, "temperature": float, "variant": str,
         "mitigation": str, "slot": int, "ord": int, "attempt": int, "presented": str,
         "status_quo_at": int, "prompt": str, "original": str, "response": str, "value": str,
         "status": str, "error": str, "failure_kind": str, "cache_key": str, "created_at": str},
        pk="id",
    )  # fmt: skip
    db["study_calls"].create_index(["run_id", "test", "model"])
    db["study_calls"].create_index(["conversation", "turn"])


MIGRATIONS = {
    1: _schema_v1,
    2: _schema_v2,
    3: _schema_v3,
    4: _schema_v4,
    5: _schema_v5,
    6: _schema_v6,
}


_PROVIDER_TEXTS = (
    "error",
    "control_answer",
    "treatment_answer",
    "control_extraction",
    "treatment_extraction",
)


_STUDY_TEXTS = ("error", "response")
_INSTANCE_TEXTS = ("error", "control", "treatment", "insertions", "values_json")


LEASE_STALE_S = 60.0  # a worker beats every ~0.5 s; a minute of silence means it is gone
HOST = socket.gethostname()


def lease_owner(pid: int, token: str) -> str:
    return f"{HOST}:{pid}:{token}"


def lease_alive(owner: str, heartbeat_at: str | None, stale_after: float) -> bool:
    """Whether the worker named by a lease is still working on its run."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host == HOST and pid_text.isdigit() and not pid_alive(int(pid_text)):
        return False
    if not heartbeat_at:
        return False
    age = (datetime.now(UTC) - parse_time(heartbeat_at)).total_seconds()
    return age < stale_after


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is not working on anything.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class Store(ExecutionQueries):
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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ schema

    @property
    def schema_version(self) -> int:
        if "meta" not in self.db.table_names():
            return 0
        row = self.db.execute("select value from meta where key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

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
            for version in range(self.schema_version + 1, SCHEMA_VERSION + 1):
                if "meta" not in self.db.table_names():
                    self.db["meta"].create({"key": str, "value": str}, pk="key")
                MIGRATIONS[version](self.db)
                self.db["meta"].upsert({"key": "schema_version", "value": str(version)}, pk="key")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Store]:
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

    # ------------------------------------------------------------------ writes

    def save_test_case(self, case_id: str, name: str, content_hash: str, source: str) -> None:
        with self.atomic():
            self.db["test_cases"].insert(
                {
                    "hash": content_hash,
                    "id": case_id,
                    "name": name,
                    "source": source,
                    "created_at": now(),
                },
                pk="hash",
                ignore=True,
            )

    def save_scenarios(self, scenarios: Iterable[Mapping[str, Any]]) -> None:
        with self.atomic():
            self.db["scenarios"].insert_all(scenarios, pk="id", replace=True)

    def save_instances(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert instances; an existing id keeps its row (instances are immutable once made)."""
        if rows:
            clean = redactor()
            with self.atomic():
                self.db["instances"].insert_all(
                    [
                        {**r, **{k: clean(r.get(k)) for k in _INSTANCE_TEXTS}, "created_at": now()}
                        for r in rows
                    ],
                    pk="id",
                    ignore=True,
                )

    def save_study_calls(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Turns of study conversations; a turn asked again replaces its earlier row.
        Provider texts are redacted, as in `save_decisions`."""
        if rows:
            clean, stamp = redactor(), now()
            self.db["study_calls"].insert_all(
                [{**r, **{k: clean(r.get(k)) for k in _STUDY_TEXTS}, "created_at": stamp}
                 for r in rows],
                pk="id",
                replace=True,
            )  # fmt: skip

    def save_study_source(self, digest: str, study: str, source: str) -> None:
        self.db["study_sources"].insert(
            {"hash": digest, "study": study, "source": source, "created_at": now()},
            pk="hash",
            ignore=True,
        )

    def save_decisions(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Upsert decisions by id: a resumed run fills the gaps and never duplicates.

        Texts that came from a provider are redacted too: a careless endpoint may echo a key.
        """
        clean = redactor()
        with self.atomic():
            if rows:
                self.db["decisions"].insert_all(
                    [
                        {**r, **{k: clean(r.get(k)) for k in _PROVIDER_TEXTS}, "created_at": now()}
                        for r in rows
                    ],
                    pk="id",
                    replace=True,
                )

    def put_llm_calls(self, rows: Sequence[Mapping[str, Any]]) -> None:
        clean = redactor()
        with self.atomic():
            if rows:
                self.db["llm_calls"].insert_all(
                    [
                        {
                            **r,
                            "response": clean(r["response"]),
                            "request": clean(r.get("request")),
                            "created_at": now(),
                        }
                        for r in rows
                    ],
                    pk="key",
                    replace=True,
                )

    def get_llm_call(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "select response, prompt_tokens, completion_tokens, cost, latency_s, source "
            "from llm_calls where key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        names = ("text", "prompt_tokens", "completion_tokens", "cost", "latency_s", "source")
        return dict(zip(names, row, strict=True))

    def create_run(
        self,
        run_id: str,
        spec: Mapping[str, Any],
        planned: int,
        name: str = "",
        spec_version: int = 1,
    ) -> bool:
        """Create a run, or leave an existing one with the same id (same spec) as it is.

        Returns True when the run is new."""
        with self.atomic():
            before = self.db.conn.total_changes
            self.db["runs"].insert(
                {
                    "id": run_id,
                    "name": name,
                    "spec": dumps(spec),
                    "spec_version": spec_version,
                    "status": "planned",
                    "planned": planned,
                    "done": 0,
                    "failed": 0,
                    "tokens": 0,
                    "cost": 0.0,
                    "cost_saved": 0.0,
                    "duration_s": 0.0,
                    "created_at": now(),
                    "cancel_requested": 0,
                },
                pk="id",
                ignore=True,
            )
            return self.db.conn.total_changes > before

    def update_run(self, run_id: str, **fields: Any) -> None:
        with self.atomic():
            if "error" in fields:
                fields["error"] = redact(fields["error"])
            self.db["runs"].update(run_id, fields)

    def refresh_run_counts(self, run_id: str) -> dict[str, Any]:
        """Recount pairs from decisions: counts are derived, so they can never drift."""
        done, failed = self.db.execute(
            "select count(*), coalesce(sum(status = 'failed'), 0) from decisions where run_id = ?",
            (run_id,),
        ).fetchone()
        fields = {"done": done, "failed": failed}
        self.db["runs"].update(run_id, fields)
        return fields

    def failed_decisions(self, run_id: str) -> dict[str, str]:
        """Failed decision ids of a run -> failure kind ('transient' for rows made before
        failures had kinds: asking again is how to find out)."""
        return {
            r[0]: r[1] or "transient"
            for r in self.db.execute(
                "select id, failure_kind from decisions where run_id = ? and status = 'failed'",
                (run_id,),
            )
        }

    def run_failure_kinds(self, run_id: str) -> dict[str, int]:
        rows = self.db.execute(
            "select coalesce(failure_kind, 'transient'), count(*) from decisions "
            "where run_id = ? and status = 'failed' group by 1",
            (run_id,),
        ).fetchall()
        return {kind: n for kind, n in rows}

    def forget_failed_instances(self, ids: Sequence[str]) -> None:
        """Delete failed instances among `ids`, so that a retry generates them afresh."""
        with self.atomic():
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                self.db.execute(
                    f"delete from instances where status = 'failed' and id in ({marks})", chunk
                )

    # ---- the worker lease: one process works on a run at a time

    def claim_run(
        self, run_id: str, owner: str, pid: int, stale_after: float
    ) -> dict[str, Any] | None:
        """Take the run's lease for `owner` (in one BEGIN IMMEDIATE transaction).

        Refused (the current holder's row is returned) while another owner holds it and is
        alive: on this host, its process exists and its heartbeat is younger than
        `stale_after` seconds; on another host, the heartbeat alone decides. A killed
        worker's lease is taken over at once on the same host.
        """
        with self.atomic():
            row = self.run(run_id)
            if row is None:
                raise KeyError(f"no run {run_id} in {self.path}")
            holder = row.get("lease_owner")
            if (
                holder
                and holder != owner
                and lease_alive(holder, row.get("heartbeat_at"), stale_after)
            ):
                return row
            self.db["runs"].update(
                run_id, {"lease_owner": owner, "pid": pid, "heartbeat_at": now()}
            )
        return None

    def release_run(self, run_id: str, owner: str) -> None:
        with self.atomic():
            self.db.execute(
                "update runs set lease_owner = null where id = ? and lease_owner = ?",
                (run_id, owner),
            )

    def heartbeat_run(self, run_id: str, owner: str, **increments: float) -> dict[str, Any] | None:
        """Beat the lease and add `increments` to the run's counters (cost, tokens, duration).

        Returns the run's row, or None when `owner` no longer holds the lease (a worker that
        stalled past its lease must stop: another has taken the run over)."""
        sets = ", ".join(f"{k} = coalesce({k}, 0) + ?" for k in increments)
        with self.atomic():
            cursor = self.db.execute(
                f"update runs set heartbeat_at = ?{', ' + sets if sets else ''} "
                "where id = ? and lease_owner = ?",
                (now(), *increments.values(), run_id, owner),
            )
            if cursor.rowcount == 0:
                return None
        return self.run(run_id)

    def request_cancel(self, run_id: str) -> None:
        """Ask the run's worker to stop. A worker that holds the run, or is starting to (its
        process exists but has not claimed the run yet), sees the request within a second;
        a run that no worker holds is marked cancelled at once."""
        with self.atomic():
            row = self.run(run_id)
            if row is None:
                return
            holder = row.get("lease_owner")
            working = bool(holder) and lease_alive(holder, row.get("heartbeat_at"), LEASE_STALE_S)
            starting = not working and row["status"] != "running" and pid_alive(row.get("pid"))
            if working or starting:
                self.db["runs"].update(run_id, {"cancel_requested": 1})
            elif row["status"] in ("planned", "running"):
                self.db["runs"].update(
                    run_id, {"status": "cancelled", "lease_owner": None, "finished_at": now()}
                )

    # ---- the response cache

    def save_batch_requests(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self.atomic():
            if rows:
                self.db["batch_requests"].insert_all(
                    [{**r, "created_at": now()} for r in rows], pk="key", replace=True
                )

    def save_batch(self, row: Mapping[str, Any]) -> None:
        """Insert or update a provider batch (by its id)."""
        with self.atomic():
            self.db["batches"].upsert({**row, "updated_at": now()}, pk="id")

    def batches(self, run_id: str | None = None, open_only: bool = False) -> list[dict[str, Any]]:
        clauses, params = [], []
        if run_id:
            clauses.append("run_id = ?")
            params.append(run_id)
        if open_only:
            clauses.append("status in ('validating', 'in_progress', 'finalizing', 'cancelling')")
        where = f" where {' and '.join(clauses)}" if clauses else ""
        return self.query(f"select * from batches{where} order by created_at", params)

    def add_run_cost(self, run_id: str, cost: float, tokens: int) -> None:
        with self.atomic():
            self.db.execute(
                "update runs set cost = coalesce(cost, 0) + ?, tokens = coalesce(tokens, 0) + ? "
                "where id = ?",
                (cost, tokens, run_id),
            )

    def batch_requests(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Exported batch requests by key (those among `keys`)."""
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(keys), 500):
            chunk = list(keys[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.query(f"select * from batch_requests where key in ({marks})", chunk):
                found[row["key"]] = row
        return found

    def cache_stats(self) -> list[dict[str, Any]]:
        """Per model: cached answers, tokens, what they cost, oldest and newest."""
        return self.query(
            "select model, count(*) as answers, "
            "coalesce(sum(prompt_tokens + completion_tokens), 0) as tokens, "
            "round(coalesce(sum(cost), 0), 6) as cost, min(created_at) as oldest, "
            "max(created_at) as newest from llm_calls group by model order by model"
        )

    def prune_cache(self, older_than: str | None = None, model: str | None = None) -> int:
        """Delete cached answers created before `older_than` (ISO time) and/or of `model`."""
        clauses, params = [], []
        if older_than:
            clauses.append("created_at < ?")
            params.append(older_than)
        if model:
            clauses.append("model = ?")
            params.append(model)
        where = f" where {' and '.join(clauses)}" if clauses else ""
        with self.atomic():
            return self.db.execute(f"delete from llm_calls{where}", params).rowcount

    def save_dataset(
        self, name: str, kind: str, source: str, rows: int, meta: Mapping[str, Any]
    ) -> None:
        with self.atomic():
            self.db["datasets"].insert(
                {
                    "name": name,
                    "kind": kind,
                    "source": source,
                    "rows": rows,
                    "meta": dumps(meta),
                    "imported_at": now(),
                },
                pk="name",
                replace=True,
            )

    # ------------------------------------------------------------------ reads

    def query(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[dict[str, Any]]:
        """Read-only convenience for callers (analysis, UI): rows as dicts."""
        cursor = self.db.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("select * from runs where id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(self) -> list[dict[str, Any]]:
        return self.query("select * from runs order by created_at desc")

    def existing_instance_ids(self, ids: Iterable[str]) -> set[str]:
        return self._existing("instances", ids)

    def existing_decision_ids(self, run_id: str) -> set[str]:
        return {
            r[0] for r in self.db.execute("select id from decisions where run_id = ?", (run_id,))
        }

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

    def instances(
        self, ids: Iterable[str] | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        if dataset is not None:
            return self.query(
                "select * from instances where dataset = ? order by rowid", (dataset,)
            )
        ids = list(ids or [])
        rows: list[dict[str, Any]] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows += self.query(
                f"select * from instances where id in ({','.join('?' * len(chunk))})", chunk
            )
        return rows

    def results(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """Bias x model: mean score, scored pairs (n) and failed pairs."""
        where, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, "
            "avg(case when d.status = 'ok' then d.score end) as mean, "
            "sum(d.status = 'ok') as n, sum(d.status = 'failed') as failures "
            f"from decisions d {where} group by d.test_case, d.model order by d.test_case, d.model",
            params,
        )

    def scores(self, run_id: str | None = None, dataset: str | None = None) -> list[dict[str, Any]]:
        """One row per decision with its bias, model, status and score (for analysis)."""
        where, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, d.status as status, d.score as score "
            f"from decisions d {where}",
            params,
        )

    def pairs(
        self,
        bias: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
        dataset: str | None = None,
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Paired responses with their instance texts, for reading what a model actually said."""
        where, params = self._pair_filter(bias, model, run_id, dataset, search)
        sql = (
            "select d.*, i.scenario, i.variant, i.control as control_template, "
            "i.treatment as treatment_template, i.control as control_half, "
            "i.treatment as treatment_half, i.metric, i.n_options, i.dataset "
            "from decisions d join instances i on i.id = d.instance_id"
            f"{where} order by d.rowid limit ? offset ?"
        )
        return self.query(sql, [*params, limit, offset])

    def _pair_filter(
        self,
        bias: str | None,
        model: str | None,
        run_id: str | None,
        dataset: str | None,
        search: str | None,
    ) -> tuple[str, list[Any]]:
        """The WHERE clause shared by `pairs` and `pair_count` (search needs `i` joined)."""
        where, params = self._filter(run_id, dataset)
        clauses = [where.removeprefix("where ")] if where else []
        for column, value in (("d.test_case", bias), ("d.model", model)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if search:
            clauses.append(
                "(i.control like ? or i.treatment like ? or d.control_answer like ? "
                "or d.treatment_answer like ? or i.scenario like ?)"
            )
            params += [f"%{search}%"] * 5
        return (" where " + " and ".join(clauses) if clauses else ""), params

    @staticmethod
    def _filter(run_id: str | None, dataset: str | None) -> tuple[str, list[Any]]:
        if run_id:
            return "where d.run_id = ?", [run_id]
        if dataset:
            return (
                "where d.instance_id in (select id from instances where dataset = ?)",
                [dataset],
            )
        return "", []

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

    def counts(self) -> dict[str, int]:
        return {t: self.db[t].count for t in self.db.table_names()}

    def wait_for(self, run_id: str, timeout: float = 60.0) -> dict[str, Any] | None:
        """Poll until a run leaves 'planned'/'running' (used by tests and scripts)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run and run["status"] not in ("planned", "running"):
                return run
            time.sleep(0.1)
        return self.run(run_id)

    # ---- datasets
    # Imports write hundreds of thousands of rows: one prepared statement per table and
    # `executemany` inside the caller's transaction, never a query per row.

    _BULK_TABLES = ("instances", "decisions")

    def insert_rows(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        replace: bool = False,
    ) -> int:
        """Bulk insert tuples in `columns` order (call inside `atomic()` for all-or-nothing).

        Existing ids are kept (`insert or ignore`) unless `replace`; returns rows written.
        """
        if table not in self._BULK_TABLES:
            raise ValueError(f"bulk inserts go to {self._BULK_TABLES}, not {table!r}")
        known = set(self.db[table].columns_dict)
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise ValueError(f"{table} has no column(s) {unknown}")
        verb = "insert or replace" if replace else "insert or ignore"
        sql = f"{verb} into {table} ({', '.join(columns)}) values ({', '.join('?' * len(columns))})"
        before = self.db.conn.total_changes
        self.db.conn.executemany(sql, rows)
        return self.db.conn.total_changes - before

    @contextlib.contextmanager
    def bulk_cache(self, mebibytes: int = 128) -> Iterator[None]:
        """A larger page cache while an import writes: inserts under random (hashed) keys
        touch index pages all over the file, and a small cache turns that into disk I/O."""
        old = int(self.db.execute("pragma cache_size").fetchone()[0])
        self.db.execute(f"pragma cache_size = {-int(mebibytes) * 1024}")
        try:
            yield
        finally:
            self.db.execute(f"pragma cache_size = {old}")

    def dataset(self, name: str) -> dict[str, Any] | None:
        rows = self.query("select * from datasets where name = ?", (name,))
        return rows[0] if rows else None

    def datasets(self) -> list[dict[str, Any]]:
        """Imported datasets, newest first, with their stored metadata decoded."""
        rows = self.query("select * from datasets order by imported_at desc")
        for row in rows:
            row["meta"] = json.loads(row["meta"] or "{}")
        return rows

    def delete_dataset(self, name: str, import_run_id: str) -> None:
        """Remove a dataset's instances, its imported decisions and its row (for --replace).

        Decisions of later runs on those instances stay: they belong to their runs.
        """
        with self.atomic():
            self.db.execute("delete from decisions where run_id = ?", (import_run_id,))
            self.db.execute("delete from instances where dataset = ?", (name,))
            self.db.execute("delete from datasets where name = ?", (name,))

    def dataset_bias_counts(self, name: str) -> list[dict[str, Any]]:
        return self.query(
            "select test_case as bias, count(*) as instances from instances "
            "where dataset = ? group by test_case order by test_case",
            (name,),
        )

    def dataset_instances(
        self,
        name: str,
        bias: str | None = None,
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """One page of a dataset's test cases (browsing 30,000 rows must not load them all)."""
        clauses, params = ["dataset = ?"], [name]
        if bias:
            clauses.append("test_case = ?")
            params.append(bias)
        if search:
            clauses.append("(control like ? or treatment like ? or scenario like ?)")
            params += [f"%{search}%"] * 3
        return self.query(
            f"select * from instances where {' and '.join(clauses)} "
            "order by rowid limit ? offset ?",
            [*params, limit, offset],
        )

    def dataset_unscorable(self, name: str) -> int:
        """Instances of a dataset whose metric parameters are unknown (published results only)."""
        row = self.db.execute(
            "select count(*) from instances where dataset = ? and metric is null", (name,)
        ).fetchone()
        return int(row[0])

    def iter_pairs(
        self,
        run_id: str | None = None,
        dataset: str | None = None,
        model: str | None = None,
        batch: int = 5000,
    ) -> Iterator[list[dict[str, Any]]]:
        """Decisions joined to their instances, in batches (keyset paging keeps memory flat)."""
        where, params = self._filter(run_id, dataset)
        clauses = [where.removeprefix("where ")] if where else []
        if model:
            clauses.append("d.model = ?")
            params.append(model)
        last = 0
        while True:
            rows = self.query(
                "select d.rowid as _rowid, d.*, i.dataset, i.scenario, i.variant, "
                "i.control as control_half, i.treatment as treatment_half, i.n_options, i.metric "
                "from decisions d join instances i on i.id = d.instance_id "
                f"where {' and '.join([*clauses, 'd.rowid > ?'])} order by d.rowid limit ?",
                [*params, last, batch],
            )
            if not rows:
                return
            last = rows[-1]["_rowid"]
            yield rows

    def iter_instances(self, dataset: str, batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
        last = 0
        while True:
            rows = self.query(
                "select rowid as _rowid, * from instances where dataset = ? and rowid > ? "
                "order by rowid limit ?",
                (dataset, last, batch),
            )
            if not rows:
                return
            last = rows[-1]["_rowid"]
            yield rows

    # ---- explore
    # The Explore page summarises up to hundreds of thousands of decisions on every filter
    # change: SQLite computes per-cell sufficient statistics in one pass (see
    # `cogbias.views.explore`), so no decision row has to travel into Python.

    def score_aggregates(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """Per bias x model x status: rows, and count, sum, sum of squares, sum of |x|, min
        and max of the scores. Grouping by status (rather than filtering inside each
        aggregate) follows the covering index's column order, so SQLite never sorts."""
        where, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, d.status as status, "
            "count(*) as rows, count(d.score) as n, total(d.score) as s1, "
            "total(d.score * d.score) as s2, total(abs(d.score)) as sabs, "
            "min(d.score) as smin, max(d.score) as smax "
            f"from decisions d {where} group by d.test_case, d.model, d.status",
            params,
        )

    def pair_count(
        self,
        bias: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
        dataset: str | None = None,
        search: str | None = None,
    ) -> int:
        """How many rows `pairs` would return without a limit (for paging)."""
        where, params = self._pair_filter(bias, model, run_id, dataset, search)
        join = " join instances i on i.id = d.instance_id" if search else ""
        sql = f"select count(*) from decisions d{join}{where}"
        return int(self.db.execute(sql, params).fetchone()[0])

    # ---- deleting a run or a dataset (`cogbias.runs.deletion` plans and confirms; this executes)
    # A run's instances are shared by id with any other run that drew the same pairs, so only
    # instances no other decision uses (and no dataset owns) go with the run.

    _RUN_ONLY_INSTANCES = (
        "select id from instances where dataset is null and id in "
        "(select instance_id from decisions where run_id = :run) and id not in "
        "(select instance_id from decisions where run_id != :run)"
    )

    def run_footprint(self, run_id: str) -> dict[str, int]:
        """What deleting a run removes: its decisions (a study run's model calls) and the
        instances only it uses."""
        decisions = self.db.execute(
            "select (select count(*) from decisions where run_id = :run) "
            "+ (select count(*) from study_calls where run_id = :run)",
            {"run": run_id},
        ).fetchone()[0]
        instances = self.db.execute(
            f"select count(*) from ({self._RUN_ONLY_INSTANCES})", {"run": run_id}
        ).fetchone()[0]
        return {"decisions": int(decisions), "instances": int(instances)}

    def delete_run(self, run_id: str) -> None:
        """Remove a run, its decisions, its batch requests and the instances only it used,
        in one transaction."""
        with self.atomic():
            self.db.execute(
                f"delete from instances where id in ({self._RUN_ONLY_INSTANCES})", {"run": run_id}
            )
            self.db.execute("delete from decisions where run_id = ?", (run_id,))
            self.db.execute("delete from batch_requests where run_id = ?", (run_id,))
            self.db.execute("delete from study_calls where run_id = ?", (run_id,))
            self.db.execute("delete from runs where id = ?", (run_id,))

    def dataset_footprint(self, name: str) -> dict[str, Any]:
        """What deleting a dataset removes: its instances, every decision on them (published
        and from runs) and the runs whose decisions all lie on it."""
        instances = self.db.execute(
            "select count(*) from instances where dataset = ?", (name,)
        ).fetchone()[0]
        decisions = self.db.execute(
            "select count(*) from decisions where instance_id in "
            "(select id from instances where dataset = ?)",
            (name,),
        ).fetchone()[0]
        return {
            "instances": int(instances),
            "decisions": int(decisions),
            "runs": self._dataset_runs(name),
        }

    def _dataset_runs(self, name: str) -> list[str]:
        """Runs with decisions on this dataset and on nothing else."""
        rows = self.db.execute(
            "select r.id from runs r where exists (select 1 from decisions d join instances i "
            "on i.id = d.instance_id where d.run_id = r.id and i.dataset = ?) and not exists "
            "(select 1 from decisions d join instances i on i.id = d.instance_id "
            "where d.run_id = r.id and i.dataset is not ?) order by r.created_at",
            (name, name),
        ).fetchall()
        return [r[0] for r in rows]

    def remove_dataset(self, name: str) -> None:
        """Remove a dataset with its instances, all decisions on them and its own runs."""
        with self.atomic():
            runs = self._dataset_runs(name)
            self.db.execute(
                "delete from decisions where instance_id in "
                "(select id from instances where dataset = ?)",
                (name,),
            )
            self.db.execute("delete from instances where dataset = ?", (name,))
            self.db.execute("delete from datasets where name = ?", (name,))
            for run_id in runs:
                self.db.execute("delete from batch_requests where run_id = ?", (run_id,))
                self.db.execute("delete from runs where id = ?", (run_id,))

    # ---- comparing two models on the same instances (`analysis.compare_models`)

    def paired_scores(
        self,
        model_a: str,
        model_b: str,
        run_id: str | None = None,
        dataset: str | None = None,
    ) -> list[dict[str, Any]]:
        """Per instance both models scored: bias, instance_id, score_a, score_b.

        A model with several scored decisions on one instance (repeats, or two runs) counts
        with their mean, so each instance is one pair in the paired test.
        """
        where, params = self._filter(run_id, dataset)
        clauses = [where.removeprefix("where ")] if where else []
        clauses += ["d.status = 'ok'", "d.score is not null", "d.model in (?, ?)"]
        return self.query(
            "with s as (select d.test_case as bias, d.instance_id, d.model, avg(d.score) as score "
            f"from decisions d where {' and '.join(clauses)} "
            "group by d.test_case, d.instance_id, d.model) "
            "select a.bias, a.instance_id, a.score as score_a, b.score as score_b "
            "from s a join s b on b.instance_id = a.instance_id and b.bias = a.bias "
            "where a.model = ? and b.model = ? order by a.bias, a.instance_id",
            [*params, model_a, model_b, model_a, model_b],
        )

    def instance_pairs(self, instance_id: str, models: Sequence[str]) -> list[dict[str, Any]]:
        """Every decision of these models on one instance, joined like `pairs` rows."""
        marks = ",".join("?" * len(models))
        return self.query(
            "select d.*, i.scenario, i.control as control_template, "
            "i.treatment as treatment_template, i.metric, i.n_options, i.dataset "
            "from decisions d join instances i on i.id = d.instance_id "
            f"where d.instance_id = ? and d.model in ({marks}) order by d.rowid",
            [instance_id, *models],
        )


def describe_error(path: str | Path, exc: sqlite3.Error) -> str:
    """What went wrong with the database at `path`, in words, with what to do."""
    text = str(exc)
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
