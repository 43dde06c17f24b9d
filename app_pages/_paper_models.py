"""The seed papers' printed model results on the app's pages: browsed on Datasets (no
download: they ship as cited data), and set beside a run of the same study on Studies
(BiasBuster's Table 3) and Token bias (Appendix D).

Beside a run they are labelled "the paper's models, the paper's wording": cogbias' studies ask
the same designs in their own words, so the two are the same measure on different prompts, not
one experiment. Citations and notes are the result files' text: shown escaped, never as markup.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import _tables
from app_pages._common import attempt, db_path, db_version, keep
from cogbias.runs import study_results
from cogbias.runs.study_plan import MITIGATION_ORDER
from cogbias.store import Store
from cogbias.studies import paper_results
from cogbias.studies.paper_results import LABEL, PaperResult
from cogbias.views import paper_results as shown
from cogbias.views.safe_text import escape_markdown

HEADING = LABEL[0].upper() + LABEL[1:]
BESIDE = (
    "Printed in the paper for its own prompts, shown in the same units as this run. Our study "
    "asks the same design in its own words, so read the two side by side, not as one "
    "experiment: a difference may come from the wording as well as from the model."
)


def _cite(result: PaperResult) -> None:
    st.caption(escape_markdown(f"Source: {result.cited}"))


def _about(result: PaperResult) -> None:
    with st.expander("About these numbers: notes and columns"):
        for note in result.notes:
            st.markdown("- " + escape_markdown(note))
        _tables.table(
            pd.DataFrame({"column": list(result.columns), "holds": list(result.columns.values())}),
            f"paper_columns_{result.id}",
            f"{result.id}-columns",
            hide_index=True,
        )


def _table3(result: PaperResult, run: pd.DataFrame | None = None) -> None:
    frame = shown.table3_rows(result)
    if run is not None and not run.empty:  # the run first: it is what the reader came for
        frame = pd.concat([run, frame], ignore_index=True)
    st.altair_chart(shown.table3_chart(frame, MITIGATION_ORDER))
    st.caption(
        "Framing and group attribution: the difference of two decision rates (0 is unbiased). "
        "Anchoring: the distance d between the overall and the per-order admission rates (a "
        "small d means the decisions depend on the order). A cross, and an asterisk in the "
        "table, marks a failure to follow the instructions (the paper's mark: under 1 % "
        "admitted or rejected). Mitigation none is the paper's baseline (biased): no mitigation."
    )
    table = shown.table3_shown(frame)
    table = table if run is not None else table.drop(columns="source")
    # the whole table in view, as printed (35 px a row, the header, the border)
    _tables.table(
        table,
        f"paper_table3_{result.id}" + ("_run" if run is not None else ""),
        result.id,
        hide_index=True,
        height=min(len(table) + 1, 31) * 35 + 3,
    )


def _appendix_d(result: PaperResult, rows: pd.DataFrame) -> None:
    st.altair_chart(shown.appendix_d_chart(rows))
    st.caption(
        "Dark: the paper rejects genuine reasoning (its Benjamini-Hochberg p-value below 0.05). "
        "Each cell shows z = (n21 − n12)/√n*; positive when only the perturbed P′ was answered "
        "correctly more often."
    )
    columns = ["table", "hypothesis", "model", "prompting", "n12", "n21", "n_star", "z"]
    _tables.table(
        rows[[*columns, "p_value", "reject"]],
        f"paper_appendix_{result.id}",
        result.id,
        hide_index=True,
        column_config={
            "n_star": st.column_config.NumberColumn("n*"),
            "z": st.column_config.NumberColumn(format="%.6f"),
            "p_value": st.column_config.NumberColumn("p (BH)", format="%.6f"),
        },
    )


def browse() -> None:
    """The Datasets page's tab: pick a built-in result, read its citation, chart and table."""
    results = attempt("Reading the built-in reference results", paper_results.paper_results)
    if not results:
        return
    st.caption(
        "Built in and cited, no download or key needed: what the seed papers printed for their "
        "own models (`cogbias datasets` lists them too). A run of the same study shows them "
        "beside its own results on the Studies and Token bias pages."
    )
    keep("pm_result", allowed=results)
    pick = st.selectbox(
        "Reference result", list(results), format_func=lambda i: results[i].title, key="pm_result"
    )
    result = results[pick]
    _cite(result)
    if result.kind == "biasbuster_table3":
        _table3(result)
    else:
        rows = shown.appendix_d_rows(result)
        tables = {str(t): t for t in dict.fromkeys(rows["table"])}
        names = result.names.get("tables", {})
        keep("pm_table", allowed=tables)
        table = st.selectbox(
            "Table", list(tables), format_func=lambda t: f"Table {t}: {names.get(t, '')}",
            key="pm_table",
        )  # fmt: skip
        _appendix_d(result, rows[rows["table"] == tables[table]])
    _about(result)


@st.cache_data(show_spinner=False, max_entries=8)
def _scored(path: str, version: tuple[float, ...], run_id: str) -> pd.DataFrame:
    """A study run's cells, once per run and database state (its own connection: cached
    work may run in any session's thread)."""
    with Store(path) as own:
        return study_results.results(own, run_id)


def beside_study_run(run_id: str, study: str) -> None:
    """Under a study run's results: the paper's own models on the same design, if printed."""
    results = [r for r in paper_results.for_study(study) if r.kind == "biasbuster_table3"]
    if not results:
        return
    path = str(db_path())
    cells = attempt("Scoring this study run", lambda: _scored(path, db_version(path), run_id))
    run = shown.table3_of_run(cells) if cells is not None else None
    st.subheader(HEADING)
    st.caption(BESIDE)
    for result in results:
        _cite(result)
        _table3(result, run)
        _about(result)


def beside_tokenbias(table: pd.DataFrame) -> None:
    """Under a token-bias run's hypothesis tables: Appendix D for the same hypotheses."""
    hypotheses = [str(h) for h in dict.fromkeys(table["hypothesis"])]
    printed = False
    for result in paper_results.for_study("tokenbias"):
        rows = shown.appendix_d_rows(result, hypotheses)
        if rows.empty:
            continue
        printed = True
        st.subheader(HEADING)
        st.caption(BESIDE)
        _cite(result)
        _appendix_d(result, rows)
        _about(result)
    if not printed:
        st.info(
            "The paper prints no results for these hypotheses; all of Appendix D is on the "
            "Datasets page, in the Reference results tab."
        )
