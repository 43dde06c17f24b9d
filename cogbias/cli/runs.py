"""The handlers of the run commands: `run` (paired and dataset runs; studies go to
cli/studies.py), `resume`, `batch`, `cancel`, `runs` and `results`. Their flags are defined
in cli/parsers.py."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from cogbias.cli.execution import execute
from cogbias.cli.options import _table, is_token_bias, refuse_pair_options
from cogbias.core.run_record import ResultsPage, RunStatus
from cogbias.core.safetext import csv_cell
from cogbias.llm import costs
from cogbias.views.unread_answers import run_note

if TYPE_CHECKING:
    from cogbias.store import Store


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _run(args: argparse.Namespace) -> int:
    """One run per prompting method, reasoning effort and intervention (each is part of a
    run's identity)."""
    from cogbias.runs import prompting, scorers

    if args.study and args.study != "tokenbias":
        from cogbias.cli import studies as cli_studies

        given = [f"--{o}" for o in ("samples", "reducer") if getattr(args, o, None)]
        if args.scoring is not None or given:
            flags = ", ".join([f"--scoring {args.scoring}"] * (args.scoring is not None) + given)
            raise ValueError(
                f"{flags} does not apply to the study '{args.study}': its "
                "answers are numbers or conversations, not one option of a pair"
            )
        return cli_studies.run(args)
    refuse_pair_options(args)
    methods = _split(args.prompting) or [prompting.BASELINE]
    for method in methods:
        prompting.parse(method)
    variants = _variants(args, methods)
    factored = any(v["reasoning_effort"] or v["intervention"] != "none" for v in variants)
    if args.scoring is None and (factored or args.thinking_budget):
        # a factor's levels are compared on one scoring, and its levels ask for more than a
        # letter: every run of them (its reference "none" too) is sampled
        args.scoring = scorers.CHOICE
    if args.study and args.dry_run:
        return _dry_run_study(args, variants)
    if args.study:
        args.dataset = _materialise_study(args)
    code = 0
    for variant in variants:
        code = max(code, _run_one(argparse.Namespace(**{**vars(args), **variant})))
    return code


def _variants(args: argparse.Namespace, methods: list[str]) -> list[dict[str, Any]]:
    """The runs asked for: every prompting method × reasoning effort × intervention."""
    from cogbias.llm.thinking import check_effort
    from cogbias.studies.interventions import check

    efforts = [check_effort(e) for e in _split(args.reasoning_effort)] or [None]
    chosen = [check(i) for i in _split(args.intervention)] or ["none"]
    return [
        {"prompting": method, "reasoning_effort": effort, "intervention": intervention}
        for method in methods
        for effort in efforts
        for intervention in chosen
    ]


class _RollBack(Exception):
    """Raised to undo what a dry run had to store in order to plan."""


def _dry_run_study(args: argparse.Namespace, variants: list[dict[str, Any]]) -> int:
    """Plan a study's runs without keeping anything: its pairs are stored (planning reads
    them) inside a transaction that is rolled back once every plan is printed."""
    from cogbias.store import Store

    with Store(args.db) as store:
        try:
            with store.atomic():
                args.dataset = _materialise_study(args, store)
                for variant in variants:
                    _run_one(argparse.Namespace(**{**vars(args), **variant}), store)
                raise _RollBack
        except _RollBack:
            print(
                "dry run: the study's pairs were stored only to plan; nothing is kept",
                file=sys.stderr,
            )
    return 0


def _materialise_study(args: argparse.Namespace, store: Store | None = None) -> str:
    """Store a built-in study's pairs like an imported dataset (a no-op when unchanged)."""
    from cogbias.datasets import tokenbias_study
    from cogbias.store import Store
    from cogbias.studies import tokenbias

    if args.study != "tokenbias":
        raise KeyError(
            f"--study runs the token-bias study; '{args.study}' is not one (use tokenbias)"
        )
    if args.dataset:
        raise ValueError("--study and --dataset are alternatives: give one")
    study = tokenbias.load_study()
    with nullcontext(store) if store is not None else Store(args.db) as opened:
        print(tokenbias_study.materialise(opened, study).describe(), file=sys.stderr)
    return study.id


def _run_one(args: argparse.Namespace, store: Store | None = None) -> int:
    from cogbias.runs import executor, paired_plan, scorers
    from cogbias.store import Store

    spec = paired_plan.RunSpec(
        biases=_split(args.biases),
        scenarios=args.scenarios,
        instances=args.instances,
        models=_split(args.models),
        generator=args.generator,
        temperature=args.temperature,
        generator_temperature=args.generator_temperature,
        repeats=args.repeats or 1,
        seed=args.seed,
        api_base=args.api_base,
        dataset=args.dataset,
        per_bias=args.per_bias,
        prompting=args.prompting,
        # None: the models choose when planned; a batch holds no log-probabilities, so a
        # batch run that names none is sampled
        scoring=args.scoring or (scorers.DEFAULT if args.batch else None),
        samples=args.samples or 1,
        reducer=args.reducer,
        extractor=args.extractor or None,
        option_order=args.option_order,
        reading=args.reading,
        reasoning_effort=args.reasoning_effort,
        thinking_budget=args.thinking_budget,
        intervention=args.intervention,
    )
    with nullcontext(store) if store is not None else Store(args.db) as opened:
        plan = paired_plan.plan(spec, opened)
        print(plan.describe(), file=sys.stderr)
        if args.dry_run:
            return 0
        if args.plan_only:
            executor.create(plan, opened, args.name)
            print(plan.spec.run_id)  # its option order chosen: the id the run is stored under
            return 0
        return execute(plan, opened, args, name=args.name)


def _resume(args: argparse.Namespace) -> int:
    from cogbias.runs import kinds
    from cogbias.store import Store

    with Store(args.db) as store:
        run = kinds.stored(store, args.run_id)
        plan = kinds.replan_run(store, run)
        print(plan.describe(), file=sys.stderr)
        return execute(plan, store, args, kind=kinds.of(run))


def _batch_export(args: argparse.Namespace) -> int:
    """Kinds that are `batchable` only (paired, dataset and token-bias runs): a study's
    conversations are asked turn by turn, each turn depending on the answer before it, so
    there is no round to hand over."""
    from cogbias.runs import batch, kinds
    from cogbias.store import Store

    with Store(args.db) as store:
        run = kinds.stored(store, args.run_id)
        kind = run.kind
        assert kind is not None  # `kinds.stored` resolves it
        if not kind.batchable:
            raise ValueError(
                f"run {args.run_id} is {kinds.described(run)}: batch export writes the calls "
                f"of paired, dataset and token-bias runs; a {kind.name} run asks its units "
                f"directly (a study turn by turn): `cogbias resume {args.run_id}` finishes it"
            )
        plan = kinds.replan_run(store, run)
        counts = batch.export_requests(plan, store, args.output, args.round, args.force)
    total = sum(counts.values())
    detail = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    print(
        f"wrote {total} request(s) to {args.output}" + (f" ({detail})" if detail else ""),
        file=sys.stderr,
    )
    if not total:
        print(
            f"nothing left to ask: `cogbias resume {args.run_id}` finishes the run", file=sys.stderr
        )
    return 0


def _batch_import(args: argparse.Namespace) -> int:
    from cogbias.runs import batch
    from cogbias.store import Store

    with Store(args.db) as store:
        try:
            summary = batch.import_results(store, args.results)
        except batch.BatchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    kept = f"; {summary.kept} already stored, kept" if summary.kept else ""
    print(f"imported {summary.answers} answer(s) into the cache{kept}", file=sys.stderr)
    for line in summary.errors[:20]:
        print(f"  not imported: {line}", file=sys.stderr)
    if summary.errors:
        print(
            f"{len(summary.errors)} request(s) had no answer; export again to retry them",
            file=sys.stderr,
        )
    for line in summary.conflicts[:20]:
        print(f"  conflict: {line}", file=sys.stderr)
    if summary.conflicts:
        print(
            f"error: {len(summary.conflicts)} answer(s) conflict with answers already stored; "
            "those were not imported (`cogbias cache prune` removes stored answers)",
            file=sys.stderr,
        )
        return 1
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from cogbias.runs import kinds
    from cogbias.store import Store

    with Store(args.db) as store:
        kinds.stored(store, args.run_id)
        done = store.request_cancel(args.run_id)
    print(f"run {args.run_id}: {_cancelled(args.run_id, str(done))}", file=sys.stderr)
    return 0  # a run that is not running is what was asked for


def _cancelled(run_id: str, done: str) -> str:
    """What `cancel` did, from `Store.request_cancel`: a run that had already ended is said
    to have (it once read "cancelling" when the process that had run it lived on)."""
    if done == "requested":
        return "cancelling (the worker stops within 2 s)"
    if done == "marked":
        return "cancelled"
    if done == RunStatus.DONE:
        return "already finished (done): nothing to cancel"
    if done == RunStatus.CANCELLED:
        return "already cancelled: nothing to cancel"
    return (
        f"not running (it ended {done}): nothing to cancel; `cogbias resume {run_id}` continues it"
    )


def _runs(args: argparse.Namespace) -> int:
    from cogbias.runs.summaries import run_summaries, table_row
    from cogbias.store import Store

    with Store(args.db) as store:
        runs = run_summaries(store)
        rows = [table_row(r) for r in runs]
        rows = [{**r, "cost": costs.cost_cell(r["cost"], r["cost_text"])} for r in rows]
        batches = store.batches()
        unread = [(r.id, note) for r in runs if r.failed and (note := run_note(store, r, True))]
    if not rows:
        print("no runs yet: start one with `cogbias run pairs|dataset|study`", file=sys.stderr)
        return 0
    columns = ["id", "name", "status", "planned", "done", "failed", "tokens", "cost"]
    _table(rows, [*columns, "cost_saved", "duration_s", "models", "biases", "error"])
    for run_id, note in unread:  # what the failed column does not say
        print(f"{run_id}: {note}")
    if batches:
        print("\nprovider batches:")
        _table(
            batches,
            [
                "run_id",
                "id",
                "model",
                "round",
                "status",
                "total",
                "completed",
                "failed",
                "expected_at",
            ],
        )
    return 0


def _results(args: argparse.Namespace) -> int:
    from cogbias.cli import studies as cli_studies
    from cogbias.runs import kinds, study_results
    from cogbias.store import Store
    from cogbias.studies import cells

    with Store(args.db) as store:
        if args.run and store.run(args.run) is None:
            raise KeyError(f"no run {args.run} in {store.path}; see `cogbias runs`")
        run = kinds.stored(store, args.run) if args.run else None
        page = kinds.of(run).page if run is not None else None
        if page is ResultsPage.STUDIES or (args.study and not is_token_bias(args.study, store)):
            return cli_studies.results(args, store)  # its pivots (--by) and the humans beside
    if args.by or getattr(args, "humans", False):  # no other run has study dimensions
        what = f"run {args.run} is {kinds.described(run)}" if run else "these are paired runs"
        flag = "--by pivots" if args.by else "--humans compares"
        raise ValueError(
            f"{flag} study runs; {what}: leave it out (see `cogbias results study NAME --by ...`)"
        )
    if args.study:
        from cogbias.cli.hypotheses import _study_results

        return _study_results(args)
    with Store(args.db) as store:
        if args.dataset and store.dataset(args.dataset) is None:
            raise KeyError(f"no dataset {args.dataset} in {store.path}; see `cogbias datasets`")
        if run is not None:
            table = kinds.of(run).cells(store, run)
        else:
            table = cells.results_table(store, dataset=args.dataset)
        # only worth reading every run's spec when there is nothing else to show
        studies = (
            set()
            if not table.empty
            else {study_results.spec_of(r).study for r in study_results.study_runs(store)}
        )
    if table.empty:
        print("no results yet: start a run with `cogbias run pairs|dataset|study`", file=sys.stderr)
        if studies:
            print(
                "study runs are shown with `cogbias results study NAME` (here: "
                f"{', '.join(sorted(studies))})",
                file=sys.stderr,
            )
        return 0
    _print_cells(table, args.format)
    return 0


def _print_cells(table: Any, fmt: str) -> None:
    """A kind's cells (a pandas table) as a table, JSON records or CSV; a missing value is
    null in JSON, an empty cell in CSV and in the table."""
    rows = table.astype(object).where(table.notna(), None).to_dict("records")
    columns = [str(c) for c in table.columns]
    if fmt == "json":
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: csv_cell(row[k]) for k in columns} for row in rows)
    else:
        _table(rows, columns)
