"""The kinds of run, and the one place that tells them apart.

Every run is a plan of units worked by one executor (`cogbias.runs.executor`); a kind says
what is particular to it: how a spec becomes a plan of units, how a unit is asked (one or
more model turns), how the answers become rows and how those rows are stored. A caller that
must treat kinds differently (which page shows a run's results, what a unit is called) asks
the kind's capabilities here; nothing else looks inside a spec to guess its kind.

To add a kind: write a module with a class satisfying `RunKind` (`cogbias.runs.work`), and
add it to `_kinds()`.
A stored spec names its kind by its fields (a study spec has `"kind": "study"`; a paired
spec has no kind key, so run ids made before kinds existed stay the same).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cogbias.runs.work import RunKind

if TYPE_CHECKING:
    from cogbias.store import Store


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


def stored(store: Store, run_id: str) -> tuple[dict[str, Any], RunKind]:
    """A stored run and its kind, so a command can refuse a kind it does not handle by
    name; KeyError naming the recent runs when there is no such run."""
    run = store.run(run_id)
    if run is None:
        known = ", ".join(r["id"] for r in store.runs()[:5]) or "none"
        raise KeyError(f"no run {run_id} in {store.path} (recent runs: {known})")
    return run, kind_of(run["spec"])


def described(run: Mapping[str, Any]) -> str:
    """What a stored run is, in words a refusal can use: 'a study run (study mohr8)'."""
    kind = kind_of(run["spec"])
    return f"a {kind.name} run ({kind.target(spec_dict(run['spec']))})"


def replan(store: Store, run_id: str) -> Any:
    """The plan of a stored run, to resume it; KeyError when there is no such run."""
    run, kind = stored(store, run_id)
    return kind.replan(store, run)
