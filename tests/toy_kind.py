"""A toy kind of run, written as docs/architecture.md says a new kind is ("Add a run kind"):
one module, registered by its last line, and known to every process that imports it
(`COGBIAS_PLUGINS=toy_kind`, the worker a run is resumed in included).

It asks no model: each unit writes one row into the kind's own table, `toy_units`, so a resume
that asked a unit twice, or skipped one, shows in the rows; its read side (`ReadSide`) says
where those rows are, how they export and what they reduce to, so listing, exporting,
reporting and deleting its runs need no other edit. A worker started with `TOY_HOLD_AFTER=N`
holds every unit from the N-th on until the run is cancelled: a test cancels it midway
without racing the clock.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from cogbias.core import records
from cogbias.core.run_record import Run, RunRows
from cogbias.runs import kinds
from cogbias.runs.read_side import ExportTable, ReadSide
from cogbias.runs.work import Job, pool
from cogbias.store import Store

TABLE = "toy_units"
HOLD = "TOY_HOLD_AFTER"


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


def stored_units(store: Store, run_id: str) -> list[int]:
    """The units of a run stored so far, in order."""
    if not store.db[TABLE].exists():
        return []
    rows = store.db[TABLE].rows_where("run_id = ?", [run_id], select="unit", order_by="unit")
    return [row["unit"] for row in rows]


def unit_rows(store: Store, run: Run, model: str | None) -> Iterator[list[dict[str, Any]]]:
    yield [{"run_id": run.id, "unit": unit} for unit in stored_units(store, run.id)]


class ToyKind(ReadSide):
    """Units 0..n-1; each waits a moment, then is stored."""

    name = "toy"
    unit_name = "units"
    batchable = False
    tables = (RunRows(TABLE),)
    exports = (
        ExportTable("units", {"run_id": "str", "unit": "int"}, unit_rows, "one row per unit"),
    )
    noun = "unit"

    def __init__(self) -> None:
        self.asked: list[int] = []  # units asked in this process

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return False  # its specs always name it

    def target(self, spec: Mapping[str, Any]) -> str:
        return f"toy x{spec['units']}"

    def cells(self, store: Store, run: Run) -> pd.DataFrame:
        units = pd.Series(stored_units(store, run.id), dtype=int)
        parity = units.map(lambda unit: "even" if unit % 2 == 0 else "odd")
        counts = units.groupby(parity).count()
        return pd.DataFrame({"parity": counts.index, "units": counts.to_numpy()})

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
        return {"done": len(stored_units(store, plan.spec.run_id)), "failed": 0}

    async def work(self, job: Job) -> None:
        done = set(stored_units(job.store, job.plan.spec.run_id))
        todo = (u for u in range(job.plan.planned) if u not in done)
        hold = int(os.environ.get(HOLD, job.plan.planned))

        async def unit(number: int) -> None:
            await asyncio.sleep(0.01)
            while number >= hold:  # held until the run is cancelled
                await asyncio.sleep(0.05)
            self.asked.append(number)
            job.writer.run.done += 1
            job.writer.add(TABLE, {"run_id": job.plan.spec.run_id, "unit": number})

        await pool(todo, unit, job.concurrency)

    def save(self, store: Store, rows: Mapping[str, list[dict[str, Any]]]) -> None:
        if rows.get(TABLE):
            store.db[TABLE].insert_all(rows[TABLE], pk=("run_id", "unit"), ignore=True)

    def incomplete(self, job: Job) -> str | None:
        left = job.plan.planned - len(stored_units(job.store, job.plan.spec.run_id))
        return f"{left} unit(s) left; resume the run" if left else None

    def end_fields(self, job: Job) -> dict[str, Any]:
        return {}


kinds.register(ToyKind())
