"""The kinds of run, and the one place that tells them apart.

Every run is a plan of units worked by one executor (`cogbias.runs.executor`); a kind says
what is particular to it: how a spec becomes a plan of units, how a unit is asked (one or
more model turns), how the answers become rows and how those rows are stored. A caller that
must treat kinds differently (which page shows a run's results, what a unit is called) asks
the kind's capabilities here; nothing else looks inside a spec to guess its kind.

To add a kind: write a module with a class satisfying `RunKind`, and add it to `_KINDS`.
A stored spec names its kind by its fields (a study spec has `"kind": "study"`; a paired
spec has no kind key, so run ids made before kinds existed stay the same).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cogbias.llm import LLMClient
    from cogbias.runs.executor import Writer
    from cogbias.store import Store


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
    """What the executor asks of a kind of run."""

    name: str  # "paired" | "dataset" | "tokenbias" | "study"
    unit_name: str  # what a unit is called in progress and summaries ("pairs", "units")
    results_page: str  # the app page that shows the results ("run", "studies")

    def owns(self, spec: Mapping[str, Any]) -> bool:
        """Whether a stored spec (as a dict) is of this kind."""

    def target(self, spec: Mapping[str, Any]) -> str:
        """What the run covers, in a few words (the runs table's "biases" column)."""

    def plan(self, spec: Any, store: Store) -> Any:
        """The plan of a spec of this kind (raises KeyError/ValueError on bad input)."""

    def replan(self, store: Store, run: Mapping[str, Any]) -> Any:
        """The plan of a stored run, from its stored spec (to resume it)."""

    def create(self, plan: Any, store: Store, name: str) -> str:
        """Store the run (unless it exists); returns its id."""

    def prepare(self, plan: Any, store: Store, retry_failed: bool) -> dict[str, Any]:
        """Before the work, in the transaction that marks the run running: store what the
        plan needs and return the run's counters so far (done, failed)."""

    async def work(self, job: Job) -> None:
        """Ask every unit not yet stored; hand the rows to `job.writer`."""

    def save(self, store: Store, rows: Mapping[str, list[dict[str, Any]]]) -> None:
        """Store a batch of rows (by table), inside the writer's transaction."""

    def incomplete(self, job: Job) -> str | None:
        """Why a run whose work finished is not done (transient failures left), or None."""

    def end_fields(self, job: Job) -> dict[str, Any]:
        """Run fields to record when the run ends."""


def _kinds() -> list[RunKind]:
    from cogbias.runs.paired import DatasetKind, PairedKind, TokenBiasKind
    from cogbias.runs.study import StudyKind

    # asked in order: the first that owns a spec is its kind
    return [StudyKind(), TokenBiasKind(), DatasetKind(), PairedKind()]


_KINDS: list[RunKind] = []


def registry() -> list[RunKind]:
    """Every kind of run, most specific first."""
    if not _KINDS:
        _KINDS.extend(_kinds())
    return _KINDS


def spec_dict(spec: Any) -> dict[str, Any]:
    """A spec as the dict it is stored as: from JSON text, a dict, or a spec object."""
    if spec is None or spec == "":
        return {}
    if isinstance(spec, str):
        return json.loads(spec)
    if isinstance(spec, Mapping):
        return dict(spec)
    return spec.canonical()


def kind_of(spec: Any) -> RunKind:
    """The kind of a run's spec (stored JSON, a dict, or a spec object)."""
    data = spec_dict(spec)
    # A kind this version does not know is read as a paired run, as before kinds were
    # registered: its spec then says, when resumed, that a newer cogbias made it.
    return next((k for k in registry() if k.owns(data)), get("paired"))


def get(name: str) -> RunKind:
    """A kind by its name."""
    for kind in registry():
        if kind.name == name:
            return kind
    raise KeyError(f"no run kind '{name}'; kinds: {', '.join(k.name for k in registry())}")


def plan(spec: Any, store: Store) -> Any:
    """The plan of any spec object, by its kind."""
    return kind_of(spec).plan(spec, store)


def replan(store: Store, run_id: str) -> Any:
    """The plan of a stored run, to resume it; KeyError when there is no such run."""
    run = store.run(run_id)
    if run is None:
        known = ", ".join(r["id"] for r in store.runs()[:5]) or "none"
        raise KeyError(f"no run {run_id} in {store.path} (recent runs: {known})")
    return kind_of(run["spec"]).replan(store, run)
