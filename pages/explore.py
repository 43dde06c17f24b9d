"""Explore: the bias x model heatmap; click a cell to read its paired responses."""

import os

import pandas as pd
import streamlit as st

from cogbias import charts_explore, explore, present
from cogbias.datasets.export import csv_bytes
from cogbias.records import pair_record
from cogbias.store import Store
from pages._common import db_path, friendly, open_store_or_stop, run_label, test_cases

PAGE_SIZE = 20
EXPORT_LIMIT = 20000
st.title("Explore results")
store = open_store_or_stop()


def _version(path: str) -> tuple[float, ...]:
    """Changes whenever the database is written (main file or WAL), at the cost of two stats."""
    out: list[float] = []
    for suffix in ("", "-wal"):
        try:
            info = os.stat(path + suffix)
            out += [info.st_mtime_ns, info.st_size]
        except FileNotFoundError:
            out += [0, 0]
    return tuple(out)


@st.cache_data(show_spinner="Summarising…", max_entries=32)
def summary(
    path: str, version: tuple[float, ...], run_id: str | None, dataset: str | None
) -> pd.DataFrame:
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        return explore.heatmap_summary(own, run_id=run_id, dataset=dataset)


runs = store.runs()
datasets = [d["name"] for d in store.datasets()]
if not runs and not datasets:
    st.info(
        "This database has no results yet. Start a run on the **Run** page (the random "
        "baseline needs no key and finishes in seconds), or import a published dataset."
    )
    st.stop()

sources = ["all"] + [f"run:{r['id']}" for r in runs] + [f"dataset:{d}" for d in datasets]
run_by_id = {r["id"]: r for r in runs}


def _source_label(source: str) -> str:
    if source == "all":
        return "All results in this database"
    kind, _, name = source.partition(":")
    return f"Run {run_label(run_by_id[name])}" if kind == "run" else f"Dataset {name}"


if st.session_state.get("explore_source") not in sources:
    st.session_state["explore_source"] = "all"
c1, c2, c3 = st.columns([3, 2, 2])
source = c1.selectbox("Results", sources, format_func=_source_label, key="explore_source")
view = c2.radio(
    "Show",
    list(charts_explore.VIEWS),
    format_func=charts_explore.VIEWS.get,
    horizontal=True,
    key="explore_view",
)
order = c3.selectbox(
    "Rows",
    ["average", "average_asc", "name"],
    format_func={
        "average": "by average, highest first",
        "average_asc": "by average, lowest first",
        "name": "by name",
    }.get,
    key="explore_order",
)
kind, _, name = source.partition(":")
run_id = name if kind == "run" else None
dataset = name if kind == "dataset" else None
path = str(db_path())
try:
    table = summary(path, _version(path), run_id, dataset)
except Exception as exc:
    st.error(f"The results could not be summarised: {friendly(exc)}")
    st.stop()
if table.empty:
    st.info("No decisions here yet. If this run is still going, results appear as it proceeds.")
    st.stop()

rows = explore.row_order(table, order)
columns = sorted(table["model"].unique())
names = {case_id: case.name for case_id, case in test_cases().items()}
chart = charts_explore.explore_heatmap(table, view, rows, columns, names)
event = st.altair_chart(
    chart,
    key="explore_heatmap",
    on_select="rerun",
    selection_mode=[charts_explore.SELECTION],
)
st.caption(
    "Scores run from -1 to 1: positive (red) means the model shows the bias, negative (blue) the "
    "opposite effect. * and a dashed frame: significantly different from 0 (t-test, Benjamini–Hochberg "
    "adjusted p < 0.05). Grey: no scored pair. Click a cell to read its responses."
)

# A click on the chart moves the two pickers below; they also work without a mouse.
clicked = charts_explore.selected_cell(event)
if clicked and clicked != st.session_state.get("explore_clicked"):
    st.session_state["explore_clicked"] = clicked
    st.session_state["explore_bias"], st.session_state["explore_model"] = clicked
    st.session_state["explore_page"] = 1
for key, options in (("explore_bias", rows), ("explore_model", columns)):
    if st.session_state.get(key) not in options:
        st.session_state[key] = None

st.subheader("Paired responses")
c1, c2, c3 = st.columns([2, 2, 3])
bias = c1.selectbox(
    "Bias",
    rows,
    key="explore_bias",
    placeholder="click a cell or choose",
    format_func=lambda b: names.get(b, b),
)
model = c2.selectbox("Model", columns, key="explore_model", placeholder="click a cell or choose")
search = c3.text_input("Search texts and answers", key="explore_search")
if not bias or not model:
    st.info("Click a cell of the heatmap (or choose a bias and a model) to read its pairs.")
    st.stop()

cell = table[(table["bias"] == bias) & (table["model"] == model)]
if not cell.empty:
    c = cell.iloc[0]
    mean = "–" if pd.isna(c["mean"]) else f"{c['mean']:+.3f}"
    ci = "" if pd.isna(c["ci_low"]) else f" (95% CI {c['ci_low']:+.2f} to {c['ci_high']:+.2f})"
    st.markdown(
        f"**{names.get(bias, bias)} × {model}**: mean {mean}{ci}, n = {c['n']}, {c['failures']} failed"
        + (", significant" if c["significant"] else "")
    )
total = store.pair_count(bias, model, run_id, dataset, search or None)
pages = max(1, -(-total // PAGE_SIZE))
c1, c2 = st.columns([1, 3])
page = int(c1.number_input("Page", 1, pages, key="explore_page") if pages > 1 else 1)
c2.caption(f"{total:,} pair(s) · page {page} of {pages}")
rows_page = store.pairs(
    bias, model, run_id, dataset, search or None, PAGE_SIZE, (page - 1) * PAGE_SIZE
)
frame = present.pairs_frame(rows_page)
st.dataframe(
    frame[["score", "status", "control_choice", "treatment_choice", "scenario", "error"]],
    hide_index=True,
    width="stretch",
)
for i, pair in frame.iterrows():
    score = "failed" if pair["status"] != "ok" else f"score {pair['score']:+.2f}"
    with st.expander(
        f"Pair {(page - 1) * PAGE_SIZE + i + 1}: {score} — {str(pair['scenario'])[:90]}"
    ):
        left, right = st.columns(2)
        for column, half in ((left, "control"), (right, "treatment")):
            with column:
                st.markdown(
                    f"**{half.capitalize()}** · chose option {pair[f'{half}_choice'] or '–'}"
                )
                st.text(pair[f"{half}_text"])
                st.markdown("*Answer*")
                st.text(pair[f"{half}_answer"] or "(none)")
                st.caption(f"Extracted: {pair[f'{half}_extraction'] or '–'}")
        if pair["error"]:
            st.caption(f"Error: {pair['error']}")


def _csv() -> bytes:
    # Runs when the button is clicked, possibly outside this script's thread: own connection.
    with Store(path) as own:
        every = own.pairs(bias, model, run_id, dataset, search or None, EXPORT_LIMIT, 0)
    return csv_bytes(pair_record(r) for r in every)


st.download_button(
    f"Download {'these' if total <= EXPORT_LIMIT else f'the first {EXPORT_LIMIT:,}'} pairs as CSV",
    data=_csv,
    file_name=f"cogbias-{bias}-{model.replace('/', '_')}.csv",
    mime="text/csv",
    key="explore_csv",
    on_click="ignore",
)
