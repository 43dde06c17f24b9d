"""The humans beside a model, as a reader sees them: one text table for the CLI and the app.

`studies.reference_tables.comparison` gives the numbers (`runs.study_results.comparison` for a
stored run); this turns each row into words and percentages a teacher can put on a slide
("72% [64%, 79%], n = 152"), keeping the same rows, and lists the citations the figures come from. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from cogbias.studies.references import Reference
from cogbias.studies.study_tables import DIMENSIONS
from cogbias.views.charts import category_axis
from cogbias.views.numbers import percent

SHOWN = ["Experiment", "Condition", "Humans", "Model", "Model − humans", "Cohen's h", "Note"]


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (an empty cell of a whole-number column)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _number(value: Any, measure: str, unit: str, signed: bool = False) -> str:
    """A share as a percentage, a median in its unit ($7.12, 25%)."""
    if _missing(value):
        return "–"
    sign = "+" if signed and value > 0 else ""
    if measure == "share":
        return percent(value) if not signed else f"{sign}{value * 100:.0f} pts"
    if unit == "$":
        return f"{'-' if value < 0 else sign}${abs(value):,.2f}"
    text = f"{value:,.1f}".removesuffix(".0")
    return f"{sign}{text}{unit}"


def _figure(row: Any, who: str) -> str:
    """'72% [64%, 79%], n = 152': the value, its 95 % interval, its n."""
    signed = row.kind == "effect"
    value = getattr(row, "humans" if who == "humans" else "model_value")
    text = _number(value, row.measure, row.unit, signed)
    low, high = getattr(row, f"{who}_low"), getattr(row, f"{who}_high")
    if not _missing(low) and not _missing(high) and not _missing(value):
        bounds = (_number(b, row.measure, row.unit, signed) for b in (low, high))
        text += " [{}, {}]".format(*bounds)
    n = getattr(row, f"{who}_n")
    if not _missing(n) and n:
        text += f", n = {int(n):,}"
    h = getattr(row, f"{who}_h")
    if signed and not _missing(h):
        text += f"; h = {h:+.2f}"
    return text


def shown_comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """The comparison as text, one row per row of `frame`; the run's dimensions appear as
    columns only where they vary (a run of one model shows no Model column)."""
    varying = [d for d in DIMENSIONS if d in frame and frame[d].astype(str).nunique() > 1]
    records = []
    for row in frame.itertuples(index=False):
        record: dict[str, Any] = {"Experiment": row.experiment}
        record |= {d.capitalize(): getattr(row, d) for d in varying}
        if row.kind == "note":
            record |= {"Condition": "–", "Humans": "–", "Model": "–"}
            record |= {"Model − humans": "", "Cohen's h": "", "Note": row.note}
            records.append(record)
            continue
        option = "" if row.option == "median" else f" ({row.option})"
        effect = "effect: " if row.kind == "effect" else ""
        record["Condition"] = f"{effect}{row.label}{option}"
        record["Humans"] = _figure(row, "humans")
        record["Model"] = _figure(row, "model")
        difference = _number(row.difference, row.measure, row.unit, signed=True)
        if not _missing(row.difference_low):
            low = _number(row.difference_low, row.measure, row.unit, signed=True)
            high = _number(row.difference_high, row.measure, row.unit, signed=True)
            difference += f" [{low}, {high}]"
        record["Model − humans"] = difference
        h = "" if _missing(row.h) else f"{row.h:+.2f}"
        if h and not _missing(row.h_low):
            h += f" [{row.h_low:+.2f}, {row.h_high:+.2f}]"
        record["Cohen's h"] = h
        record["Note"] = ""
        records.append(record)
    columns = ["Experiment", *(d.capitalize() for d in varying), *SHOWN[1:]]
    return pd.DataFrame.from_records(records, columns=columns)


def citations(frame: pd.DataFrame) -> list[str]:
    """Each experiment's citation once, in the table's order: '<experiment>: <citation>'."""
    pairs = dict.fromkeys(zip(frame["experiment"], frame["citation"], strict=True))
    return [f"{experiment}: {citation}" for experiment, citation in pairs]


HUMANS = "humans (original study)"


def cell_label(row: Any) -> str:
    """A cell of a study run in words: 'random · 0.7 · default · none'."""
    return " · ".join(str(getattr(row, d)) for d in DIMENSIONS)


def share_chart(frame: pd.DataFrame) -> alt.LayerChart | None:
    """Each condition's share, humans and model side by side with their 95 % intervals (one
    cell's rows of a comparison); None when no experiment of it counts shares."""
    rows = frame[(frame["kind"] == "condition") & (frame["measure"] == "share")]
    records = []
    for row in rows.itertuples(index=False):
        label = f"{row.experiment}: {row.label}"
        for who, value, low, high, n in (
            (HUMANS, row.humans, row.humans_low, row.humans_high, row.humans_n),
            (f"model: {row.model}", row.model_value, row.model_low, row.model_high, row.model_n),
        ):
            if not _missing(value):
                records.append(
                    {"condition": label, "who": who, "share": value, "low": low,
                     "high": high, "n": n, "option": row.option}
                )  # fmt: skip
    if not records:
        return None
    data = pd.DataFrame.from_records(records)
    order = list(dict.fromkeys(data["condition"]))
    y = alt.Y("condition:N", sort=order, title=None, axis=category_axis(labelLimit=420))
    offset = alt.YOffset("who:N", sort=[HUMANS])
    title = "share choosing the option named (95% interval)"
    x = alt.X("share:Q", title=title, axis=alt.Axis(format="%"))
    colour = alt.Color("who:N", title=None, legend=alt.Legend(orient="bottom"), sort=[HUMANS])
    tooltip = [
        alt.Tooltip("condition:N"),
        alt.Tooltip("option:N"),
        alt.Tooltip("who:N"),
        alt.Tooltip("share:Q", format=".0%"),
        alt.Tooltip("low:Q", format=".0%", title="95% CI low"),
        alt.Tooltip("high:Q", format=".0%", title="95% CI high"),
        alt.Tooltip("n:Q"),
    ]
    base = alt.Chart(data).encode(y=y, yOffset=offset, color=colour, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title=title), x2="high:Q"
    )
    points = base.mark_point(filled=True, size=70).encode(x=x)
    return (bars + points).properties(width=520, height=alt.Step(16))


def human_table(references: Mapping[str, Reference], study: str) -> pd.DataFrame:
    """The human results a study's tests are compared with, before any run (a teacher
    preparing a lesson): one row per condition with its n, share or median, and source."""
    records = []
    for reference in references.values():
        tests = [use.test for use in reference.uses if use.study == study]
        if not tests:
            continue
        option = reference.focus_option
        for condition in reference.conditions.values():
            if reference.measure == "median":
                shown = _number(condition.median, "median", reference.unit)
                what = "median"
            else:
                shown = _number(condition.shares.get(option), "share", "")
                what = reference.options.get(option, option)
            records.append(
                {
                    "Test": ", ".join(tests),
                    "Experiment": reference.experiment,
                    "Condition": condition.label,
                    "Humans": shown if condition.n is None else f"{shown}, n = {condition.n:,}",
                    "Of": what,
                    "Source": reference.cited,
                }
            )
    return pd.DataFrame.from_records(
        records, columns=["Test", "Experiment", "Condition", "Humans", "Of", "Source"]
    )
