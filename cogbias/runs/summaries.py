"""The runs as people read them: every kind of run as its `Run` record, with the status that
tells a running run from one whose worker died (or that is being cancelled), its duration,
and, for a table of runs, the models it asks, what it covers and its cost as text."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from cogbias.core.run_record import Run, RunStatus
from cogbias.llm import costs
from cogbias.runs import kinds
from cogbias.store import Store, parse_time, pid_alive

OFFLINE_GENERATORS = ("examples", "random")  # fill gaps without a model call
HIDDEN = ("spec", "spec_readable", "kind")  # a record's fields a table of runs leaves out


def run_summaries(store: Store) -> list[Run]:
    """Every run as read (`read`), newest first; each spec is parsed and each kind resolved
    once."""
    return [read(row) for row in store.runs()]


def run_summary(store: Store, run_id: str) -> Run | None:
    """One run as read (None when there is no such run): what a progress view polls every
    second, without reading, parsing and probing every other run."""
    row = store.run(run_id)
    return None if row is None else read(row)


def read(row: dict[str, Any]) -> Run:
    """A stored run's row as its reader sees it: a 'running' run whose worker died is
    `interrupted`, one whose cancel was asked `cancelling`; its duration (to the tenth of a
    second) and its costs (to the micro-dollar) as a table shows them."""
    run = kinds.record(row)
    status = run.status
    if status == RunStatus.RUNNING and not pid_alive(run.pid):
        status = RunStatus.INTERRUPTED
    if status == RunStatus.RUNNING and run.cancel_requested:
        status = RunStatus.CANCELLING
    duration = run.duration_s
    if duration is None:  # made before durations accumulated
        duration = _duration(run.started_at, run.finished_at or run.heartbeat_at)
    else:
        duration = round(duration, 1)
    return replace(
        run,
        status=status,
        duration_s=duration,
        cost=round(run.cost or 0.0, 6),
        cost_saved=round(run.cost_saved or 0.0, 6),
    )


def target(run: Run) -> str:
    """What the run covers, in a few words (its kind's `target`: biases, a dataset, a
    study): the runs table's "biases" column."""
    return kinds.of(run).target(run.spec)


def table_row(run: Run) -> dict[str, Any]:
    """A run as one row of a table of runs (`cogbias runs`, the pages' pickers): its stored
    fields, the models it asks ("a,b", as `--models` takes them), what it covers
    (`biases`), what its units are called (`unit`) and its cost as text (`cost_text`)."""
    row = {f.name: getattr(run, f.name) for f in fields(run) if f.name not in HIDDEN}
    return {
        **row,
        "models": ",".join(str(m) for m in run.spec.get("models", [])),
        "biases": target(run),
        "unit": kinds.of(run).unit_name,
        "cost_text": cost_text(run),
    }


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
    return costs.cost_text(run.cost, run_models(run), run.spec.get("api_base"))


def _duration(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((parse_time(end) - parse_time(start)).total_seconds(), 1)
