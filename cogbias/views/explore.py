"""Explore as it is shown: which runs a heatmap stands on, the order of its rows and the
numbers behind it as a table reads them.

The statistics themselves (the bias x model cells from SQL sufficient statistics, the exact
null under uniform answers) are `cogbias.studies.cells`; this module only arranges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from cogbias.core.run_record import ResultsPage, Run
from cogbias.views import unread_answers
from cogbias.views.numbers import interval, p_text, percent, signed_or_dash

# A cell's pairs that could not be read, in words (`with_unread`), where the page has them:
# its tooltip (`charts_explore`) and its heading say how many and why.
UNREAD = "unread_text"
NONE_UNREAD = "none"


def runs_behind(
    runs: Sequence[Run],
    datasets: Iterable[Mapping[str, Any]],
    run_id: str | None = None,
    dataset: str | None = None,
) -> list[Run]:
    """The runs whose pairs a heatmap of `run_id` / `dataset` (or of everything) shows, of
    `runs` (`kinds.records`) and `datasets` (`Store.datasets`) as the page read them: runs
    whose kind Explore shows (paired runs), not those on a dataset another page reads (token-bias, effect sizes), nor a run
    whose stored spec cannot be read (it cannot be placed, so it is not named)."""
    from cogbias.datasets.formats import results_page

    if run_id is not None:
        return [r for r in runs if r.id == run_id]
    elsewhere = {d["name"] for d in datasets if results_page(d["kind"]) != "explore"}
    shown = []
    for run in runs:
        on = run.spec.get("dataset")
        if run.spec_readable and run.kind and run.kind.page is ResultsPage.EXPLORE:
            if on not in elsewhere and (dataset is None or on == dataset):
                shown.append(run)
    return shown


def row_order(summary: pd.DataFrame, sort: str = "average") -> list[str]:
    """Biases in display order: by average mean score over models (highest first), or by name."""
    if summary.empty:
        return []
    averages = summary.groupby("bias")["mean"].mean()
    if sort == "name":
        return sorted(averages.index)
    ascending = sort == "average_asc"
    ordered = averages.sort_values(ascending=ascending, na_position="last", kind="stable")
    return [str(b) for b in ordered.index]


CI_COLUMN = "95% CI of this cell alone"


def numbers_table(summary: pd.DataFrame, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The numbers behind the heatmap as a page's table shows them: scores with three
    decimals and no sign on zero, intervals and p-values with a dash where a cell has too few
    scored pairs for them (a table would otherwise print "None"), rates as percentages, and
    the abstained pairs of sampled runs (`--reducer majority`) where there are any."""
    names = names or {}
    # pairs a reducer left undecided (`DecisionStatus.ABSTAINED`), where a run has any: apart from
    # failures, in no mean
    abstained = (
        {"abstained": summary["abstained"].astype(int)}
        if "abstained" in summary and summary["abstained"].any()
        else {}
    )
    nulls = (  # the exact null, where the summary has one (`with_uniform_null`)
        {"null (uniform answers)": [signed_or_dash(v, 3) for v in summary["null"]]}
        if "null" in summary
        else {}
    )
    return pd.DataFrame(
        {
            "bias": [names.get(b, b) for b in summary["bias"]],
            "model": summary["model"],
            "mean score": [signed_or_dash(v, 3) for v in summary["mean"]],
            **nulls,
            "n": summary["n"].astype(int),
            CI_COLUMN: [
                interval(lo, hi)
                for lo, hi in zip(summary["ci_low"], summary["ci_high"], strict=True)
            ],
            "p (BH-adjusted)": [p_text(p) for p in summary["p_adjusted"]],
            "significant after BH": summary["significant"].fillna(False).astype(bool),
            "failures": summary["failures"].astype(int),
            "failure rate": [percent(r, 1) for r in summary["failure_rate"]],
            **abstained,
        }
    )


def with_unread(summary: pd.DataFrame, errors: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """`summary` with each cell's pairs that could not be read in words (`UNREAD`: "3 of 20
    pairs could not be read: the model named more than one option", or "none"), from the
    stored reasons of the source's unread pairs (`Store.unreadable_errors`), for the cell's
    tooltip and heading."""
    by_cell: dict[tuple[str, str], list[str]] = {}
    for row in errors:
        by_cell.setdefault((str(row["test_case"]), str(row["model"])), []).append(
            str(row["error"] or "")
        )
    abstained = summary["abstained"] if "abstained" in summary else 0
    pairs = (summary["n"] + summary["failures"] + abstained).astype(int)
    out = summary.copy()
    out[UNREAD] = [
        unread_answers.count_sentence(by_cell.get((bias, model), []), total) or NONE_UNREAD
        for bias, model, total in zip(summary["bias"], summary["model"], pairs, strict=True)
    ]
    return out


def unread_line(summary: pd.DataFrame, bias: str, model: str, behind: Sequence[Run]) -> str:
    """The heading's word on a cell's unread pairs with what would read them ("3 of 20 pairs
    could not be read: the model named more than one option; score by option probabilities
    or use a stronger model"), or '' when none were (or `summary` does not say)."""
    if UNREAD not in summary:
        return ""
    cell = summary[(summary["bias"] == bias) & (summary["model"] == model)]
    said = str(cell[UNREAD].iloc[0]) if not cell.empty else NONE_UNREAD
    if said == NONE_UNREAD:
        return ""
    asked = [r for r in behind if model in (r.spec.get("models") or [])]
    scorings = {r.spec.get("scoring") for r in asked}
    bases = {r.spec.get("api_base") for r in asked}
    fix = unread_answers.fix_sentence(
        [model],
        next(iter(bases)) if len(bases) == 1 else None,
        next(iter(scorings)) if len(scorings) == 1 else None,
    )
    return f"{said}; {fix}"
