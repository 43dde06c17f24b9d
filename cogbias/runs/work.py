"""What the executor hands a kind's work, and what a kind must offer: the writer that commits
finished rows, the bounded pool units are asked in, the `Job` and the `RunKind` contract.

These sit below both the executor and the kinds, so a kind module imports them without
importing the executor that drives it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from cogbias.core.run_record import ResultsPage, Run, RunRows, RunStatus, SharedRows
from cogbias.runs.read_side import ExportTable
from cogbias.store.buffered_cache import BufferedCache

if TYPE_CHECKING:
    import pandas as pd

    from cogbias.llm import LLMClient
    from cogbias.store import Store

FLUSH_SECONDS = 0.05
FLUSH_ROWS = 256
IDLE_CHECK_SECONDS = 0.2  # how often an idle worker looks for a cancel request
DB_WAIT_LIMIT_S = 600.0  # a worker waits this long for another process's long transaction


@dataclass
class LiveRun:
    """A run while a worker is on it: the counters its writer commits with every batch and a
    progress view shows (`Progress` is handed it after each commit). A kind's work counts
    into it (`job.writer.run.done += 1`); once the run has ended, the executor returns the
    stored `Run` (`record()` is the same run, read from here, should the store fail)."""

    id: str
    planned: int
    unit: str  # what a unit is called ("pairs", "units"): the kind's `unit_name`
    status: str = RunStatus.RUNNING
    done: int = 0
    failed: int = 0
    generated: int = 0  # instances generated so far, of `to_generate`, before any is decided
    to_generate: int = 0
    waiting: int = 0  # calls waiting to be retried, and why
    wait_reason: str = ""
    db_wait: bool = False  # waiting for another process's long transaction
    cost: float = 0.0
    cost_saved: float = 0.0
    error: str | None = None

    def record(self) -> Run:
        """The run as a `Run` record (its stored fields that a worker keeps live)."""
        counters = {f.name: getattr(self, f.name) for f in fields(self)}
        del counters["unit"], counters["db_wait"]
        return Run(**counters)


Progress = Callable[[LiveRun], None]


class Writer:
    """Collects finished rows, commits them every FLUSH_SECONDS, and keeps the lease.

    Rows are kept by table and stored by the run's kind (`save`), with the cache's new
    answers and the run's counters, in one transaction. A commit that finds the database
    locked by another process's long transaction (an import, say) keeps its rows and tries
    again on the next tick; any other failure to write (a full disk) stops the run at once:
    no further commit is tried until the run ends (one last attempt), so a full disk is
    reported within a tick, not after re-writing an ever-growing buffer on every row. The
    run then ends `failed` with the error and what to do; what was committed stays.
    """

    def __init__(
        self,
        store: Store,
        run: LiveRun,
        owner: str,
        caches: list[BufferedCache],
        clients: list[LLMClient],
        progress: Progress | None,
        save: Callable[[Store, dict[str, list[Any]]], None],
    ) -> None:
        self.store, self.run, self.owner = store, run, owner
        self.caches, self.clients, self.progress = caches, clients, progress
        self.save = save
        self.rows: dict[str, list[Any]] = {}
        self.stop_reason: str | None = None  # "cancel" | "lease" | "error"
        self.error: str | None = None
        self.last = time.monotonic()
        self.accounted: dict[str, float] = {"cost": 0.0, "cost_saved": 0.0, "tokens": 0}
        self.db_wait_since: float | None = None
        self.on_stop: Callable[[], None] = lambda: None

    def add(self, table: str, row: Any) -> None:
        """A finished row of `table` (its record: a `Decision`, a `Turn`), committed with the
        next flush.

        Once the run is stopping (the store failed, a cancel, the lease lost) the row is kept
        for the last commit and the caller's work is stopped here: answers read from the cache
        arrive without ever waiting, so the work's own cancellation would not land until
        every remaining unit had been added."""
        pending = self.rows.setdefault(table, [])
        pending.append(row)
        if self.stop_reason is None and len(pending) >= FLUSH_ROWS:
            self.flush()
        if self.stop_reason is not None:
            raise asyncio.CancelledError(f"run stopped: {self.stop_reason}")

    @property
    def pending(self) -> bool:
        return any(self.rows.values()) or any(c.pending for c in self.caches)

    def _totals(self) -> dict[str, float]:
        return {
            "cost": sum(c.stats.cost for c in self.clients),
            "cost_saved": sum(c.stats.cost_saved for c in self.clients),
            "tokens": sum(c.stats.tokens for c in self.clients),
        }

    def flush(self) -> bool:
        """Commit what is pending; False when the database was busy (rows are kept)."""
        t = time.monotonic()
        buffered = [dict(cache.pending) for cache in self.caches]
        try:
            with self.store.atomic():
                self.save(self.store, self.rows)
                for cache in self.caches:
                    self.store.put_llm_calls(cache.drain())
                run = self.run
                waiting = sum(c.stats.waiting for c in self.clients)
                reason = next((c.stats.wait_reason for c in self.clients if c.stats.waiting), "")
                self.store.update_run(
                    run.id,
                    done=run.done,
                    failed=run.failed,
                    generated=run.generated,
                    to_generate=run.to_generate,
                    waiting=waiting,
                    wait_reason=reason,
                )
                totals = self._totals()
                increments = {k: totals[k] - self.accounted[k] for k in totals}
                increments["duration_s"] = t - self.last
                current = self.store.heartbeat_run(run.id, self.owner, **increments)
        except Exception as exc:  # disk full, locked, a corrupted file, a bug: never hang
            for cache, answers in zip(self.caches, buffered, strict=True):
                cache.pending = {**answers, **cache.pending}  # rolled back: keep them buffered
            if not (isinstance(exc, sqlite3.OperationalError) and busy(exc)):
                self._fail(write_failure(self.store, self.run.id, exc))
                return False
            self.db_wait_since = self.db_wait_since or t
            self.run.db_wait = True
            if t - self.db_wait_since > DB_WAIT_LIMIT_S:
                self._fail(f"the database stayed locked for {DB_WAIT_LIMIT_S:.0f} s: {exc}")
            return False
        self.last, self.accounted = t, totals
        self.db_wait_since = None
        self.run.db_wait = False
        self.rows = {}
        self.run.waiting, self.run.wait_reason = waiting, reason
        if current is None:
            self._stop("lease")
        elif current["cancel_requested"]:
            self._stop("cancel")
        else:
            self.run.cost, self.run.cost_saved = (
                current["cost"] or 0.0,
                current["cost_saved"] or 0.0,
            )
        if self.progress:
            self.progress(self.run)
        return True

    def _fail(self, message: str) -> None:
        self.error = message
        self._stop("error")

    def _stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.on_stop()

    async def ticker(self) -> None:
        while self.stop_reason is None:
            await asyncio.sleep(FLUSH_SECONDS)
            # With nothing to write, only beat the lease and look for a cancel now and then.
            if self.stop_reason is None and (
                self.pending or time.monotonic() - self.last >= IDLE_CHECK_SECONDS
            ):
                self.flush()


def busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def write_failure(store: Store, run_id: str, exc: BaseException) -> str:
    """Why a run's results could not be written, and what to do: a full disk is named as
    one (free space, then resume: what was committed is kept and not asked again)."""
    from cogbias.store import disk_full

    text = str(exc) if isinstance(exc, sqlite3.Error) else f"{type(exc).__name__}: {exc}"
    if disk_full(exc):
        return (
            f"could not write results: the disk holding {store.path} is full ({text}); the "
            f"results written before are kept: free some space, then `cogbias resume {run_id}` "
            "continues the run"
        )
    return f"could not write results: {text}"


async def pool(jobs: Iterator[Any], worker: Callable[[Any], Any], size: int) -> None:
    """Run `worker` over `jobs` with at most `size` in flight."""

    async def loop() -> None:
        for job in jobs:
            await worker(job)

    tasks = [asyncio.create_task(loop()) for _ in range(max(size, 1))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@dataclass
class Job:
    """What a kind's `work` gets: the plan, the store, the clients and the writer.

    `fresh` asks afresh (no cache read): retried answers that were unreadable use it."""

    plan: Any
    store: Store
    client: LLMClient
    fresh: LLMClient
    writer: Writer
    concurrency: int
    retry_failed: bool
    state: dict[str, Any] = field(default_factory=dict)  # what `prepare` hands to `work`


class RunKind(Protocol):
    """What the executor asks of a kind of run (the methods below), and what its readers ask
    (`read_side.ReadSide`: a kind subclasses it and overrides what it has)."""

    name: str  # "paired" | "dataset" | "tokenbias" | "study" | "class": a stored spec's "kind"
    unit_name: str  # what a unit is called in progress and summaries ("pairs", "units")
    batchable: bool  # whether `cogbias batch` and `--batch` can hand its requests over
    # its read side (`read_side.ReadSide` says what each is and gives the defaults)
    page: ResultsPage | None
    tables: tuple[RunRows | SharedRows, ...]
    exports: tuple[ExportTable, ...]
    noun: str
    failed_noun: str

    def cells(self, store: Store, run: Run) -> pd.DataFrame:
        """Its rows reduced to cells (`read_side.ReadSide.cells`)."""

    def settings(self, store: Store, run: Run) -> tuple[str, ...]:
        """What the run asked, in words (`read_side.ReadSide.settings`)."""

    def failures(self, store: Store, run: Run) -> Mapping[str, int]:
        """Its failed units by failure kind (`read_side.ReadSide.failures`)."""

    def abstained(self, store: Store, run: Run) -> int:
        """How many of its units abstained (`read_side.ReadSide.abstained`)."""

    def unreadable(self, store: Store, run: Run) -> list[str]:
        """Why each unit whose answer could not be read was not (`ReadSide.unreadable`)."""

    def owns(self, spec: Mapping[str, Any]) -> bool:
        """Whether a spec without a "kind" key (a paired spec object, or a spec stored
        before kinds were named) is of this kind; a kind whose specs name it says False."""

    def target(self, spec: Mapping[str, Any]) -> str:
        """What the run covers, in a few words (the runs table's "biases" column)."""

    def plan(self, spec: Any, store: Store) -> Any:
        """The plan of a spec of this kind (raises KeyError/ValueError on bad input)."""

    def replan(self, store: Store, run: Run) -> Any:
        """The plan of a stored run (to resume it); `run.spec` holds the kind's own fields."""

    def create(self, plan: Any, store: Store, name: str) -> str:
        """Store the run (unless it exists); returns its id."""

    def prepare(self, plan: Any, store: Store, retry_failed: bool) -> dict[str, Any]:
        """Before the work, in the transaction that marks the run running: store what the
        plan needs and return the run's counters so far (done, failed)."""

    async def work(self, job: Job) -> None:
        """Ask every unit not yet stored; hand the rows to `job.writer`."""

    def save(self, store: Store, rows: Mapping[str, list[Any]]) -> None:
        """Store a batch of records (by table), inside the writer's transaction."""

    def incomplete(self, job: Job) -> str | None:
        """Why a run whose work finished is not done (transient failures left), or None."""

    def end_fields(self, job: Job) -> dict[str, Any]:
        """Run fields to record when the run ends."""
