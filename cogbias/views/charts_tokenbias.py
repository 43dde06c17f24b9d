"""Altair charts of token-bias results (built from `analysis.hypothesis_table` frames).

Plain Altair objects, like `cogbias.views.charts`: the app, notebooks and exported HTML agree.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from cogbias.views.charts import Heatmap, bottom_legend, category_axis, heatmap_of
from cogbias.views.numbers import signed

N12 = "n12: only P correct"
N21 = "n21: only P' correct"


def _row_label(table: pd.DataFrame) -> pd.Series:
    return table["model"].astype(str) + " · " + table["prompting"].astype(str)


def discordant_bars(table: pd.DataFrame) -> alt.FacetChart:
    """Per hypothesis, n12 beside n21 for each model and prompting method (the paper's bars)."""
    frame = table.assign(row=_row_label(table))
    long = frame.melt(
        id_vars=["hypothesis", "row", "n_star", "p_adjusted", "reject"],
        value_vars=["n12", "n21"],
        var_name="cell",
        value_name="pairs",
    )
    long["cell"] = long["cell"].map({"n12": N12, "n21": N21})
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("row:N", title=None, axis=category_axis()),
            yOffset=alt.YOffset("cell:N", sort=[N12, N21]),
            x=alt.X("pairs:Q", title="discordant pairs"),
            color=alt.Color(
                "cell:N",
                sort=[N12, N21],
                scale=alt.Scale(range=["#c0392b", "#2e86c1"]),
                legend=alt.Legend(title=None, orient="top"),
            ),
            tooltip=[
                "hypothesis",
                "row",
                "cell",
                "pairs",
                "n_star",
                alt.Tooltip("p_adjusted:Q", format=".4f"),
                "reject",
            ],
        )
        .properties(width=360, height=alt.Step(12))
        .facet(
            row=alt.Row(
                "hypothesis:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")
            )
        )
        .resolve_scale(y="independent")
    )


def rejection_heatmap(table: pd.DataFrame) -> alt.LayerChart:
    """Hypothesis x (model · prompting): rejected at alpha or not, labelled with z."""
    frame = table.assign(row=_row_label(table))
    frame["verdict"] = frame["reject"].map({True: "rejected", False: "not rejected"})
    frame["label"] = frame["z"].map(lambda v: "" if pd.isna(v) else signed(v))
    color = alt.Color(
        "verdict:N",
        scale=alt.Scale(domain=["rejected", "not rejected"], range=["#1f618d", "#d5d8dc"]),
        legend=bottom_legend(title="H0 (genuine reasoning)"),
    )
    spec = Heatmap(
        "row", "hypothesis", sorted(set(frame["row"])), sorted(set(frame["hypothesis"])),
        color, step=60, height=24,
        dark="datum.reject", x_axis=category_axis(labelAngle=-45),
        y_axis=category_axis(labelLimit=300),
        tooltip=["hypothesis", "row", "n12", "n21", alt.Tooltip("z:Q", format=".3f"),
                 alt.Tooltip("p_adjusted:Q", format=".4f")],
    )  # fmt: skip
    return heatmap_of(frame, spec)
