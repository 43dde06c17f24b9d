"""Plan and execute batches: test cases x scenarios x instances x models x repeats.

A run's id is a hash of what it asks for, and every instance and decision has a
deterministic key, so starting the same run again resumes it: whatever is already in the
store is skipped, nothing is duplicated. Results are committed in small batches every few
tens of milliseconds, so a killed run loses at most the calls that were in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import examples, library, pipeline
from .library import Scenario, TestCase
from .pipeline import Instance
from .store import Store, dumps, now

if TYPE_CHECKING:
    from .llm import LLMClient

FLUSH_SECONDS = 0.05
FLUSH_ROWS = 256
# Rough token use per LLM call, for estimates before a run (measured on the built-in library).
EST_PROMPT_TOKENS = {"generate": 450, "decide": 330, "extract": 200}
EST_COMPLETION_TOKENS = {"generate": 120, "decide": 180, "extract": 4}


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

    @property
    def run_id(self) -> str:
        return "run-" + pipeline.stable_id("run", asdict(self))[:12]

    def to_cli_args(self, db: str | Path) -> list[str]:
        args = ["run", "--db", str(db), "--models", ",".join(self.models)]
        args += ["--scenarios", str(self.scenarios), "--instances", str(self.instances)]
        args += ["--generator", self.generator, "--temperature", str(self.temperature)]
        args += ["--repeats", str(self.repeats), "--seed", str(self.seed)]
        if self.biases:
            args += ["--biases", ",".join(self.biases)]
        if self.api_base:
            args += ["--api-base", self.api_base]
        if self.dataset:
            args += ["--dataset", self.dataset]
        if self.per_bias:
            args += ["--per-bias", str(self.per_bias)]
        return args


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
        if not self.dataset_instances and self.spec.generator != pipeline.RANDOM_MODEL:
            gen = sum(
                2 for j in self.jobs if j.case.control.llm_gaps() or j.case.treatment.llm_gaps()
            )
        llm_models = [m for m in self.spec.models if m != pipeline.RANDOM_MODEL]
        per_model = len(self.instance_ids) * self.spec.repeats * 2
        return {
            "generate": gen,
            "decide": per_model * len(llm_models),
            "extract": per_model * len(llm_models),
        }

    def estimated_cost(self) -> float | None:
        """USD for priced models; None when any model has no known price."""
        calls = self.llm_calls()
        total = 0.0
        llm_models = [m for m in self.spec.models if m != pipeline.RANDOM_MODEL]
        per_model = {k: v // max(len(llm_models), 1) for k, v in calls.items() if k != "generate"}
        pricing = [(self.spec.generator, {"generate": calls["generate"]})]
        pricing += [(m, per_model) for m in llm_models]
        for model, counts in pricing:
            for kind, n in counts.items():
                if n == 0:
                    continue
                price = price_per_call(model, EST_PROMPT_TOKENS[kind], EST_COMPLETION_TOKENS[kind])
                if price is None:
                    return None
                total += n * price
        return total

    def describe(self) -> str:
        calls = self.llm_calls()
        cost = self.estimated_cost()
        source = (
            f"dataset {self.spec.dataset}"
            if self.spec.dataset
            else (
                f"{len(self.cases)} biases x {self.spec.scenarios} scenarios x {self.spec.instances} instances"
            )
        )
        return (
            f"run {self.spec.run_id}: {source} x {len(self.spec.models)} models x {self.spec.repeats} repeats "
            f"= {self.planned} pairs; at most {sum(calls.values())} LLM calls "
            f"({calls['generate']} generate, {calls['decide']} decide, {calls['extract']} extract); "
            f"estimated cost: {'unknown (unpriced model)' if cost is None else f'${cost:.4f}'}"
        )


def price_per_call(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for one call from litellm's price map; local and built-in models are free."""
    if model == pipeline.RANDOM_MODEL or model.startswith("local/"):
        return 0.0
    from .llm import get_litellm

    try:
        prompt, completion = get_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # unmapped model: litellm raises various errors
        return None
    return float(prompt + completion)


def plan(spec: RunSpec, store: Store | None = None) -> Plan:
    """Resolve a spec into concrete instances; raises KeyError/ValueError on bad input."""
    if not spec.models:
        raise ValueError("no decision models given (e.g. --models random,local/smollm2)")
    if spec.repeats < 1 or spec.instances < 1 or spec.scenarios < 1:
        raise ValueError("scenarios, instances and repeats must be at least 1")
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
    scenarios = library.load_scenarios()
    if spec.scenarios > len(scenarios):
        raise ValueError(f"only {len(scenarios)} scenarios exist")
    jobs = [
        InstanceJob(
            cases[b],
            s,
            i,
            pipeline.instance_id(
                cases[b], s.text, i, spec.generator, spec.seed, spec.generator_temperature
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
    """A one-line progress bar on stderr (a plain line per second when not a terminal)."""

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
            done, planned, what = run["done"], run["planned"] or 1, f"pairs, {run['failed']} failed"
        bar = "#" * int(30 * done / max(planned, 1))
        line = f"[{bar:<30}] {done}/{planned} {what}, {time.monotonic() - self.started:.0f} s"
        print(
            ("\r" + line) if self.tty else line,
            end="" if self.tty and not final else "\n",
            file=sys.stderr,
            flush=True,
        )


class _Writer:
    """Collects finished rows and commits them together every FLUSH_SECONDS."""

    def __init__(
        self, store: Store, run: dict[str, Any], cache: BufferedCache, progress: Progress | None
    ) -> None:
        self.store, self.run, self.cache, self.progress = store, run, cache, progress
        self.instances: list[dict[str, Any]] = []
        self.decisions: list[dict[str, Any]] = []
        self.cancelled = False
        self.last = time.monotonic()

    def add_decision(self, row: dict[str, Any]) -> None:
        self.decisions.append(row)
        self.run["done"] += 1
        self.run["failed"] += row["status"] == "failed"
        self.run["tokens"] += row.get("tokens") or 0
        self.run["cost"] += row.get("cost") or 0.0
        if len(self.decisions) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        self.last = time.monotonic()
        with self.store.atomic():
            self.store.save_instances(self.instances)
            self.store.save_decisions(self.decisions)
            self.store.put_llm_calls(self.cache.drain())
            keys = ("done", "failed", "tokens", "cost", "generated", "to_generate")
            fields = {k: self.run[k] for k in keys if k in self.run}
            self.store.update_run(self.run["id"], **fields, heartbeat_at=now())
        self.instances, self.decisions = [], []
        current = self.store.run(self.run["id"])
        self.cancelled = bool(current and current["cancel_requested"])
        if self.progress:
            self.progress(self.run)

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            idle = not (self.instances or self.decisions or self.cache.pending)
            # With nothing to write, only look for a cancel request now and then.
            if not idle or time.monotonic() - self.last >= 10 * FLUSH_SECONDS:
                self.flush()


def execute(
    plan: Plan,
    store: Store,
    concurrency: int = 16,
    progress: Progress | None = None,
    name: str = "",
) -> dict[str, Any]:
    """Run (or resume) a plan to completion, cancellation or a fatal error; returns the run row."""
    return asyncio.run(_execute(plan, store, concurrency, progress, name))


async def _execute(
    plan: Plan, store: Store, concurrency: int, progress: Progress | None, name: str
) -> dict[str, Any]:
    from .llm import FatalLLMError, LLMClient

    spec = plan.spec
    run_id = spec.run_id
    store.create_run(run_id, asdict(spec), plan.planned, name=name)
    with store.atomic():
        for case in plan.cases.values():
            store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
        scenarios = {job.scenario.id: job.scenario for job in plan.jobs}
        store.save_scenarios([{**asdict(s), "text": s.text} for s in scenarios.values()])
        counts = store.refresh_run_counts(run_id)
        store.update_run(
            run_id,
            status="running",
            started_at=now(),
            finished_at=None,
            pid=os.getpid(),
            cancel_requested=0,
            error=None,
        )
    run = {"id": run_id, "planned": plan.planned, "status": "running", **counts}
    cache = BufferedCache(store)
    client = LLMClient(cache=cache, concurrency=concurrency, api_base=spec.api_base)
    writer = _Writer(store, run, cache, progress)
    ticker = asyncio.create_task(writer.ticker())
    status, error = "done", None
    try:
        instances = await _instances(plan, store, client, writer, concurrency)
        if not writer.cancelled:
            await _decisions(plan, store, client, writer, instances, concurrency)
        if writer.cancelled:
            status = "cancelled"
    except FatalLLMError as exc:
        status, error = "failed", str(exc)
    except (asyncio.CancelledError, KeyboardInterrupt):
        status = "cancelled"
    finally:
        ticker.cancel()
        writer.flush()
    if status == "done" and run["done"] < plan.planned:
        status = "failed"
        error = error or f"only {run['done']} of {plan.planned} pairs were completed"
    store.update_run(run_id, status=status, finished_at=now(), error=error)
    run.update(status=status, error=error)
    if progress:
        progress(run)
    return store.run(run_id) or run


async def _pool(
    jobs: Iterator[Any], worker: Callable[[Any], Any], size: int, writer: _Writer
) -> None:
    """Run `worker` over `jobs` with at most `size` in flight; stop early on cancel."""

    async def loop() -> None:
        for job in jobs:
            if writer.cancelled:
                return
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
) -> list[Instance]:
    """Load the run's instances, generating the missing ones first."""
    if plan.dataset_instances:
        return [Instance.from_row(r) for r in store.instances(plan.dataset_instances)]
    existing = store.existing_instance_ids(j.id for j in plan.jobs)
    made: dict[str, Instance] = {}
    spec = plan.spec
    schema_ok = _supports_json_schema(spec.generator)

    async def make(job: InstanceJob) -> None:
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
                json_schema=schema_ok,
            )
        except pipeline.GenerationError as exc:
            instance = _failed_instance(job, spec, str(exc))
        except Exception as exc:
            from .llm import FatalLLMError, LLMError

            if isinstance(exc, FatalLLMError) or not isinstance(exc, LLMError):
                raise
            instance = _failed_instance(job, spec, f"{exc.kind}: {exc}")
        made[job.id] = instance
        writer.instances.append(instance.to_row())
        writer.run["generated"] += 1

    missing = [j for j in plan.jobs if j.id not in existing]
    writer.run.update(generated=0, to_generate=len(missing))
    await _pool(iter(missing), make, concurrency, writer)
    writer.flush()
    rows = {r["id"]: r for r in store.instances(existing)}
    return [
        made[j.id] if j.id in made else Instance.from_row(rows[j.id])
        for j in plan.jobs
        if j.id in made or j.id in rows
    ]


def _failed_instance(job: InstanceJob, spec: RunSpec, error: str) -> Instance:
    offline = pipeline.generate_offline(
        job.case, job.scenario.text, seed=spec.seed, index=job.index
    )
    offline.id, offline.generator = job.id, spec.generator
    offline.scenario_id, offline.temperature = job.scenario.id, spec.generator_temperature
    offline.status, offline.error = "failed", f"generation failed: {error}"
    return offline


def _supports_json_schema(model: str) -> bool:
    for info in library.load_models():
        if info.id == model:
            return info.json_schema
    return model.startswith(("openai/", "local/", "gpt-"))


async def _decisions(
    plan: Plan,
    store: Store,
    client: LLMClient,
    writer: _Writer,
    instances: list[Instance],
    concurrency: int,
) -> None:
    spec = plan.spec
    done = store.existing_decision_ids(spec.run_id)

    def jobs() -> Iterator[tuple[Instance, str, int]]:
        for instance in instances:
            for model in spec.models:
                for repeat in range(spec.repeats):
                    key = pipeline.stable_id(
                        "decision", spec.run_id, instance.id, model, repeat, spec.temperature
                    )
                    if key not in done:
                        yield instance, model, repeat

    async def decide(job: tuple[Instance, str, int]) -> None:
        instance, model, repeat = job
        if instance.status != "ok":
            row = pipeline.failed_decision(
                instance,
                model,
                spec.run_id,
                spec.temperature,
                repeat,
                instance.error or "instance failed",
            )
        else:
            row = await pipeline.decide_pair(
                client,
                instance,
                model,
                run_id=spec.run_id,
                temperature=spec.temperature,
                repeat=repeat,
                seed=spec.seed,
            )
        writer.add_decision(row)

    await _pool(jobs(), decide, concurrency, writer)


# --------------------------------------------------------------------------- background runs


def start_background(spec: RunSpec, db: str | Path, log_dir: str | Path | None = None) -> str:
    """Start `cogbias run` in its own process (it outlives the app's script and the browser)."""
    log_dir = Path(log_dir or Path(db).parent)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{spec.run_id}.log", "ab")  # noqa: SIM115 - handed to the child
    subprocess.Popen(
        [sys.executable, "-m", "cogbias", *spec.to_cli_args(db)],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    return spec.run_id


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_summaries(store: Store) -> list[dict[str, Any]]:
    """Runs with duration, models and biases; a 'running' run whose process died is 'interrupted'."""
    rows = []
    for run in store.runs():
        spec = _loads(run["spec"])
        if run["status"] == "running" and not pid_alive(run["pid"]):
            run["status"] = "interrupted"
        run["models"] = ",".join(spec.get("models", []))
        run["biases"] = spec.get("dataset") or (",".join(spec.get("biases", [])) or "all")
        run["duration_s"] = _duration(run["started_at"], run["finished_at"] or run["heartbeat_at"])
        run["cost"] = round(run["cost"] or 0.0, 6)
        rows.append(run)
    return rows


def spec_of(run: dict[str, Any]) -> RunSpec:
    return RunSpec(**_loads(run["spec"]))


def _loads(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _duration(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    return round((datetime.strptime(end, fmt) - datetime.strptime(start, fmt)).total_seconds(), 1)
