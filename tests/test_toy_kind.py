"""A kind of run registered as docs/architecture.md says ("Add a run kind") is planned,
started, cancelled and resumed through the functions the CLI and the app use, without
touching `RunSpec`, the pages or the commands: kinds are told apart by their kind.

The toy kind asks no model: each unit writes one row into its own table, so a resume that
asked a unit twice, or skipped one, shows in the row count.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
from run_helpers import spec as paired_spec

from cogbias.cli.main import main as cogbias
from cogbias.core import records
from cogbias.core.run_record import Run
from cogbias.runs import executor, kinds, paired_plan
from cogbias.runs.summaries import run_summaries
from cogbias.runs.work import Job, pool
from cogbias.store import Store

TABLE = "toy_units"


@dataclass(frozen=True)
class ToySpec:
    units: int
    seed: int = 0
    api_base: str | None = None  # the executor opens its client on the run's endpoint

    def canonical(self) -> dict[str, Any]:
        return {"kind": ToyKind.name, **asdict(self)}

    @property
    def run_id(self) -> str:
        return records.run_id_of(self.canonical())

    @classmethod
    def from_stored(cls, fields: Mapping[str, Any]) -> ToySpec:
        return cls(**fields)


@dataclass
class ToyPlan:
    spec: ToySpec

    @property
    def planned(self) -> int:
        return self.spec.units

    def describe(self) -> str:
        return f"toy run {self.spec.run_id}: {self.planned} units"


def _stored_units(store: Store, run_id: str) -> set[int]:
    _table(store)
    rows = store.query(f"select unit from {TABLE} where run_id = ?", [run_id])
    return {r["unit"] for r in rows}


def _table(store: Store) -> None:
    store.db.execute(
        f"create table if not exists {TABLE} (run_id text, unit integer, primary key (run_id, unit))"
    )


class ToyKind:
    """Units 0..n-1; each waits a moment, then is stored. `after_unit` lets a test act
    (cancel the run) after a given unit."""

    name = "toy"
    unit_name = "units"
    results = TABLE  # no page shows these
    batchable = False

    def __init__(self) -> None:
        self.after_unit: Callable[[int], None] = lambda unit: None
        self.asked: list[int] = []

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return False  # its specs always name it

    def target(self, spec: Mapping[str, Any]) -> str:
        return f"toy x{spec['units']}"

    def plan(self, spec: ToySpec, store: Store) -> ToyPlan:
        if spec.units < 1:
            raise ValueError("a toy run needs at least one unit")
        return ToyPlan(spec)

    def replan(self, store: Store, run: Run) -> ToyPlan:
        return self.plan(ToySpec.from_stored(run.spec), store)

    def create(self, plan: ToyPlan, store: Store, name: str) -> str:
        spec = plan.spec
        store.create_run(spec.run_id, spec.canonical(), plan.planned, name)
        return spec.run_id

    def prepare(self, plan: ToyPlan, store: Store, retry_failed: bool) -> dict[str, Any]:
        return {"done": len(_stored_units(store, plan.spec.run_id)), "failed": 0}

    async def work(self, job: Job) -> None:
        done = _stored_units(job.store, job.plan.spec.run_id)
        todo: Iterator[int] = (u for u in range(job.plan.planned) if u not in done)

        async def unit(number: int) -> None:
            await asyncio.sleep(0.02)
            self.asked.append(number)
            job.writer.run["done"] += 1
            job.writer.add(TABLE, {"run_id": job.plan.spec.run_id, "unit": number})
            self.after_unit(number)

        await pool(todo, unit, job.concurrency)

    def save(self, store: Store, rows: Mapping[str, list[dict[str, Any]]]) -> None:
        _table(store)
        if rows.get(TABLE):
            store.db[TABLE].insert_all(rows[TABLE], ignore=True)

    def incomplete(self, job: Job) -> str | None:
        left = job.plan.planned - len(_stored_units(job.store, job.plan.spec.run_id))
        return f"{left} unit(s) left; resume the run" if left else None

    def end_fields(self, job: Job) -> dict[str, Any]:
        return {}


@pytest.fixture
def toy() -> Iterator[ToyKind]:
    kind = kinds.register(ToyKind())
    try:
        yield kind
    finally:
        kinds.unregister(kind.name)


def test_a_registered_kind_is_planned_started_cancelled_and_resumed(
    toy: ToyKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "toy.db")
    spec = ToySpec(units=40)
    with Store(db) as store:
        plan = kinds.plan(spec, store)  # what `cogbias run --plan-only` and the pages do
        run_id = executor.create(plan, store, "toy")
        assert kinds.kind_of(store.run(run_id)["spec"]) is toy
        assert json.loads(store.run(run_id)["spec"])["kind"] == "toy"

    def cancel_once(unit: int) -> None:
        if len(toy.asked) == 5:
            assert cogbias(["cancel", run_id, "--db", db]) == 0

    toy.after_unit = cancel_once
    # started as the app starts a run: a worker resumes the stored run by its id
    assert cogbias(["resume", run_id, "--db", db, "--concurrency", "1"]) == 0
    with Store(db) as store:
        run = store.run(run_id)
        assert run["status"] == "cancelled"
        assert 5 <= len(_stored_units(store, run_id)) < 40
        assert run["done"] == len(_stored_units(store, run_id))
    assert "cancelling" in capsys.readouterr().err

    toy.after_unit = lambda unit: None
    asked_before = len(toy.asked)
    assert cogbias(["resume", run_id, "--db", db]) == 0
    with Store(db) as store:
        run = store.run(run_id)
        assert run["status"] == "done" and run["done"] == 40
        assert _stored_units(store, run_id) == set(range(40))
        [summary] = [r for r in run_summaries(store) if r["id"] == run_id]
        assert summary["biases"] == "toy x40"
    assert asked_before < 40 and len(toy.asked) == 40  # the resume asked only what was left
    assert "40 of 40 units" in capsys.readouterr().err


def test_a_registered_kind_runs_in_process_and_is_refused_by_batch_by_name(
    toy: ToyKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "toy.db")
    with Store(db) as store:
        outcome = executor.execute(kinds.plan(ToySpec(units=3, seed=1), store), store)
    assert outcome["status"] == "done" and outcome["done"] == 3
    out = str(tmp_path / "requests.jsonl")
    assert cogbias(["batch", "export", outcome["id"], "--db", db, "-o", out]) == 2
    assert "a toy run asks its units directly" in capsys.readouterr().err


def test_stored_specs_name_their_kind_and_old_ones_load_as_before(tmp_path: Path) -> None:
    spec = paired_spec(None, scenarios=1)
    with Store(tmp_path / "k.db") as store:
        plan = paired_plan.plan(spec, store)
        run_id = executor.create(plan, store)
        stored = store.run(run_id)["spec"]
        kind, fields = kinds.read_stored(stored)
        assert json.loads(stored)["kind"] == "paired" and kind.name == "paired"
        # the kind is not hashed: the id is the spec's, as before kinds were stored
        assert paired_plan.RunSpec.from_stored(fields).run_id == run_id == plan.spec.run_id
        assert kinds.replan(store, run_id).spec.run_id == run_id
        old = plan.spec.canonical()  # a spec stored before kinds were named
        assert kinds.read_stored(old) == (kind, old)


def test_a_kind_this_cogbias_does_not_know_is_listed_but_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "k.db")
    with Store(db) as store:
        store.create_run("run-fromafuture", {"kind": "hologram", "models": ["random"]}, 1)
        assert kinds.kind_of(store.run("run-fromafuture")["spec"]).name == "paired"  # listed
        assert [r["id"] for r in run_summaries(store)] == ["run-fromafuture"]
    assert cogbias(["resume", "run-fromafuture", "--db", db]) == 2
    said = capsys.readouterr().err
    assert "'hologram'" in said and "upgrade cogbias" in said
