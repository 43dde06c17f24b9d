"""Heatmap data for exploring results: the bias x model summary without loading every decision.

`analysis.summarize` works on one row per decision; at 600,000 decisions, moving them from
SQLite into pandas dominates. A mean, a t-interval and a one-sample t-test need only n, the sum
and the sum of squares, so SQLite aggregates per cell (`Store.score_aggregates`) and this
module turns those sufficient statistics into the same table `summarize` returns (a test checks
the two agree). Multiple-testing correction reuses `analysis.with_significance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cogbias.store import Store
from cogbias.studies.analysis import ALPHA, SCORE_RANGE, with_significance


def summarize_aggregates(
    rows: Iterable[Mapping[str, Any]], alpha: float = ALPHA, confidence: float = 0.95
) -> pd.DataFrame:
    """`analysis.summarize`'s table from per-cell n, s1 (sum), s2 (sum of squares), sabs,
    smin, smax and failures."""
    agg = pd.DataFrame(
        list(rows), columns=["bias", "model", "n", "s1", "s2", "sabs", "smin", "smax", "failures"]
    )
    n = agg["n"].fillna(0).to_numpy(dtype=float)
    s1, s2 = agg["s1"].to_numpy(dtype=float), agg["s2"].to_numpy(dtype=float)
    failures = agg["failures"].fillna(0).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(n > 0, s1 / n, np.nan)
        mean_abs = np.where(n > 0, agg["sabs"].to_numpy(dtype=float) / n, np.nan)
        var = np.clip((s2 - n * mean**2) / (n - 1), 0.0, None)  # rounding can dip below 0
        sem = np.sqrt(var) / np.sqrt(n)
        constant = agg["smin"].to_numpy(dtype=float) == agg["smax"].to_numpy(dtype=float)
        degenerate = constant | (sem == 0)
        dof = np.maximum(n - 1, 1)
        half = stats.t.ppf(0.5 + confidence / 2, dof) * sem
        t = mean / sem
        p = 2 * stats.t.sf(np.abs(t), dof)
    few = n < 2
    low, high = SCORE_RANGE  # as `analysis.t_interval`: truncated to the score range
    # as `analysis.identical_interval`: identical scores still leave room on either side
    share = 1.0 - ((1.0 - confidence) / 2) ** (1.0 / np.maximum(n, 1))
    same_low, same_high = mean - share * (mean - low), mean + share * (high - mean)
    ci_low = np.where(few, np.nan, np.where(degenerate, same_low, np.maximum(mean - half, low)))
    ci_high = np.where(few, np.nan, np.where(degenerate, same_high, np.minimum(mean + half, high)))
    # As in `analysis.one_sample_p`: identical scores fall back to the exact sign test.
    p = np.where(degenerate, np.where(mean == 0, 1.0, np.minimum(1.0, 2 * 0.5**n)), p)
    p = np.where(few, np.nan, p)
    total = n + failures
    table = pd.DataFrame(
        {
            "bias": agg["bias"],
            "model": agg["model"],
            "mean": mean,
            "mean_abs": mean_abs,
            "n": n.astype(int),
            "failures": failures.astype(int),
            "failure_rate": np.where(total > 0, failures / np.where(total > 0, total, 1), 0.0),
            "ci_low": ci_low,
            "ci_high": ci_high,
            "p_value": p,
        }
    )
    return (
        with_significance(table, alpha)
        .sort_values(["bias", "model"], kind="stable")
        .reset_index(drop=True)
    )


def cells_from_status_groups(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Merge `Store.score_aggregates` rows (one per bias, model, status) into one per cell:
    scores count only from 'ok' decisions, every other status counts as a failure."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cell = cells.setdefault(
            (r["bias"], r["model"]),
            {"bias": r["bias"], "model": r["model"], "n": 0, "s1": 0.0, "s2": 0.0,
             "sabs": 0.0, "smin": None, "smax": None, "failures": 0},
        )  # fmt: skip
        if r["status"] == "ok":
            cell.update({k: r[k] for k in ("n", "s1", "s2", "sabs", "smin", "smax")})
        else:
            cell["failures"] += int(r["rows"])
    return [cells[key] for key in sorted(cells)]


def heatmap_summary(
    store: Store, run_id: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """The bias x model summary of a run, a dataset, or (neither) everything in the store."""
    groups = store.score_aggregates(run_id=run_id, dataset=dataset)
    return summarize_aggregates(cells_from_status_groups(groups))


def token_bias_test_cases(store: Store) -> set[str]:
    """The test cases of token-bias studies and imports (their datasets carry hypotheses).

    Their score is (P' correct) - (P correct), not a cognitive bias: Explore's legend ("positive
    means the model shows the bias") would misread them; the Token bias page reads them.
    """
    out: set[str] = set()
    for row in store.datasets():
        meta = row.get("meta") or {}
        if "alternatives" in meta:
            out |= set(meta["alternatives"]) | set(meta.get("biases", []))
    return out


def cognitive_bias_summary(
    store: Store, run_id: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """`heatmap_summary` without token-bias rows: what Explore's cognitive-bias legend reads."""
    summary = heatmap_summary(store, run_id=run_id, dataset=dataset)
    if summary.empty:
        return summary
    keep = ~summary["bias"].isin(token_bias_test_cases(store))
    return summary[keep].reset_index(drop=True)


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
