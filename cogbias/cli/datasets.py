"""CLI commands for published datasets: `import`, `datasets`, `export`, `analyze`."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

from cogbias.cli.options import add_db
from cogbias.core.safetext import terminal
from cogbias.datasets import formats
from cogbias.datasets.common import Format


def add_commands(commands: Any) -> None:
    """The dataset commands: import, datasets, export, analyze, effects."""
    for add in (_add_import, _add_datasets, _add_export, _add_analyze, _add_effects):
        add(commands)


def _add_import(commands: Any) -> None:
    """`cogbias import FORMAT`: one subcommand per published format (`datasets.formats`)."""
    imp = commands.add_parser("import", help="import a published dataset (one transaction)")
    kinds = imp.add_subparsers(metavar="FORMAT")
    for fmt in formats.FORMATS:
        p = kinds.add_parser(
            fmt.name,
            help=fmt.help,
            epilog=fmt.epilog or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        fmt.add_arguments(p)
        _common_import_args(p, fmt.default_name)
        p.set_defaults(handler=functools.partial(_import, fmt))


def _add_datasets(commands: Any) -> None:
    """`cogbias datasets`: the imported datasets, or one built-in reference result."""
    p = commands.add_parser(
        "datasets", help="list imported datasets and the built-in reference results"
    )
    add_db(p)
    p.add_argument(
        "--reference",
        metavar="ID",
        help="print one built-in reference result (a seed paper's printed model results), "
        "its citation first on stderr",
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=_datasets)


def _add_export(commands: Any) -> None:
    """`cogbias export`: the pairs (or test cases) of a run or dataset to a file."""
    p = commands.add_parser("export", help="export pairs of a run or dataset (CSV, JSONL, Parquet)")
    add_db(p)
    p.add_argument("--dataset", help="all pairs on this dataset (published and run)")
    p.add_argument("--run", help="the pairs of this run")
    p.add_argument("--model", help="only this model's pairs")
    p.add_argument(
        "--test-cases", action="store_true", help="export the dataset's test cases, not pairs"
    )
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"], help="default: from -o")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-o", "--output", help="file to write (never the database)")
    where.add_argument(
        "--hub",
        metavar="DIR",
        help="write a folder for the Hugging Face Hub instead: Parquet tables (pairs or "
        "turns, instances, runs) and a dataset card README.md (docs/datasets.md)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.set_defaults(handler=_export)


def _add_analyze(commands: Any) -> None:
    """`cogbias analyze`: bias x model statistics of a run or dataset."""
    p = commands.add_parser(
        "analyze", help="bias x model statistics, the paper's table, clusters, capability"
    )
    add_db(p)
    p.add_argument("--dataset", help="decisions on this dataset")
    p.add_argument("--run", help="decisions of this run")
    p.add_argument(
        "--view",
        choices=["summary", "table", "clusters", "capability"],
        default="summary",
        help="summary: mean, CI, p (BH); table: Figure 7 with averages; "
        "clusters: dendrogram order (Figure 6); capability: Figure 5 data",
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=_analyze)


def _add_effects(commands: Any) -> None:
    """`cogbias effects`: the published effect sizes' tables, homogeneity and regressions."""
    p = commands.add_parser(
        "effects", help="published effect sizes (mohr2025): tables, homogeneity, regressions"
    )
    p.add_argument("--db", required=True)
    p.add_argument("--dataset", help="only this dataset (default: all effect sizes)")
    p.add_argument("--run", help="the Cohen's d cells of a study run of yours instead")
    p.add_argument("--by", choices=["model", "temperature", "scenario"], default="model")
    p.add_argument(
        "--view",
        choices=["thesis", "mean", "homogeneity", "ols", "features"],  # effect_tables.VIEWS
        default="thesis",
        help="thesis (default): weighted mean of d, then capped (the thesis' Figure 2); mean: "
        "mean capped d per bias x BY, with each bias' homogeneity; homogeneity: per bias x BY "
        "(Figure 3); ols: capped d on bias, model, scenario, temperature; features: on model "
        "features. The output's first line on stderr names the view and its numbers",
    )
    p.add_argument("--uncapped", action="store_true", help="use d instead of the capped d")
    p.add_argument(
        "--hedges",
        choices=["exact", "thesis"],
        default="exact",
        help="Hedges' J in the sampling variance (weights, homogeneity): exact (Γ form) or "
        "thesis (1 - 3/(4ν - 1), the thesis' approximation: its Table 8 digits)",
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=_effects)


def _common_import_args(p: argparse.ArgumentParser, default_name: str | None) -> None:
    add_db(p)
    p.add_argument(
        "--name",
        default=default_name,
        help=f"dataset name (default: {default_name or 'file stem'})",
    )
    p.add_argument("--replace", action="store_true", help="replace a dataset of the same name")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --replace: delete the runs whose test cases the new file no longer has "
        "(they are named); without it such a replace is refused",
    )


class ByteProgress:
    """A progress bar on stderr for reads and downloads (a line every few seconds if no tty)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.label = ""

    def __call__(self, label: str, done: int, total: int) -> None:
        from cogbias.views.numbers import percent

        now = time.monotonic()
        final = total and done >= total
        if label == self.label and not final and now - self.last < (0.2 if self.tty else 3.0):
            return
        self.last, self.label = now, label
        label = terminal(label)  # a file name with a newline or ESC is shown, not acted out
        if total:
            bar = "#" * int(30 * done / total)
            line = f"[{bar:<30}] {percent(done / total):>4} {label} ({done / 1e6:.1f} of {total / 1e6:.1f} MB)"
        else:
            line = f"{label}: {done / 1e6:.1f} MB"
        end = "\n" if final or not self.tty else ""
        print(("\r" + line) if self.tty else line, end=end, file=sys.stderr, flush=True)


def _report(summary: Any) -> int:
    print(summary.describe(), file=sys.stderr)
    return 0


def _import(fmt: Format, args: argparse.Namespace) -> int:
    from cogbias.datasets.importing import StrandedRuns
    from cogbias.store import Store

    if args.force and not args.replace:
        raise ValueError("--force only goes with --replace (it deletes the runs a replace strands)")
    with Store(args.db) as store:
        try:
            return _report(fmt.run(store, args, ByteProgress()))
        except StrandedRuns as exc:
            if not args.force:
                raise
            return _report(_replace_deleting(store, fmt, args, list(exc.runs)))


def _replace_deleting(store: Any, fmt: Format, args: argparse.Namespace, runs: list[str]) -> Any:
    """`--replace --force`: delete the runs the replace strands, then import, all in one
    transaction (a file that fails to import leaves the runs where they were)."""
    from cogbias.runs import deletion

    deleted = []
    with store.atomic():
        for run_id in runs:
            plan = deletion.plan_run(store, run_id)
            deletion.apply(store, plan)
            deleted.append(plan.describe())
        summary = fmt.run(store, args, ByteProgress())
    for line in deleted:  # only once the transaction has committed
        print(f"deleted {line}", file=sys.stderr)
    return summary


def _datasets(args: argparse.Namespace) -> int:
    from cogbias.cli.options import _table
    from cogbias.datasets.formats import holds
    from cogbias.store import Store
    from cogbias.studies import paper_results

    if args.reference:
        result = paper_results.paper_result(args.reference)
        print(f"{result.title}\nSource: {result.cited}", file=sys.stderr)
        _print_frame(result.rows if args.format == "json" else result.printed(), args.format)
        return 0
    with Store(args.db) as store:
        rows = store.datasets()
        contents = store.dataset_contents()
    if not rows:
        print("no datasets yet: import one with `cogbias import`", file=sys.stderr)
    for row in rows:
        meta = row["meta"]
        row["holds"] = holds(row["kind"], contents.get(row["name"], {}))  # each kind its units
        row["models"] = len(meta.get("models", []))
        row["biases"] = len(meta.get("biases", []))
    if rows:
        _table(rows, ["name", "kind", "holds", "biases", "models", "imported_at", "source"])
        print()
    print("built in, no import needed (`cogbias datasets --reference ID` prints one):")
    references = [
        {"name": r.id, "kind": "reference results", "holds": r.holds(), "study": r.study,
         "source": r.source}
        for r in paper_results.paper_results().values()
    ]  # fmt: skip
    _table(references, ["name", "kind", "holds", "study", "source"])
    return 0


def _export(args: argparse.Namespace) -> int:
    from cogbias.store import Store
    from cogbias.views.export import export

    if not args.dataset and not args.run:
        raise ValueError("say what to export: --dataset NAME or --run ID")
    with Store(args.db) as store:
        if args.run:
            _check_run(store, args.run, "--test-cases" if args.test_cases else None)
        if args.dataset and store.dataset(args.dataset) is None:
            raise KeyError(f"no dataset '{args.dataset}' in {args.db} (see `cogbias datasets`)")
        if args.hub:
            return _export_hub(store, args)
        count = export(
            store,
            args.output,
            run_id=args.run,
            dataset=None if args.run else args.dataset,
            what="instances" if args.test_cases else "pairs",
            fmt=args.format,
            model=args.model,
            force=args.force,
        )
    print(f"wrote {count} rows to {args.output}", file=sys.stderr)
    return 0


def _export_hub(store: Any, args: argparse.Namespace) -> int:
    """`cogbias export --hub DIR`: the run's or dataset's Hub folder; one way of choosing
    what, as for a file (--run or --dataset, --model), and the tables are fixed."""
    from cogbias.views.hub_export import export_hub

    if args.test_cases or args.format:
        flag = "--test-cases" if args.test_cases else "--format"
        raise ValueError(
            f"--hub writes every table (pairs or turns, instances, runs) as Parquet: "
            f"leave out {flag}"
        )
    tables = export_hub(
        store,
        args.hub,
        run_id=args.run,
        dataset=None if args.run else args.dataset,
        model=args.model,
        force=args.force,
    )
    counts = ", ".join(f"{t.rows} {t.name}" for t in tables)
    print(f"wrote {counts} and README.md to {terminal(args.hub)}", file=sys.stderr)
    return 0


def _check_run(store: Any, run_id: str, needs_pairs: str | None) -> None:
    """Refuse a run that does not exist, and a run whose kind Explore does not show where
    `needs_pairs` (the command or flag that reads pairs, if any) would find none, saying
    where such a run is shown."""
    from cogbias.core.run_record import ResultsPage
    from cogbias.runs import kinds

    run = kinds.stored(store, run_id)
    if needs_pairs and kinds.of(run).page is not ResultsPage.EXPLORE:
        raise ValueError(
            f"{needs_pairs} works on the pairs of paired, dataset and token-bias runs; run {run_id} is "
            f"{kinds.described(run)}: see it with `cogbias results run {run_id}` (its rows: "
            f"`cogbias export --run {run_id} -o FILE`)"
        )


def _analyze(args: argparse.Namespace) -> int:
    import pandas as pd

    from cogbias.store import Store
    from cogbias.studies import analysis, cells

    with Store(args.db) as store:
        if args.run:
            _check_run(store, args.run, "analyze")
        summary = cells.heatmap_summary(store, run_id=args.run, dataset=args.dataset)
    if summary.empty:
        print(
            "no decisions to analyze (run a dataset or import published results)", file=sys.stderr
        )
        return 0
    if args.view == "table":
        out = analysis.figure7_table(summary).reset_index(names="bias")
    elif args.view == "clusters":
        tree = analysis.model_dendrogram(summary)
        out = pd.DataFrame({"model": tree.order, "position": range(1, len(tree.order) + 1)})
    elif args.view == "capability":
        out = analysis.capability_frame(summary)
    else:
        out = summary
    _print_frame(out, args.format)
    return 0


def _effects(args: argparse.Namespace) -> int:
    from cogbias.store import Store
    from cogbias.studies import effect_tables as tables
    from cogbias.studies import regression

    value = "d" if args.uncapped else "d_capped"
    with Store(args.db) as store:
        if args.run:
            from cogbias.runs import study_results
            from cogbias.studies import study_tables

            study = study_results.study_of_run(store, args.run)
            frame = study_tables.effect_frame(study_results.results(store, args.run), study)
            if frame.empty:
                raise KeyError(f"run {args.run} has no Cohen's d cells with a value yet")
        else:
            frame = tables.load_effects(store, args.dataset)
        if args.view == "features":
            datasets = [args.dataset] if args.dataset else sorted(frame["dataset"].unique())
            features = regression.published_features(store, datasets)
    print(tables.view_caption(args.view, args.by, value), file=sys.stderr)
    if args.view in ("ols", "features"):
        if args.view == "ols":
            result = regression.experiment_ols(frame, target=value)
        else:
            result = regression.ols_on_features(frame, features, target=value)
        print(result.describe(), file=sys.stderr)
        _print_frame(result.table, args.format)
        return 0
    hedges = args.hedges
    print(f"Hedges' J in the sampling variance: {hedges}", file=sys.stderr)
    if args.view == "thesis":
        table = tables.thesis_table(frame, args.by, hedges)
    elif args.view == "homogeneity":
        table = tables.homogeneity_table(frame, args.by, hedges)
    else:
        table = tables.mean_table(frame, args.by, value)
        table["homogeneity"] = tables.homogeneity_by_bias(frame, hedges)
    table.columns = [tables.column_label(c) for c in table.columns]
    _print_frame(table.reset_index(), args.format)
    return 0


def _print_frame(frame: Any, fmt: str) -> None:
    """A table as CSV (formulas neutralised), JSON or text (control characters escaped)."""
    from cogbias.cli.terminal import shown_frame
    from cogbias.views.export import frame_csv

    if fmt == "csv":
        frame_csv(frame, sys.stdout)
    elif fmt == "json":
        json.dump(json.loads(frame.to_json(orient="records")), sys.stdout, indent=1)
        print()
    else:
        print(shown_frame(frame).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
