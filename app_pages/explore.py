"""Explore: the bias x model heatmap; click a cell to read its paired responses."""

from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _delete, _figure, _pair, _report, _tables
from app_pages._common import (
    chosen_gone,
    db_path,
    db_version,
    friendly,
    keep,
    open_store_or_stop,
    other_pages_datasets,
    result_sources,
    source_filter,
    studies_link,
    test_cases,
)
from cogbias.core.export_columns import pair_record
from cogbias.core.records import DecisionStatus
from cogbias.core.redact import redactor
from cogbias.core.run_record import Run
from cogbias.runs import kinds
from cogbias.store import PairFilter, Store
from cogbias.studies import cells
from cogbias.studies.analysis import CI_METHOD
from cogbias.views import (
    charts_explore,
    explore,
    factor_view,
    pair_tables,
    probability_bars,
    safe_text,
    shown_pairs,
)
from cogbias.views.export import csv_bytes
from cogbias.views.figures import Source
from cogbias.views.numbers import interval, signed, signed_or_dash

PAGE_SIZE = 20
EXPORT_LIMIT = 20000
CAPTIONS = {
    "mean": "Mean score per cell, from -1 to 1: positive (red) means the model shows the bias, "
    "negative (blue) the opposite effect. * and a dashed frame: significantly different from 0 "
    "(t-test, Benjamini–Hochberg adjusted p < 0.05 across the table). Grey: no scored pair. "
    "Click a cell to read its responses.",
    "failure_rate": "Share of pairs per cell that could not be scored (no answer, an answer "
    "no option could be read from, or an error): white is 0%, darker is more; grey: no pair at "
    "all. * and a dashed frame still mark cells whose mean score is significant. Click a cell "
    "to read its pairs.",
    "n": "Scored pairs per cell: the more pairs, the more a cell's mean can be trusted; grey: no "
    "pair at all. * and a dashed frame mark significant means. Click a cell to read its pairs.",
}
HOVER_CAPTION = (
    "Hover a cell for its n, its 95% CI (of that cell alone) and whether it is significant "
    "after correcting for all the cells tested (BH), which can disagree. The **random** baseline "
    "answers at random: its cells show how far from 0 chance alone can move a mean with that "
    "n, so read a model's cell against it (with few pairs even random scores look large)."
)
NULL_CAPTION = (
    "**null (uniform answers)**: a cell's mean score if both halves answered uniformly at "
    "random (the metric's exact null, which the random baseline scores with option "
    "probabilities), 0 for symmetric metrics and what 'no bias' looks like for the others; "
    "significance is still tested against 0, as in the paper."
)


@st.cache_data(show_spinner="Summarising…", max_entries=32)
def summary(
    path: str, version: tuple[float, ...], run_id: str | None, dataset: str | None
) -> pd.DataFrame:
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        table = cells.cognitive_bias_summary(own, run_id=run_id, dataset=dataset)
        table = cells.with_uniform_null(own, table, run_id=run_id, dataset=dataset)
        return explore.with_unread(table, own.unreadable_errors(run_id, dataset))


@st.cache_data(show_spinner=False, max_entries=16)
def _heatmap(
    path: str, version: tuple[float, ...], run_id: str | None, dataset: str | None, view: str,
    order: str, names: tuple[tuple[str, str], ...],
) -> dict[str, Any]:  # fmt: skip
    """The chart's Vega-Lite spec, built once per database state and choice: building and
    validating its layers was most of a rerun's time at 600 cells (a click reruns the page)."""
    table = summary(path, version, run_id, dataset)
    rows, columns = explore.row_order(table, order), sorted(table["model"].unique())
    return charts_explore.explore_heatmap(table, view, rows, columns, dict(names)).to_dict()


@st.cache_data(show_spinner=False, max_entries=4)
def _csv(
    path: str, version: tuple[float, ...], bias: str, model: str, run_id: str | None,
    dataset: str | None, search: str | None,
) -> bytes:  # fmt: skip
    """Bytes for the button, once per cell, filter and database state (0.05 s per thousand
    pairs): Streamlit's on-click generation now and then never delivered the file."""
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        every = own.pairs(bias, model, run_id, dataset, search, EXPORT_LIMIT, 0)
    return csv_bytes(pair_record(r) for r in every)


def _sources(runs: list[Run], datasets: list[dict[str, Any]]) -> tuple[list[str], Any]:
    """What can be shown, after pointing elsewhere for what this page does not show; stops
    the page when there is nothing."""
    studies_link(runs)
    sources, source_label = result_sources(runs, datasets)
    elsewhere = other_pages_datasets(datasets)
    if elsewhere:
        st.caption(
            "Not shown here, because this page's scores mean something else for them: "
            + safe_text.escape_markdown("; ".join(elsewhere))
            + "."
        )
    if sources == ["all"]:
        st.info(
            "This database has no results yet. Start a run on the **Run** page (the random "
            "baseline needs no key and finishes in seconds), or import a published dataset."
        )
        st.stop()
    return sources, source_label


def _pickers(sources: list[str], source_label: Any) -> tuple[str, str, str]:
    """(source, view, row order), kept over visits to other pages."""
    keep("explore_source", allowed=sources)
    keep("explore_view", allowed=charts_explore.VIEWS)
    keep("explore_order")
    # A run or dataset deleted elsewhere since this page was drawn is named (the picker falls
    # back to all results, where nothing can be deleted).
    chosen_gone(
        "explore_source",
        sources,
        lambda s: f"{s.partition(':')[0].capitalize()} {s.partition(':')[2]}",  # "Run X"
        "all",
    )
    c1, c2, c3 = st.columns([3, 2, 2])
    source = c1.selectbox("Results", sources, format_func=source_label, key="explore_source")
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
    return source, view, order


def _summary_or_stop(run_id: str | None, dataset: str | None) -> pd.DataFrame:
    path = str(db_path())
    try:
        table = summary(path, db_version(path), run_id, dataset)
    except Exception as exc:
        st.error(f"The results could not be summarised: {friendly(exc)}")
        st.stop()
    if table.empty:
        st.info(
            "No cognitive-bias decisions here yet. If this run is still going, results appear "
            "as it proceeds; token-bias results are read on the **Token bias** page."
        )
        st.stop()
    return table


def _numbers(table: pd.DataFrame, names: dict[str, str]) -> None:
    with st.expander("The numbers behind the heatmap"):
        st.caption(NULL_CAPTION)
        _tables.table(
            explore.numbers_table(table, names),
            "explore_numbers",
            "explore-numbers",
            data=table,
            hide_index=True,
            column_config={
                "n": st.column_config.NumberColumn("n", help="scored pairs"),
                "null (uniform answers)": st.column_config.TextColumn(
                    help="Expected score under uniform random answers; significance is tested "
                    "against 0"
                ),
                explore.CI_COLUMN: st.column_config.TextColumn(
                    help=f"95% confidence interval: {CI_METHOD}."
                ),
                "significant after BH": st.column_config.CheckboxColumn(),
            },
        )
        st.caption("A dash: no value (no scored pair, or fewer than 2 for an interval and a test).")


def _trace_signal(
    store: Store, run_id: str | None, dataset: str | None, names: dict[str, str]
) -> None:
    """Where reasoning models wrote traces: per cell, the share naming the treatment's
    eliciting detail (a string match, said so)."""
    traces = factor_view.explore_signal(store, run_id, dataset)
    if traces.empty:
        return
    with st.expander("Trace signal: do the reasoning traces name the treatment's detail?"):
        _tables.table(
            factor_view.signal_numbers(traces, names),
            "explore_traces",
            "cogbias-trace-signal",
            hide_index=True,
        )
        st.caption(factor_view.TRACE_NOTE)


def _cell(
    event: Any, rows: list[str], columns: list[str], names: dict[str, str]
) -> tuple[str, str, str | None]:
    """(bias, model, search): a click on the chart moves the two pickers; they also work
    without a mouse. Stops the page until both are chosen."""
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
    model = c2.selectbox(
        "Model", columns, key="explore_model", placeholder="click a cell or choose"
    )
    search = c3.text_input("Search texts and answers", key="explore_search")
    if not bias or not model:
        st.info("Click a cell of the heatmap (or choose a bias and a model) to read its pairs.")
        st.stop()
    return bias, model, search or None


def _cell_line(
    table: pd.DataFrame, bias: str, model: str, names: dict[str, str], behind: list[Run]
) -> None:
    """The chosen cell's numbers in one sentence, then how many of its pairs could not be
    read, why, and what would read them."""
    cell = table[(table["bias"] == bias) & (table["model"] == model)]
    if cell.empty:
        return
    c = cell.iloc[0]
    mean = signed_or_dash(c["mean"], 3)
    ci = (
        " (95% CI needs 2 scored pairs)"
        if pd.isna(c["ci_low"])
        else f" (95% CI of this cell alone {interval(c['ci_low'], c['ci_high'])}, "
        "not adjusted for the other cells)"
    )
    title = safe_text.escape_markdown(f"{names.get(bias, bias)} × {model}")
    null = "unknown" if pd.isna(c["null"]) else signed(c["null"], 3)
    significant = "significant" if c["significant"] else "not significant"
    st.markdown(
        f"**{title}**: mean {mean}{ci}, null (uniform answers) {null}, n = {c['n']}, "
        f"{c['failures']} failed, "
        + (f"{c['abstained']} abstained (undecided samples), " if c.get("abstained") else "")
        + f"{significant} after the BH correction over all cells"
    )
    if unread := explore.unread_line(table, bias, model, behind):
        st.warning(safe_text.escape_markdown(unread[0].upper() + unread[1:] + "."))


def _pairs(store: Store, which: PairFilter) -> int:
    """One page of the cell's pairs: a table, then each pair as the model saw it. Returns how
    many pairs the cell holds."""
    total = store.pair_count(which)
    pages = max(1, -(-total // PAGE_SIZE))
    c1, c2 = st.columns([1, 3])
    page = int(c1.number_input("Page", 1, pages, key="explore_page") if pages > 1 else 1)
    c2.caption(f"{total:,} pair(s) · page {page} of {pages}")
    shown = store.pairs(
        which.bias, which.model, which.run_id, which.dataset, which.search, PAGE_SIZE,
        (page - 1) * PAGE_SIZE,
    )  # fmt: skip
    clean = redactor()
    _tables.table(
        pair_tables.shown_frame(shown, clean),
        "explore_pairs_table",
        f"pairs-page-{page}",
        data=pd.DataFrame([pair_record(p) for p in shown]),
        hide_index=True,
        width="stretch",
    )
    st.caption(pair_tables.choice_note(shown))
    for i, pair in enumerate(shown):
        d = pair.decision
        score = (
            f"score {signed(d.score)}"
            if d.status == DecisionStatus.OK and d.score is not None
            else "failed"
        )
        flipped = " · options reversed" if d.reversed else ""
        scenario = safe_text.escape_markdown((clean(pair.scenario or "") or "")[:90])
        number = (page - 1) * PAGE_SIZE + i + 1
        with st.expander(f"Pair {number}: {score}{flipped} — {scenario}"):
            pair_view = shown_pairs.shown_stored_pair(pair, clean)
            if pair_view is None:
                st.warning("This pair's stored text cannot be read.")
            else:
                _pair.show_pair(pair_view)
                _pair.show_probabilities(pair_view)
                _pair.show_samples(pair_view, key=f"explore_samples_{number}")
    return total


def _download(which: PairFilter, total: int) -> None:
    path = str(db_path())
    what = "these" if total <= EXPORT_LIMIT else f"the first {EXPORT_LIMIT:,}"
    st.download_button(
        f"Download {what} pairs as CSV",
        data=_csv(
            path,
            db_version(path),
            which.bias,
            which.model,
            which.run_id,
            which.dataset,
            which.search,
        ),  # fmt: skip
        file_name=f"cogbias-{which.bias}-{str(which.model).replace('/', '_')}.csv",
        mime="text/csv",
        key="explore_csv",
        on_click="ignore",
    )


def main() -> None:
    st.title("Explore results")
    store = open_store_or_stop()
    # What the page shows is read once per rerun and passed down.
    runs, datasets = kinds.records(store), store.datasets()
    sources, source_label = _sources(runs, datasets)
    source, view, order = _pickers(sources, source_label)
    kind, _, name = source.partition(":")
    _delete.flash("explore_delete")
    if kind in ("run", "dataset"):
        with st.expander(f"Delete this {kind}"):
            _delete.delete_control(store, kind, name, "explore_delete", ("explore_source", source))
    run_id, dataset = source_filter(source)
    table = _summary_or_stop(run_id, dataset)
    rows = explore.row_order(table, order)
    columns = sorted(table["model"].unique())
    names = {case_id: case.name for case_id, case in test_cases().items()}
    path = str(db_path())
    chart = _heatmap(path, db_version(path), run_id, dataset, view, order, tuple(names.items()))
    event = st.vega_lite_chart(
        chart,
        key="explore_heatmap",
        on_select="rerun",
        selection_mode=[charts_explore.SELECTION],
    )
    st.caption(CAPTIONS[view])
    _figure.save_figure(
        ["explore-heatmap"], "explore_figure", Source(run_id, dataset, view=view, order=order)
    )
    behind = explore.runs_behind(runs, datasets, run_id, dataset)
    if scored_by := probability_bars.heatmap_note(behind):
        st.caption(scored_by)
    st.caption(HOVER_CAPTION)
    _numbers(table, names)
    _trace_signal(store, run_id, dataset, names)
    if run_id:
        _report.offer("run", "explore_report", run_id=run_id)
    elif dataset:
        _report.offer("dataset", "explore_report", name=dataset)
    bias, model, search = _cell(event, rows, columns, names)
    _cell_line(table, bias, model, names, behind)
    which = PairFilter(bias, model, run_id, dataset, search)
    _download(which, _pairs(store, which))


main()
