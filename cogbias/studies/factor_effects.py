"""The paired effect of a factor: runs that differ in one setting alone (a reasoning effort,
an intervention; `runs.factor_runs`) asked the same instances, so each level's scores can be
set against a reference level's pair by pair, as two models are compared (`analysis.
compare_models`), with each instance's own difficulty cancelled out.

Per level (other than the reference) × bias × model: the mean change in score on the
instances both runs scored (the level's minus the reference's, each instance's repeats
averaged first), its paired 95 % t-interval (truncated to [-2, 2]), a Wilcoxon signed-rank
test, and Benjamini–Hochberg adjusted p-values across the bias × model cells of that level
(one family per level against the reference). A negative change on a test case scored in
the bias's direction means the level reduced the bias. Beside it, what each level cost in
thinking (`thinking_by_level`) and the share of traces naming the treatment's detail
(`trace_shares`, a string match).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cogbias.studies.analysis import ALPHA, paired_difference, with_significance

FACTOR_COLUMNS = [
    "level", "bias", "model", "n", "mean_reference", "mean_level", "mean_change", "ci_low",
    "ci_high", "statistic", "p_value", "p_adjusted", "significant",
]  # fmt: skip
THINKING_COLUMNS = [
    "level", "model", "pairs", "reported", "thinking_tokens", "thinking_per_pair", "cost",
]  # fmt: skip
TRACE_COLUMNS = ["level", "bias", "model", "traced", "mentioning", "share"]


def level_scores(rows: Iterable[Mapping[str, Any]], levels: Mapping[str, str]) -> pd.DataFrame:
    """`Store.run_scores` rows with each run's level (`levels`: run id -> level)."""
    frame = pd.DataFrame(list(rows), columns=["run_id", "bias", "model", "instance_id", "score"])
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    frame["level"] = frame["run_id"].map(levels)
    return frame.dropna(subset=["level"])


def factor_effects(
    scores: pd.DataFrame, reference: str, levels: Sequence[str], alpha: float = ALPHA
) -> pd.DataFrame:
    """Per level (in `levels`' order, the reference left out) × bias × model: the paired
    change against `reference` (see the module docstring). A cell is there when both levels
    scored at least one shared instance; its interval and test need two."""
    records = []
    base = scores[scores["level"] == reference].set_index(["bias", "model", "instance_id"])
    for level in [lv for lv in levels if lv != reference]:
        other = scores[scores["level"] == level].set_index(["bias", "model", "instance_id"])
        joined = (
            base[["score"]]
            .rename(columns={"score": "score_ref"})
            .join(other[["score"]], how="inner")
        )
        for (bias, model), group in joined.groupby(level=["bias", "model"], sort=True):
            reference_scores = group["score_ref"].to_numpy(dtype=float)
            level_scores_ = group["score"].to_numpy(dtype=float)
            records.append(_cell(level, str(bias), str(model), reference_scores, level_scores_))
    table = pd.DataFrame.from_records(records, columns=FACTOR_COLUMNS[:-2])
    parts = [
        with_significance(part.copy(), alpha) for _, part in table.groupby("level", sort=False)
    ]
    if not parts:
        return pd.DataFrame(columns=FACTOR_COLUMNS)
    return pd.concat(parts, ignore_index=True)[FACTOR_COLUMNS]


def _cell(level: str, bias: str, model: str, ref: np.ndarray, now: np.ndarray) -> dict[str, Any]:
    """One cell: the level's scores against the reference's (`analysis.paired_difference`)."""
    d = paired_difference(now, ref)
    renamed = {"mean_b": "mean_reference", "mean_a": "mean_level", "mean_diff": "mean_change"}
    return {"level": level, "bias": bias, "model": model} | {
        renamed.get(k, k): v for k, v in d.items()
    }


def thinking_by_level(rows: Iterable[Mapping[str, Any]], levels: Mapping[str, str]) -> pd.DataFrame:
    """Per level × model (`Store.run_thinking` rows): pairs, pairs whose answers reported
    thinking tokens, the tokens, their mean per reporting pair (NaN when none reported) and
    the pairs' cost when asked."""
    frame = pd.DataFrame(
        list(rows), columns=["run_id", "model", "pairs", "reported", "reasoning_tokens", "cost"]
    )
    frame["level"] = frame["run_id"].map(levels)
    frame = frame.dropna(subset=["level"]).rename(columns={"reasoning_tokens": "thinking_tokens"})
    reported = frame["reported"].astype(float)
    frame["thinking_per_pair"] = (frame["thinking_tokens"] / reported).where(reported > 0)
    order = {level: i for i, level in enumerate(dict.fromkeys(levels.values()))}
    frame = frame.sort_values(
        ["level", "model"], key=lambda c: c.map(order) if c.name == "level" else c
    )
    return frame[THINKING_COLUMNS].reset_index(drop=True)


def trace_shares(
    rows: Iterable[Mapping[str, Any]], levels: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Per level (or all runs together, level "all", without `levels`) × bias × model
    (`Store.trace_signal` rows): halves whose trace could be checked, those naming the
    treatment's eliciting detail, and their share."""
    frame = pd.DataFrame(list(rows), columns=["run_id", "bias", "model", "traced", "mentioning"])
    frame["level"] = frame["run_id"].map(levels) if levels is not None else "all"
    frame = frame.dropna(subset=["level"])
    summed = frame.groupby(["level", "bias", "model"], sort=True, as_index=False)[
        ["traced", "mentioning"]
    ].sum()
    traced = summed["traced"].astype(float)
    summed["share"] = (summed["mentioning"] / traced).where(traced > 0)
    return summed[TRACE_COLUMNS]
