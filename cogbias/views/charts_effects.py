"""Altair charts of effect-size tables (the Mohr thesis' Figures 2 and 3).

Capped effects live on [0, 1] (0 = no bias, 1 = a large effect), so the scale is sequential,
not the diverging [-1, 1] scale of `charts.heatmap`. Nothing here imports Streamlit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

EFFECT_SCALE = alt.Scale(domain=[0, 1], scheme="blues")
HOMOGENEITY_SCALE = alt.Scale(domain=[0, 1], scheme="greens")


def effects_heatmap(long: pd.DataFrame, column_title: str = "") -> alt.HConcatChart:
    """bias × column cells of capped effects, with each bias' homogeneity in a side column.

    `long` is `effect_tables.heatmap_frame(...)`: bias, column, value, homogeneity.
    """
    data = long.assign(
        label=long["value"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
    )
    rows = sorted(data["bias"].unique())
    columns = list(dict.fromkeys(data["column"]))
    y = alt.Y("bias:N", sort=rows, title=None)
    base = alt.Chart(data).encode(
        x=alt.X("column:N", sort=columns, title=column_title or None, axis=alt.Axis(labelAngle=0)),
        y=y,
    )
    cells = base.mark_rect().encode(
        color=alt.Color("value:Q", scale=EFFECT_SCALE, title="effect (capped)"),
        tooltip=["bias", "column", alt.Tooltip("value:Q", format=".3f")],
    )
    text = base.mark_text(fontSize=10).encode(
        text="label:N",
        color=alt.condition("datum.value > 0.6", alt.value("white"), alt.value("black")),
    )
    per_bias = data.drop_duplicates("bias")[["bias", "homogeneity"]].assign(
        label=lambda f: f["homogeneity"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}"),
        column="homogeneity",
    )
    side = alt.Chart(per_bias).encode(
        x=alt.X("column:N", title="homogeneity", axis=alt.Axis(labels=False, ticks=False)), y=y
    )
    homogeneity = side.mark_rect().encode(
        color=alt.Color("homogeneity:Q", scale=HOMOGENEITY_SCALE, title="σ²_e / σ²_d"),
        tooltip=["bias", alt.Tooltip("homogeneity:Q", format=".3f")],
    ) + side.mark_text(fontSize=10).encode(text="label:N")
    return alt.hconcat(
        (cells + text).properties(width=alt.Step(56), height=alt.Step(22)),
        homogeneity.properties(width=alt.Step(80), height=alt.Step(22)),
        spacing=6,
    ).resolve_scale(color="independent")
