"""The Studies heatmap: a study run's headline value per test, pivoted by one dimension.

Rows are the rows of `study_tables.pivot` (the test, plus any other dimension that varies in
the run); columns are the values of the chosen dimension (mitigation, temperature, variant or
model). Every headline value is a difference or a capped effect on roughly [-1, 1], so one
diverging scale fixed to [-1, 1] with its midpoint at 0 reads the same in every study (as in
Explore), coloured so that red always means more biased: a metric where a smaller value is
more biased (the anchoring distance) is coloured by its negative (`BIAS_DIRECTION`); the
label shows the value itself. Nothing here imports Streamlit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from cogbias.studies.study_tables import BIAS_DIRECTION, pivot
from cogbias.views.charts import Heatmap, column_axis, column_step, heatmap_of
from cogbias.views.numbers import signed

# Columns share about 660 px (ten models fit on a laptop's page), each 64-110 px wide: enough
# for a label such as "+0.25*" at the cells' font size.
CELLS_WIDTH = 660
STEP_RANGE = (64, 110)
PIVOT_LABELS = {
    "mitigation": "Mitigation",
    "temperature": "Temperature",
    "variant": "Prompt variant",
    "model": "Model",
}


def column_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def column_order(table: pd.DataFrame, by: str) -> list[str]:
    """The heatmap's columns in the pivot table's order (mitigations as planned)."""
    return [column_text(v) for v in pivot(table, by).columns]


def heatmap_frame(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """One row per pivot cell: row label, column, value, its label and the tooltip fields."""
    rows = [n for n in pivot(table, by).index.names if n != "metric"]
    frame = table.copy()
    frame["row"] = [
        " · ".join(column_text(v) for v in values)
        for values in frame[rows].itertuples(index=False, name=None)
    ]
    frame["column"] = [column_text(v) for v in frame[by]]
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["colour"] = frame["value"] * frame["metric"].map(BIAS_DIRECTION).fillna(1)
    frame["label"] = [
        "–" if pd.isna(v) else signed(v) + ("*" if degenerate else "")
        for v, degenerate in zip(frame["value"], frame["degenerate"].fillna(False), strict=True)
    ]
    frame["has_value"] = frame["value"].notna()
    frame["note"] = frame["note"].fillna("")
    keep = ["row", "column", "test", "metric", "value", "colour", "label", "has_value", "n"]
    keep += ["a", "b", "neutral_share", "ci_low", "ci_high", "p_value", "degenerate"]
    return frame[keep + ["unreadable", "failed", "note"]]


def study_heatmap(table: pd.DataFrame, by: str) -> alt.LayerChart:
    """Headline value by test (× the dimensions that vary) × the values of `by`."""
    frame = heatmap_frame(table, by)
    columns = column_order(table, by)
    step = column_step(len(columns), CELLS_WIDTH, *STEP_RANGE)
    tooltip = [
        alt.Tooltip("test:N"),
        alt.Tooltip("metric:N"),
        alt.Tooltip("column:N", title=PIVOT_LABELS.get(by, by)),
        alt.Tooltip("value:Q", format="+.3f", title="headline value"),
        alt.Tooltip("a:Q", format=".3f", title="first condition (rate or mean)"),
        alt.Tooltip("b:Q", format=".3f", title="second condition (rate or mean)"),
        alt.Tooltip("neutral_share:Q", format=".3f", title="neutral share"),
        alt.Tooltip("ci_low:Q", format="+.3f", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format="+.3f", title="95% CI high"),
        alt.Tooltip("p_value:Q", format=".3g", title="p-value"),
        alt.Tooltip("degenerate:N", title="degenerate (*: <1% admit or reject)"),
        alt.Tooltip("n:Q", title="n (answers)"),
        alt.Tooltip("unreadable:Q"),
        alt.Tooltip("failed:Q"),
        alt.Tooltip("note:N"),
    ]
    scale = alt.Scale(domain=[-1, 1], domainMid=0, scheme="redblue", reverse=True, clamp=True)
    legend = alt.Legend(
        orient="bottom", direction="horizontal", gradientLength=220, values=[-1, -0.5, 0, 0.5, 1]
    )
    color = alt.Color("colour:Q", scale=scale, title="more biased → (red)", legend=legend)
    axis = column_axis(columns, step, orient="top", labelLimit=200)
    spec = Heatmap(
        "column", "row", columns, list(dict.fromkeys(frame["row"])), color, step=step,
        height=30, dark="abs(datum.colour) > 0.6", tooltip=tooltip,
        x_title=PIVOT_LABELS.get(by, by), x_axis=axis, font_size=12, missing=True, grid=True,
    )  # fmt: skip
    return heatmap_of(frame, spec)
