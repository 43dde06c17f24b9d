"""The read side of the paired kinds (paired, dataset, token bias): where their rows live,
how they export, what they reduce to and how their settings read (`read_side.ReadSide`).

A paired run's results are `decisions` rows, each joined to the instance it answered; its
instances are shared by id with any other run that drew the same pair, so deleting a run
removes only those no other run uses (and none a dataset owns).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from cogbias.core.export_columns import (
    INSTANCE_EXPORT_COLUMNS,
    PAIR_COLUMNS,
    instance_record,
    pair_record,
)
from cogbias.core.run_record import ResultsPage, Run, RunRows, SharedRows
from cogbias.runs import scorers
from cogbias.runs.read_side import ExportTable, ReadSide

if TYPE_CHECKING:
    import pandas as pd

    from cogbias.store import Store

OFFLINE_GENERATORS = {
    "examples": "the offline generator: each gap filled from its author-written example fills",
    "random": "the offline generator: gaps filled at random from their example fills",
    "none": "none: gaps left as written",
}


def pair_rows(store: Store, run: Run, model: str | None) -> Iterator[list[dict[str, Any]]]:
    """A run's pairs (each decision joined to its instance) as exported, in batches."""
    for batch in store.iter_pairs(run_id=run.id, model=model):
        yield [pair_record(pair) for pair in batch]


def instance_rows(store: Store, run: Run, model: str | None) -> Iterator[list[dict[str, Any]]]:
    """The instances a run's pairs answered, as exported test cases, in batches."""
    for batch in store.iter_run_instances(run.id, model):
        yield [instance_record(row) for row in batch]


class PairedResults(ReadSide):
    """Pairs scored per bias × model: Explore shows them."""

    page = ResultsPage.EXPLORE
    tables = (
        RunRows("decisions"),
        RunRows("batch_requests", results=False),
        RunRows("run_test_cases", results=False),
        SharedRows("instances", "id", (("decisions", "instance_id"),), kept_if_set="dataset"),
    )
    exports = (
        ExportTable(
            "pairs",
            PAIR_COLUMNS,
            pair_rows,
            "one row per model decision on a control/treatment pair, joined to its instance "
            "(both texts as the model read them, the answers, the metric and the score)",
        ),
        ExportTable(
            "instances",
            INSTANCE_EXPORT_COLUMNS,
            instance_rows,
            "the filled control/treatment pairs (test instances) the decisions answered",
        ),
    )
    noun = "decision"

    def cells(self, store: Store, run: Run) -> pd.DataFrame:
        from cogbias.studies import cells

        return cells.results_table(store, run_id=run.id)

    def settings(self, store: Store, run: Run) -> tuple[str, ...]:
        return settings(run, self.name)

    def failures(self, store: Store, run: Run) -> Mapping[str, int]:
        return store.run_failure_kinds(run.id)

    def abstained(self, store: Store, run: Run) -> int:
        return store.run_abstained(run.id)

    def unreadable(self, store: Store, run: Run) -> list[str]:
        return [str(row["error"] or "") for row in store.unreadable_errors(run_id=run.id)]


def settings(run: Run, kind: str) -> tuple[str, ...]:
    """A paired run's stored spec in words."""
    spec = run.spec
    try:
        scorer = scorers.get(str(spec.get("scoring") or scorers.DEFAULT)).label
    except ValueError:
        scorer = str(spec.get("scoring"))
    target = f"the dataset {spec['dataset']}" if spec.get("dataset") else "the library"
    return (
        f"Run {run.id}"
        + (f" ({run.name})" if run.name else "")
        + f": a {kind} run on {target}, status {run.status}",
        f"Scorer: {scorer} ({spec.get('scoring') or scorers.DEFAULT}); answers read by "
        f"{spec.get('reading') or 'answer'}" + _sampled(spec),
        f"Decision temperature {spec.get('temperature', 0.0)}, seed {spec.get('seed', 0)}, "
        f"{spec.get('repeats', 1)} repeat(s) per pair",
        f"Prompting: {spec.get('prompting') or 'baseline'}; option order: "
        f"{spec.get('option_order') or 'half_reversed'}; extraction by "
        f"{spec.get('extractor') or 'each decision model'}",
        _factors(spec),
        f"Scenarios: {spec.get('scenarios', 1)}, instances per test case and scenario: "
        f"{spec.get('instances', 1)}"
        + (f", at most {spec['per_bias']} per bias" if spec.get("per_bias") else ""),
        f"Gaps filled by {_generator(spec)}",
        f"Created {run.created_at or '–'}, started {run.started_at or '–'}, finished "
        f"{run.finished_at or '–'}",
    )


def _factors(spec: Mapping[str, Any]) -> str:
    """The run's reasoning effort, thinking budget and intervention (`runs.factors`)."""
    budget = spec.get("thinking_budget")
    return (
        f"Reasoning effort: {spec.get('reasoning_effort') or 'each model’s own'}"
        + (f", thinking budget {budget:,} tokens" if isinstance(budget, int) and budget else "")
        + f"; intervention: {spec.get('intervention') or 'none'}"
    )


def _sampled(spec: Mapping[str, Any]) -> str:
    """How many answers each half was asked and how they were reduced, or '' for one."""
    try:
        scoring, samples, reducer = scorers.spelled(
            str(spec.get("scoring") or scorers.DEFAULT),
            int(spec.get("samples") or 1),
            spec.get("reducer"),
        )
        scorer = scorers.get(scoring)
    except (TypeError, ValueError):
        return ""
    if not scorer.sampled(samples):
        return ""
    return f"; {samples} sample(s) a half, reduced by {reducer or scorer.reducer}"


def _generator(spec: Mapping[str, Any]) -> str:
    generator = str(spec.get("generator") or "")
    if spec.get("dataset"):
        return "none: the dataset's pairs were asked as stored"
    if generator in OFFLINE_GENERATORS:
        return OFFLINE_GENERATORS[generator]
    temperature = spec.get("generator_temperature", 0.7)
    return f"the model {generator}, at temperature {temperature}"
