"""`cogbias figure NAME --run ID | --dataset NAME -o FILE.svg|.png`: a paper-ready chart."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cogbias.cli.options import add_db


def _listing() -> str:
    from cogbias.views.figures import FIGURES  # Altair loads here, not for every command

    lines = [f"  {f.name:<20} {f.title}\n  {'':<20} needs {f.needs}" for f in FIGURES.values()]
    return "figures:\n" + "\n".join(lines)


def add_commands(commands: Any) -> None:
    p = commands.add_parser(
        "figure",
        help="save a chart (Explore's heatmap, Figures 5-7, ...) as SVG or PNG for a paper",
        description="Save one of the app's charts as a paper-ready SVG or PNG: every label "
        "whole, the legend inside, sized for a journal (page: 7 in, column: 3.5 in).",
        epilog="`cogbias figure --list` names the figures and what each needs.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the figure (see --list)")
    p.add_argument("--list", action="store_true", help="list the figures and what each needs")
    p.add_argument("--run", metavar="RUN_ID", help="the run to draw")
    p.add_argument("--dataset", metavar="NAME", help="the dataset to draw")
    p.add_argument("--models", nargs=2, metavar=("A", "B"), help="compare-forest: the two models")
    p.add_argument("--by", help="study-heatmap / mohr-heatmap: the columns' dimension")
    p.add_argument(
        "--view",
        choices=["mean", "failure_rate", "n"],
        default="mean",
        help="explore-heatmap: what the cells show (default: mean)",
    )
    p.add_argument(
        "--order",
        choices=["average", "average_asc", "name"],
        default="average",
        help="explore-heatmap: the rows by average score, highest first (default), lowest "
        "first, or by name",
    )
    p.add_argument(
        "--width",
        choices=["page", "column"],
        default="page",
        help="page: a double column, 7 in (default); column: a single column, 3.5 in",
    )
    p.add_argument("-o", "--output", type=Path, help="FILE.svg or FILE.png")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    add_db(p)
    p.set_defaults(handler=_figure)


def _figure(args: argparse.Namespace) -> int:
    from cogbias.core.outputs import check_output
    from cogbias.store import Store
    from cogbias.views import figures

    if args.list or not args.name:
        print(_listing())
        return 0 if args.list else 2
    if args.output is None:
        print("error: say where to save the figure: -o FILE.svg or -o FILE.png", file=sys.stderr)
        return 2
    figures.figure_format(args.output)  # a wrong suffix or a file in the way fails at once
    check_output(args.output, args.force, [args.db])
    if not Path(args.db).is_file():  # opening would create an empty one
        raise figures.FigureError(f"no database at {args.db}; pass --db FILE")
    with Store(args.db) as store:
        chart = figures.figure_chart(
            args.name,
            store,
            run_id=args.run,
            dataset=args.dataset,
            width=args.width,
            models=args.models or (),
            by=args.by,
            view=args.view,
            order=args.order,
        )
        path = figures.save_figure(chart, args.output, force=args.force, protect=[args.db])
    print(f"Saved {args.name} to {path}.")
    return 0
