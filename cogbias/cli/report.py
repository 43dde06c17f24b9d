"""`cogbias report --run RUN_ID | --dataset NAME | --compare A B | --factor F | --class CODE
-o FILE.html`:
one self-contained HTML file of results, with its methods (cogbias.views.report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cogbias.cli.options import add_db

SUFFIXES = (".html", ".htm")


def add_commands(commands: Any) -> None:
    p = commands.add_parser(
        "report",
        help="write one self-contained HTML report of a run, a dataset, two models compared "
        "or a class session",
        description="Write the results of a paired or study run, a dataset, two models "
        "compared or a class session as one HTML file: charts drawn inline, the numbers behind each as tables, "
        "the humans' and papers' results beside them where they exist, and a methods section "
        "from the stored spec. It opens offline, runs no script and carries no key.",
    )
    p.add_argument("--run", metavar="RUN_ID", help="a paired, dataset or study run")
    p.add_argument("--dataset", metavar="NAME", help="every decision on an imported dataset")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("MODEL_A", "MODEL_B"),
        help="two models on the same instances (of --run or --dataset, else of every result)",
    )
    p.add_argument(
        "--factor",
        choices=["effort", "intervention"],
        help="the paired effect of a factor: runs that differ in it alone (--runs names "
        "them; default: the one design here that varies it)",
    )
    p.add_argument("--runs", metavar="RUN_IDS", help="with --factor: the runs, comma-separated")
    p.add_argument("--reference", metavar="LEVEL", help="with --factor: the reference level")
    p.add_argument(
        "--class",
        dest="session",
        metavar="CODE",
        help="a class session: its question, the class beside the humans and the models",
    )
    p.add_argument("-o", "--output", required=True, type=Path, help="FILE.html")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    add_db(p)
    p.set_defaults(handler=_report)


def _what(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The report kind and its builder's arguments, from the flags."""
    if args.session and (args.compare or args.run or args.dataset):
        raise ValueError("--class CODE reports one session: give it alone")
    if args.session:
        return "class", dict(code=args.session)
    if args.factor:
        if args.compare or args.run or args.dataset:
            raise ValueError("--factor reports runs that vary it: name them with --runs")
        run_ids = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
        return "factor", dict(factor=args.factor, run_ids=run_ids, reference=args.reference)
    if args.runs or args.reference:
        raise ValueError("--runs and --reference go with --factor effort|intervention")
    if args.compare:
        model_a, model_b = args.compare
        where = dict(run_id=args.run, dataset=args.dataset)
        return "compare", dict(model_a=model_a, model_b=model_b, **where)
    if args.run and args.dataset:
        raise ValueError("give --run or --dataset, not both (or --compare A B with either)")
    if args.run:
        return "run", dict(run_id=args.run)
    if args.dataset:
        return "dataset", dict(name=args.dataset)
    raise ValueError(
        "say what to report: --run RUN_ID, --dataset NAME, --compare MODEL_A MODEL_B, "
        "--factor effort|intervention or --class CODE"
    )


def _report(args: argparse.Namespace) -> int:
    from cogbias.core.outputs import check_output, replacing
    from cogbias.store import Store
    from cogbias.views import report, report_html

    kind, what = _what(args)
    if args.output.suffix.lower() not in SUFFIXES:
        raise ValueError(f"{args.output}: a report is an HTML file; name it FILE.html")
    check_output(args.output, args.force, [args.db])  # a file in the way fails before the work
    if not Path(args.db).is_file():  # opening would create an empty one
        raise report.ReportError(f"no database at {args.db}; pass --db FILE")
    with Store(args.db) as store:
        page = report_html.render(report.build(kind, store, **what))
    with replacing(args.output, force=args.force, protect=[args.db]) as temporary:
        temporary.write_text(page, encoding="utf-8")
    print(f"wrote {args.output} ({len(page.encode('utf-8')) // 1024 + 1} KB)", file=sys.stderr)
    return 0
