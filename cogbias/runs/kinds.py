"""The kinds of run, and the one place that tells them apart.

Every run is a plan of units worked by one executor (`cogbias.runs.executor`); a kind says
what is particular to it: how a spec becomes a plan of units, how a unit is asked (one or
more model turns), how the answers become rows and how those rows are stored, and (its read
side, `read_side.ReadSide`) where those rows live, how they export and reduce, and which page
shows them. A caller asks a run's kind for these (`run.kind`, resolved here once); nothing
else looks inside a spec to guess its kind, and nothing outside this module compares a
kind's name (`tests/test_architecture.py` holds it).

To add a kind: write a module with a class satisfying `RunKind` (`cogbias.runs.work`, its
read side a subclass of `ReadSide`) whose spec's `canonical()` starts with
`"kind": <its name>`, and add it to `_kinds()`, or `register` it from its own module: a
plugin module named in the environment variable `COGBIAS_PLUGINS` (comma-separated module
paths) is imported when kinds are first asked for, in every process (the command, the app,
a run's worker), so one `kinds.register(...)` line in it is all a new kind needs. Planning,
starting, cancelling, resuming, listing, exporting, reporting and deleting then work for it
unchanged.

A stored spec names its kind (`read_stored` reads it and hands the kind its own fields):
a new kind's `canonical()` carries it, as a study's always has (`"kind": "study"`, part of
its run id); a paired spec's is added when stored, not hashed (`paired_plan.create_run`), so
run ids made before kinds existed stay the same. A spec stored without the key is owned by
the first kind whose `owns` says so.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from cogbias.core.run_record import Run
from cogbias.runs.work import RunKind

if TYPE_CHECKING:
    from cogbias.store import Store


def _kinds() -> list[RunKind]:
    from cogbias.runs.class_answers import ClassKind
    from cogbias.runs.paired import DatasetKind, PairedKind, TokenBiasKind
    from cogbias.runs.study import StudyKind

    # asked in order: the first that owns a spec without a kind key is its kind
    return [ClassKind(), StudyKind(), TokenBiasKind(), DatasetKind(), PairedKind()]


_KINDS: list[RunKind] = []
PLUGINS = "COGBIAS_PLUGINS"  # modules to import first: each registers its kinds
# what every kind offers its readers (`read_side.ReadSide` gives each a default)
READ_SIDE = (
    "page", "tables", "exports", "noun", "failed_noun", "cells", "settings", "failures",
    "abstained",
)  # fmt: skip


def registry() -> list[RunKind]:
    """Every kind of run, most specific first (the plugins' first of all)."""
    if not _KINDS:
        _KINDS.extend(_kinds())
        _import_plugins()
    return _KINDS


def _import_plugins() -> None:
    """Import the modules `COGBIAS_PLUGINS` names (each registers its kinds on import). The
    variable is inherited by a run's worker process, so the worker knows the same kinds."""
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(
                f"{PLUGINS} names the module '{module}', which could not be imported ({exc}); "
                f"install it or take it out of {PLUGINS}"
            ) from None


def register(kind: RunKind) -> RunKind:
    """Add a kind in this process (first in the registry); ValueError when its name is taken,
    TypeError when it lacks a read side (subclass `read_side.ReadSide` for its defaults).
    A worker process (`executor.launch`) knows the kinds of `_kinds()` and of the plugins
    `COGBIAS_PLUGINS` names."""
    missing = [piece for piece in READ_SIDE if not hasattr(kind, piece)]
    if missing:
        raise TypeError(
            f"the run kind '{kind.name}' has no {', '.join(missing)}: subclass "
            "`cogbias.runs.read_side.ReadSide`, which gives each a default"
        )
    if any(k.name == kind.name for k in registry()):
        raise ValueError(f"a run kind named '{kind.name}' is already registered")
    registry().insert(0, kind)
    return kind


def unregister(name: str) -> None:
    """Remove a kind added by `register` (a test's own kind, once it is done)."""
    registry()[:] = [k for k in registry() if k.name != name]


def spec_dict(spec: Any) -> dict[str, Any]:
    """A spec as the dict it is stored as: from JSON text, a dict, or a spec object."""
    if spec is None or spec == "":
        return {}
    if isinstance(spec, str):
        return json.loads(spec)
    if isinstance(spec, Mapping):
        return dict(spec)
    return spec.canonical()


def _named(name: Any) -> RunKind | None:
    return next((k for k in registry() if k.name == name), None)


def kind_of(spec: Any) -> RunKind:
    """The kind of a run's spec (stored JSON, a dict, or a spec object): the kind it names,
    else the first kind that owns it."""
    data = spec_dict(spec)
    if "kind" in data and (named := _named(data["kind"])) is not None:
        return named
    # A kind this version does not know is shown as a paired run; `read_stored` refuses to
    # resume it, saying that a newer cogbias made it.
    return next((k for k in registry() if "kind" not in data and k.owns(data)), get("paired"))


def get(name: str) -> RunKind:
    """A kind by its name."""
    if (kind := _named(name)) is not None:
        return kind
    raise KeyError(f"no run kind '{name}'; kinds: {', '.join(k.name for k in registry())}")


def read_stored(spec: Any) -> tuple[RunKind, dict[str, Any]]:
    """A stored spec's kind and its own fields: the spec without its "kind" key, as the
    kind's spec class reads it. ValueError when this cogbias does not know the kind named."""
    data = spec_dict(spec)
    name = data.pop("kind", None)
    if name is not None and _named(name) is None:
        raise ValueError(
            f"this run is of a kind this cogbias does not know ('{name}'; kinds: "
            f"{', '.join(k.name for k in registry())}): it was made by a newer cogbias or "
            "with a plugin that is not installed here; upgrade cogbias to resume it"
        )
    return (_named(name) if name is not None else kind_of(data)) or get("paired"), data


def plan(spec: Any, store: Store) -> Any:
    """The plan of any spec object, by its kind."""
    return kind_of(spec).plan(spec, store)


def stored(store: Store, run_id: str) -> Run:
    """A stored run as a `Run` (its kind resolved once), so a command can refuse a kind it
    does not handle by name; KeyError naming the recent runs when there is no such run."""
    row = store.run(run_id)
    if row is None:
        known = ", ".join(r["id"] for r in store.runs()[:5]) or "none"
        raise KeyError(f"no run {run_id} in {store.path} (recent runs: {known})")
    return record(row)


def record(row: Mapping[str, Any]) -> Run:
    """A stored run's row as a `Run`: its spec parsed and its kind resolved, once, so its
    readers ask the record instead of parsing the spec again."""
    run = Run.from_row(row)
    return replace(run, kind=kind_of(run.spec))


def records(store: Store) -> list[Run]:
    """Every stored run as a `Run` (newest first), each kind resolved once."""
    return [record(row) for row in store.runs()]


def of(run: Run) -> RunKind:
    """A record's kind, with everything a reader asks of it (`record` resolved it once)."""
    kind = run.kind if run.kind is not None else kind_of(run.spec)
    return cast(RunKind, kind)


def described(run: Run) -> str:
    """What a stored run is, in words a refusal can use: 'a study run (study mohr8)'."""
    kind = run.kind or kind_of(run.spec)
    return f"a {kind.name} run ({kind.target(run.spec)})"


def replan_run(store: Store, run: Run) -> Any:
    """The plan of a stored run (to resume it), by the kind its spec names; the kind's
    `replan` gets the run with its spec's own fields. ValueError when this cogbias does not
    know that kind."""
    kind, fields = read_stored(run.spec)
    return kind.replan(store, replace(run, spec=fields))


def replan(store: Store, run_id: str) -> Any:
    """The plan of a stored run, to resume it; KeyError when there is no such run."""
    return replan_run(store, stored(store, run_id))
