"""What the teacher's page shows of a class session: the live count, the join QR code, and
the reveal — one chart with the original humans (where a reference exists), the class and
the chosen models per condition on one scale, and the same numbers as a table.

The chart's rows come from one long frame (`reveal_frame`), so the chart, the table and a
test read the same numbers. Nothing here imports Streamlit.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import altair as alt
import pandas as pd

from cogbias.classroom import reveal
from cogbias.classroom.questions import Question
from cogbias.classroom.reveal import CLASS, HUMANS, POOLED, measure_of
from cogbias.classroom.sessions import ClassResults
from cogbias.studies.condition_summary import ConditionSummary
from cogbias.views.charts import category_axis

__all__ = ["CLASS", "HUMANS", "POOLED", "measure_of"]  # who the reveal's rows are, what they hold
FRAME_COLUMNS = ["condition", "option", "who", "value", "low", "high", "n"]
MAX_URL = 2_000  # a join link is short; anything longer is not one
WRAP = 34  # characters of a chart row's label line on the projector


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


def _rows(question: Question, item: ConditionSummary, focus: str) -> list[dict[str, Any]]:
    """One summary's rows (the humans', the class's, the pool's or a model's): per shown
    option its share and interval, named as its own condition names it
    (`reveal.option_labels`), or its mean position, or its median."""
    base = {"condition": question.label(item.condition), "who": item.who, "n": item.n}
    if question.kind == "number":
        values = (item.median, item.median_low, item.median_high)
        return [base | {"option": "", "value": values[0], "low": values[1], "high": values[2]}]
    if question.kind == "scale":
        if item.mean is None:
            return []
        values = (item.mean, item.mean_low, item.mean_high)
        return [base | {"option": "", "value": values[0], "low": values[1], "high": values[2]}]
    names = reveal.option_labels(question)[item.condition]
    rows = []
    for i in shown_options(question, focus):
        if i < len(item.shares) and item.shares[i] is not None:
            low = item.low[i] if i < len(item.low) else None
            high = item.high[i] if i < len(item.high) else None
            rows.append(
                base | {"option": names[i], "value": item.shares[i], "low": low, "high": high}
            )
    return rows


def focus_of(question: Question) -> str:
    """The option the original study reports (its reference's focus), or ""."""
    from cogbias.studies.references import load_references

    reference = load_references().get(question.reference or "")
    return reference.focus_option if reference else ""


def reveal_frame(results: ClassResults, focus: str | None = None) -> pd.DataFrame:
    """The reveal's numbers, one row per condition × shown option × who: the humans first
    (where the question has a reference), then the teacher's classes pooled (where another
    class answered the same question), then the class, then each model; NaN for an
    interval that does not exist (a single call, a humans' median). `focus`: the option a
    two-option chart shows (default: the one the original reports)."""
    question = results.question
    focus = focus_of(question) if focus is None else focus
    records: list[dict[str, Any]] = []
    for human in results.humans:
        records += _rows(question, human, focus)
    pool = results.pool if results.pooled_others else []
    for row in (*pool, *results.conditions, *results.models):
        records += _rows(question, row, focus) if row.n else []
    order = {question.label(c): i for i, c in enumerate(question.conditions)}
    records.sort(key=lambda r: order.get(r["condition"], len(order)))  # stable: who stays
    frame = pd.DataFrame.from_records(records, columns=FRAME_COLUMNS)
    for column in ("value", "low", "high"):
        frame[column] = [_number(v) for v in frame[column]]
    return frame.astype({"value": float, "low": float, "high": float})


def reveal_chart(
    frame: pd.DataFrame, question: Question, projector: bool = False
) -> alt.LayerChart | None:
    """Humans, classes and models side by side per condition, each with its 95 % interval,
    on one scale (shares 0–100 %, scale positions 1…n, numbers as they come); None when
    nothing has been answered yet. Each row is its condition, with the option it shows when
    the conditions word it differently. `projector`: large type, the legend above, a fixed
    height and the container's width, so a room reads it at 1280×720."""
    if frame.empty:
        return None
    single = frame["option"].nunique() == 1  # one name for the option shown: the axis says it
    several = frame.groupby("condition")["option"].nunique().max() > 1
    pairs = zip(frame["condition"], frame["option"], strict=True)
    data = frame.assign(row=[c if single else reveal.row_label(c, o) for c, o in pairs])
    if projector:
        data["row"] = [_wrapped(r, WRAP) for r in data["row"]]
    measure = measure_of(question)
    present = set(data["who"])
    who_order = [w for w in dict.fromkeys([HUMANS, POOLED, CLASS, *data["who"]]) if w in present]
    title = reveal.axis_title(question, frame["option"].iloc[0] if single else None, several)
    size = _Sizes(projector)
    if measure == reveal.SHARE:
        scale, axis = alt.Scale(domain=[0, 1]), alt.Axis(format="%", **size.axis)
    elif measure == reveal.POSITION:
        scale = alt.Scale(domain=[1, len(question.keys)])
        axis = alt.Axis(tickMinStep=1, **size.axis)
    else:
        scale, axis = alt.Scale(zero=False), alt.Axis(**size.axis)
    y = alt.Y("row:N", sort=list(dict.fromkeys(data["row"])), title=None, axis=size.rows)
    palette = alt.Scale(domain=who_order, range=_colours(who_order))
    colour = alt.Color("who:N", title=None, sort=who_order, scale=palette, legend=size.legend)
    offset = alt.YOffset("who:N", sort=who_order)
    base = alt.Chart(data).encode(y=y, yOffset=offset, color=colour, tooltip=_tooltip(measure))
    rules = base.mark_rule(strokeWidth=size.stroke).encode(
        x=alt.X("low:Q", scale=scale, title=title), x2="high:Q"
    )
    x = alt.X("value:Q", scale=scale, title=title, axis=axis)
    points = base.mark_point(filled=True, size=size.point, opacity=1).encode(x=x)
    chart = rules + points
    if projector:
        return chart.properties(width="container", height=size.height(data)).configure_view(
            stroke=None
        )
    return chart.properties(width=560, height=alt.Step(26))


class _Sizes:
    """Type and marks for the teacher's page or, larger, the projector."""

    def __init__(self, projector: bool) -> None:
        self.projector = projector
        big = projector
        self.axis = {"labelFontSize": 22 if big else 13}
        if big:
            self.axis |= {"titleFontSize": 22, "titlePadding": 14, "titleLimit": 1100}
        self.rows = category_axis(
            labelLimit=520 if big else 420,
            labelFontSize=24 if big else 14,
            **({"labelExpr": "split(datum.label, '\\n')", "labelPadding": 10} if big else {}),
        )
        self.legend = alt.Legend(
            orient="top" if big else "bottom",
            labelLimit=600 if big else 400,
            labelFontSize=22 if big else 14,
            symbolSize=360 if big else 160,
            columns=0,
        )
        self.stroke = 7 if big else 4
        self.point = 420 if big else 140

    @staticmethod
    def height(data: pd.DataFrame) -> int:
        """The whole chart's height (the page fits legend, plot and axis into it): room for
        every row and who, at most what fits below the title at 1280×720."""
        lines = max(r.count("\n") + 1 for r in data["row"])
        per_row = max(len(set(data["who"])) * 36, lines * 30) + 30
        return int(min(500, max(300, 150 + per_row * data["row"].nunique())))


def _tooltip(measure: str) -> list[alt.Tooltip]:
    shown = ".0%" if measure == reveal.SHARE else ".2f"
    return [
        alt.Tooltip("condition:N"),
        alt.Tooltip("option:N"),
        alt.Tooltip("who:N"),
        alt.Tooltip("value:Q", format=shown, title=measure),
        alt.Tooltip("low:Q", format=shown, title="95% low"),
        alt.Tooltip("high:Q", format=shown, title="95% high"),
        alt.Tooltip("n:Q"),
    ]


def _wrapped(text: str, width: int) -> str:
    """Lines of at most about `width` characters, broken between words (the projector's
    row labels: whole, never cut)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


# the humans in dark grey, the class in a strong red, the pooled classes in purple, the
# models in Tableau's other colours
_PALETTE = ["#3b3b3b", "#e45756", "#8e5ca8", "#4c78a8", "#54a24b", "#f58518", "#72b7b2",
            "#9d755d", "#eeca3b", "#ff9da6"]  # fmt: skip
_FIXED = {HUMANS: _PALETTE[0], CLASS: _PALETTE[1], POOLED: _PALETTE[2]}


def _colours(who: list[str]) -> list[str]:
    """The same colour for the humans, the class and the pool in every chart; the models
    after them."""
    models = [w for w in who if w not in _FIXED]
    fixed = dict(_FIXED)
    fixed |= {w: _PALETTE[3 + i % (len(_PALETTE) - 3)] for i, w in enumerate(models)}
    return [fixed[w] for w in who]


def reveal_table(frame: pd.DataFrame, question: Question) -> pd.DataFrame:
    """The chart's numbers as text a teacher can read out: '72% [64%, 79%]', with n; each
    row's option as its own condition names it."""
    measure = measure_of(question)
    records = [
        {
            "Condition": row.condition,
            "Option": row.option or measure,
            "Who": row.who,
            reveal.RESULT_HEADING: reveal.with_interval(row.value, row.low, row.high, measure),
            "n": "–" if row.n is None or pd.isna(row.n) else f"{int(row.n):,}",
        }
        for row in frame.itertuples(index=False)
    ]
    columns = ["Condition", "Option", "Who", reveal.RESULT_HEADING, "n"]
    return pd.DataFrame.from_records(records, columns=columns)


RESULT_COLUMNS = ["session", "question", "condition", "option", "who", "measure", "value",
                  "low", "high", "n"]  # fmt: skip


def reveal_csv(results: ClassResults) -> str:
    """The reveal's rows (`reveal_frame`, with your classes pooled where there are), one per
    condition, option and who, numbers plain; cells safe for a spreadsheet."""
    from cogbias.core.safetext import csv_cell

    measure = measure_of(results.question)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RESULT_COLUMNS)
    for row in reveal_frame(results).itertuples(index=False):
        n = "" if row.n is None or pd.isna(row.n) else int(row.n)
        cells = [results.code, results.question.title, row.condition, row.option or measure,
                 row.who, measure, _plain(row.value), _plain(row.low), _plain(row.high), n]  # fmt: skip
        writer.writerow([csv_cell(cell) for cell in cells])
    return out.getvalue()


def _plain(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6g}"


def pool_note(results: ClassResults) -> str:
    """'your classes: 3 sessions of this question, 74 answers, 2026-03-02 to 2026-05-04',
    or "" when no other class answered it."""
    if not results.pooled_others:
        return ""
    parts = results.pool_parts
    return reveal.POOL_NOTE.format(
        sessions=len(parts),
        n=f"{sum(p.total for p in parts):,}",
        first=parts[0].opened[:10],
        last=parts[-1].opened[:10],
    )


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
