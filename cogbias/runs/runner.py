"""Plan and execute batches: test cases x scenarios x instances x models x repeats.

A run is a stored object. Its id is made once, from its canonical spec, when it is created;
the spec is stored with it, and `resume` reads it back, so a run never depends on arguments
being passed again. One worker at a time holds a run's lease (a heartbeat in the runs row,
taken in a BEGIN IMMEDIATE transaction); a second worker refuses to start, and a worker that
was killed is taken over at once.

Every instance and decision has a deterministic key, so resuming skips what is stored and
duplicates nothing. Failures carry a kind (see `cogbias.core.records`): resuming retries
`transient` ones; `retry_failed` retries the rest too, asking the models afresh. Results are
committed in small batches every few tens of milliseconds, so a killed run loses at most the
calls in flight; a cancel is seen within a fraction of a second, even while every call hangs.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cogbias.core import expressions, records
from cogbias.core.metrics import MetricParams
from cogbias.core.records import Instance, dumps
from cogbias.core.templates import Filled
from cogbias.library import examples
from cogbias.library import testcases as library
from cogbias.library.testcases import Scenario, TestCase
from cogbias.llm.direct import close_sessions
from cogbias.llm.profiles import RANDOM_MODEL, resolve
from cogbias.runs import pipeline
from cogbias.runs import prompting as prompting_methods
from cogbias.store import (
    LEASE_STALE_S,
    Store,
    lease_alive,
    lease_owner,
    now,
    parse_time,
    pid_alive,
)

if TYPE_CHECKING:
    from cogbias.llm import LLMClient

FLUSH_SECONDS = 0.05
FLUSH_ROWS = 256
IDLE_CHECK_SECONDS = 0.2  # how often an idle worker looks for a cancel request
DB_WAIT_LIMIT_S = 600.0  # a worker waits this long for another process's long transaction
SPEC_VERSION = 1
# Rough token use per LLM call, for estimates before a run (measured on the built-in library).
EST_PROMPT_TOKENS = {"generate": 450, "decide": 330, "extract": 200}
EST_COMPLETION_TOKENS = {"generate": 120, "decide": 180, "extract": 4}
ACTIVE = ("planned", "running")


class RunBusy(RuntimeError):
    """Another live worker holds the run."""


@dataclass(frozen=True)
class RunSpec:
    """What a run asks for. Two runs with equal specs are the same run."""

    models: list[str]
    biases: list[str] = field(default_factory=list)  # empty: the whole library
    scenarios: int = 1
    instances: int = 1
    generator: str = field(default_factory=examples.default_generator)
    temperature: float = 0.0
    repeats: int = 1
    seed: int = 0
    generator_temperature: float = 0.7
    api_base: str | None = None
    dataset: str | None = None
    per_bias: int | None = None
    prompting: str = prompting_methods.BASELINE  # see cogbias.runs.prompting: one method per run

    def canonical(self) -> dict[str, Any]:
        """The spec as stored and hashed into the run id.

        The fields of spec version 1 are always present (so run ids made before specs were
        versioned stay valid); fields added later appear only when they differ from their
        default, so adding an optional field never changes an existing run's id.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in _V1_FIELDS and value == _default(f):
                continue
            out[f.name] = list(value) if isinstance(value, list | tuple) else value
        return out

    @property
    def run_id(self) -> str:
        return records.run_id_of(self.canonical())

    @classmethod
    def from_stored(cls, spec: Mapping[str, Any] | str) -> RunSpec:
        """The spec of a stored run (JSON text or dict); refuses fields this version lacks."""
        data = json.loads(spec) if isinstance(spec, str) else dict(spec)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"this run was made by a newer cogbias (unknown spec fields: {', '.join(unknown)}); "
                "upgrade cogbias to resume it"
            )
        return cls(**data)


_V1_FIELDS = (
    "models",
    "biases",
    "scenarios",
    "instances",
    "generator",
    "temperature",
    "repeats",
    "seed",
    "generator_temperature",
    "api_base",
    "dataset",
    "per_bias",
)


def _default(f: Any) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default


@dataclass
class InstanceJob:
    case: TestCase
    scenario: Scenario
    index: int
    id: str


@dataclass
class Plan:
    spec: RunSpec
    cases: dict[str, TestCase]
    jobs: list[InstanceJob]  # instances of the run (generated or to generate)
    dataset_instances: list[str]  # instance ids of an imported dataset

    @property
    def instance_ids(self) -> list[str]:
        return self.dataset_instances or [j.id for j in self.jobs]

    @property
    def planned(self) -> int:
        return len(self.instance_ids) * len(self.spec.models) * self.spec.repeats

    def llm_calls(self) -> dict[str, int]:
        """Upper bound of LLM calls by kind (cached calls are free and not counted later)."""
        gen = 0
        offline = (RANDOM_MODEL, examples.EXAMPLES_GENERATOR)  # fill gaps without a model
        if not self.dataset_instances and self.spec.generator not in offline:
            gen = sum(
                2 for j in self.jobs if j.case.control.llm_gaps() or j.case.treatment.llm_gaps()
            )
        llm_models = [m for m in self.spec.models if m != RANDOM_MODEL]
        per_model = len(self.instance_ids) * self.spec.repeats * 2
        return {
            "generate": gen,
            "decide": per_model * len(llm_models),
            "extract": per_model * len(llm_models),
        }

    def estimated_cost(self, batch: bool = False) -> float | None:
        """USD for priced models (computed once per model); None when a price is unknown.
        With `batch`, at the providers' batch prices (see `ModelProfile.batch_price_per_call`)."""
        calls = self.llm_calls()
        llm_models = [m for m in self.spec.models if m != RANDOM_MODEL]
        per_model = {k: v // max(len(llm_models), 1) for k, v in calls.items() if k != "generate"}
        pricing = [(self.spec.generator, {"generate": calls["generate"]})]
        pricing += [(m, per_model) for m in llm_models]
        total = 0.0
        for model, counts in pricing:
            if not any(counts.values()):
                continue
            profile = resolve(model, self.spec.api_base)
            price_of = profile.batch_price_per_call if batch else profile.price_per_call
            for kind, n in counts.items():
                price = price_of(EST_PROMPT_TOKENS[kind], EST_COMPLETION_TOKENS[kind])
                if price is None:
                    return None
                total += n * price
        return total

    def describe(self) -> str:
        calls = self.llm_calls()
        cost, batch_cost = self.estimated_cost(), self.estimated_cost(batch=True)
        source = (
            f"dataset {self.spec.dataset}"
            if self.spec.dataset
            else (
                f"{len(self.cases)} biases x {self.spec.scenarios} scenarios x {self.spec.instances} instances"
            )
        )
        if self.spec.prompting != prompting_methods.BASELINE:
            source += f" (prompting {self.spec.prompting})"
        return (
            f"run {self.spec.run_id}: {source} x {len(self.spec.models)} models x {self.spec.repeats} repeats "
            f"= {self.planned} pairs; at most {sum(calls.values())} LLM calls "
            f"({calls['generate']} generate, {calls['decide']} decide, {calls['extract']} extract); "
            f"estimated cost: {'unknown (unpriced model)' if cost is None else f'${cost:.4f}'}"
            + ("" if not cost or batch_cost is None else f", ${batch_cost:.4f} with --batch")
            + " (answers already in the cache are free)"
        )


def plan(spec: RunSpec, store: Store | None = None) -> Plan:
    """Resolve a spec into concrete instances; raises KeyError/ValueError on bad input."""
    from cogbias.llm.settings import check_api_base

    if not spec.models:
        raise ValueError("no decision models given (e.g. --models random,local/smollm2)")
    if spec.repeats < 1 or spec.instances < 1 or spec.scenarios < 1:
        raise ValueError("scenarios, instances and repeats must be at least 1")
    prompting_methods.parse(spec.prompting)
    if spec.api_base:
        check_api_base(spec.api_base)
    for model in {*spec.models, spec.generator}:
        resolve(model, spec.api_base)  # unknown local models fail here, before any work
    if spec.dataset:
        if store is None:
            raise ValueError("a dataset run needs a store")
        ids = dataset_instance_ids(store, spec.dataset, spec.biases, spec.per_bias)
        return Plan(spec, {}, [], ids)
    cases = library.load_library()
    wanted = spec.biases or list(cases)
    unknown = [b for b in wanted if b not in cases]
    if unknown:
        raise KeyError(f"unknown test case id(s): {', '.join(unknown)}; see `cogbias library list`")
    if spec.generator == RANDOM_MODEL:
        refusals = [
            pipeline.random_generator_refusal(b, [g.instruction for g in gaps])
            for b in wanted
            if (gaps := cases[b].control.llm_gaps() + cases[b].treatment.llm_gaps())
        ]
        if refusals:
            raise ValueError(
                f"--generator random cannot fill LLM gaps: {len(refusals)} of the chosen test "
                f"cases have them, e.g. {refusals[0]}"
            )
    scenarios = library.load_scenarios()
    if spec.scenarios > len(scenarios):
        raise ValueError(f"only {len(scenarios)} scenarios exist")
    jobs = [
        InstanceJob(
            cases[b],
            s,
            i,
            records.instance_id(
                cases[b].content_hash,
                s.text,
                i,
                spec.generator,
                spec.seed,
                spec.generator_temperature,
            ),
        )
        for b in wanted
        for s in scenarios[: spec.scenarios]
        for i in range(spec.instances)
    ]
    return Plan(spec, {b: cases[b] for b in wanted}, jobs, [])


def dataset_instance_ids(
    store: Store, dataset: str, biases: list[str], per_bias: int | None
) -> list[str]:
    rows = store.query(
        "select id, test_case from instances where dataset = ? order by rowid", (dataset,)
    )
    if not rows:
        names = [r["name"] for r in store.query("select name from datasets")]
        raise KeyError(
            f"no dataset '{dataset}' in this database (imported: {', '.join(names) or 'none'})"
        )
    unscorable = store.dataset_unscorable(dataset)
    if unscorable:
        raise ValueError(
            f"dataset '{dataset}' has {unscorable} test case(s) without metric parameters "
            "(the paper's code format does not record them), so new decisions could not be "
            "scored; run the Hub dataset (`cogbias import malberg2024-hub`) instead"
        )
    taken: dict[str, int] = {}
    ids = []
    for row in rows:
        if biases and row["test_case"] not in biases:
            continue
        if per_bias is not None and taken.get(row["test_case"], 0) >= per_bias:
            continue
        taken[row["test_case"]] = taken.get(row["test_case"], 0) + 1
        ids.append(row["id"])
    return ids


def create_run(plan: Plan, store: Store, name: str = "") -> str:
    """Store the run (id and canonical spec) unless it exists; returns its id."""
    store.create_run(
        plan.spec.run_id, plan.spec.canonical(), plan.planned, name=name, spec_version=SPEC_VERSION
    )
    return plan.spec.run_id


def stored_spec(store: Store, run_id: str) -> RunSpec:
    run = store.run(run_id)
    if run is None:
        known = ", ".join(r["id"] for r in store.runs()[:5]) or "none"
        raise KeyError(f"no run {run_id} in {store.path} (recent runs: {known})")
    return RunSpec.from_stored(run["spec"] or "{}")


class BufferedCache:
    """The LLM response cache: reads from the store, writes batched with the run's results."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        record = self.pending.get(key)
        if record is not None:
            return record
        return self.store.get_llm_call(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        self.pending[key] = record

    def drain(self) -> list[dict[str, Any]]:
        rows = [
            {
                "key": key,
                "model": r["model"],
                "api_base": r.get("api_base"),
                "request": dumps(r.get("request", {})),
                "response": r["text"],
                "prompt_tokens": r.get("prompt_tokens", 0),
                "completion_tokens": r.get("completion_tokens", 0),
                "cost": r.get("cost", 0.0),
                "latency_s": r.get("latency_s", 0.0),
            }
            for key, r in self.pending.items()
        ]
        self.pending = {}
        return rows


Progress = Callable[[dict[str, Any]], None]


class TerminalProgress:
    """A one-line progress bar on stderr (a plain line every two seconds when not a terminal)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, run: dict[str, Any]) -> None:
        t = time.monotonic()
        final = run.get("status") not in ("running", None)
        if not final and t - self.last < (0.2 if self.tty else 2.0):
            return
        self.last = t
        if run.get("generated", 0) < run.get("to_generate", 0):
            done, planned, what = run["generated"], run["to_generate"], "instances generated"
        else:
            done, planned = run["done"], run["planned"] or 1
            what = f"{run.get('unit', 'pairs')}, {run['failed']} failed"
        bar = "#" * int(30 * done / max(planned, 1))
        line = f"[{bar:<30}] {done}/{planned} {what}, {time.monotonic() - self.started:.0f} s"
        if run.get("waiting"):
            line += f"; {run['waiting']} calls waiting to retry ({run.get('wait_reason')})"
        if run.get("db_wait"):
            line += "; waiting for the database (another process is writing)"
        print(
            ("\r" + line) if self.tty else line,
            end="" if self.tty and not final else "\n",
            file=sys.stderr,
            flush=True,
        )


class _Writer:
    """Collects finished rows, commits them every FLUSH_SECONDS, and keeps the lease.

    A commit that finds the database locked by another process's long transaction (an
    import, say) keeps its rows and tries again on the next tick; any other failure to
    write stops the run, which then ends `failed` with the error.
    """

    def __init__(
        self,
        store: Store,
        run: dict[str, Any],
        owner: str,
        caches: list[BufferedCache],
        clients: list[LLMClient],
        progress: Progress | None,
        retried: dict[str, str],
    ) -> None:
        self.store, self.run, self.owner = store, run, owner
        self.caches, self.clients, self.progress = caches, clients, progress
        self.retried = retried  # failed decision ids being asked again -> their old kind
        self.instances: list[dict[str, Any]] = []
        self.decisions: list[dict[str, Any]] = []
        self.study_calls: list[dict[str, Any]] = []  # turns of a study run (study_runner)
        self.stop_reason: str | None = None  # "cancel" | "lease" | "error"
        self.error: str | None = None
        self.last = time.monotonic()
        self.accounted: dict[str, float] = {"cost": 0.0, "cost_saved": 0.0, "tokens": 0}
        self.db_wait_since: float | None = None
        self.on_stop: Callable[[], None] = lambda: None

    def add_decision(self, row: dict[str, Any]) -> None:
        self.decisions.append(row)
        if self.retried.pop(row["id"], None) is None:
            self.run["done"] += 1
        else:
            self.run["failed"] -= 1
        self.run["failed"] += row["status"] == "failed"
        if len(self.decisions) >= FLUSH_ROWS:
            self.flush()

    def _totals(self) -> dict[str, float]:
        return {
            "cost": sum(c.stats.cost for c in self.clients),
            "cost_saved": sum(c.stats.cost_saved for c in self.clients),
            "tokens": sum(c.stats.tokens for c in self.clients),
        }

    def flush(self) -> bool:
        """Commit what is pending; False when the database was busy (rows are kept)."""
        t = time.monotonic()
        try:
            with self.store.atomic():
                self.store.save_instances(self.instances)
                self.store.save_decisions(self.decisions)
                self.store.save_study_calls(self.study_calls)
                for cache in self.caches:
                    self.store.put_llm_calls(cache.drain())
                keys = ("done", "failed", "generated", "to_generate")
                waiting = sum(c.stats.waiting for c in self.clients)
                reason = next((c.stats.wait_reason for c in self.clients if c.stats.waiting), "")
                self.store.update_run(
                    self.run["id"],
                    **{k: self.run[k] for k in keys},
                    waiting=waiting,
                    wait_reason=reason,
                )
                totals = self._totals()
                increments = {k: totals[k] - self.accounted[k] for k in totals}
                increments["duration_s"] = t - self.last
                current = self.store.heartbeat_run(self.run["id"], self.owner, **increments)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                self._fail(f"could not write results: {exc}")
                return False
            self.db_wait_since = self.db_wait_since or t
            self.run["db_wait"] = True
            if t - self.db_wait_since > DB_WAIT_LIMIT_S:
                self._fail(f"the database stayed locked for {DB_WAIT_LIMIT_S:.0f} s: {exc}")
            return False
        except Exception as exc:  # disk full, a corrupted file, a bug: record it, never hang
            self._fail(f"could not write results: {type(exc).__name__}: {exc}")
            return False
        self.last, self.accounted = t, totals
        self.db_wait_since = None
        self.run["db_wait"] = False
        self.instances, self.decisions, self.study_calls = [], [], []
        self.run["waiting"], self.run["wait_reason"] = waiting, reason
        if current is None:
            self._stop("lease")
        elif current["cancel_requested"]:
            self._stop("cancel")
        else:
            self.run.update(cost=current["cost"], cost_saved=current["cost_saved"])
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
            pending = self.instances or self.decisions or self.study_calls
            idle = not (pending or any(c.pending for c in self.caches))
            # With nothing to write, only beat the lease and look for a cancel now and then.
            if not idle or time.monotonic() - self.last >= IDLE_CHECK_SECONDS:
                self.flush()


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def execute(
    plan: Plan,
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
) -> dict[str, Any]:
    """Run (or resume) a plan to completion, cancellation or a fatal error; returns the run row.

    Raises `RunBusy` when another live worker holds the run.
    """
    return asyncio.run(
        _execute(
            plan,
            store,
            progress,
            name,
            retry_failed,
            read_cache,
            dict(
                concurrency=concurrency, timeout=timeout, deadline=deadline, max_retries=max_retries
            ),
        )
    )


async def _execute(
    plan: Plan,
    store: Store,
    progress: Progress | None,
    name: str,
    retry_failed: bool,
    read_cache: bool,
    client_options: dict[str, Any],
) -> dict[str, Any]:
    run_id = create_run(plan, store, name)
    return await holding_lease(
        store,
        run_id,
        lambda owner: _work(plan, store, owner, progress, retry_failed, read_cache, client_options),
    )


async def holding_lease(
    store: Store, run_id: str, work: Callable[[str], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Claim the run's lease, `await work(owner)`, release the lease (paired and study runs).

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
        _retrying(lambda: store.release_run(run_id, owner))


async def _work(
    plan: Plan,
    store: Store,
    owner: str,
    progress: Progress | None,
    retry_failed: bool,
    read_cache: bool,
    client_options: dict[str, Any],
) -> dict[str, Any]:
    from cogbias.llm import LLMClient

    spec = plan.spec
    run_id = spec.run_id
    if (store.run(run_id) or {}).get("cancel_requested"):  # cancelled while this worker started
        store.update_run(run_id, status="cancelled", cancel_requested=0, finished_at=now())
        return store.run(run_id) or {}
    with store.atomic():
        for case in plan.cases.values():
            store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
        scenarios = {job.scenario.id: job.scenario for job in plan.jobs}
        store.save_scenarios([{**asdict(s), "text": s.text} for s in scenarios.values()])
        if retry_failed:
            store.forget_failed_instances([j.id for j in plan.jobs])
        counts = store.refresh_run_counts(run_id)
        previous = store.run(run_id) or {}
        store.update_run(
            run_id,
            status="running",
            started_at=previous.get("started_at") or now(),
            finished_at=None,
            error=None,
            waiting=0,
            wait_reason=None,
        )
    store.set_busy_timeout(0.2)  # never block the event loop on another process's writes
    retried = retried_decisions(store, run_id, retry_failed)
    run = {
        "id": run_id,
        "planned": plan.planned,
        "status": "running",
        "generated": 0,
        "to_generate": 0,
        **counts,
    }
    options = {**client_options, "api_base": spec.api_base}
    concurrency = options["concurrency"]
    cache = BufferedCache(store)
    client = LLMClient(cache=cache, read_cache=read_cache, **options)  # type: ignore[arg-type]
    # Answers that were unreadable are asked afresh when retried on request.
    fresh = LLMClient(cache=cache, read_cache=False, **options) if retry_failed else client  # type: ignore[arg-type]
    writer = _Writer(
        store,
        run,
        owner,
        [cache],
        [client, fresh] if fresh is not client else [client],
        progress,
        dict(retried),
    )
    work = asyncio.create_task(
        _instances_and_decisions(plan, store, client, fresh, writer, retried, concurrency)
    )
    status, error = await until_stopped(work, writer)
    kinds = store.run_failure_kinds(run_id)
    if status == "done":
        counts = store.refresh_run_counts(run_id)
        left = kinds.get("transient", 0)
        if left:
            status = "incomplete"
            error = (
                f"{left} pair(s) failed on transient errors (timeouts, rate limits, server "
                f"errors); run `cogbias resume {run_id}` to retry them"
            )
        elif counts["done"] < plan.planned:
            status = "incomplete"
            error = f"only {counts['done']} of {plan.planned} pairs were made; resume the run"
    return end_run(store, run, status, error, progress)


async def until_stopped(work: asyncio.Task[Any], writer: _Writer) -> tuple[str, str | None]:
    """Await a run's work while the writer commits; (status, error) by how it ended: done,
    failed (a fatal error, or the store failing), cancelled, interrupted (the lease lost)."""
    from cogbias.llm import FatalLLMError

    writer.on_stop = work.cancel
    ticker = asyncio.create_task(writer.ticker())
    status, error = "done", None
    try:
        await work
    except FatalLLMError as exc:
        status, error = "failed", str(exc)
    except asyncio.CancelledError:
        status = {"cancel": "cancelled", "lease": "interrupted"}.get(
            writer.stop_reason or "", "failed"
        )
        if writer.stop_reason is None:  # cancelled from outside (Ctrl-C)
            status = "cancelled"
    except KeyboardInterrupt:
        status = "cancelled"
    finally:
        ticker.cancel()
        await close_sessions()
    writer.store.set_busy_timeout(30)
    _retrying(writer.flush, until=lambda: writer.db_wait_since is None)
    if writer.stop_reason == "error":
        status, error = "failed", writer.error
    return status, error


def end_run(
    store: Store,
    run: dict[str, Any],
    status: str,
    error: str | None,
    progress: Progress | None,
    **fields: Any,
) -> dict[str, Any]:
    """Record how a run ended (unless its lease was lost: the new owner records that)."""
    if status != "interrupted":
        _retrying(
            lambda: store.update_run(
                run["id"],
                status=status,
                finished_at=now(),
                error=error,
                waiting=0,
                cancel_requested=0,
                **fields,
            )
        )
    run.update(status=status, error=error)
    if progress:
        progress(run)
    return store.run(run["id"]) or run


def _retrying(action: Callable[[], Any], until: Callable[[], bool] = lambda: True) -> None:
    """Do a final write, waiting politely while another process holds the database."""
    waited = 0.0
    while True:
        try:
            action()
            if until():
                return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or waited > DB_WAIT_LIMIT_S:
                raise
        if waited == 0.0:
            print("waiting for the database (another process is writing)...", file=sys.stderr)
        time.sleep(0.5)
        waited += 0.5


async def _instances_and_decisions(
    plan: Plan,
    store: Store,
    client: LLMClient,
    fresh: LLMClient,
    writer: _Writer,
    retried: dict[str, str],
    concurrency: int,
) -> None:
    instances = await _instances(plan, store, client, writer, concurrency)
    await _decisions(plan, store, client, fresh, writer, instances, retried, concurrency)


async def _pool(jobs: Iterator[Any], worker: Callable[[Any], Any], size: int) -> None:
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


async def _instances(
    plan: Plan, store: Store, client: LLMClient, writer: _Writer, concurrency: int
) -> dict[str, Instance]:
    """The run's instances, generating the missing ones first.

    A generation that failed transiently is not stored (another run must not inherit an
    outage); its pairs fail as transient, and resuming generates it again.
    """
    if plan.dataset_instances:
        return {r["id"]: Instance.from_row(r) for r in store.instances(plan.dataset_instances)}
    existing = store.existing_instance_ids(j.id for j in plan.jobs)
    made: dict[str, Instance] = {}
    spec = plan.spec

    async def make(job: InstanceJob) -> None:
        from cogbias.llm import FatalLLMError, LLMError

        try:
            instance = await pipeline.generate(
                client,
                job.case,
                job.scenario.text,
                generator=spec.generator,
                seed=spec.seed,
                temperature=spec.generator_temperature,
                index=job.index,
                scenario_id=job.scenario.id,
            )
        except FatalLLMError:
            raise
        except LLMError as exc:
            instance = _failed_instance(job, spec, str(exc), exc.failure_kind)
        except pipeline.GenerationError as exc:
            instance = _failed_instance(job, spec, str(exc), "unparseable")
        except expressions.ExpressionError as exc:
            instance = _failed_instance(job, spec, str(exc), "invalid")  # names case and values
        made[job.id] = instance
        if instance.failure_kind != "transient":
            writer.instances.append(instance.to_row())
        writer.run["generated"] += 1

    missing = [j for j in plan.jobs if j.id not in existing]
    writer.run.update(generated=0, to_generate=len(missing))
    await _pool(iter(missing), make, concurrency)
    rows = {r["id"]: r for r in store.instances(existing)}
    return made | {i: Instance.from_row(r) for i, r in rows.items()}


def _failed_instance(job: InstanceJob, spec: RunSpec, error: str, kind: str) -> Instance:
    """A stand-in for an instance that could not be made: enough to record its pairs."""
    blank = [
        Filled(t.situation, t.prompt, t.options) for t in (job.case.control, job.case.treatment)
    ]
    return Instance(
        id=job.id,
        test_case=job.case.id,
        test_case_hash=job.case.content_hash,
        scenario=job.scenario.text,
        control=blank[0],
        treatment=blank[1],
        metric=MetricParams(),
        scenario_id=job.scenario.id,
        instance_index=job.index,
        generator=spec.generator,
        temperature=spec.generator_temperature,
        seed=spec.seed,
        status="failed",
        error=f"generation failed: {error}",
        failure_kind=kind,
    )


async def _decisions(
    plan: Plan,
    store: Store,
    client: LLMClient,
    fresh: LLMClient,
    writer: _Writer,
    instances: dict[str, Instance],
    retried: dict[str, str],
    concurrency: int,
) -> None:
    spec = plan.spec
    skip = store.existing_decision_ids(spec.run_id) - set(retried)

    async def decide(job: tuple[Instance, str, int, str]) -> None:
        instance, model, repeat, key = job
        if instance.status != "ok":
            row = pipeline.failed_decision(
                instance,
                model,
                spec.run_id,
                spec.temperature,
                repeat,
                instance.error or "instance failed",
                instance.failure_kind or "invalid",
                spec.prompting,
            )
        else:
            asked_before = retried.get(key) not in (None, "transient")
            row = await pipeline.decide_pair(
                fresh if asked_before else client,
                instance,
                model,
                run_id=spec.run_id,
                temperature=spec.temperature,
                repeat=repeat,
                seed=spec.seed,
                prompting=spec.prompting,
            )
        writer.add_decision(row)

    await _pool(decision_jobs(plan, instances, skip), decide, concurrency)


def retried_decisions(store: Store, run_id: str, retry_failed: bool) -> dict[str, str]:
    """The run's failed decisions to ask again (id -> kind): transient ones on every resume,
    all of them with `retry_failed`."""
    kinds = records.FAILURE_KINDS if retry_failed else records.RETRIED_ON_RESUME
    return {k: v for k, v in store.failed_decisions(run_id).items() if v in kinds}


def decision_jobs(
    plan: Plan, instances: Mapping[str, Instance], skip: set[str]
) -> Iterator[tuple[Instance, str, int, str]]:
    """(instance, model, repeat, decision id) of every planned pair not in `skip`, in plan order."""
    spec = plan.spec
    for instance_id in plan.instance_ids:
        instance = instances.get(instance_id)
        if instance is None:
            continue
        for model in spec.models:
            for repeat in range(spec.repeats):
                key = records.decision_id(
                    spec.run_id, instance.id, model, repeat, spec.temperature, spec.prompting
                )
                if key not in skip:
                    yield instance, model, repeat, key


# --------------------------------------------------------------------------- background runs


def start_background(
    run_id: str,
    db: str | Path,
    log_dir: str | Path | None = None,
    retry_failed: bool = False,
    batch: bool = False,
) -> None:
    """Resume a stored run in its own process (it outlives the app's script and the browser).

    Only the run id and the database go on the command line: the spec is read from the
    store, and nothing secret is ever an argument."""
    log_dir = Path(log_dir or Path(db).parent)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{run_id}.log", "ab")  # noqa: SIM115 - handed to the child
    worker = subprocess.Popen(
        [sys.executable, "-m", "cogbias", "resume", run_id, "--db", str(db)]
        + (["--retry-failed"] if retry_failed else [])
        + (["--batch"] if batch else []),
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    with Store(db) as store:  # a cancel before the worker claims the run must reach it
        store.update_run(run_id, pid=worker.pid, cancel_requested=0)


def launch(spec: RunSpec, db: str | Path, name: str = "", batch: bool = False) -> str:
    """Plan and store a run, then work on it in the background (the app's Start/Resume).

    Raises `RunBusy` when a live worker already holds it, before starting another."""
    with Store(db) as store:
        run_id = create_run(plan(spec, store), store, name)
    return launch_stored(run_id, db, batch)


def launch_stored(run_id: str, db: str | Path, batch: bool = False) -> str:
    """Work on a stored run in the background, unless a live worker already holds it."""
    with Store(db) as store:
        run = store.run(run_id) or {}
        owner = run.get("lease_owner")
        if owner and lease_alive(owner, run.get("heartbeat_at"), LEASE_STALE_S):
            raise RunBusy(f"run {run_id} is already running")
    start_background(run_id, db, batch=batch)
    return run_id


def run_summaries(store: Store) -> list[dict[str, Any]]:
    """Runs with duration, models and biases; a 'running' run whose worker died is 'interrupted'."""
    rows = []
    for run in store.runs():
        spec = _loads(run["spec"])
        if run["status"] == "running" and not pid_alive(run["pid"]):
            run["status"] = "interrupted"
        if run["status"] == "running" and run["cancel_requested"]:
            run["status"] = "cancelling"
        run["models"] = ",".join(spec.get("models", []))
        run["biases"] = (
            spec.get("dataset")
            or (spec.get("kind") == "study" and f"study {spec['study']}")
            or (",".join(spec.get("biases", [])) or "all")
        )
        if run.get("duration_s") is None:  # made before durations accumulated
            run["duration_s"] = _duration(
                run["started_at"], run["finished_at"] or run["heartbeat_at"]
            )
        else:
            run["duration_s"] = round(run["duration_s"], 1)
        run["cost"] = round(run["cost"] or 0.0, 6)
        run["cost_saved"] = round(run.get("cost_saved") or 0.0, 6)
        rows.append(run)
    return rows


def spec_of(run: dict[str, Any]) -> RunSpec:
    return RunSpec.from_stored(run["spec"] or "{}")


def _loads(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _duration(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((parse_time(end) - parse_time(start)).total_seconds(), 1)
