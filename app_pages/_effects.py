"""Published effect sizes on the Datasets page (the Mohr thesis' `bias_detections.csv`).

The statistics layer groups and fits (`cogbias.studies.effect_tables`,
`cogbias.studies.regression`) and `cogbias.views.charts_effects` draws; this page only shows:
the bias × pivot heatmap with each bias' homogeneity, the homogeneity table, and the two OLS
fits. Names in these tables come from an imported CSV, so they are only ever shown in
charts and dataframes (as text), never in Markdown.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import _figure, _tables
from app_pages._common import attempt
from cogbias.store import Store
from cogbias.studies import effect_tables, regression
from cogbias.views import safe_text
from cogbias.views.charts_effects import effects_heatmap
from cogbias.views.coefficients import coefficient_table
from cogbias.views.figures import Source

# The first is the default: the thesis' own figure, which a researcher compares with.
CELLS = {
    "thesis": "thesis' Figure 2 (weighted mean of d, then capped)",
    "mean": "mean of capped d",
}


# A fit on the thesis' 1,599 experiments takes most of a second: fit once per data, not on
# every click of a radio. (A fit that fails raises, and failures are not cached.)
@st.cache_data(show_spinner=False, max_entries=8)
def _experiment_fit(frame: pd.DataFrame) -> regression.OlsResult:
    return regression.experiment_ols(frame)


@st.cache_data(show_spinner=False, max_entries=8)
def _feature_fit(frame: pd.DataFrame, features: pd.DataFrame) -> regression.OlsResult:
    return regression.ols_on_features(frame, features)


def show_effects(store: Store, dataset: str) -> None:
    """Everything the page shows about the effect sizes of `dataset`."""
    frame = attempt("Reading the effect sizes", lambda: effect_tables.load_effects(store, dataset))
    if frame is None:
        return
    st.subheader("Published effect sizes (Cohen's d, capped to [0, 1])")
    st.caption(
        f"{len(frame):,} experiments: one per bias × prompt scenario × model × temperature. "
        "0 means no bias, 1 a large effect. The right-hand column is each bias' homogeneity "
        "σ²_e / σ²_d over all its experiments (1: every experiment agrees)."
    )
    left, right = st.columns([2, 3])
    by = left.radio("Pivot by", effect_tables.PIVOTS, horizontal=True, key="ds_eff_by")
    how = right.radio("Cells", list(CELLS), format_func=CELLS.get, key="ds_eff_how")
    long = effect_tables.heatmap_frame(frame, by=by, how=how)
    st.altair_chart(effects_heatmap(long, column_title=by))
    if how == "thesis":  # the figure is the thesis' own; the other view stays on screen only
        _figure.save_figure(["mohr-heatmap"], "ds_eff_figure", Source(dataset=dataset, by=by))
    # our own sentence, but Markdown would read its "σ²_e / σ²_d" as italics
    st.caption(safe_text.escape_markdown(f"Showing the {effect_tables.view_caption(how, by)}."))

    st.subheader("Homogeneity per bias")
    _tables.table(
        effect_tables.homogeneity_rows(frame),
        "ds_eff_homogeneity",
        f"{dataset}-homogeneity",
        hide_index=True,
        column_config={
            "bias": st.column_config.TextColumn("bias"),
            "homogeneity": st.column_config.NumberColumn("homogeneity σ²_e / σ²_d", format="%.3f"),
        },
    )

    st.subheader("What explains the effect (OLS)")
    st.caption(
        "The capped effect regressed on bias, model and prompt scenario (fixed effects against "
        "the alphabetically first level) and temperature (linear), as in the thesis' Table 4."
    )
    fit = attempt("The OLS on bias, model, scenario and temperature",
                  lambda: _experiment_fit(frame))  # fmt: skip
    if fit is not None:
        _ols(fit, "ds_eff_ols", f"{dataset}-ols")
    features = regression.published_features(store, [dataset])
    if features.empty:
        st.caption("This dataset has no models.csv, so there are no model features to regress on.")
        return
    st.caption(
        "The capped effect regressed on temperature and the published model features "
        "(parameters, capability score, release date in days since the earliest) — Table 5. "
        "Each coefficient is the change in the effect per unit of its feature (release_days: "
        "per day, so it is small); every number keeps three significant digits. "
        "Features that are unknown or never vary are left out."
    )
    fit = attempt(
        "The OLS on model features",
        lambda: _feature_fit(frame, features),
    )
    if fit is not None:
        _ols(fit, "ds_eff_features", f"{dataset}-ols-features")


def show_rows(store: Store, dataset: str) -> None:
    """The published effect sizes as stored, one row per experiment (for the Browse tab)."""
    frame = attempt("Reading the effect sizes", lambda: effect_tables.load_effects(store, dataset))
    if frame is None:
        return
    st.caption(
        "One row per bias × prompt scenario × model × temperature as published: the group "
        "sizes, Cohen's d (pooled SD) and d capped to [0, 1]. The Analysis tab charts them."
    )
    _tables.table(
        frame[effect_tables.EFFECT_COLUMNS],
        "ds_eff_rows",
        f"{dataset}-effect-sizes",
        hide_index=True,
        column_config={
            "bias_name": st.column_config.TextColumn("bias (as published)"),
            "n_control": st.column_config.NumberColumn("n control"),
            "n_treatment": st.column_config.NumberColumn("n treatment"),
            "d": st.column_config.NumberColumn("d", format="%+.3f"),
            "d_capped": st.column_config.NumberColumn("d capped", format="%.3f"),
        },
    )


def _ols(fit: regression.OlsResult, key: str, name: str) -> None:
    # Text with three significant digits: a fixed "%.3f" showed a per-day coefficient as 0.000.
    _tables.table(
        coefficient_table(fit.table, reference=fit.reference),
        key,
        name,
        data=fit.table,
        hide_index=True,
    )
    st.caption(
        f"n = {fit.n:,} experiments · R² = {fit.r_squared:.3f} · "
        f"adjusted R² = {fit.adj_r_squared:.3f}"
    )
