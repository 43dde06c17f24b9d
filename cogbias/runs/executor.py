"""One executor for every kind of run: lease, writer, cancel, resume, retries, progress.

A run is a stored object: its id is made once, from its canonical spec, when it is created,
and `resume` reads the spec back, so a run never depends on arguments being passed again.
What a run asks is its kind's business (`cogbias.runs.kinds`: paired test cases, an
imported dataset, the token-bias study, a study of conversations); how it is worked is the
same for every kind and lives here.

One worker at a time holds a run's lease (a heartbeat in the runs row, taken in a BEGIN
IMMEDIATE transaction); a second worker refuses to start, and a worker that was killed is
taken over at once. Every row has a deterministic key, so resuming skips what is stored and
duplicates nothing. Failures carry a kind (see `cogbias.core.records`): resuming retries
`transient` ones; `retry_failed` retries the rest too, asking the models afresh. Results are
committed in small batches every few tens of milliseconds, so a killed run loses at most the
calls in flight; a cancel is seen within a fraction of a second, even while every call hangs.
A run whose work finished with transient failures left ends `incomplete`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from cogbias.core.run_record import Run, RunStatus
from cogbias.llm.direct import close_sessions
from cogbias.llm.factory import open_client
from cogbias.llm.spending import SpendCap, SpendCapReached
from cogbias.runs import kinds
from cogbias.runs.work import DB_WAIT_LIMIT_S, Job, LiveRun, Progress, RunKind, Writer, busy
from cogbias.store import LEASE_STALE_S, Store, lease_alive, lease_owner, now
from cogbias.store.buffered_cache import BufferedCache

T = TypeVar("T")


class RunBusy(RuntimeError):
    """Another live worker holds the run."""


# --------------------------------------------------------------------------- executing


def create(plan: Any, store: Store, name: str = "") -> str:
    """Store a planned run of any kind (unless it exists); returns its id."""
    return kinds.kind_of(plan.spec).create(plan, store, name)


def execute(
    plan: Any,
    store: Store,
    concurrency: int = 16,
    progress: Progress | None = None,
    name: str = "",
    *,
    retry_failed: bool = False,
    read_cache: bool = True,
    timeout: float | None = None,
    deadline: float | None = None,
    max_retries: int = 6,
    api_key_env: str | None = None,
    kind: RunKind | None = None,
    max_cost: float | None = None,
) -> Run:
    """Run (or resume) a plan of any kind to completion, cancellation or a fatal error;
    returns the run as stored. Raises `RunBusy` when another live worker holds the run.
    `api_key_env` names the variable holding the key of the run's `api_base` (never stored:
    a key variable changes no answer). `kind` is the plan's kind when the caller has
    resolved it already (a resumed run's record). `max_cost` caps what this execution
    spends (USD, `llm.spending`): the run ends `incomplete` before a call could pass it."""
    kind = kind or kinds.kind_of(plan.spec)
    if concurrency < 1:  # no slot would ever be free: the run would wait forever
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    tuning = dict(
        timeout=timeout, deadline=deadline, max_retries=max_retries, api_key_env=api_key_env
    )
    if max_cost is not None:  # one cap for the run's clients (the fresh one included)
        tuning["spend_cap"] = SpendCap(max_cost)
    return asyncio.run(
        _execute(kind, plan, store, progress, name, retry_failed, read_cache, concurrency, tuning)
    )


async def _execute(
    kind: RunKind,
    plan: Any,
    store: Store,
    progress: Progress | None,
    name: str,
    retry_failed: bool,
    read_cache: bool,
    concurrency: int,
    tuning: dict[str, Any],
) -> Run:
    run_id = kind.create(plan, store, name)
    return await holding_lease(
        store,
        run_id,
        lambda owner: _work(
            kind, plan, store, owner, progress, retry_failed, read_cache, concurrency, tuning
        ),
    )


async def holding_lease(store: Store, run_id: str, work: Callable[[str], Awaitable[T]]) -> T:
    """Claim the run's lease, `await work(owner)`, release the lease.

    Raises `RunBusy` when another live worker holds the run."""
    owner = lease_owner(os.getpid(), uuid.uuid4().hex[:8])
    holder = store.claim_run(run_id, owner, os.getpid(), LEASE_STALE_S)
    if holder is not None:
        raise RunBusy(
            f"run {run_id} is already being worked on by process {holder['pid']} "
            f"(last heartbeat {holder['heartbeat_at']}); wait for it to finish, or cancel it "
            f"with `cogbias cancel {run_id}`"
        )
    try:
        return await work(owner)
    finally:
        try:
            _retrying(lambda: store.release_run(run_id, owner))
        except sqlite3.Error:  # a full disk: the lease lapses with this process (see end_run)
            pass


async def _work(
    kind: RunKind,
    plan: Any,
    store: Store,
    owner: str,
    progress: Progress | None,
    retry_failed: bool,
    read_cache: bool,
    concurrency: int,
    tuning: dict[str, Any],
) -> Run:
    spec = plan.spec
    run_id = spec.run_id
    if (store.run(run_id) or {}).get("cancel_requested"):  # cancelled while this worker started
        store.update_run(run_id, status=RunStatus.CANCELLED, cancel_requested=0, finished_at=now())
        return replace(Run.from_row(store.run(run_id) or {"id": run_id}), kind=kind)
    with store.atomic():
        counts = kind.prepare(plan, store, retry_failed)
        previous = store.run(run_id) or {}
        store.update_run(
            run_id,
            status=RunStatus.RUNNING,
            started_at=previous.get("started_at") or now(),
            finished_at=None,
            error=None,
            waiting=0,
            wait_reason=None,
        )
    store.set_busy_timeout(0.2)  # never block the event loop on another process's writes
    run = LiveRun(run_id, plan.planned, kind.unit_name, **counts)
    cache = BufferedCache(store)
    options = dict(api_base=spec.api_base, concurrency=concurrency, **tuning)
    client = open_client(cache, read_cache=read_cache, **options)
    # Answers that were unreadable are asked afresh when retried on request.
    fresh = open_client(cache, read_cache=False, **options) if retry_failed else client
    clients = [client, fresh] if fresh is not client else [client]
    writer = Writer(store, run, owner, [cache], clients, progress, kind.save)
    job = Job(plan, store, client, fresh, writer, concurrency, retry_failed)
    status, error = await until_stopped(asyncio.create_task(kind.work(job)), writer)
    if status == RunStatus.DONE:
        error = kind.incomplete(job)
        status = RunStatus.INCOMPLETE if error else status
    ended = end_run(store, run, status, error, progress, **kind.end_fields(job))
    return replace(ended, kind=kind)  # the kind this worker resolved, not asked again


async def until_stopped(work: asyncio.Task[Any], writer: Writer) -> tuple[str, str | None]:
    """Await a run's work while the writer commits; (status, error) by how it ended: done,
    failed (a fatal error, or the store failing), cancelled, interrupted (the lease lost)."""
    from cogbias.llm import FatalLLMError

    writer.on_stop = work.cancel
    ticker = asyncio.create_task(writer.ticker())
    status, error = RunStatus.DONE, None
    try:
        await work
    except SpendCapReached as exc:  # resumable: the calls left were never sent
        status, error = RunStatus.INCOMPLETE, capped(str(exc), writer.run.id)
    except FatalLLMError as exc:
        status, error = RunStatus.FAILED, str(exc)
    except asyncio.CancelledError:
        status = {"cancel": RunStatus.CANCELLED, "lease": RunStatus.INTERRUPTED}.get(
            writer.stop_reason or "", RunStatus.FAILED
        )
        if writer.stop_reason is None:  # cancelled from outside (Ctrl-C)
            status = RunStatus.CANCELLED
    except KeyboardInterrupt:
        status = RunStatus.CANCELLED
    finally:
        ticker.cancel()
        await close_sessions()
    writer.store.set_busy_timeout(30)
    _retrying(writer.flush, until=lambda: writer.db_wait_since is None)
    if writer.stop_reason == "error":
        status, error = RunStatus.FAILED, writer.error
    return status, error


def capped(reason: str, run_id: str) -> str:
    """What a run stopped at its spend cap says: how much, and how to go on."""
    return f"{reason}; `cogbias resume {run_id} --max-cost USD` goes on with a new cap"


def end_run(
    store: Store,
    run: LiveRun,
    status: str,
    error: str | None,
    progress: Progress | None,
    **fields: Any,
) -> Run:
    """Record how a run ended (unless its lease was lost: the new owner records that) and
    return it as stored (a `Run`; the caller sets the kind it resolved).

    When even that cannot be written (a full disk), stderr says so and what to do, and the
    returned run carries the ending anyway: the stored row still says `running`, which reads
    as `interrupted` once this process has ended, and `cogbias resume` takes it over."""
    recorded = True
    if status != RunStatus.INTERRUPTED:
        try:
            _retrying(
                lambda: store.update_run(
                    run.id,
                    status=status,
                    finished_at=now(),
                    error=error,
                    waiting=0,
                    cancel_requested=0,
                    **fields,
                )
            )
        except sqlite3.Error as exc:
            recorded = False
            print(
                f"error: could not record in {store.path} that run {run.id} ended {status} "
                f"({exc}); free some space, then `cogbias resume {run.id}` continues it "
                "from what was written",
                file=sys.stderr,
            )
    run.status, run.error = status, error
    if progress:
        progress(run)
    stored = store.run(run.id)
    ended = Run.from_row(stored) if stored is not None else run.record()
    return ended if recorded else replace(ended, status=status, error=error)


def _retrying(action: Callable[[], Any], until: Callable[[], bool] = lambda: True) -> None:
    """Do a final write, waiting politely while another process holds the database."""
    waited = 0.0
    while True:
        try:
            action()
            if until():
                return
        except sqlite3.OperationalError as exc:
            if not busy(exc) or waited > DB_WAIT_LIMIT_S:
                raise
        if waited == 0.0:
            print("waiting for the database (another process is writing)...", file=sys.stderr)
        time.sleep(0.5)
        waited += 0.5


# --------------------------------------------------------------------------- worker processes


def start_background(
    run_id: str,
    db: str | Path,
    log_dir: str | Path | None = None,
    retry_failed: bool = False,
    batch: bool = False,
    max_cost: float | None = None,
) -> None:
    """Resume a stored run in its own process (it outlives the app's script and the browser).

    Only the run id, the database and how to execute it (a spend cap) go on the command line:
    the spec is read from the store, and nothing secret is ever an argument."""
    log_dir = Path(log_dir or Path(db).parent)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{run_id}.log", "ab")  # noqa: SIM115 - handed to the child
    worker = subprocess.Popen(
        [sys.executable, "-m", "cogbias", "resume", run_id, "--db", str(db)]
        + (["--retry-failed"] if retry_failed else [])
        + (["--batch"] if batch else [])
        + (["--max-cost", repr(float(max_cost))] if max_cost is not None else []),
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    with Store(db) as store:  # a cancel before the worker claims the run must reach it
        store.update_run(run_id, pid=worker.pid, cancel_requested=0)


def launch(
    spec: Any, db: str | Path, name: str = "", batch: bool = False, max_cost: float | None = None
) -> str:
    """Plan and store a run of any kind (a spec or a ready plan), then work on it in a worker
    process (the app's Start), within `max_cost` USD when given. Raises `RunBusy` when a live
    worker already holds it."""
    with Store(db) as store:
        kind = kinds.kind_of(spec.spec if hasattr(spec, "planned") else spec)  # once
        plan = spec if hasattr(spec, "planned") else kind.plan(spec, store)
        run_id = kind.create(plan, store, name)
    return launch_stored(run_id, db, batch, max_cost)


def launch_stored(
    run_id: str, db: str | Path, batch: bool = False, max_cost: float | None = None
) -> str:
    """Work on a stored run in a worker process, unless a live worker already holds it."""
    with Store(db) as store:
        run = store.run(run_id) or {}
        owner = run.get("lease_owner")
        if owner and lease_alive(owner, run.get("heartbeat_at"), LEASE_STALE_S):
            raise RunBusy(f"run {run_id} is already running")
    start_background(run_id, db, batch=batch, max_cost=max_cost)
    return run_id
