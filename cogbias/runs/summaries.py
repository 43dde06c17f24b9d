"""The runs table as people read it: every kind of run with its duration, models and target,
and a status that tells a running run from one whose worker died."""

from __future__ import annotations

import json
from typing import Any

from cogbias.runs import kinds
from cogbias.runs.paired_plan import RunSpec
from cogbias.store import Store, parse_time, pid_alive


def run_summaries(store: Store) -> list[dict[str, Any]]:
    """Runs with duration, models and biases; a 'running' run whose worker died is 'interrupted'."""
    rows = []
    for run in store.runs():
        spec = json.loads(run["spec"]) if run["spec"] else {}
        if run["status"] == "running" and not pid_alive(run["pid"]):
            run["status"] = "interrupted"
        if run["status"] == "running" and run["cancel_requested"]:
            run["status"] = "cancelling"
        run["models"] = ",".join(spec.get("models", []))
        run["biases"] = kinds.kind_of(spec).target(spec)
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
    """The spec of a stored paired run (its fields, read by `kinds.read_stored`)."""
    return RunSpec.from_stored(kinds.read_stored(run["spec"])[1])


def _duration(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((parse_time(end) - parse_time(start)).total_seconds(), 1)
