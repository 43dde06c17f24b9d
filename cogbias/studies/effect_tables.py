"""Tables of published (or measured) effect sizes: bias × model, pivots, homogeneity.

Rows come from the `effect_sizes` table (`datasets.mohr_format`): one Cohen's d per bias ×
scenario × model × temperature with its capped form. Two ways to fill a bias × model cell:

- `thesis_table`: the thesis' Figure 2, the inverse-variance weighted mean of the *uncapped*
  effects, capped afterwards (so one extreme experiment counts with its full size before the
  cell is clipped). What `cogbias effects` and the Datasets page show first: a researcher
  comparing with the thesis compares with this figure;
- `mean_table(..., value="d_capped")`: the plain mean of the capped effects — the simple
  reading, and what a user recomputes from the CSV.

`homogeneity_table` / `homogeneity_by_bias` (`homogeneity_rows`: with each bias' count of
experiments) give Figure 3's figure: σ²_e / σ²_d of the capped
effects, in [0, 1]. Everything returns plain pandas frames, ready for `charts_effects`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from cogbias.store import Store
from cogbias.store.effects import EFFECT_FIELDS
from cogbias.studies.effects import aggregate, cap

EFFECT_COLUMNS = [f for f in EFFECT_FIELDS if f not in ("dataset", "source_row")]
PIVOTS = ("model", "temperature", "scenario")
# How a bias × pivot cell is filled: "thesis" = thesis_table (the default: the thesis' own
# figure), "mean" = mean_table.
AGGREGATES = ("thesis", "mean")
# The views of `cogbias effects` (the first is its default) and what each shows. `{by}` is the
# pivot, `{value}` the effect a mean or regression reads (VALUES). The command prints the
# sentence beside its table and the Datasets page under its chart, so a number is never read
# as another view's.
VIEWS = {
    "thesis": "thesis view (the thesis' Figure 2): per bias × {by}, the inverse-variance "
    "weighted mean of Cohen's d over the other dimensions, capped to [0, 1] afterwards; "
    "experiments whose d is infinite are left out",
    "mean": "mean view: per bias × {by}, the plain mean of {value} over the other dimensions, "
    "and each bias' homogeneity (not the thesis' Figure 2, which is the thesis view)",
    "homogeneity": "homogeneity view (the thesis' Figure 3 and Table 8): per bias × {by}, "
    "σ²_e / σ²_d of the capped d, from 0 (the experiments disagree) to 1 (they agree)",
    "ols": "ols view (the thesis' Tables 4, 9 and 10): {value} regressed on bias, model and "
    "scenario (fixed effects) and temperature",
    "features": "features view (the thesis' Tables 5, 13 and 14): {value} regressed on "
    "temperature and the published model features",
}
VALUES = {
    "d_capped": "the capped d (Cohen's d clipped to [0, 1])",
    "d": "the uncapped Cohen's d",
}


class NoEffectSizes(KeyError):
    """The store holds no effect sizes for the dataset asked about."""


def load_effects(store: Store, dataset: str | None = None) -> pd.DataFrame:
    """Effect-size rows of one imported dataset (or of all of them)."""
    if not store.has_effect_sizes():
        raise NoEffectSizes(
            "this database has no published effect sizes yet: import them with "
            "`cogbias import mohr2025 DIR --db ...`"
        )
    rows = store.effect_sizes(dataset)
    frame = pd.DataFrame(rows, columns=[*EFFECT_COLUMNS, "dataset"]) if rows else pd.DataFrame()
    if frame.empty:
        which = f"dataset '{dataset}'" if dataset else "any dataset"
        raise NoEffectSizes(f"no effect sizes stored for {which}")
    return frame


def _check_by(by: str) -> None:
    if by not in PIVOTS:
        raise ValueError(f"pivot by one of {', '.join(PIVOTS)}, not {by!r}")


def mean_table(frame: pd.DataFrame, by: str = "model", value: str = "d_capped") -> pd.DataFrame:
    """bias × `by` table of the plain mean of `value` over everything else."""
    _check_by(by)
    table = frame.pivot_table(index="bias", columns=by, values=value, aggfunc="mean")
    table.columns.name = by
    return table.sort_index()


def _cell(group: pd.DataFrame, value: str, hedges: str = "exact") -> tuple[float, float]:
    """(weighted mean, homogeneity) of one cell's effects; NaN mean if none are finite.
    `hedges` is the J of the sampling variance (`effects.HEDGES`)."""
    rows = group[group[value].map(math.isfinite)]
    if rows.empty:
        return math.nan, math.nan
    sizes = list(zip(rows["n_control"], rows["n_treatment"], strict=True))
    result = aggregate(list(rows[value]), sizes, hedges)
    return result.mean, result.homogeneity


def thesis_table(frame: pd.DataFrame, by: str = "model", hedges: str = "exact") -> pd.DataFrame:
    """Figure 2: per bias × `by` the inverse-variance weighted mean of d, capped to [0, 1].

    Experiments whose d is infinite (groups without any spread) cannot be weighted and are
    left out of the mean; use `mean_table` on `d_capped` to count them as 1 / 0.
    """
    _check_by(by)
    cells = {
        key: cap(_cell(group, "d", hedges)[0])
        for key, group in frame.groupby(["bias", by], sort=True)
    }
    return _unstack(cells, by)


def homogeneity_table(
    frame: pd.DataFrame, by: str = "model", hedges: str = "exact"
) -> pd.DataFrame:
    """Figure 3 / Table 8: per bias × `by` the homogeneity ratio of the capped effects
    (`hedges="thesis"` reproduces the thesis' digits)."""
    _check_by(by)
    cells = {key: _cell(group, "d_capped", hedges)[1] for key, group in frame.groupby(["bias", by])}
    return _unstack(cells, by)


def homogeneity_by_bias(frame: pd.DataFrame, hedges: str = "exact") -> pd.Series:
    """One homogeneity figure per bias, over all its scenarios, models and temperatures."""
    values = {bias: _cell(group, "d_capped", hedges)[1] for bias, group in frame.groupby("bias")}
    return pd.Series(values, name="homogeneity", dtype=float).sort_index()


def homogeneity_rows(frame: pd.DataFrame, hedges: str = "exact") -> pd.DataFrame:
    """One row per bias: its homogeneity (`homogeneity_by_bias`) and how many experiments
    it rests on, so a figure over two experiments is not read like one over two hundred."""
    homogeneity = homogeneity_by_bias(frame, hedges)
    experiments = frame.groupby("bias").size().reindex(homogeneity.index)
    return pd.DataFrame(
        {
            "bias": homogeneity.index,
            "homogeneity": homogeneity.to_numpy(),
            "experiments": experiments.to_numpy(),
        }
    )


def _unstack(cells: dict[tuple, float], by: str) -> pd.DataFrame:
    series = pd.Series(cells, dtype=float)
    series.index = series.index.set_names(["bias", by])
    table = series.unstack(by)
    table.columns.name = by
    return table.sort_index()


def heatmap_frame(
    frame: pd.DataFrame,
    by: str = "temperature",
    value: str = "d_capped",
    biases: Sequence[str] | None = None,
    how: str = "mean",
) -> pd.DataFrame:
    """Long rows (bias, column, value, homogeneity) for a bias × `by` heatmap.

    `how` fills the cells: "mean" is `mean_table` of `value`, "thesis" is `thesis_table`
    (which always weighs the uncapped d, so `value` is not used). `column` is the pivot value
    as text (temperatures as "0.2", "1"), ordered as in the data; `homogeneity` repeats the
    bias' own figure on each of its rows.
    """
    if how not in AGGREGATES:
        raise ValueError(f"fill the cells by one of {', '.join(AGGREGATES)}, not {how!r}")
    table = thesis_table(frame, by) if how == "thesis" else mean_table(frame, by, value)
    if biases is not None:
        table = table.loc[[b for b in biases if b in table.index]]
    homogeneity = homogeneity_by_bias(frame)
    long = table.reset_index().melt(id_vars="bias", var_name=by, value_name="value")
    long["column"] = long[by].map(column_label)
    long["homogeneity"] = long["bias"].map(homogeneity)
    return long[["bias", "column", "value", "homogeneity"]]


def view_caption(view: str, by: str = "model", value: str = "d_capped") -> str:
    """The sentence that names a view and what its numbers are (`VIEWS`)."""
    if view not in VIEWS:
        raise ValueError(f"show one of the views {', '.join(VIEWS)}, not {view!r}")
    return VIEWS[view].format(by=by, value=VALUES[value])


def column_label(value: object) -> str:
    """A pivot column as text: temperatures 0.2 and 1.0 read "0.2" and "1"."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
