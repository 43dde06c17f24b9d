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

from cogbias.cli.options import _table, execution_options, is_token_bias, refuse_pair_options
from cogbias.core.safetext import csv_cell
from cogbias.llm import costs

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
        if args.scoring != scorers.DEFAULT or given:
            flags = ", ".join(
                [f"--scoring {args.scoring}"] * (args.scoring != scorers.DEFAULT) + given
            )
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
    from cogbias.runs import executor, paired_plan
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
        scoring=args.scoring,
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
        return _execute(plan, opened, args, name=args.name)


def _resume(args: argparse.Namespace) -> int:
    from cogbias.runs import kinds
    from cogbias.store import Store

    with Store(args.db) as store:
        run = kinds.stored(store, args.run_id)
        kind = run.kind
        assert kind is not None  # `kinds.stored` resolves it
        if kind.name == "study":  # its own summary: units, and where its figures are
            from cogbias.cli import studies as cli_studies

            return cli_studies.resume(store, run, args)
        plan = kinds.replan_run(store, run)
        print(plan.describe(), file=sys.stderr)
        return _execute(plan, store, args, kind=kind)


def _execute(
    plan: Any, store: Any, args: argparse.Namespace, name: str = "", kind: Any = None
) -> int:
    """Work on `plan` (of `kind`, when the caller has resolved it) and say how it ended."""
    from cogbias.core.run_record import Run, RunStatus
    from cogbias.runs import executor, kinds, summaries

    kind = kind or kinds.kind_of(plan.spec)
    if getattr(args, "batch", False) and not kind.batchable:
        raise ValueError(
            f"--batch hands the calls of paired, dataset and token-bias runs to a batch "
            f"engine; a {kind.name} run is asked directly: leave --batch out"
        )
    if getattr(args, "batch", False) and getattr(args, "max_cost", None) is not None:
        raise ValueError(
            "--max-cost stops a run before a call that could pass it; a batch is charged when "
            "its results come back, all at once: leave one of them out (--dry-run shows the "
            "estimate with --batch)"
        )
    args.exit_at_once = True  # see cli._exit_at_once
    options = execution_options(args, name)
    try:
        if getattr(args, "batch", False):
            from cogbias.runs import batch_provider

            options.pop("max_cost")

            outcome = batch_provider.execute(
                plan,
                store,
                poll_seconds=args.poll_seconds,
                fallback=args.batch_fallback,
                **options,
            )
        else:
            outcome = executor.execute(plan, store, kind=kind, **options)
    except executor.RunBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    saved = outcome.get("cost_saved") or 0.0
    print(
        f"run {outcome['id']}: {outcome['status']} — {outcome['done']} of {outcome['planned']} "
        f"{kind.unit_name}, {outcome['failed']} failed; cost {summaries.cost_text(Run.from_row(outcome))}"
        + (f" (${saved:.4f} saved by the cache)" if saved else ""),
        file=sys.stderr,
    )
    if outcome["status"] in (RunStatus.FAILED, RunStatus.INCOMPLETE):
        print(
            f"{'error' if outcome['status'] == RunStatus.FAILED else 'note'}: {outcome['error']}",
            file=sys.stderr,
        )
        return 1
    return 0


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
    if done == "done":
        return "already finished (done): nothing to cancel"
    if done == "cancelled":
        return "already cancelled: nothing to cancel"
    return (
        f"not running (it ended {done}): nothing to cancel; `cogbias resume {run_id}` continues it"
    )


def _runs(args: argparse.Namespace) -> int:
    from cogbias.runs.summaries import run_summaries
    from cogbias.store import Store

    with Store(args.db) as store:
        rows = [
            {**r, "cost": costs.cost_cell(r["cost"], r["cost_text"])} for r in run_summaries(store)
        ]
        batches = store.batches()
    if not rows:
        print("no runs yet: start one with `cogbias run pairs|dataset|study`", file=sys.stderr)
        return 0
    columns = ["id", "name", "status", "planned", "done", "failed", "tokens", "cost"]
    _table(rows, [*columns, "cost_saved", "duration_s", "models", "biases", "error"])
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

    with Store(args.db) as store:
        row = store.run(args.run) if args.run else None
        if args.run and row is None:
            raise KeyError(f"no run {args.run} in {store.path}; see `cogbias runs`")
        kind = kinds.record(row).kind if row is not None else None
        if (kind is not None and kind.results == "study_calls") or (
            args.study and not is_token_bias(args.study, store)
        ):
            return cli_studies.results(args, store)
    if args.by or getattr(args, "humans", False):  # a paired run has no study dimensions
        what = f"run {args.run} is a paired run" if args.run else "these are paired runs"
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
        rows = store.results(run_id=args.run, dataset=args.dataset)
        # only worth reading every run's spec when there is nothing else to show
        studies = (
            set()
            if rows
            else {study_results.spec_of(r).study for r in study_results.study_runs(store)}
        )
    if not rows:
        print("no results yet: start a run with `cogbias run pairs|dataset|study`", file=sys.stderr)
        if studies:
            print(
                "study runs are shown with `cogbias results study NAME` (here: "
                f"{', '.join(sorted(studies))})",
                file=sys.stderr,
            )
        return 0
    for row in rows:
        total = (row["n"] or 0) + (row["failures"] or 0) + (row["abstained"] or 0)
        row["failure_rate"] = round(row["failures"] / total, 4) if total else 0.0
        row["mean"] = None if row["mean"] is None else round(row["mean"], 4)
    # abstained pairs (a reducer's tie) are counted apart from failures
    columns = ["bias", "model", "mean", "n", "failures", "failure_rate", "abstained"]
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif args.format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: csv_cell(row[k]) for k in columns} for row in rows)
    else:
        _table(rows, columns)
    return 0
