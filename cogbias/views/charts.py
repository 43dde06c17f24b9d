"""Altair charts of the paper's analyses (Figures 5-7), built from `analysis` frames.

Charts are plain Altair objects so the app, notebooks and exported HTML all show the same
thing; nothing here imports Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import pandas as pd

from cogbias.studies.analysis import AVERAGE, AVERAGE_ABS, Dendrogram
from cogbias.views.numbers import interval, p_text, signed, signed_or_dash

DIVERGING = alt.Scale(domain=[-1, 1], scheme="redblue", reverse=True)
LABEL_CHAR_PX = 7  # about the width of one axis-label character in Streamlit's chart theme
# Figure 7's cells: labels such as "+0.12*" need about 44 pixels; ten models fit a laptop.
FIGURE7_WIDTH = 560
FIGURE7_STEP = (44, 64)


def category_axis(**kwargs: object) -> alt.Axis:
    """An axis of categories (models, biases, scenarios) that names every one of them.

    Streamlit's chart theme sets `labelOverlap: true`, so Vega hides every label that would
    touch its neighbour (a heatmap of 10 models named only 5 columns), and `labelLimit: 100`,
    which cuts long names. Every band axis of the app's charts is built here; long labels are
    tilted (`labelAngle`) or given room (`alt.Step`) instead of being dropped.
    """
    return alt.Axis(**{"labelOverlap": False, "labelLimit": 260, **kwargs})


def column_step(count: int, width: int, smallest: int, largest: int) -> int:
    """Pixels per heatmap column: `width` shared by `count` columns, kept in [smallest, largest],
    so ten models fit on a laptop's page and two columns are not a wall of colour."""
    return max(smallest, min(largest, width // max(count, 1)))


def column_axis(columns: Sequence[object], step: int, **kwargs: object) -> alt.Axis:
    """`category_axis` for a heatmap's columns: upright while the longest name fits in its
    column (`step` pixels), tilted otherwise, so neighbouring names never run into each other."""
    longest = max((len(str(c)) for c in columns), default=0)
    return category_axis(**{"labelAngle": 0 if longest * LABEL_CHAR_PX <= step else -40, **kwargs})


def bottom_legend(**kwargs: object) -> alt.Legend:
    """A horizontal legend under the chart: one on the right is cut off by a wide chart."""
    return alt.Legend(**{"orient": "bottom", "direction": "horizontal", **kwargs})


MISSING_COLOR = "#e9ecef"  # a cell without a value (no scored pair, too few answers)


@dataclass(frozen=True)
class Heatmap:
    """How `heatmap_of` draws a frame of cells (one row per cell): every heatmap of the app,
    the reports and the figures is one of these, its variants these parameters.

    `x` and `y` name the frame's column and row fields, `columns` and `rows` their order,
    `color` the cells' colour (its scale, title and legend), `step` and `height` a cell's
    pixels; each cell's `label` is written on it, white where `dark` (a Vega expression) holds.
    `x_axis` is the column axis (default: named upright or tilted, `column_axis`), `y_axis`
    the row axis (None: none). `missing` draws a cell whose `has_value` is false in grey, and
    `grid` draws a thin line around each coloured cell."""

    x: str
    y: str
    columns: Sequence[Any]
    rows: Sequence[Any]
    color: alt.Color
    step: int
    height: int
    dark: str
    tooltip: Sequence[Any] = ()
    x_title: str | None = None
    x_axis: alt.Axis | None = None
    y_axis: alt.Axis | None = field(default_factory=category_axis)
    label: str = "label"
    font_size: int = 10
    missing: bool = False
    grid: bool = False
    aria: bool = True  # False: the cells are not described to screen readers (a layer above is)


def heatmap_of(
    frame: pd.DataFrame,
    spec: Heatmap,
    above: Callable[[alt.Chart], Sequence[alt.Chart]] | None = None,
) -> alt.LayerChart:
    """The cells of `frame` as `spec` says (grey ones without a value, coloured ones, their
    labels), with the layers `above` builds on the same axes (Explore's frames around
    significant cells and its click target)."""
    x_axis = spec.x_axis if spec.x_axis is not None else column_axis(spec.columns, spec.step)
    base = alt.Chart(frame).encode(
        x=alt.X(f"{spec.x}:N", sort=list(spec.columns), title=spec.x_title, axis=x_axis),
        y=alt.Y(f"{spec.y}:N", sort=list(spec.rows), title=None, axis=spec.y_axis),
    )
    if spec.tooltip:
        base = base.encode(tooltip=list(spec.tooltip))
    lines = {"stroke": "#dee2e6", "strokeWidth": 0.5} if spec.grid else {}
    colored = base.transform_filter("datum.has_value") if spec.missing else base
    layers = [colored.mark_rect(aria=spec.aria, **lines).encode(color=spec.color)]
    if spec.missing:
        empty = base.transform_filter("!datum.has_value")
        layers.insert(0, empty.mark_rect(color=MISSING_COLOR, aria=spec.aria))
    # Channel objects with plain-dict conditions, not `alt.condition(...)`: Altair validates
    # the latter against its JSON schema on every call, which cost ~0.3 s per chart.
    layers.append(
        base.mark_text(fontSize=spec.font_size, aria=spec.aria).encode(
            text=alt.Text(f"{spec.label}:N"),
            color=alt.ColorValue("black", condition={"test": spec.dark, "value": "white"}),
        )
    )
    layers += list(above(base)) if above is not None else []
    return alt.layer(*layers).properties(width=alt.Step(spec.step), height=alt.Step(spec.height))


def heatmap(table: pd.DataFrame, summary: pd.DataFrame | None = None) -> alt.LayerChart:
    """Figure 7: bias x model means on a diverging [-1, 1] scale; '*' marks significant cells."""
    rows = list(table.index)
    columns = list(table.columns)
    long = table.reset_index(names="bias").melt(id_vars="bias", var_name="model", value_name="mean")
    long["label"] = long["mean"].map(lambda v: "" if pd.isna(v) else signed(v))
    if summary is not None and not summary.empty:
        marks = summary.set_index(["bias", "model"])["significant"]
        long["label"] = [
            label + ("*" if bool(marks.get((b, m), False)) else "")
            for label, b, m in zip(long["label"], long["bias"], long["model"], strict=True)
        ]
    long["summary"] = long["bias"].isin([AVERAGE, AVERAGE_ABS]) | long["model"].isin(
        [AVERAGE, AVERAGE_ABS]
    )
    color = alt.Color("mean:Q", scale=DIVERGING, title="mean score", legend=bottom_legend())
    spec = Heatmap(
        "model", "bias", columns, rows, color,
        step=column_step(len(columns), FIGURE7_WIDTH, *FIGURE7_STEP), height=20,
        dark="abs(datum.mean) > 0.6",
        tooltip=["bias", "model", alt.Tooltip("mean:Q", format=".3f")],
    )  # fmt: skip
    return heatmap_of(long, spec)


def dendrogram(tree: Dendrogram) -> alt.HConcatChart:
    """Figure 6: the models' complete-linkage tree, leaves on the left, distance to the right."""
    segments = []
    top = max((max(ys) for ys in tree.dcoord), default=1.0) or 1.0
    for xs, ys in zip(tree.icoord, tree.dcoord, strict=True):
        for i in range(3):
            segments.append({"y": xs[i], "x": ys[i], "y2": xs[i + 1], "x2": ys[i + 1]})
    leaves = pd.DataFrame({"model": tree.order, "y": [10 * i + 5 for i in range(len(tree.order))]})
    height = max(120, 22 * len(tree.order))
    y_scale = alt.Scale(domain=[0, 10 * max(len(tree.order), 1)])
    lines = (
        alt.Chart(pd.DataFrame(segments, columns=["x", "y", "x2", "y2"]))
        .mark_rule()
        .encode(
            x=alt.X(
                "x:Q",
                title="distance (Euclidean, complete linkage)",
                scale=alt.Scale(domain=[0, top * 1.05]),
            ),
            y=alt.Y("y:Q", axis=None, scale=y_scale),
            x2="x2:Q",
            y2="y2:Q",
        )
        .properties(height=height, width=420)
    )
    labels = (
        alt.Chart(leaves)
        .mark_text(align="right")
        .encode(x=alt.value(150), y=alt.Y("y:Q", axis=None, scale=y_scale), text="model:N")
        .properties(height=height, width=150)
    )
    return alt.hconcat(labels, lines, spacing=4).resolve_scale(y="shared")


def bubbles(frame: pd.DataFrame) -> alt.Chart:
    """Figure 5: mean absolute biasedness against capability, bubble size = parameters."""
    data = frame.assign(
        size=frame["params_b"].fillna(
            frame["params_b"].min() if frame["params_b"].notna().any() else 1.0
        )
    )
    base = alt.Chart(data).encode(
        x=alt.X(
            "arena_score:Q", title="capability (Chatbot Arena score)", scale=alt.Scale(zero=False)
        ),
        y=alt.Y("mean_abs:Q", title="mean absolute biasedness", scale=alt.Scale(zero=False)),
    )
    points = base.mark_circle(opacity=0.6).encode(
        size=alt.Size("size:Q", title="parameters (B)", scale=alt.Scale(range=[40, 2000])),
        tooltip=[
            "label",
            alt.Tooltip("mean_abs:Q", format=".3f"),
            "arena_score",
            "params_b",
            "arena_imputed",
        ],
    )
    text = base.mark_text(dy=-12, fontSize=10).encode(text="label:N")
    return (points + text).properties(width=520, height=360)


def compare_chart(
    table: pd.DataFrame, model_a: str, model_b: str, names: dict[str, str] | None = None
) -> alt.LayerChart:
    """Dot-and-whisker of mean paired differences A - B per bias (`analysis.compare_models`),
    sorted largest first; filled dots are significant after BH, the rule marks 0."""
    names = names or {}
    data = table.assign(
        bias_name=[names.get(b, b) for b in table["bias"]],
        verdict=["significant (BH)" if s else "not significant" for s in table["significant"]],
        ci=[interval(lo, hi) for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)],
        # tooltips get texts: Vega's "+.3f" would print "+0.000" or "−0.000" for a zero
        mean_a_text=[signed_or_dash(v, 3) for v in table["mean_a"]],
        mean_b_text=[signed_or_dash(v, 3) for v in table["mean_b"]],
        mean_diff_text=[signed_or_dash(v, 3) for v in table["mean_diff"]],
        p_text=[p_text(p) for p in table["p_adjusted"]],
    )
    order = list(data["bias_name"])
    title = f"mean score difference: {model_a} minus {model_b}"
    y = alt.Y("bias_name:N", sort=order, title=None, axis=category_axis())
    x_scale = alt.Scale(domain=[-2, 2])
    base = alt.Chart(data).encode(y=y)
    whiskers = base.mark_rule(strokeWidth=2, color="#868e96").encode(
        x=alt.X("ci_low:Q", scale=x_scale, title=title), x2="ci_high:Q"
    )
    dots = base.mark_point(size=90, filled=True).encode(
        x=alt.X("mean_diff:Q", scale=x_scale),
        color=alt.Color(
            "verdict:N",
            scale=alt.Scale(
                domain=["significant (BH)", "not significant"], range=["#c92a2a", "#adb5bd"]
            ),
            title=None,
            legend=alt.Legend(orient="bottom"),
        ),
        tooltip=[
            alt.Tooltip("bias_name:N", title="bias"),
            alt.Tooltip("n:Q", title="paired instances (n)"),
            alt.Tooltip("mean_a_text:N", title=f"mean {model_a}"),
            alt.Tooltip("mean_b_text:N", title=f"mean {model_b}"),
            alt.Tooltip("mean_diff_text:N", title="mean difference"),
            alt.Tooltip("ci:N", title="95% CI (t, truncated to [-2, 2])"),
            alt.Tooltip("p_text:N", title="p (Wilcoxon, BH-adjusted)"),
            alt.Tooltip("verdict:N", title="after BH"),
        ],
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
    return alt.layer(zero, whiskers, dots).properties(width=520, height=alt.Step(22))
