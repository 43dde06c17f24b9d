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

from cogbias.views.charts import MISSING_COLOR as MISSING_COLOR  # a cell without a pair
from cogbias.views.charts import Heatmap, column_axis, column_step, heatmap_of
from cogbias.views.explore import NONE_UNREAD, UNREAD
from cogbias.views.numbers import MISSING, interval, p_text, percent, signed, signed_or_dash

SELECTION = "cell"
VIEWS = {"mean": "Mean score", "failure_rate": "Failure rate", "n": "Scored pairs (n)"}
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
    kept = CELL_COLUMNS + [UNREAD] * (UNREAD in summary)
    frame = summary[kept]
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
    ).reindex(columns=kept)  # fmt: skip
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
        frame["label"] = [percent(v) for v in frame["value"]]
    else:
        frame["label"] = [MISSING if pd.isna(v) else str(int(v)) for v in frame["value"]]
    frame["has_value"] = frame["value"].notna()
    frame["mean_text"] = [signed_or_dash(v, 3) for v in frame["mean"]]
    frame["failure_text"] = [
        "no pairs" if none else percent(rate, 1)
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
    if UNREAD in frame:
        frame[UNREAD] = frame[UNREAD].fillna(NONE_UNREAD)
    return frame


def _legend(**kwargs: object) -> alt.Legend:
    # Horizontal, below the chart: a vertical gradient is clipped on charts with few rows.
    return alt.Legend(orient="bottom", direction="horizontal", gradientLength=220, **kwargs)


def mean_color(title: str = "mean score") -> alt.Color:
    """The mean view's colour: diverging, fixed to [-1, 1] around 0, so a colour means the
    same in every run (and for a factor's mean change, `views.factor_view`)."""
    scale = alt.Scale(domain=[-1, 1], domainMid=0, scheme="redblue", reverse=True, clamp=True)
    legend = _legend(values=[-1, -0.5, 0, 0.5, 1])
    return alt.Color("value:Q", scale=scale, title=title, legend=legend)


MEAN_DARK = "abs(datum.value) > 0.6"  # where a mean's label is written in white


def _color(view: str, max_n: float) -> alt.Color:
    if view == "mean":
        return mean_color()
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
) -> alt.LayerChart:
    """Heatmap of `summary` (as `studies.cells.heatmap_summary` returns it); click selects a cell.

    Rows are labelled with `names` (bias id -> display name) where given; clicks still
    report the bias id.
    """
    rows = list(rows) if rows is not None else sorted(summary["bias"].unique())
    columns = list(columns) if columns is not None else sorted(summary["model"].unique())
    frame = heatmap_frame(summary, view, rows, columns)
    names = names or {}
    frame["bias_name"] = [names.get(b, b) for b in frame["bias"]]
    tooltip = [
        alt.Tooltip("bias_name:N", title="bias"),
        alt.Tooltip("model:N"),
        alt.Tooltip("mean_text:N", title="mean"),
        alt.Tooltip("n:Q", title="n (scored pairs)"),
        alt.Tooltip("ci:N", title=CI_TITLE),
        alt.Tooltip("verdict:N", title="significant after BH over all cells"),
        alt.Tooltip("p_text:N", title="p (BH-adjusted)"),
        alt.Tooltip("failures:Q"),
        alt.Tooltip("failure_text:N", title="failure rate"),
        *([alt.Tooltip(f"{UNREAD}:N", title="could not be read")] if UNREAD in frame else []),
    ]
    most = float(frame["n"].max() if len(frame) else 1)
    dark = MEAN_DARK if view == "mean" else "datum.value > 0.7"
    if view == "n":
        dark = f"datum.value > {0.7 * most}"

    def above(base: alt.Chart) -> list[alt.Chart]:
        """Significant cells framed, and a transparent top layer that owns the click and
        the tooltip."""
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
        return [significant_frames(base), catcher]

    named_rows = [names.get(b, b) for b in rows]
    spec = cells_spec(columns, named_rows, _color(view, most), dark, aria=False)
    return heatmap_of(frame, spec, above)


def cells_spec(
    columns: Sequence[str],
    rows: Sequence[str],
    color: alt.Color,
    dark: str,
    tooltip: Sequence[alt.Tooltip] = (),
    aria: bool = True,
) -> Heatmap:
    """Explore's cells as the one builder draws them (`charts.heatmap_of` of a frame from
    `heatmap_frame`, rows by `bias_name`): a level's changes (`views.factor_view`) too.
    Without `aria`, a layer above describes each cell to screen readers instead."""
    step = column_step(len(columns), CELLS_WIDTH, *STEP_RANGE)
    return Heatmap(
        "model", "bias_name", columns, rows, color, step=step, height=24, dark=dark,
        tooltip=tooltip, x_axis=column_axis(columns, step, orient="top"), font_size=11,
        missing=True, grid=True, aria=aria,
    )  # fmt: skip


def significant_frames(base: alt.Chart) -> alt.Chart:
    """Significant cells framed (dashed) as well as starred, so they stand out in any view."""
    return base.transform_filter("datum.significant").mark_rect(
        filled=False, stroke="#212529", strokeWidth=1.5, strokeDash=[3, 2], aria=False
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
