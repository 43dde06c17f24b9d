"""Runs and their worker lease: create, update, count, claim, beat, release, cancel, delete."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from cogbias.core.records import DecisionStatus, dumps
from cogbias.core.redact import redact
from cogbias.core.run_record import ACTIVE, RunRows, RunStatus, SharedRows
from cogbias.store.connection import StoreBase, now, parse_time

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


class RunsRepo(StoreBase):
    """The `runs` table: a run's row, its counters and its lease."""

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
                    "status": RunStatus.PLANNED,
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

    def run_abstained(self, run_id: str) -> int:
        """How many of a run's pairs abstained (`DecisionStatus.ABSTAINED`: a half's samples left
        undecided by the run's reducer), counted apart from its failures."""
        row = self.db.execute(
            "select count(*) from decisions where run_id = ? and status = ?",
            (run_id, DecisionStatus.ABSTAINED),
        ).fetchone()
        return int(row[0])

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
        """Give up the lease. The process id goes with it: a stored pid means a worker is on
        the run or starting on it (`request_cancel`), and the process that ended a run (the
        CLI on to its next run, the app, a notebook) may live on long after."""
        with self.atomic():
            self.db.execute(
                "update runs set lease_owner = null, pid = null where id = ? and lease_owner = ?",
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

    def request_cancel(self, run_id: str) -> str | None:
        """Ask the run's worker to stop. A worker that holds the run, or is starting to (its
        process exists but has not claimed the run yet), sees the request within a second;
        a run that no worker holds is marked cancelled at once.

        A run that has ended is left as it is (nothing is requested of a later resume), also
        while its worker is still letting go of it: its end was recorded after its last
        heartbeat.

        Returns what happened, for the caller to say: "requested" (a worker will stop),
        "marked" (no worker was on it: marked cancelled at once), the status of a run that
        had ended already ("done", "cancelled", ...), or None when there is no such run."""
        with self.atomic():
            row = self.run(run_id)
            if row is None:
                return None
            holder = row.get("lease_owner")
            held = bool(holder) and lease_alive(holder, row.get("heartbeat_at"), LEASE_STALE_S)
            ended = row["status"] not in ACTIVE and (row.get("finished_at") or "") >= (
                row.get("heartbeat_at") or ""
            )
            working = held and not ended
            starting = not held and row["status"] != RunStatus.RUNNING and pid_alive(row.get("pid"))
            if working or starting:
                self.db["runs"].update(run_id, {"cancel_requested": 1})
                return "requested"
            if row["status"] in ACTIVE:
                self.db["runs"].update(
                    run_id,
                    {"status": RunStatus.CANCELLED, "lease_owner": None, "finished_at": now()},
                )
                return "marked"
            return str(row["status"])

    def add_run_cost(self, run_id: str, cost: float, tokens: int) -> None:
        with self.atomic():
            self.db.execute(
                "update runs set cost = coalesce(cost, 0) + ?, tokens = coalesce(tokens, 0) + ? "
                "where id = ?",
                (cost, tokens, run_id),
            )

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("select * from runs where id = ?", (run_id,))
        return rows[0] if rows else None

    def has_runs(self) -> bool:
        return self.db.execute("select 1 from runs limit 1").fetchone() is not None

    def runs(self) -> list[dict[str, Any]]:
        return self.query("select * from runs order by created_at desc")

    def wait_for(self, run_id: str, timeout: float = 60.0) -> dict[str, Any] | None:
        """Poll until a run leaves 'planned'/'running' (used by tests and scripts)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run and run["status"] not in ACTIVE:
                return run
            time.sleep(0.1)
        return self.run(run_id)

    # ---- deleting a run or a dataset (`cogbias.runs.deletion` plans and confirms; this executes)
    # What a run's rows are is its kind's to say (`RunRows`, `SharedRows`): this deletes what
    # it is told, so a new kind's table is cleaned without an edit here. Shared rows (an
    # instance two runs drew) go only when no other run's rows point at them.

    def run_footprint(
        self, run_id: str, owned: Sequence[RunRows], shared: Sequence[SharedRows]
    ) -> dict[str, int]:
        """What deleting a run removes: its results rows (of the `owned` tables marked as
        results) and the `shared` rows only it uses."""
        results = sum(
            self.db.execute(
                f"select count(*) from {_name(rows.table)} where {_name(rows.column)} = ?",
                (run_id,),
            ).fetchone()[0]
            for rows in owned
            if rows.results and self._has_table(rows.table)
        )
        only = sum(
            self.db.execute(
                f"select count(*) from ({_only_this_run(rows)})", {"run": run_id}
            ).fetchone()[0]
            for rows in self._present(shared)
        )
        return {"decisions": int(results), "instances": int(only)}

    def delete_run(
        self, run_id: str, owned: Sequence[RunRows], shared: Sequence[SharedRows] = ()
    ) -> None:
        """Remove a run, the rows of its `owned` tables and the `shared` rows only it used, in
        one transaction (shared rows first: which are only its is read from its rows)."""
        with self.atomic():
            for rows in self._present(shared):
                self.db.execute(
                    f"delete from {_name(rows.table)} where {_name(rows.key)} in "
                    f"({_only_this_run(rows)})",
                    {"run": run_id},
                )
            for rows in owned:
                if self._has_table(rows.table):
                    self.db.execute(
                        f"delete from {_name(rows.table)} where {_name(rows.column)} = ?",
                        (run_id,),
                    )
            self.db.execute("delete from runs where id = ?", (run_id,))

    def _present(self, shared: Sequence[SharedRows]) -> list[SharedRows]:
        """`shared` as this database holds it: only its tables, and refs, that exist."""
        found = []
        for rows in shared:
            refs = tuple(ref for ref in rows.refs if self._has_table(ref[0]))
            if refs and self._has_table(rows.table):
                found.append(replace(rows, refs=refs))
        return found

    def _has_table(self, table: str) -> bool:
        """Whether `table` exists (a plugin kind's table before its first row is stored)."""
        return self.db[_name(table)].exists()


def _name(identifier: str) -> str:
    """A table or column name a kind declared, checked before it is put into SQL."""
    if not identifier.isidentifier():
        raise ValueError(f"not a table or column name: {identifier!r}")
    return identifier


def _only_this_run(rows: SharedRows) -> str:
    """SQL selecting the keys of `rows` that run `:run`'s rows point at and no other run's
    do (and that nothing keeps, see `SharedRows.kept_if_set`)."""
    key, refs = _name(rows.key), [(_name(t), _name(c)) for t, c in rows.refs]
    mine = " union ".join(f"select {c} from {t} where run_id = :run" for t, c in refs)
    others = " union ".join(
        f"select {c} from {t} where run_id != :run and {c} is not null" for t, c in refs
    )
    kept = f"{_name(rows.kept_if_set)} is null and " if rows.kept_if_set else ""
    return (
        f"select {key} from {_name(rows.table)} where {kept}{key} in ({mine}) "
        f"and {key} not in ({others})"
    )
