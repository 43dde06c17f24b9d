"""Deleting a run or an imported dataset: say exactly what goes, then remove only that.

Both the app and `cogbias delete` first build a `Deletion` (what would be removed, in
words the confirmation shows), then `apply` it in one transaction. What a run's rows are is
its kind's to say (`read_side.ReadSide.tables`), so a kind added later is deleted whole
without an edit here or in the store. A run that is still
going is refused: its worker would keep writing decisions for a run that no longer exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cogbias.core.run_record import ACTIVE, RunRows, SharedRows
from cogbias.runs import kinds, read_side
from cogbias.runs.summaries import run_summaries, target
from cogbias.store import Store


@dataclass(frozen=True)
class Deletion:
    """What deleting one run or dataset removes (and nothing else is touched)."""

    kind: str  # "run" | "dataset"
    name: str
    decisions: int
    instances: int
    runs: list[str] = field(default_factory=list)  # a dataset's own runs, deleted with it
    # a run's: where its kind keeps its rows (`read_side.ReadSide.tables`), what one is called
    owned: tuple[RunRows, ...] = ()
    shared: tuple[SharedRows, ...] = ()
    noun: str = "decision"

    def describe(self) -> str:
        if self.kind == "run":
            return (
                f"run {self.name}: {self.decisions:,} {self.noun}(s) and {self.instances:,} "
                "instance(s) no other run uses"
            )
        runs = f" and its {len(self.runs)} run(s) ({', '.join(self.runs)})" if self.runs else ""
        return (
            f"dataset {self.name}: {self.instances:,} test case(s), {self.decisions:,} "
            f"decision(s) on them{runs}"
        )


def _active(store: Store, run_ids: list[str], dataset: str | None = None) -> list[str]:
    """Which of these runs (or runs on `dataset`, even before their first decision) still run."""
    wanted = set(run_ids)
    return [
        r.id
        for r in run_summaries(store)
        if r.status in ACTIVE and (r.id in wanted or (dataset and target(r) == dataset))
    ]


def plan_run(store: Store, run_id: str) -> Deletion:
    """What deleting `run_id` removes. KeyError if unknown, ValueError while it runs."""
    row = store.run(run_id)
    if row is None:
        raise KeyError(f"no run {run_id!r} in {store.path}; `cogbias runs` lists them")
    if _active(store, [run_id]):
        raise ValueError(f"run {run_id} is still running: cancel it first, then delete it")
    kind = kinds.record(row).kind
    assert kind is not None  # `kinds.record` resolves it
    owned = tuple(read_side.owned(kind))
    shared = tuple(read_side.shared(kind, kinds.registry()))
    counts = store.run_footprint(run_id, owned, shared)
    return Deletion(
        "run", run_id, counts["decisions"], counts["instances"], [], owned, shared, kind.noun
    )


def plan_dataset(store: Store, name: str) -> Deletion:
    """What deleting dataset `name` removes. KeyError if unknown, ValueError while a run on
    it is still going."""
    if store.dataset(name) is None:
        raise KeyError(f"no dataset {name!r} in {store.path}; `cogbias datasets` lists them")
    counts = store.dataset_footprint(name)
    busy = _active(store, counts["runs"], name)
    if busy:
        raise ValueError(
            f"run(s) {', '.join(busy)} on dataset {name} are still running: cancel them first"
        )
    return Deletion("dataset", name, counts["decisions"], counts["instances"], counts["runs"])


def apply(store: Store, deletion: Deletion) -> None:
    """Remove what `deletion` describes, all or nothing."""
    if deletion.kind == "run":
        store.delete_run(deletion.name, deletion.owned, deletion.shared)
    elif deletion.kind == "dataset":
        store.remove_dataset(deletion.name)
    else:
        raise ValueError(f"cannot delete a {deletion.kind!r}")
