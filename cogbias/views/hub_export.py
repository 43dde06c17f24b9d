"""Export a run or a dataset as a folder the Hugging Face Hub reads as a dataset.

`cogbias export --hub DIR` writes one Parquet file per table under `DIR/data/` — the pairs
(one row per decision joined to its instance, the columns of `cogbias export`) or, for a
study run, its turns; the instances those pairs answered; and the runs that made them — and a
dataset card, `DIR/README.md` (`views.hub_card`), whose YAML header names one config per
table with its features, so `hf upload` or `datasets.load_dataset(DIR, "pairs")` reads the
folder as published. The folder appears whole or not at all (`core.outputs.replacing_folder`).
No key is written: the runs' specs lose an endpoint's user, password and query, and pass
through `core.redact` like everything else the store hands out.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cogbias.core.export_columns import instance_record
from cogbias.core.outputs import check_folder, replacing_folder
from cogbias.core.redact import redact, redact_json, redactor
from cogbias.core.run_record import Run
from cogbias.runs import kinds
from cogbias.runs.paired_results import PairedResults
from cogbias.runs.read_side import ExportTable
from cogbias.store import Store
from cogbias.views import hub_card
from cogbias.views.export import records, write
from cogbias.views.hub_card import HubTable
from cogbias.views.report_methods import dataset_methods, run_methods

RUNS_DESCRIPTION = (
    "the runs that made the decisions: spec (JSON, without keys), status, counts, tokens and cost"
)
# name -> type (as in core/export_columns.py). A run's spec is JSON text: its fields differ by
# kind, and a text column keeps one schema for every run.
RUN_COLUMNS: dict[str, str] = {
    "run_id": "str",
    "name": "str",
    "kind": "str",
    "status": "str",
    "spec": "str",
    "models": "list",
    "planned": "int",
    "done": "int",
    "failed": "int",
    "failure_kinds": "str",
    "tokens": "int",
    "cost": "float",
    "created_at": "str",
    "started_at": "str",
    "finished_at": "str",
    "error": "str",
}


def export_hub(
    store: Store,
    folder: str | Path,
    run_id: str | None = None,
    dataset: str | None = None,
    model: str | None = None,
    force: bool = False,
) -> list[HubTable]:
    """Write the Hub folder of a run (its pairs or turns, instances and run) or of a dataset
    (every pair on it, its instances, the runs that answered it); the tables written. Never
    over a folder holding the store's database; over a non-empty folder only with `force`."""
    if not run_id and not dataset:
        raise ValueError("say what to export: --dataset NAME or --run ID")
    protect = (store.path,)
    check_folder(folder, force, protect)  # before reading anything: a refusal costs nothing
    runs = selected_runs(store, run_id, dataset)
    exported = _exported(store, runs[0] if run_id else None, dataset, model)
    tables = [HubTable(t.name, "", t.columns, t.description) for t, _ in exported]
    tables.append(HubTable("runs", "", RUN_COLUMNS, RUNS_DESCRIPTION))
    main = tables[0]
    sources: dict[str, Iterable[list[dict[str, Any]]]] = {t.name: rows for t, rows in exported}
    sources["runs"] = [[run_record(store, run) for run in runs]]
    with replacing_folder(folder, force, protect) as temporary:
        for table in tables:
            table.path = f"data/{table.name}.parquet"
            rows = table.counted(sources[table.name])
            table.rows = write(rows, temporary / table.path, "parquet", table.columns)
            if not table.rows:  # `datasets` cannot load an empty split: no config for it
                (temporary / table.path).unlink()
        if not main.rows:
            what = f"run {run_id}" if run_id else f"dataset {dataset}"
            which = f" of model {model}" if model else ""
            raise ValueError(f"{what} has no {main.name}{which} yet: there is nothing to publish")
        tables = [table for table in tables if table.rows]
        title = (
            f"cogbias run {runs[0].name or runs[0].id}" if run_id else f"cogbias dataset {dataset}"
        )
        methods = run_methods(store, run_id) if run_id else dataset_methods(store, str(dataset))
        text = hub_card.card(title, tables, methods, temporary, model)
        (temporary / "README.md").write_text(text, encoding="utf-8")
    return tables


def _exported(
    store: Store, run: Run | None, dataset: str | None, model: str | None
) -> list[tuple[ExportTable, Iterable[list[dict[str, Any]]]]]:
    """Each table beside the runs, with its rows: what a run's kind exports (a paired run's
    pairs and instances, a study run's turns), or a dataset's pairs and instances (the
    tables of a paired run, over the whole dataset)."""
    if run is not None:
        tables = kinds.of(run).exports
        if not tables:
            raise ValueError(f"run {run.id} is {kinds.described(run)}, whose rows are not exported")
        return [(t, t.rows(store, run, model)) for t in tables]
    pairs, instances = PairedResults.exports
    return [
        (pairs, records(store, None, dataset, "pairs", model)),
        (instances, _instances(store, str(dataset))),
    ]


def selected_runs(store: Store, run_id: str | None, dataset: str | None) -> list[Run]:
    """The stored runs a selection covers: the run itself, or every run with decisions on the
    dataset (its published decisions have no stored run: the card says where they came
    from)."""
    if run_id:
        return [kinds.stored(store, run_id)]
    ids = store.dataset_run_users(str(dataset), "")
    found = [store.run(run) for run in ids]
    return [kinds.record(row) for row in found if row is not None]


def _instances(store: Store, dataset: str) -> Iterator[list[dict[str, Any]]]:
    for batch in store.iter_instances(dataset):
        yield [instance_record(row) for row in batch]


def run_record(store: Store, run: Run) -> dict[str, Any]:
    """A run as a row of the `runs` table: what it asked (its spec, keyless), what became of
    it, and what it cost."""
    clean = redactor()
    models = run.spec.get("models")
    return {
        "run_id": run.id,
        "name": clean(run.name),
        "kind": kinds.of(run).name,
        "status": run.status,
        "spec": redact_json(json.dumps(public_spec(run.spec), sort_keys=True), clean),
        "models": [clean(str(m)) for m in models] if isinstance(models, list) else [],
        "planned": run.planned,
        "done": run.done,
        "failed": run.failed,
        "failure_kinds": json.dumps(dict(kinds.of(run).failures(store, run)), sort_keys=True),
        "tokens": run.tokens,
        "cost": run.cost,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "error": redact(run.error),
    }


def public_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored spec fit to publish: an endpoint keeps its scheme, host, port and path, never
    a user, password, query or fragment (where a careless URL carries a key)."""
    out = dict(spec)
    base = out.get("api_base")
    if isinstance(base, str) and base:
        try:
            parts = urllib.parse.urlsplit(base)
            host = parts.hostname or ""
            netloc = f"[{host}]" if ":" in host else host
            netloc += f":{parts.port}" if parts.port else ""
            out["api_base"] = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        except ValueError:  # not a URL cogbias could have used: nothing of it is published
            out["api_base"] = None
    return out
