"""Altair charts of effect-size tables (the Mohr thesis' Figures 2 and 3).

Capped effects live on [0, 1] (0 = no bias, 1 = a large effect), so the scale is sequential,
not the diverging [-1, 1] scale of `charts.heatmap`; both are drawn by `charts.heatmap_of`. Every column is named (`category_axis`:
long names are tilted, never dropped) and both legends sit under the chart, where a wide
heatmap cannot push them off the page. Nothing here imports Streamlit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from cogbias.views.charts import Heatmap, bottom_legend, column_step, heatmap_of
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
    color = alt.Color(
        "value:Q",
        scale=EFFECT_SCALE,
        title="effect (capped)",
        legend=bottom_legend(gradientLength=200),
    )
    cells = Heatmap(
        "column", "bias", columns, rows, color,
        step=column_step(len(columns), CELLS_WIDTH, *STEP_RANGE), height=22,
        dark="datum.value > 0.6", x_title=column_title or None,
        tooltip=["bias", "column", alt.Tooltip("value:Q", format=".3f")],
    )  # fmt: skip
    per_bias = data.drop_duplicates("bias")[["bias", "homogeneity"]].assign(
        label=lambda f: f["homogeneity"].map(lambda v: "" if pd.isna(v) else fixed(v)),
        column="homogeneity",
    )
    homogeneity = Heatmap(
        "column", "bias", ["homogeneity"], rows,
        alt.Color(
            "homogeneity:Q",
            scale=HOMOGENEITY_SCALE,
            title="σ²_e / σ²_d",
            legend=bottom_legend(gradientLength=100, values=[0, 0.5, 1]),
        ),
        step=80, height=22, dark="false", x_title="homogeneity",
        x_axis=alt.Axis(labels=False, ticks=False), y_axis=None,
        tooltip=["bias", alt.Tooltip("homogeneity:Q", format=".3f")],
    )  # fmt: skip
    return alt.hconcat(
        heatmap_of(data, cells), heatmap_of(per_bias, homogeneity), spacing=6
    ).resolve_scale(color="independent")
