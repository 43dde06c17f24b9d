"""CLI commands that run batches and read results: `run`, `runs`, `results`."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from . import examples


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
    p.add_argument("--db", required=True, help="SQLite file for results")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--temperature", type=float, default=0.0, help="decision temperature")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-base", help="OpenAI-compatible base URL for openai/<name> models")
    p.add_argument("--dataset", help="run the instances of an imported dataset instead")
    p.add_argument("--per-bias", type=int, help="with --dataset: at most N instances per bias")
    p.add_argument("--name", default="", help="a label for the run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, do not run")
    p.set_defaults(handler=_run)

    p = commands.add_parser("runs", help="list runs with counts, failures, tokens, cost, duration")
    p.add_argument("--db", required=True)
    p.set_defaults(handler=_runs)

    p = commands.add_parser("results", help="bias x model mean scores, n and failures")
    p.add_argument("--db", required=True)
    p.add_argument("--run", help="only this run")
    p.add_argument("--dataset", help="only decisions on this dataset")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=_results)


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _run(args: argparse.Namespace) -> int:
    from . import runner
    from .store import Store

    spec = runner.RunSpec(
        biases=_split(args.biases),
        scenarios=args.scenarios,
        instances=args.instances,
        models=_split(args.models),
        generator=args.generator,
        temperature=args.temperature,
        repeats=args.repeats,
        seed=args.seed,
        api_base=args.api_base,
        dataset=args.dataset,
        per_bias=args.per_bias,
    )
    with Store(args.db) as store:
        plan = runner.plan(spec, store)
        print(plan.describe(), file=sys.stderr)
        if args.dry_run:
            return 0
        outcome = runner.execute(
            plan,
            store,
            concurrency=args.concurrency,
            progress=runner.TerminalProgress(),
            name=args.name,
        )
    print(
        f"run {outcome['id']}: {outcome['status']} — {outcome['done']} of {outcome['planned']} pairs, {outcome['failed']} failed",
        file=sys.stderr,
    )
    if outcome["status"] == "failed":
        print(f"error: {outcome['error']}", file=sys.stderr)
        return 1
    return 0


def _runs(args: argparse.Namespace) -> int:
    from .runner import run_summaries
    from .store import Store

    with Store(args.db) as store:
        rows = run_summaries(store)
    if not rows:
        print("no runs yet: start one with `cogbias run`", file=sys.stderr)
        return 0
    _table(
        rows,
        [
            "id",
            "name",
            "status",
            "planned",
            "done",
            "failed",
            "tokens",
            "cost",
            "duration_s",
            "models",
            "biases",
        ],
    )
    return 0


def _results(args: argparse.Namespace) -> int:
    from .store import Store

    with Store(args.db) as store:
        rows = store.results(run_id=args.run, dataset=args.dataset)
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


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    shown = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(r[i]) for r in shown)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for r in shown:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
