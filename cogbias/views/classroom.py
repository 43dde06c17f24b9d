"""What the teacher's page shows of a class session: the live count, the join QR code, and
the reveal — one chart with the original humans (where a reference exists), the class and
the chosen models per condition on one scale, and the same numbers as a table.

The chart's rows come from one long frame (`reveal_frame`), so the chart, the table and a
test read the same numbers. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import altair as alt
import pandas as pd

from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import ClassResults
from cogbias.studies.condition_summary import CLASS, HUMANS, ConditionSummary
from cogbias.views.charts import category_axis
from cogbias.views.numbers import percent

__all__ = ["CLASS", "HUMANS"]  # who the reveal's first two rows are (`condition_summary`)
FRAME_COLUMNS = ["condition", "option", "who", "value", "low", "high", "n"]
MAX_URL = 2_000  # a join link is short; anything longer is not one


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def shown_options(question: Question, focus: str = "") -> list[int]:
    """The option positions a chart shows: for two options the one the original reports
    (`focus`, else the first) — the other is its complement; else every option."""
    if len(question.keys) == 2:
        return [question.keys.index(focus)] if focus in question.keys else [0]
    return list(range(len(question.keys)))


def measure_of(question: Question) -> str:
    """What a row's value is: a share, a mean position on the scale, or a median."""
    return {"number": "median", "scale": "mean position"}.get(question.kind, "share")


def _option_name(question: Question, index: int) -> str:
    first = question.options[question.conditions[0]]
    return first[index] if index < len(first) else question.keys[index]


def _rows(question: Question, item: ConditionSummary, focus: str) -> list[dict[str, Any]]:
    """One summary's rows (the humans', the class's or a model's): per shown option its share
    and interval, or its mean position, or its median."""
    base = {"condition": question.label(item.condition), "who": item.who, "n": item.n}
    if question.kind == "number":
        values = (item.median, item.median_low, item.median_high)
        return [base | {"option": "", "value": values[0], "low": values[1], "high": values[2]}]
    if question.kind == "scale":
        if item.mean is None:
            return []
        values = (item.mean, item.mean_low, item.mean_high)
        return [base | {"option": "", "value": values[0], "low": values[1], "high": values[2]}]
    rows = []
    for i in shown_options(question, focus):
        if i < len(item.shares) and item.shares[i] is not None:
            low = item.low[i] if i < len(item.low) else None
            high = item.high[i] if i < len(item.high) else None
            rows.append(
                base | {"option": _option_name(question, i), "value": item.shares[i],
                        "low": low, "high": high}
            )  # fmt: skip
    return rows


def focus_of(question: Question) -> str:
    """The option the original study reports (its reference's focus), or ""."""
    from cogbias.studies.references import load_references

    reference = load_references().get(question.reference or "")
    return reference.focus_option if reference else ""


def reveal_frame(results: ClassResults, focus: str | None = None) -> pd.DataFrame:
    """The reveal's numbers, one row per condition × shown option × who: the humans first
    (where the question has a reference), then the class, then each model; NaN for an
    interval that does not exist (a single call, a humans' median). `focus`: the option a
    two-option chart shows (default: the one the original reports)."""
    question = results.question
    focus = focus_of(question) if focus is None else focus
    records: list[dict[str, Any]] = []
    for human in results.humans:
        records += _rows(question, human, focus)
    for row in (*results.conditions, *results.models):
        records += _rows(question, row, focus) if row.n else []
    order = {question.label(c): i for i, c in enumerate(question.conditions)}
    records.sort(key=lambda r: order.get(r["condition"], len(order)))  # stable: who stays
    frame = pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)
    for column in ("value", "low", "high"):
        frame[column] = [_number(v) for v in frame[column]]
    return frame.astype({"value": float, "low": float, "high": float})


def reveal_chart(frame: pd.DataFrame, question: Question) -> alt.LayerChart | None:
    """Humans, class and models side by side per condition, each with its 95 % interval,
    on one scale (shares 0–100 %, scale positions 1…n, numbers as they come); None when
    nothing has been answered yet."""
    if frame.empty:
        return None
    single = frame["option"].nunique() == 1  # one option shown: it goes in the axis title
    pairs = zip(frame["condition"], frame["option"], strict=True)
    data = frame.assign(row=[c if single else _row_label(c, o) for c, o in pairs])
    measure = measure_of(question)
    present = set(data["who"])
    who_order = [w for w in dict.fromkeys([HUMANS, CLASS, *data["who"]]) if w in present]
    if measure == "share":
        scale, axis = alt.Scale(domain=[0, 1]), alt.Axis(format="%", labelFontSize=13)
        chosen = f"“{frame['option'].iloc[0]}”" if single else "the option"
        title = f"share choosing {chosen} (95% interval)"
    elif measure == "mean position":
        scale = alt.Scale(domain=[1, len(question.keys)])
        axis = alt.Axis(tickMinStep=1, labelFontSize=13)
        ends = question.options[question.conditions[0]]
        title = f"mean position: 1 = {ends[0]} … {len(ends)} = {ends[-1]} (95% interval)"
    else:
        scale, axis = alt.Scale(zero=False), alt.Axis(labelFontSize=13)
        title = "median answer (95% interval)"
    y = alt.Y("row:N", sort=list(dict.fromkeys(data["row"])), title=None,
              axis=category_axis(labelLimit=420, labelFontSize=14))  # fmt: skip
    palette = alt.Scale(domain=who_order, range=_colours(who_order))
    legend = alt.Legend(orient="bottom", labelLimit=400, labelFontSize=14, symbolSize=160)
    colour = alt.Color("who:N", title=None, sort=who_order, scale=palette, legend=legend)
    shown = ".0%" if measure == "share" else ".2f"
    tooltip = [
        alt.Tooltip("condition:N"),
        alt.Tooltip("option:N"),
        alt.Tooltip("who:N"),
        alt.Tooltip("value:Q", format=shown, title=measure),
        alt.Tooltip("low:Q", format=shown, title="95% low"),
        alt.Tooltip("high:Q", format=shown, title="95% high"),
        alt.Tooltip("n:Q"),
    ]
    offset = alt.YOffset("who:N", sort=who_order)
    base = alt.Chart(data).encode(y=y, yOffset=offset, color=colour, tooltip=tooltip)
    rules = base.mark_rule(strokeWidth=4).encode(
        x=alt.X("low:Q", scale=scale, title=title), x2="high:Q"
    )
    x = alt.X("value:Q", scale=scale, title=title, axis=axis)
    points = base.mark_point(filled=True, size=140, opacity=1).encode(x=x)
    return (rules + points).properties(width=560, height=alt.Step(26))


# the humans in dark grey, the class in a strong red, the models in Tableau's other colours
_PALETTE = ["#3b3b3b", "#e45756", "#4c78a8", "#54a24b", "#b279a2", "#f58518", "#72b7b2",
            "#9d755d", "#eeca3b", "#ff9da6"]  # fmt: skip


def _colours(who: list[str]) -> list[str]:
    """The same colour for the humans and the class in every chart; the models after them."""
    models = [w for w in who if w not in (HUMANS, CLASS)]
    fixed = {HUMANS: _PALETTE[0], CLASS: _PALETTE[1]}
    fixed |= {w: _PALETTE[2 + i % (len(_PALETTE) - 2)] for i, w in enumerate(models)}
    return [fixed[w] for w in who]


def _row_label(condition: str, option: str) -> str:
    return f"{condition}: {option}" if option else condition


def _figure(value: float, low: float, high: float, measure: str) -> str:
    def one(x: float) -> str:
        return percent(x) if measure == "share" else f"{x:,.2f}".rstrip("0").rstrip(".")

    if math.isnan(value):
        return "–"
    text = one(value)
    if not math.isnan(low) and not math.isnan(high) and (low, high) != (value, value):
        text += f" [{one(low)}, {one(high)}]"
    return text


def reveal_table(frame: pd.DataFrame, question: Question) -> pd.DataFrame:
    """The chart's numbers as text a teacher can read out: '72% [64%, 79%]', with n."""
    measure = measure_of(question)
    records = [
        {
            "Condition": row.condition,
            "Option": row.option or measure,
            "Who": row.who,
            "Result (95% interval)": _figure(row.value, row.low, row.high, measure),
            "n": "–" if row.n is None or pd.isna(row.n) else f"{int(row.n):,}",
        }
        for row in frame.itertuples(index=False)
    ]
    columns = ["Condition", "Option", "Who", "Result (95% interval)", "n"]
    return pd.DataFrame.from_records(records, columns=columns)


def unreadable_notes(results: ClassResults) -> list[str]:
    """One sentence per model and condition with answers that could not be read:
    "model local/smollm2 (T 0.7), lives lost: 3 answers could not be read: …"."""
    return [
        f"{row.who}, {row.label}: {row.unreadable_text()}"
        for row in results.models
        if row.n_unreadable
    ]


def count_table(question: Question, counts: Mapping[str, int]) -> pd.DataFrame:
    """The live count: answers so far per condition, and the total."""
    rows = [
        {"Condition": question.labels.get(c, c), "Answers": int(counts.get(c, 0))}
        for c in question.conditions
    ]
    rows.append({"Condition": "total", "Answers": sum(r["Answers"] for r in rows)})
    return pd.DataFrame.from_records(rows, columns=["Condition", "Answers"])


def safe_join_url(url: str) -> str | None:
    """The join link if it is one a phone can open (http or https, a host, short), else None:
    the page draws a QR code of it and shows it as a link."""
    if not isinstance(url, str) or len(url) > MAX_URL or any(c.isspace() for c in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return url


def join_qr_svg(url: str) -> str:
    """An SVG of the join link's QR code (generated here from a checked URL, so the page may
    embed it): dark on white with a quiet zone, big enough to scan off a projector."""
    import segno

    checked = safe_join_url(url)
    if checked is None:
        raise ValueError(f"not a join link a phone can open: {url[:80]!r}")
    return str(segno.make(checked, error="m").svg_inline(scale=10, dark="#000", light="#fff"))
