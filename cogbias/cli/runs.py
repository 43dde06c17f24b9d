"""CLI commands that run batches and read results: `run`, `resume`, `cancel`, `runs`,
`results`, `cache`."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from cogbias.library import examples
from cogbias.llm import costs


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=None,
        help="SQLite file (default: $COGBIAS_DB, else $COGBIAS_HOME/cogbias.db, "
        "else ~/.cogbias/cogbias.db — the app's database)",
    )


def _at_least_one(text: str) -> int:
    """A count that must be positive (`--concurrency 0` would wait forever for a free slot)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _add_execution(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--concurrency", type=_at_least_one, default=16, help="LLM requests in flight at once"
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="also retry pairs whose answers could not be read or were refused (asked afresh, "
        "not from the cache); transient failures are always retried",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="ask every model afresh instead of reading cached answers (new answers are cached)",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="send the calls through the provider's Batch API (half price; OpenAI and "
        "OpenAI-compatible servers), then score from the cache",
    )
    p.add_argument(
        "--batch-fallback",
        choices=["round", "interactive"],
        default="round",
        help="requests a batch failed: retry them in the next batch round, or interactively",
    )
    p.add_argument("--poll-seconds", type=float, default=30.0, help="how often to poll batches")
    p.add_argument("--timeout", type=float, help="seconds per attempt (default: per model)")
    p.add_argument(
        "--max-retries", type=int, default=6, help="retries of a transiently failing call"
    )
    p.add_argument(
        "--deadline", type=float, help="seconds per call, retries included (default: per model)"
    )


def add_commands(commands: Any) -> None:
    p = commands.add_parser("run", help="run test cases x scenarios x models (resumable)")
    p.add_argument("--biases", help="comma-separated test case ids (default: all)")
    p.add_argument("--scenarios", type=int, default=1, help="number of scenarios (first N)")
    p.add_argument("--instances", type=int, default=1, help="instances per bias and scenario")
    p.add_argument("--models", required=True, help="comma-separated decision models")
    p.add_argument(
        "--generator",
        default=examples.default_generator(),
        help="what fills [[gaps]]: 'examples' (offline, the default) or a model id",
    )
    add_db(p)
    p.add_argument("--temperature", type=float, default=0.0, help="decision temperature")
    p.add_argument("--generator-temperature", type=float, default=0.7)
    p.add_argument(
        "--repeats",
        type=int,
        help="answers per pair (default 1); with a study: valid answers wanted per condition "
        "(default: the study's, 2 on the local model)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-base", help="OpenAI-compatible base URL for openai/<name> models")
    p.add_argument("--dataset", help="run the instances of an imported dataset instead")
    p.add_argument("--per-bias", type=int, help="with --dataset: at most N instances per bias")
    p.add_argument(
        "--study",
        help="run a study: biasbuster, mohr8, your own, or an imported thesis dataset's "
        "prompts (docs/studies.md); tokenbias stores its pairs like a dataset, then runs them",
    )
    p.add_argument("--mitigations", help="with a study: none,awareness,contrastive,...")
    p.add_argument("--temperatures", help="with a study: a sweep, e.g. 0.2,1.0")
    p.add_argument("--variants", help="with a study: prompt scenarios (default: all)")
    p.add_argument("--tests", help="with a study: only these tests (default: all)")
    p.add_argument("--max-attempts", type=int, help="with a study: tries per wanted answer")
    p.add_argument(
        "--prompting",
        default="baseline",
        help="comma-separated prompting methods, one run each: baseline, zs_cot, one_shot, "
        "few_shot, one_shot_cot, few_shot_cot (a name swap: one_shot@Bob)",
    )
    p.add_argument("--name", default="", help="a label for the run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, do not run")
    p.add_argument(
        "--plan-only",
        action="store_true",
        help="store the run without executing it (for `cogbias batch export`, `resume`)",
    )
    _add_execution(p)
    p.set_defaults(handler=_run)

    p = commands.add_parser("batch", help="hand a run's calls to a batch engine (vLLM run-batch)")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("export", help="write the run's next calls as OpenAI batch JSONL")
    q.add_argument("run_id")
    q.add_argument("--round", choices=["fill", "decide", "extract"], help="only this round")
    q.add_argument("-o", "--output", required=True, help="the requests file (.jsonl)")
    add_db(q)
    q.set_defaults(handler=_batch_export)
    q = actions.add_parser("import", help="put a batch engine's answers into the cache")
    q.add_argument("results", help="the engine's output file (OpenAI batch output JSONL)")
    add_db(q)
    q.set_defaults(handler=_batch_import)

    p = commands.add_parser("resume", help="resume a stored run from its own spec")
    p.add_argument("run_id")
    add_db(p)
    _add_execution(p)
    p.set_defaults(handler=_resume)

    p = commands.add_parser("cancel", help="ask a run's worker to stop (it stops within 2 s)")
    p.add_argument("run_id")
    add_db(p)
    p.set_defaults(handler=_cancel)

    p = commands.add_parser("runs", help="list runs with counts, failures, tokens, cost, duration")
    add_db(p)
    p.set_defaults(handler=_runs)

    p = commands.add_parser("results", help="bias x model mean scores, n and failures")
    add_db(p)
    p.add_argument("--run", help="only this run")
    p.add_argument("--dataset", help="only decisions on this dataset")
    p.add_argument(
        "--study",
        help="the hypothesis tables of a token-bias study or imported token-bias dataset "
        "(per hypothesis, model and prompting method: n12, n21, n*, z, p, p_BH, reject)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="with --study: significance level")
    p.add_argument(
        "--normal-above",
        type=int,
        default=10,
        help="with --study: exact binomial test up to this many discordant pairs, normal above",
    )
    p.add_argument(
        "--by",
        choices=["mitigation", "temperature", "variant", "model"],
        help="with a study: one column per mitigation, temperature, ...",
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=_results)

    p = commands.add_parser("cache", help="see, prune or clear the LLM response cache")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("stats", help="cached answers per model: count, tokens, cost, age")
    add_db(q)
    q.set_defaults(handler=_cache_stats)
    q = actions.add_parser("prune", help="delete cached answers older than an age")
    q.add_argument("--older-than", required=True, help="an age like 30d, 12h or 90m")
    q.add_argument("--model", help="only this model's answers")
    add_db(q)
    q.set_defaults(handler=_cache_prune)
    q = actions.add_parser("clear", help="delete every cached answer (or one model's)")
    q.add_argument("--model", help="only this model's answers")
    add_db(q)
    q.set_defaults(handler=_cache_clear)


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _run(args: argparse.Namespace) -> int:
    """One run per prompting method (the method is part of each run's identity)."""
    from cogbias.runs import prompting

    if args.study and args.study != "tokenbias":
        from cogbias.cli import studies as cli_studies

        return cli_studies.run(args)
    from cogbias.cli.studies import refuse_pair_options

    refuse_pair_options(args)
    methods = _split(args.prompting) or [prompting.BASELINE]
    for method in methods:
        prompting.parse(method)
    if args.study:
        args.dataset = _materialise_study(args)
    code = 0
    for method in methods:
        code = max(code, _run_one(argparse.Namespace(**{**vars(args), "prompting": method})))
    return code


def _materialise_study(args: argparse.Namespace) -> str:
    """Store a built-in study's pairs like an imported dataset (a no-op when unchanged)."""
    from cogbias.store import Store
    from cogbias.studies import tokenbias

    if args.study != "tokenbias":
        raise KeyError(
            f"--study runs the token-bias study; '{args.study}' is not one (use tokenbias)"
        )
    if args.dataset:
        raise ValueError("--study and --dataset are alternatives: give one")
    study = tokenbias.load_study()
    with Store(args.db) as store:
        print(tokenbias.materialise(store, study).describe(), file=sys.stderr)
    return study.id


def _run_one(args: argparse.Namespace) -> int:
    from cogbias.runs import paired_plan
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
    )
    with Store(args.db) as store:
        plan = paired_plan.plan(spec, store)
        print(plan.describe(), file=sys.stderr)
        if args.dry_run:
            return 0
        if args.plan_only:
            paired_plan.create_run(plan, store, args.name)
            print(spec.run_id)
            return 0
        return _execute(plan, store, args, name=args.name)


def _resume(args: argparse.Namespace) -> int:
    from cogbias.runs import kinds
    from cogbias.store import Store

    with Store(args.db) as store:
        run = store.run(args.run_id)
        if run is not None and kinds.kind_of(run["spec"]).results_page == "studies":
            from cogbias.cli import studies as cli_studies

            return cli_studies.resume(store, run, args)
        plan = kinds.replan(store, args.run_id)
        print(plan.describe(), file=sys.stderr)
        return _execute(plan, store, args)


def execution_options(args: argparse.Namespace, name: str = "") -> dict[str, Any]:
    """How to execute a run, from the flags `_add_execution` defines (paired and study runs)."""
    from cogbias.cli.progress import TerminalProgress

    return dict(
        concurrency=args.concurrency,
        progress=TerminalProgress(),
        name=name,
        retry_failed=args.retry_failed,
        read_cache=not args.no_cache,
        timeout=args.timeout,
        deadline=args.deadline,
        max_retries=args.max_retries,
    )


def _execute(plan: Any, store: Any, args: argparse.Namespace, name: str = "") -> int:
    from cogbias.runs import executor

    args.exit_at_once = True  # see cli._exit_at_once
    options = execution_options(args, name)
    try:
        if args.batch:
            from cogbias.runs import batch_provider

            outcome = batch_provider.execute(
                plan,
                store,
                poll_seconds=args.poll_seconds,
                fallback=args.batch_fallback,
                **options,
            )
        else:
            outcome = executor.execute(plan, store, **options)
    except executor.RunBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    saved = outcome.get("cost_saved") or 0.0
    print(
        f"run {outcome['id']}: {outcome['status']} — {outcome['done']} of {outcome['planned']} "
        f"pairs, {outcome['failed']} failed; cost {costs.run_cost_text(outcome)}"
        + (f" (${saved:.4f} saved by the cache)" if saved else ""),
        file=sys.stderr,
    )
    if outcome["status"] in ("failed", "incomplete"):
        print(
            f"{'error' if outcome['status'] == 'failed' else 'note'}: {outcome['error']}",
            file=sys.stderr,
        )
        return 1
    return 0


def _batch_export(args: argparse.Namespace) -> int:
    from cogbias.runs import batch, paired_plan
    from cogbias.store import Store

    with Store(args.db) as store:
        plan = paired_plan.plan(paired_plan.stored_spec(store, args.run_id), store)
        counts = batch.export_requests(plan, store, args.output, args.round)
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
    print(f"imported {summary.answers} answer(s) into the cache", file=sys.stderr)
    for line in summary.errors[:20]:
        print(f"  not imported: {line}", file=sys.stderr)
    if summary.errors:
        print(
            f"{len(summary.errors)} request(s) had no answer; export again to retry them",
            file=sys.stderr,
        )
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    with Store(args.db) as store:
        if store.run(args.run_id) is None:
            raise KeyError(f"no run {args.run_id} in {store.path}")
        store.request_cancel(args.run_id)
        run = store.run(args.run_id) or {}
    state = (
        "cancelled"
        if run.get("status") == "cancelled"
        else "cancelling (the worker stops within 2 s)"
    )
    print(f"run {args.run_id}: {state}", file=sys.stderr)
    return 0


def _runs(args: argparse.Namespace) -> int:
    from cogbias.runs.summaries import run_summaries
    from cogbias.store import Store

    with Store(args.db) as store:
        rows = [{**r, "cost": costs.run_cost_cell(r)} for r in run_summaries(store)]
        batches = store.batches()
    if not rows:
        print("no runs yet: start one with `cogbias run`", file=sys.stderr)
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
    from cogbias.runs import kinds
    from cogbias.store import Store
    from cogbias.studies import results as study_results

    with Store(args.db) as store:
        run = store.run(args.run) if args.run else None
        if args.run and run is None:
            raise KeyError(f"no run {args.run} in {store.path}; see `cogbias runs`")
        if (run and kinds.kind_of(run["spec"]).results_page == "studies") or (
            args.study and not cli_studies.is_token_bias(args.study, store)
        ):
            return cli_studies.results(args, store)
    if args.by:  # a paired run's table has no study dimensions to pivot on
        what = f"run {args.run} is a paired run" if args.run else "these are paired runs"
        raise ValueError(
            f"--by pivots study runs; {what}: leave --by out "
            "(see `cogbias results --study NAME --by ...`)"
        )
    if args.study:
        return _study_results(args)
    with Store(args.db) as store:
        if args.dataset and store.dataset(args.dataset) is None:
            raise KeyError(f"no dataset {args.dataset} in {store.path}; see `cogbias datasets`")
        rows = store.results(run_id=args.run, dataset=args.dataset)
        # only worth reading every run's spec when there is nothing else to show
        studies = set() if rows else {r["study"] for r in study_results.study_runs(store)}
    if not rows:
        print("no results yet: start a run with `cogbias run`", file=sys.stderr)
        if studies:
            print(
                "study runs are shown with `cogbias results --study NAME` (here: "
                f"{', '.join(sorted(studies))})",
                file=sys.stderr,
            )
        return 0
    for row in rows:
        total = (row["n"] or 0) + (row["failures"] or 0)
        row["failure_rate"] = round(row["failures"] / total, 4) if total else 0.0
        row["mean"] = None if row["mean"] is None else round(row["mean"], 4)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif args.format == "csv":
        writer = csv.DictWriter(
            sys.stdout, fieldnames=["bias", "model", "mean", "n", "failures", "failure_rate"]
        )
        writer.writeheader()
        writer.writerows(rows)
    else:
        _table(rows, ["bias", "model", "mean", "n", "failures", "failure_rate"])
    return 0


def _cache_stats(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    with Store(args.db) as store:
        rows = store.cache_stats()
    if not rows:
        print("the cache is empty", file=sys.stderr)
        return 0
    _table(rows, ["model", "answers", "tokens", "cost", "oldest", "newest"])
    return 0


_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([dhm])")


def _cache_prune(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    match = _AGE.fullmatch(args.older_than.strip())
    if not match:
        raise ValueError(f"--older-than {args.older_than!r}: give an age like 30d, 12h or 90m")
    unit = {"d": "days", "h": "hours", "m": "minutes"}[match.group(2)]
    cutoff = datetime.now(UTC) - timedelta(**{unit: float(match.group(1))})
    with Store(args.db) as store:
        removed = store.prune_cache(cutoff.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), args.model)
    print(f"removed {removed} cached answer(s) older than {args.older_than}", file=sys.stderr)
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    with Store(args.db) as store:
        removed = store.prune_cache(model=args.model)
    print(f"removed {removed} cached answer(s)", file=sys.stderr)
    return 0


STUDY_COLUMNS = [
    "hypothesis",
    "model",
    "prompting",
    "n12",
    "n21",
    "n_star",
    "z",
    "p_value",
    "p_adjusted",
    "reject",
]


SIDES = {
    "perturbed_better": "pi12 < pi21, P' answered better",
    "original_better": "pi12 > pi21, the perturbation hurts",
    "two_sided": "pi12 != pi21",
}


def _study_results(args: argparse.Namespace) -> int:
    """The paper's layout: per hypothesis, one row per model and prompting method."""
    from cogbias.store import Store
    from cogbias.studies import tokenbias

    with Store(args.db) as store:
        table = tokenbias.results(store, args.study, args.alpha, args.normal_above)
    if table.empty:
        print(
            f"no answered pairs on '{args.study}' yet: run it with `cogbias run --study`",
            file=sys.stderr,
        )
        return 0
    if args.format == "json":
        print(table.to_json(orient="records", indent=1))
        return 0
    if args.format == "csv":
        table.to_csv(sys.stdout, index=False)
        return 0
    shown = table[STUDY_COLUMNS].copy()
    shown["z"] = shown["z"].map(lambda v: "" if v != v else f"{v:.6f}")
    for column in ("p_value", "p_adjusted"):
        shown[column] = shown[column].map(lambda v: f"{v:.6f}")
    for hypothesis, rows in shown.groupby("hypothesis", sort=False):
        tests = table.loc[rows.index, "test"]
        side = table.loc[rows.index, "alternative"].iloc[0]
        exact = int((tests == "exact").sum())
        print(
            f"{hypothesis}  (H_a: {SIDES.get(side, side)}; exact binomial test for n* <= "
            f"{args.normal_above}: {exact} of {len(rows)} rows; BH within the hypothesis; "
            f"alpha {args.alpha})"
        )
        _table(rows.drop(columns="hypothesis").to_dict("records"), STUDY_COLUMNS[1:])
        print()
    return 0


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    shown = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in shown)]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in shown:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
