"""A stored run as a record: its status, its parsed spec and (once resolved) its kind.

The `runs` table keeps a run's spec as JSON text and its status as a word. Read from here,
every reader sees the same thing: `Run.from_row` parses the spec once, and the runs layer
(`cogbias.runs.kinds.record`) resolves the run's kind once, so no page or command parses a
spec or asks for a kind again to learn what a run is. What "active" and "resumable" mean is
said here, once (`ACTIVE`, `RESUMABLE`), for the store, the executor, deletion and the pages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Protocol


class RunStatus(StrEnum):
    """A run's status; the values are the words stored in `runs.status`."""

    PLANNED = "planned"  # stored, no worker has begun it
    RUNNING = "running"  # a worker holds it
    DONE = "done"
    INCOMPLETE = "incomplete"  # worked through, with transient failures left
    FAILED = "failed"  # a fatal error stopped it
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # its worker died or lost the lease
    # Never stored: `run_summaries` calls a running run whose cancel was asked "cancelling".
    CANCELLING = "cancelling"


# A worker is on it (a stored row is never "cancelling"; a summary's is, and its worker is
# still writing) ...
WORKING: frozenset[str] = frozenset({RunStatus.RUNNING, RunStatus.CANCELLING})
# ... or about to be: not to be deleted, started again or resumed.
ACTIVE: frozenset[str] = WORKING | {RunStatus.PLANNED}
# Ended before its work was all done: resuming it continues from what is stored.
RESUMABLE: tuple[str, ...] = (
    RunStatus.CANCELLED,
    RunStatus.INTERRUPTED,
    RunStatus.FAILED,
    RunStatus.INCOMPLETE,
)


class ResultsPage(StrEnum):
    """The page that shows a kind's results (a kind with none is read by export and report
    alone); the Run page's "Open in …" button goes there."""

    EXPLORE = "explore"  # pairs scored per bias × model: Explore, Compare, `cogbias analyze`
    STUDIES = "studies"  # a study's cells, pivots, conversations and the humans beside them
    CLASS = "class"  # a class session's answers: the class, the humans and the models beside


@dataclass(frozen=True)
class RunRows:
    """The rows of `table` that are one run's: those whose `column` holds its id. Deleting
    the run deletes them; `results` rows are what a deletion counts (its decisions, turns)."""

    table: str
    column: str = "run_id"
    results: bool = True


@dataclass(frozen=True)
class SharedRows:
    """Rows of `table` that a run's rows point at by `key` and that other runs may share (an
    instance two runs drew): `refs` are the (table, column) pairs of run rows (keyed by
    `run_id`) that point at them. Deleting a run deletes the ones only it points at, unless
    `kept_if_set` (a column: a dataset owns the row) holds a value."""

    table: str
    key: str
    refs: tuple[tuple[str, str], ...]
    kept_if_set: str | None = None


class KindInfo(Protocol):
    """What a record says of its kind (a `cogbias.runs.work.RunKind` satisfies it)."""

    name: str
    unit_name: str
    page: ResultsPage | None


@dataclass(frozen=True)
class Run:
    """One row of the `runs` table, its spec parsed; `kind` is set by `runs.kinds.record`."""

    id: str
    name: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    spec_readable: bool = True  # False: the stored spec was not a JSON object (shown as {})
    spec_version: int | None = None
    status: str = RunStatus.PLANNED
    planned: int = 0
    done: int = 0
    failed: int = 0
    tokens: int = 0
    cost: float | None = None
    cost_saved: float | None = None
    duration_s: float | None = None
    generated: int | None = None
    to_generate: int | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    heartbeat_at: str | None = None
    pid: int | None = None
    lease_owner: str | None = None
    cancel_requested: int | None = None
    waiting: int | None = None
    wait_reason: str | None = None
    error: str | None = None
    kind: KindInfo | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Run:
        """A run from its stored row (unknown columns are ignored; the spec is parsed once)."""
        spec, readable = parsed_spec(row.get("spec"))
        names = {f.name for f in fields(cls)} - {"spec", "spec_readable", "kind"}
        values = {k: row[k] for k in names if k in row and row[k] is not None}
        return cls(spec=spec, spec_readable=readable, **values)

    @property
    def page(self) -> ResultsPage | None:
        """The page that shows this run's results (its kind's), or None."""
        return self.kind.page if self.kind is not None else None

    @property
    def active(self) -> bool:
        """Whether a worker is on the run or about to be (see `ACTIVE`)."""
        return self.status in ACTIVE


def parsed_spec(spec: Any) -> tuple[dict[str, Any], bool]:
    """(a stored spec as a dict, whether it could be read): `{}` for none or for text that is
    not a JSON object, which is then unreadable (False)."""
    if spec is None or spec == "":
        return {}, True
    if isinstance(spec, Mapping):
        return dict(spec), True
    try:
        data = json.loads(spec)
    except (TypeError, ValueError):
        return {}, False
    return (data, True) if isinstance(data, dict) else ({}, False)
