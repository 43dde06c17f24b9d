"""The Explore heatmap: bias x model cells you can click, as a plain Altair chart.

Layers over one dataset: coloured cells, frames for significant cells, labels, and a
transparent top layer that owns the click selection (`SELECTION`), so a click anywhere in a
cell — label included — selects it. Only that top layer is described to screen readers (one
label per cell, not five), which also keeps the SVG small enough to draw 600 cells quickly.
The mean view uses a diverging scale fixed to [-1, 1] with its midpoint at 0, so colours
mean the same thing in every run; other views show failure rate and n.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from cogbias.views.charts import category_axis, column_axis, column_step
from cogbias.views.numbers import MISSING, interval, p_text, signed, signed_or_dash

SELECTION = "cell"
VIEWS = {"mean": "Mean score", "failure_rate": "Failure rate", "n": "Scored pairs (n)"}
MISSING_COLOR = "#e9ecef"  # cells without a scored pair
FAILURE_RANGE = ["#ffffff", "#ffa94d", "#c92a2a"]  # 0%, 50%, 100% failed
# Tooltip keys are cut after about 35 characters: this one must stay whole to be read.
CI_TITLE = "95% CI of this cell alone"
SMALL_N = 10  # below this many scored pairs a cell's label shows its n
# Pixels the cells may take together, and per column: a label such as "+0.03*  (n=3)" needs
# about 72; two models get columns wide enough for their names upright, ten still fit a laptop.
CELLS_WIDTH = 720
STEP_RANGE = (72, 120)


CELL_COLUMNS = ["bias", "model", "mean", "n", "failures", "failure_rate", "ci_low", "ci_high",
                "p_adjusted", "significant"]  # fmt: skip


def complete_grid(
    summary: pd.DataFrame, rows: Sequence[str] | None = None, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """`summary`'s cells plus an empty one (n = 0, no pair at all) for every bias x model it
    lacks, so a model that never ran a bias shows a grey cell, not a gap in the page's white."""
    frame = summary[CELL_COLUMNS]
    rows = list(rows) if rows is not None else sorted(frame["bias"].unique())
    columns = list(columns) if columns is not None else sorted(frame["model"].unique())
    every = pd.MultiIndex.from_product([rows, columns], names=["bias", "model"])
    have = pd.MultiIndex.from_frame(frame[["bias", "model"]])
    absent = every.difference(have)
    if absent.empty:
        return frame.copy()
    empty = pd.DataFrame(
        {"bias": absent.get_level_values(0), "model": absent.get_level_values(1), "n": 0,
         "failures": 0, "failure_rate": float("nan"), "significant": False}
    ).reindex(columns=CELL_COLUMNS)  # fmt: skip
    return pd.concat([frame, empty], ignore_index=True)


def heatmap_frame(
    summary: pd.DataFrame,
    view: str = "mean",
    rows: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per cell (every bias in `rows` x model in `columns`, empty ones included) with
    the value shown, its label and the tooltip fields as text."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; use one of {', '.join(VIEWS)}")
    frame = complete_grid(summary, rows, columns)
    frame["n"] = frame["n"].astype(int)
    frame["failures"] = frame["failures"].astype(int)
    no_pairs = (frame["n"] + frame["failures"]) == 0
    frame["value"] = frame[view].astype(float).where(~no_pairs)
    frame["significant"] = frame["significant"].fillna(False).astype(bool)
    if view == "mean":
        # A mean of two scores is mostly noise: small cells say their n in the cell itself.
        frame["label"] = [
            MISSING
            if pd.isna(v)
            else signed(v) + ("*" if sig else "") + (f"  (n={n})" if n < SMALL_N else "")
            for v, sig, n in zip(frame["mean"], frame["significant"], frame["n"], strict=True)
        ]
    elif view == "failure_rate":
        frame["label"] = [MISSING if pd.isna(v) else f"{v:.0%}" for v in frame["value"]]
    else:
        frame["label"] = [MISSING if pd.isna(v) else str(int(v)) for v in frame["value"]]
    frame["has_value"] = frame["value"].notna()
    frame["mean_text"] = [signed_or_dash(v, 3) for v in frame["mean"]]
    frame["failure_text"] = [
        "no pairs" if none else f"{rate:.1%}"
        for none, rate in zip(no_pairs, frame["failure_rate"], strict=True)
    ]
    frame["p_text"] = [p_text(p) for p in frame["p_adjusted"]]
    frame["ci"] = [
        interval(lo, hi, note="needs 2 scored pairs")
        for lo, hi in zip(frame["ci_low"], frame["ci_high"], strict=True)
    ]
    frame["verdict"] = [
        "yes (BH-adjusted p < 0.05)" if sig else ("no" if pd.notna(p) else "not tested (n < 2)")
        for sig, p in zip(frame["significant"], frame["p_adjusted"], strict=True)
    ]
    return frame


def _legend(**kwargs: object) -> alt.Legend:
    # Horizontal, below the chart: a vertical gradient is clipped on charts with few rows.
    return alt.Legend(orient="bottom", direction="horizontal", gradientLength=220, **kwargs)


def _color(view: str, max_n: float, measure: str = "mean score") -> alt.Color:
    if view == "mean":
        scale = alt.Scale(domain=[-1, 1], domainMid=0, scheme="redblue", reverse=True, clamp=True)
        legend = _legend(values=[-1, -0.5, 0, 0.5, 1])
        return alt.Color("value:Q", scale=scale, title=measure, legend=legend)
    if view == "failure_rate":
        # 0% is white: "nothing failed" must not look like a warning colour. Interpolated in
        # RGB: Vega's default (HCL) drew 0% pale yellow, not the white the caption promises.
        scale = alt.Scale(domain=[0, 0.5, 1], range=FAILURE_RANGE, clamp=True, interpolate="rgb")
        return alt.Color("value:Q", scale=scale, title="failure rate", legend=_legend(format="%"))
    scale = alt.Scale(domain=[0, max(max_n, 1)], scheme="greens")
    return alt.Color("value:Q", scale=scale, title="scored pairs (n)", legend=_legend())


def explore_heatmap(
    summary: pd.DataFrame,
    view: str = "mean",
    rows: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    names: Mapping[str, str] | None = None,
    measure: str = "mean score",
    tested: str = "significant after BH over all cells",
) -> alt.LayerChart:
    """Heatmap of `summary` (as `studies.cells.heatmap_summary` returns it); click selects a cell.

    Rows are labelled with `names` (bias id -> display name) where given; clicks still
    report the bias id. Another table of the same columns draws the same way: `measure`
    names what `mean` holds (a factor's mean change, `views.factor_view`) and `tested` what
    its significance was corrected over.
    """
    rows = list(rows) if rows is not None else sorted(summary["bias"].unique())
    columns = list(columns) if columns is not None else sorted(summary["model"].unique())
    frame = heatmap_frame(summary, view, rows, columns)
    names = names or {}
    frame["bias_name"] = [names.get(b, b) for b in frame["bias"]]
    step = column_step(len(columns), CELLS_WIDTH, *STEP_RANGE)
    base = alt.Chart(frame).encode(
        x=alt.X("model:N", sort=columns, title=None, axis=column_axis(columns, step, orient="top")),
        y=alt.Y(
            "bias_name:N",
            sort=[names.get(b, b) for b in rows],
            title=None,
            axis=category_axis(),
        ),
    )
    tooltip = [
        alt.Tooltip("bias_name:N", title="bias"),
        alt.Tooltip("model:N"),
        alt.Tooltip("mean_text:N", title=measure),
        alt.Tooltip("n:Q", title="n (scored pairs)"),
        alt.Tooltip("ci:N", title=CI_TITLE),
        alt.Tooltip("verdict:N", title=tested),
        alt.Tooltip("p_text:N", title="p (BH-adjusted)"),
        alt.Tooltip("failures:Q"),
        alt.Tooltip("failure_text:N", title="failure rate"),
    ]
    colored = (
        base.transform_filter("datum.has_value")
        .mark_rect(aria=False, stroke="#dee2e6", strokeWidth=0.5)
        .encode(color=_color(view, float(frame["n"].max() if len(frame) else 1), measure))
    )
    empty = base.transform_filter("!datum.has_value").mark_rect(color=MISSING_COLOR, aria=False)
    dark = "abs(datum.value) > 0.6" if view == "mean" else "datum.value > 0.7"
    if view == "n":
        dark = f"datum.value > {0.7 * float(frame['n'].max() if len(frame) else 1)}"
    # Channel objects with plain-dict conditions, not `alt.condition(...)`: Altair validates
    # the latter against its JSON schema on every call, which cost ~0.3 s per chart here.
    labels = base.mark_text(fontSize=11, aria=False).encode(
        text=alt.Text("label:N"),
        color=alt.ColorValue("black", condition={"test": dark, "value": "white"}),
    )
    # Significant cells get a dashed frame as well as the "*", so they stand out in any view.
    significant = base.transform_filter("datum.significant").mark_rect(
        filled=False, stroke="#212529", strokeWidth=1.5, strokeDash=[3, 2], aria=False
    )
    pick = alt.selection_point(
        name=SELECTION, fields=["bias", "model"], on="click", clear="dblclick", empty=False
    )
    catcher = (
        base.mark_rect(fill="white", fillOpacity=0.001, cursor="pointer")
        .encode(
            tooltip=tooltip,
            stroke=alt.StrokeValue(
                None, condition={"param": SELECTION, "value": "black", "empty": False}
            ),
            strokeWidth=alt.StrokeWidthValue(
                0, condition={"param": SELECTION, "value": 3, "empty": False}
            ),
        )
        .add_params(pick)
    )
    return alt.layer(colored, empty, significant, labels, catcher).properties(
        width=alt.Step(step), height=alt.Step(24)
    )


def selected_cell(event: object) -> tuple[str, str] | None:
    """(bias, model) from `st.altair_chart(..., on_select="rerun")`'s return value, if any."""
    try:
        points = event["selection"][SELECTION]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    if isinstance(points, dict):  # some versions report {"bias": [...], "model": [...]}
        bias, model = points.get("bias"), points.get("model")
        bias = bias[0] if isinstance(bias, list) and bias else bias
        model = model[0] if isinstance(model, list) and model else model
        return (str(bias), str(model)) if bias and model else None
    if isinstance(points, list) and points and isinstance(points[0], dict):
        first = points[0]
        if first.get("bias") and first.get("model"):
            return str(first["bias"]), str(first["model"])
    return None
