"""The seed papers' printed model results as the app and the command show them: tables with
the printed digits and the paper's failure marks, a run of ours beside them, and charts.

The papers' rows come from `cogbias.studies.paper_results`; a run's rows from the frame of
`runs.study_results.results` (BiasBuster, scored by `studies.study_tables`) or
`studies.tokenbias.results` (token bias), so nothing here reads the store. Charts are plain Altair objects, as in `views/charts.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from cogbias.studies.paper_results import PaperResult, paper_hypothesis
from cogbias.views.charts import bottom_legend, category_axis
from cogbias.views.charts_studies import column_text
from cogbias.views.numbers import signed

# Table 3's measures: column -> (label, the column holding its failure mark)
MEASURES = {
    "framing_delta": ("framing Δ (admit − reject)", "framing_failure"),
    "group_delta": ("group attribution Δ (female − male)", "group_failure"),
    "anchoring_d": ("anchoring d (small: order matters)", "anchoring_failure"),
}
TABLE3_SHOWN = {  # column -> its heading, and the failure mark printed beside it, if any
    "framing_admit": ("framing: admit", None),
    "framing_reject": ("framing: reject", None),
    "framing_delta": ("framing Δ", "framing_failure"),
    "group_female": ("group: female", None),
    "group_male": ("group: male", None),
    "group_delta": ("group Δ", "group_failure"),
    "anchoring_d": ("anchoring d", "anchoring_failure"),
}
# a run's test -> the Table 3 columns its figures fill: (a, b, headline, failure mark)
RUN_TESTS = {
    "framing": ("framing_admit", "framing_reject", "framing_delta", "framing_failure"),
    "group_attribution": ("group_female", "group_male", "group_delta", "group_failure"),
    "anchoring": (None, None, "anchoring_d", "anchoring_failure"),
}
PAPER = "the paper"
YOURS = "your run"
PROMPTING_ORDER = ["baseline", "zs-cot", "os", "os-cot", "fs", "fs-cot"]


def _marked(failed: object) -> bool:
    """A failure mark that is set (an empty cell of a run's row is no mark)."""
    return isinstance(failed, bool | np.bool_) and bool(failed)


def _digits(value: object, failed: object = False) -> str:
    """A number as Table 3 prints it (3 decimals), with the paper's `*` for a failure."""
    if value is None or pd.isna(value):
        return "–"
    return f"{float(value):.3f}" + ("*" if _marked(failed) else "")


def table3_rows(result: PaperResult) -> pd.DataFrame:
    """The paper's rows with the mitigation as cogbias' biasbuster study names it and the
    source marked, ready to stand beside a run (`table3_of_run`)."""
    rows = result.rows.copy()
    mitigations = result.names.get("mitigations", {})
    rows["mitigation"] = [mitigations.get(m, m) for m in rows["mitigation"]]
    rows.insert(0, "source", PAPER)
    return rows


def table3_of_run(results: pd.DataFrame) -> pd.DataFrame:
    """A BiasBuster study run's cells in Table 3's columns: one row per model (× temperature
    and variant where they vary) × mitigation, from the run's framing, group attribution and
    anchoring cells. A test the run did not ask stays empty."""
    cells = results[results["test"].isin(list(RUN_TESTS))]
    columns = ["source", "model", "mitigation", *result_columns()]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    varying = [d for d in ("temperature", "variant") if cells[d].nunique() > 1]
    out: dict[tuple, dict] = {}
    for cell in cells.itertuples():
        label = str(cell.model) + "".join(
            f" · T={cell.temperature:g}" if d == "temperature" else f" · {cell.variant}"
            for d in varying
        )
        fresh = {"source": YOURS, "model": label, "mitigation": cell.mitigation}
        row = out.setdefault((label, cell.mitigation), fresh)
        a, b, headline, failure = RUN_TESTS[cell.test]
        if a is not None:
            row[a], row[b] = cell.a, cell.b
        row[headline] = cell.value
        row[failure] = bool(cell.degenerate)
    return pd.DataFrame(list(out.values()), columns=columns)


def result_columns() -> list[str]:
    """Table 3's figure columns, in the paper's order (each Δ followed by its failure mark)."""
    return [
        "framing_admit", "framing_reject", "framing_delta", "framing_failure", "group_female",
        "group_male", "group_delta", "group_failure", "anchoring_d", "anchoring_failure",
    ]  # fmt: skip


def table3_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 3 as printed: three decimals, `*` beside a failed figure, one text column each,
    rows in the order of `frame` (`table3_rows`, and `table3_of_run` rows if any)."""
    shown = frame[[c for c in ("source", "model", "mitigation") if c in frame]].copy()
    if "mitigation" in shown:  # the baseline as words: "none" reads as a missing value
        shown["mitigation"] = [column_text(m, "mitigation") for m in shown["mitigation"]]
    for column, (heading, mark) in TABLE3_SHOWN.items():
        marks = frame[mark] if mark else [False] * len(frame)
        shown[heading] = [_digits(v, m) for v, m in zip(frame[column], marks, strict=True)]
    return shown.reset_index(drop=True)


def table3_long(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per model × mitigation × measure (the chart's data)."""
    parts = []
    frame = frame.assign(model=[
        f"{m} · {YOURS}" if s == YOURS else m
        for m, s in zip(frame["model"], frame.get("source", [PAPER] * len(frame)), strict=True)
    ])  # fmt: skip
    for column, (label, mark) in MEASURES.items():
        part = frame[[c for c in ("source", "model", "mitigation") if c in frame]].copy()
        part["measure"] = label
        part["value"] = pd.to_numeric(frame[column], errors="coerce")
        part["failure"] = [
            "failed (*)" if _marked(m) else "followed the instructions" for m in frame[mark]
        ]
        parts.append(part)
    long = pd.concat(parts, ignore_index=True)
    return long[long["value"].notna()].reset_index(drop=True)


def table3_chart(frame: pd.DataFrame, mitigations: Sequence[str] = ()) -> alt.FacetChart:
    """Table 3 as dots: per measure, each model's value under each mitigation (a run's
    models named "· your run"); a cross marks the paper's failures and a run's cells failed
    the same way. `mitigations` orders the colours."""
    long = table3_long(frame)
    order = list(mitigations) or list(dict.fromkeys(long["mitigation"]))
    models = list(dict.fromkeys(long["model"]))
    return (
        alt.Chart(long)
        .mark_point(size=70, filled=True, opacity=0.9)
        .encode(
            x=alt.X("value:Q", title=None),
            y=alt.Y("model:N", sort=models, title=None, axis=category_axis()),
            yOffset=alt.YOffset("mitigation:N", sort=order),
            color=alt.Color("mitigation:N", sort=order, legend=bottom_legend(title="mitigation")),
            shape=alt.Shape(
                "failure:N",
                scale=alt.Scale(
                    domain=["followed the instructions", "failed (*)"], range=["circle", "cross"]
                ),
                legend=bottom_legend(title=None),
            ),
            tooltip=[
                "source",
                "model",
                "mitigation",
                "measure",
                alt.Tooltip("value:Q", format=".3f"),
                "failure",
            ],  # fmt: skip
        )
        .properties(width=190, height=alt.Step(7))
        .facet(
            column=alt.Column("measure:N", title=None, sort=[m[0] for m in MEASURES.values()]),
            spacing=36,  # each measure its own x scale: their end labels must not touch
        )
        .resolve_scale(x="independent")
    )


def appendix_d_rows(result: PaperResult, hypotheses: Sequence[str] = ()) -> pd.DataFrame:
    """The paper's rows, of the given hypotheses (a run's names: H1…, tb_h1_…) or all."""
    rows = result.rows
    wanted = {paper_hypothesis(h) for h in hypotheses} - {None}
    if hypotheses:
        rows = rows[rows["hypothesis"].isin(wanted)]
    tables = result.names.get("tables", {})
    rows = rows.assign(tested=[tables.get(str(t), "") for t in rows["table"]])
    return rows.reset_index(drop=True)


def appendix_d_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """Appendix D at a glance: per table, model × prompting method, dark where the paper
    rejects genuine reasoning, each cell labelled with its z (n21 − n12 over √n*)."""
    frame = frame.assign(
        verdict=frame["reject"].map({True: "rejected", False: "not rejected"}),
        label=frame["z"].map(lambda v: signed(v, 1)),
        panel="Table " + frame["table"].astype(str) + " · " + frame["hypothesis"],
    )
    prompting = [p for p in PROMPTING_ORDER if p in set(frame["prompting"])]
    prompting += [p for p in dict.fromkeys(frame["prompting"]) if p not in prompting]
    models = list(dict.fromkeys(frame["model"]))
    base = alt.Chart().encode(
        x=alt.X("prompting:N", sort=prompting, title=None, axis=category_axis(labelAngle=-30)),
        y=alt.Y("model:N", sort=models, title=None, axis=category_axis()),
    )
    cells = base.mark_rect().encode(
        color=alt.Color(
            "verdict:N",
            scale=alt.Scale(domain=["rejected", "not rejected"], range=["#1f618d", "#d5d8dc"]),
            legend=bottom_legend(title="H0 (genuine reasoning) at α = 0.05", titleLimit=400),
        ),
        tooltip=["panel:N", "model:N", "prompting:N", "n12:Q", "n21:Q",
                 alt.Tooltip("z:Q", format=".3f"), alt.Tooltip("p_value:Q", format=".6f")],
    )  # fmt: skip
    text = base.mark_text(fontSize=10).encode(
        text="label:N", color=alt.condition("datum.reject", alt.value("white"), alt.value("black"))
    )
    return (
        alt.layer(cells, text, data=frame)
        .properties(width=alt.Step(52), height=alt.Step(20))
        .facet(facet=alt.Facet("panel:N", title=None), columns=2)
        .resolve_scale(x="independent")
    )
