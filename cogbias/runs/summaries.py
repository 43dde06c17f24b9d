"""The runs table as people read it: every kind of run with its duration, models and target,
and a status that tells a running run from one whose worker died."""

from __future__ import annotations

from typing import Any

from cogbias.core.run_record import Run, RunStatus
from cogbias.llm import costs
from cogbias.runs import kinds
from cogbias.store import Store, parse_time, pid_alive

OFFLINE_GENERATORS = ("examples", "random")  # fill gaps without a model call


def run_summaries(store: Store) -> list[dict[str, Any]]:
    """Runs with duration, models, biases, what a unit is called (`unit`), the page that shows
    their results (`page`, a `ResultsPage` or None) and their cost as text (`cost_text`); a 'running' run whose
    worker died is 'interrupted'. Each run's spec is parsed and its kind resolved once."""
    return [_summary(run) for run in store.runs()]


def run_summary(store: Store, run_id: str) -> dict[str, Any] | None:
    """One run's `run_summaries` row (None when there is no such run): what a progress view
    polls every second, without reading, parsing and probing every other run."""
    run = store.run(run_id)
    return None if run is None else _summary(run)


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    """A stored run's row as the runs table reads it."""
    record = kinds.record(run)
    kind, spec = record.kind, record.spec
    assert kind is not None  # `kinds.record` resolves it
    if run["status"] == RunStatus.RUNNING and not pid_alive(run["pid"]):
        run["status"] = RunStatus.INTERRUPTED
    if run["status"] == RunStatus.RUNNING and run["cancel_requested"]:
        run["status"] = RunStatus.CANCELLING
    run["models"] = ",".join(spec.get("models", []))
    run["biases"] = kind.target(spec)
    run["unit"], run["page"] = kind.unit_name, kind.page
    if run.get("duration_s") is None:  # made before durations accumulated
        run["duration_s"] = _duration(run["started_at"], run["finished_at"] or run["heartbeat_at"])
    else:
        run["duration_s"] = round(run["duration_s"], 1)
    run["cost"] = round(run["cost"] or 0.0, 6)
    run["cost_saved"] = round(run.get("cost_saved") or 0.0, 6)
    run["cost_text"] = costs.spent_text(run["cost"], run_models(record), spec.get("api_base"))
    return run


def run_models(run: Run) -> list[str]:
    """Every model a stored run asks: its decision models and its gap-filling generator."""
    models = list(run.spec.get("models") or [])
    generator = run.spec.get("generator")
    if generator and generator not in OFFLINE_GENERATORS:
        models.append(generator)
    return [str(m) for m in models]


def cost_text(run: Run) -> str:
    """A stored run's spent cost as text: "≥ $0.0120, some unknown" when a model it asked
    has no price (see `cogbias.llm.costs.cost_text`)."""
    return costs.spent_text(run.cost, run_models(run), run.spec.get("api_base"))


def _duration(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((parse_time(end) - parse_time(start)).total_seconds(), 1)
