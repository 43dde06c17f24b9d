"""`cogbias results hypotheses NAME`: the hypothesis tables of a token-bias study or an
imported token-bias dataset, in the paper's layout."""

from __future__ import annotations

import argparse
import sys

from cogbias.cli.options import _table
from cogbias.cli.terminal import print_data

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
            f"no answered pairs on '{args.study}' yet: run it with `cogbias run study tokenbias` or `cogbias run dataset NAME`",
            file=sys.stderr,
        )
        return 0
    if print_data(table, args.format):
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
