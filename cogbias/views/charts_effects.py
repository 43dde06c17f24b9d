"""Altair charts of effect-size tables (the Mohr thesis' Figures 2 and 3).

Capped effects live on [0, 1] (0 = no bias, 1 = a large effect), so the scale is sequential,
not the diverging [-1, 1] scale of `charts.heatmap`. Every column is named (`category_axis`:
long names are tilted, never dropped) and both legends sit under the chart, where a wide
heatmap cannot push them off the page. Nothing here imports Streamlit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from cogbias.views.charts import bottom_legend, category_axis, column_axis, column_step
from cogbias.views.numbers import fixed

EFFECT_SCALE = alt.Scale(domain=[0, 1], scheme="blues")
HOMOGENEITY_SCALE = alt.Scale(domain=[0, 1], scheme="greens")
# Pixels a heatmap's cells may take together: ten models still fit beside the bias names and
# the homogeneity column on a laptop screen; few columns get wide cells, many narrow ones.
CELLS_WIDTH = 480
STEP_RANGE = (40, 64)


def effects_heatmap(long: pd.DataFrame, column_title: str = "") -> alt.HConcatChart:
    """bias × column cells of capped effects, with each bias' homogeneity in a side column.

    `long` is `effect_tables.heatmap_frame(...)`: bias, column, value, homogeneity.
    """
    data = long.assign(
        label=long["value"].map(lambda v: "" if pd.isna(v) else fixed(v)),
    )
    rows = sorted(data["bias"].unique())
    columns = list(dict.fromkeys(data["column"]))
    step = column_step(len(columns), CELLS_WIDTH, *STEP_RANGE)
    y = alt.Y("bias:N", sort=rows, title=None, axis=category_axis())
    base = alt.Chart(data).encode(
        x=alt.X(
            "column:N",
            sort=columns,
            title=column_title or None,
            axis=column_axis(columns, step),
        ),
        y=y,
    )
    cells = base.mark_rect().encode(
        color=alt.Color(
            "value:Q",
            scale=EFFECT_SCALE,
            title="effect (capped)",
            legend=bottom_legend(gradientLength=200),
        ),
        tooltip=["bias", "column", alt.Tooltip("value:Q", format=".3f")],
    )
    text = base.mark_text(fontSize=10).encode(
        text="label:N",
        color=alt.condition("datum.value > 0.6", alt.value("white"), alt.value("black")),
    )
    per_bias = data.drop_duplicates("bias")[["bias", "homogeneity"]].assign(
        label=lambda f: f["homogeneity"].map(lambda v: "" if pd.isna(v) else fixed(v)),
        column="homogeneity",
    )
    side = alt.Chart(per_bias).encode(
        x=alt.X("column:N", title="homogeneity", axis=alt.Axis(labels=False, ticks=False)),
        y=alt.Y("bias:N", sort=rows, title=None, axis=None),
    )
    homogeneity = side.mark_rect().encode(
        color=alt.Color(
            "homogeneity:Q",
            scale=HOMOGENEITY_SCALE,
            title="σ²_e / σ²_d",
            legend=bottom_legend(gradientLength=100, values=[0, 0.5, 1]),
        ),
        tooltip=["bias", alt.Tooltip("homogeneity:Q", format=".3f")],
    ) + side.mark_text(fontSize=10).encode(text="label:N")
    return alt.hconcat(
        (cells + text).properties(width=alt.Step(step), height=alt.Step(22)),
        homogeneity.properties(width=alt.Step(80), height=alt.Step(22)),
        spacing=6,
    ).resolve_scale(color="independent")
