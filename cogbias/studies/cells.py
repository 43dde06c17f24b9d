"""The bias x model cells from sufficient statistics: Explore's summary without loading every
decision.

`analysis.summarize` works on one row per decision; at 600,000 decisions, moving them from
SQLite into pandas dominates. A mean, a t-interval and a one-sample t-test need only n, the sum
and the sum of squares, so SQLite aggregates per cell (`Store.score_aggregates`) and this
module turns those sufficient statistics into the same table `summarize` returns. The two are
one statistic computed two ways: `tests/test_explore.py:
test_sql_summary_equals_the_per_decision_summary` holds them equal on the same data, so a
change to one that is not made to the other fails there. Multiple-testing correction is
`analysis.with_significance` for both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cogbias.core import probabilities
from cogbias.core.metrics import MetricParams, params_problem
from cogbias.core.records import DecisionStatus
from cogbias.store import Store
from cogbias.studies.analysis import ALPHA, SCORE_RANGE, identical_interval, with_significance


def summarize_aggregates(
    rows: Iterable[Mapping[str, Any]], alpha: float = ALPHA, confidence: float = 0.95
) -> pd.DataFrame:
    """`analysis.summarize`'s table from per-cell n, s1 (sum), s2 (sum of squares), sabs,
    smin, smax, failures and abstained."""
    agg = pd.DataFrame(
        list(rows),
        columns=["bias", "model", "n", "s1", "s2", "sabs", "smin", "smax", "failures", "abstained"],
    )
    n = agg["n"].fillna(0).to_numpy(dtype=float)
    s1, s2 = agg["s1"].to_numpy(dtype=float), agg["s2"].to_numpy(dtype=float)
    failures = agg["failures"].fillna(0).to_numpy(dtype=float)
    abstained = agg["abstained"].fillna(0).to_numpy(dtype=float)
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
    # identical scores still leave room on either side (elementwise over the cells)
    same_low, same_high = identical_interval(mean, np.maximum(n, 1), confidence, SCORE_RANGE)
    ci_low = np.where(few, np.nan, np.where(degenerate, same_low, np.maximum(mean - half, low)))
    ci_high = np.where(few, np.nan, np.where(degenerate, same_high, np.minimum(mean + half, high)))
    # As in `analysis.one_sample_p`: identical scores fall back to the exact sign test.
    p = np.where(degenerate, np.where(mean == 0, 1.0, np.minimum(1.0, 2 * 0.5**n)), p)
    p = np.where(few, np.nan, p)
    total = n + failures + abstained
    table = pd.DataFrame(
        {
            "bias": agg["bias"],
            "model": agg["model"],
            "mean": mean,
            "mean_abs": mean_abs,
            "n": n.astype(int),
            "failures": failures.astype(int),
            "failure_rate": np.where(total > 0, failures / np.where(total > 0, total, 1), 0.0),
            "abstained": abstained.astype(int),
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
    scores count only from 'ok' decisions, abstained ones (`DecisionStatus.ABSTAINED`) apart, every
    other status counts as a failure."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cell = cells.setdefault(
            (r["bias"], r["model"]),
            {"bias": r["bias"], "model": r["model"], "n": 0, "s1": 0.0, "s2": 0.0,
             "sabs": 0.0, "smin": None, "smax": None, "failures": 0, "abstained": 0},
        )  # fmt: skip
        if r["status"] == DecisionStatus.OK:
            cell.update({k: r[k] for k in ("n", "s1", "s2", "sabs", "smin", "smax")})
        elif r["status"] == DecisionStatus.ABSTAINED:
            cell["abstained"] += int(r["rows"])
        else:
            cell["failures"] += int(r["rows"])
    return [cells[key] for key in sorted(cells)]


def heatmap_summary(
    store: Store, run_id: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """The bias x model summary of a run, a dataset, or (neither) everything in the store."""
    groups = store.score_aggregates(run_id=run_id, dataset=dataset)
    return summarize_aggregates(cells_from_status_groups(groups))


RESULT_COLUMNS = ["bias", "model", "mean", "n", "failures", "failure_rate", "abstained"]


def results_table(
    store: Store, run_id: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """Per bias x model of a run, a dataset or everything: the mean score and the failure rate
    to four decimals, scored, failed and abstained pairs (`cogbias results`' table; abstained
    pairs, a reducer's tie, are counted apart from failures but in the rate's total)."""
    rows = store.results(run_id=run_id, dataset=dataset)
    for row in rows:
        total = (row["n"] or 0) + (row["failures"] or 0) + (row["abstained"] or 0)
        row["failure_rate"] = round(row["failures"] / total, 4) if total else 0.0
        row["mean"] = None if row["mean"] is None else round(row["mean"], 4)
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


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


# ------------------------------------------------------------------- the null of no bias


def uniform_null(params: MetricParams, n_options: int) -> float:
    """The metric's exact null for one instance: its expected score when both halves answer
    uniformly at random (what the random baseline scores in `--scoring probabilities`).

    0 for a symmetric metric (y1 = y2, no flip that breaks the symmetry); an asymmetric one
    (reference points that differ, one half flipped on an odd scale) has a null away from 0,
    which is what "no bias" looks like for it.
    """
    uniform = probabilities.uniform(n_options)
    return probabilities.expected_score(uniform, uniform, params, n_options)


def uniform_nulls(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Per bias x model, the mean exact null over its instances, from
    `Store.instance_metrics` rows; NaN where no instance has metric parameters (published
    results only) or its parameters cannot be read."""
    totals: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        cell = totals.setdefault((r["bias"], r["model"]), [0.0, 0.0])
        n = r.get("n_options")
        params = _params(r.get("metric"), n) if isinstance(n, int) and n >= 1 else None
        if params is None:
            continue
        count = int(r.get("instances") or 0)
        cell[0] += uniform_null(params, n) * count
        cell[1] += count
    return pd.DataFrame(
        [
            {"bias": b, "model": m, "null": total / count if count else np.nan}
            for (b, m), (total, count) in sorted(totals.items())
        ],
        columns=["bias", "model", "null"],
    )


def _params(text: str | None, n_options: int) -> MetricParams | None:
    """The stored parameters, or None when missing or outside their documented bounds."""
    try:
        data = json.loads(text) if text else None
        params = MetricParams(**data) if isinstance(data, dict) else None
    except (TypeError, ValueError):
        return None
    return params if params and not params_problem(params, n_options, off_scale=True) else None


def with_uniform_null(
    store: Store, summary: pd.DataFrame, run_id: str | None = None, dataset: str | None = None
) -> pd.DataFrame:
    """`summary` with a `null` column: each cell's mean exact null under uniform answers,
    shown beside the mean so an asymmetric metric's "no bias" level can be read off
    (significance is still the test against 0, as in the paper)."""
    uniform = {r["test_case"]: r for r in store.uniform_metrics()}
    # A test case with one metric gives each of its cells that one row (its weight is moot);
    # only the others need their cells' instances counted from the decisions.
    rows = [
        {**uniform[bias], "bias": bias, "model": model, "instances": 1}
        for bias, model in zip(summary["bias"], summary["model"], strict=True)
        if bias in uniform
    ]
    mixed = sorted(set(summary["bias"]) - set(uniform))
    if mixed:
        rows += store.instance_metrics(run_id=run_id, dataset=dataset, test_cases=mixed)
    return summary.merge(uniform_nulls(rows), on=["bias", "model"], how="left")
