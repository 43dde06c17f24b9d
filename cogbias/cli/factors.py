"""`cogbias results compare --factor effort|intervention`: the paired effect of a factor, as
Compare's "factor" mode shows it (`views.factor_view`): per level, bias and model the mean
change against the reference level with its paired interval and Wilcoxon test (BH within
each level), the thinking each level cost and the trace signal."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from typing import Any

from cogbias.cli.options import _table
from cogbias.core.safetext import csv_cell

EFFECT_COLUMNS = [
    "level", "bias", "model", "n", "mean_reference", "mean_level", "mean_change", "ci_low",
    "ci_high", "statistic", "p_value", "p_adjusted", "significant",
]  # fmt: skip


def add_compare(modes: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from cogbias.runs.factors import FACTORS

    p = modes.add_parser(
        "compare",
        parents=[common],
        help="the paired effect of a factor: runs that differ in the reasoning effort or the "
        "intervention alone, level against reference, per bias and model",
    )
    p.add_argument("--factor", required=True, choices=list(FACTORS), help="what the runs vary")
    p.add_argument(
        "--runs",
        metavar="RUN_IDS",
        help="the runs, comma-separated, one per level (default: the one design here whose "
        "runs vary the factor alone)",
    )
    p.add_argument(
        "--reference",
        metavar="LEVEL",
        help="the level the others are set against (default: none for interventions, the "
        "lowest effort for efforts)",
    )
    p.set_defaults(handler=compare)
    return p


def _rows(frame: Any) -> list[dict[str, Any]]:
    """JSON-able rows: NaN as null."""
    return [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in frame.to_dict("records")
    ]


def compare(args: argparse.Namespace) -> int:
    from cogbias.store import Store
    from cogbias.views import factor_view

    run_ids = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
    with Store(args.db) as store:
        tables = factor_view.factor_tables(store, args.factor, run_ids, args.reference)
    fset = tables.factor_set
    print(
        f"{args.factor}: levels {', '.join(fset.levels)} on {fset.design}; reference "
        f"{tables.reference}; runs {', '.join(fset.levels.values())}",
        file=sys.stderr,
    )
    effects = _rows(tables.effects.round(6))
    thinking = _rows(tables.thinking.round(6))
    traces = _rows(tables.traces.round(6))
    if args.format == "json":
        json.dump(
            {"effects": effects, "thinking": thinking, "traces": traces}, sys.stdout, indent=1
        )
        print()
    elif args.format == "csv":  # the effects; the rest with --format json or table
        writer = csv.DictWriter(sys.stdout, fieldnames=EFFECT_COLUMNS)
        writer.writeheader()
        writer.writerows({k: csv_cell(row[k]) for k in EFFECT_COLUMNS} for row in effects)
    else:
        if not effects:
            print(f"the runs at each {args.factor} level share no scored instance")
        else:
            _table(effects, EFFECT_COLUMNS)
        print("\nthinking per level (tokens the answers reported; cost when asked)")
        _table(thinking, list(tables.thinking.columns))
        if traces:
            print("\ntrace signal (share of traces naming the treatment's detail: a string match)")
            _table(traces, list(tables.traces.columns))
    return 0
