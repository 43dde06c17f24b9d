"""Datasets: import published bias datasets, browse them, run them on any model, export them,
and see the paper's analyses (Figures 5-7). A thin page over `cogbias.datasets`."""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

from app_pages import (
    _delete,
    _effects,
    _figure,
    _import_tab,
    _pair,
    _paper_models,
    _progress,
    _tables,
)
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    chosen_gone,
    db_path,
    keep,
    model_names,
    models,
    open_store_or_stop,
    refuse_missing_keys,
    run_label,
    runs_table,
    share_local_server,
    test_cases,
)
from app_pages._messages import said
from cogbias.core.export_columns import instance_record, pair_record
from cogbias.core.run_record import RunStatus
from cogbias.datasets import import_run_id
from cogbias.runs import executor, paired_plan, summaries
from cogbias.store import Store
from cogbias.studies import analysis, cells
from cogbias.views import (
    charts,
    dataset_views,
    explore,
    hub_export,
    pair_tables,
    safe_text,
    shown_pairs,
)
from cogbias.views.dataset_export import dataset_tables
from cogbias.views.export import export_bytes
from cogbias.views.figures import Source

PAGE = 20
BROWSING = ("ds_bias", "ds_search", "ds_page", "ds_pick", "ds_pair")


class _View(NamedTuple):
    """What every tab reads, read once per rerun: the store, the datasets by name, the chosen
    one and whether it was deleted elsewhere since the page was drawn."""

    store: Store
    datasets: dict[str, dict[str, Any]]
    current: str | None
    stale: bool


TABS = ["Imported", "Import", "Browse", "Run", "Export", "Analysis", "Reference results"]


def _reset_browsing() -> None:
    """Another dataset: forget the bias, search, page and pair picked in the previous one."""
    for key in BROWSING:
        st.session_state.pop(key, None)


@st.cache_data(show_spinner=False, max_entries=16)
def _summary(db: str, dataset: str, version: tuple[Any, ...]) -> pd.DataFrame:
    """Bias x model statistics, recomputed only when decisions were added."""
    with Store(db) as fresh:
        return cells.heatmap_summary(fresh, dataset=dataset)


def _dataset_runs(store: Store, dataset: str, was_active: bool) -> None:
    """The runs on `dataset`: the bars of each one still going, how the run started here
    ended, and the table of them all."""
    runs = [r for r in summaries.run_summaries(store) if summaries.target(r) == dataset]
    going = [r for r in runs if r.status in _progress.ACTIVE]
    for run in going:
        _progress.bars(run, prefix=f"Run {run.id}: ")
    started = (st.session_state.get("ds_started") or {}).get(dataset)
    ended = next((r for r in runs if r.id == started and r not in going), None)
    if ended is not None:
        text = (
            f"{run_label(ended)}: {ended.done:,} of {ended.planned:,} "
            f"{_progress.counted(ended)}, {ended.failed:,} failed · {_progress.totals(ended)}."
        )
        (st.success if ended.status == RunStatus.DONE else st.warning)(text)
    if runs:
        cols = ["id", "status", "models", "planned", "done", "failed", "cost", "duration_s"]
        _tables.table(runs_table(runs, cols), "ds_runs", f"{dataset}-runs", hide_index=True)
    if was_active and not going:
        st.rerun()  # finished: redraw the page (Browse and Analysis show the new pairs)


def _imported_tab(view: _View) -> None:
    """The datasets in this database, and deleting the chosen one."""
    store, datasets, current, stale = view
    if not datasets:
        st.info(
            "No datasets yet. In the Import tab, fetch the paper's benchmark from the Hugging "
            "Face Hub, or import a published file or folder from this machine (the Malberg "
            "results, the Mohr thesis' data, the token-bias items). The seed papers' own model "
            "results are built in: see the Reference results tab."
        )
    else:
        rows = dataset_views.imported_rows(store)
        _tables.table(
            pd.DataFrame(rows, columns=dataset_views.COLUMNS),
            "ds_imported",
            "datasets",
            data=pd.DataFrame(dataset_views.imported_rows(store, whole=True)),
            hide_index=True,
        )
        if current:
            with st.expander(f"Delete the dataset {safe_text.escape_markdown(current)}"):
                _delete.delete_control(
                    store, "dataset", current, "ds_delete", ("ds_current", current), stale
                )


def _browse_tab(view: _View) -> None:
    """The chosen dataset's test cases and the pairs models answered on them."""
    store, datasets, current, stale = view
    if not current:
        st.info(
            "Nothing to browse yet: import a dataset in the Import tab (the paper's benchmark "
            "from the Hugging Face Hub, or a published file or folder from this machine); its "
            "test cases or effect sizes then appear here."
        )
    elif datasets[current]["kind"] == "mohr2025":
        _effects.show_rows(store, current)
    else:
        counts = store.dataset_bias_counts(current)
        left, middle, right = st.columns([2, 2, 1])
        bias = left.selectbox(
            "Bias", ["(all)", *[c["bias"] for c in counts]], key="ds_bias"
        )  # fmt: skip
        search = middle.text_input("Search the prompts", key="ds_search").strip() or None
        page = right.number_input("Page", min_value=1, value=1, key="ds_page")
        chosen_bias = None if bias == "(all)" else bias
        rows = store.dataset_instances(current, chosen_bias, search, PAGE, (page - 1) * PAGE)
        if not rows:
            st.info("No test cases match.")
        else:
            _tables.table(
                pd.DataFrame(
                    [
                        {
                            "#": r["instance_index"],
                            "bias": r["test_case"],
                            "scenario": r["scenario"],
                            "options": r["n_options"],
                            "metric": r["metric"] or "unknown",
                        }
                        for r in rows
                    ]
                ),
                "ds_browse_cases",
                f"{current}-test-cases-page-{page}",
                data=pd.DataFrame([instance_record(r) for r in rows]),
                hide_index=True,
            )
            index = st.selectbox(
                "Read a test case", range(len(rows)), key="ds_pick",
                format_func=lambda i: f"#{rows[i]['instance_index']} · {rows[i]['test_case']}",
            )  # fmt: skip
            picked = rows[index]
            control, treatment = st.columns(2)
            for column, half in ((control, "control"), (treatment, "treatment")):
                with column:  # a long imported text shows its start, the rest collapsed
                    st.markdown(_pair.HALF_TITLES[half])  # a fixed title
                    _pair.long_text(pair_tables.half_text(picked[half]))
        st.subheader("Paired responses")
        pairs = store.pairs(dataset=current, bias=chosen_bias, search=search, limit=PAGE)
        if not pairs:
            st.caption("No model has answered these test cases yet: run them in the Run tab.")
        else:
            _tables.table(
                pair_tables.shown_frame(pairs, with_cell=True),
                "ds_browse_pairs",
                f"{current}-pairs",
                data=pd.DataFrame([pair_record(p) for p in pairs]),
                hide_index=True,
            )
            st.caption(pair_tables.choice_note(pairs))
            which = st.selectbox(
                "Read a pair's answers", range(len(pairs)), key="ds_pair",
                format_func=lambda i: " · ".join(
                    (pairs[i].decision.model, pairs[i].decision.test_case, pairs[i].decision.status)
                ),
            )  # fmt: skip
            shown = shown_pairs.shown_stored_pair(pairs[min(which or 0, len(pairs) - 1)])
            if shown is None:
                st.warning("This pair's stored text cannot be read.")
            else:
                _pair.show_pair(shown)


def _run_tab(view: _View) -> None:
    """Running the chosen dataset on models, with the runs on it and their progress."""
    store, datasets, current, stale = view
    if current:
        if datasets[current]["kind"] == "mohr2025":
            st.info(
                "This dataset holds the thesis' published effect sizes, not paired test cases, "
                "so there is nothing to run from this tab. Its effect sizes are in the Browse "
                "and Analysis tabs."
            )
        elif store.dataset_unscorable(current):
            st.info(
                "This dataset holds published results without metric parameters (the paper's "
                "code format does not record them), so new models cannot be scored on it. "
                "Import the Hub benchmark — the same test cases with their parameters — and run that."
            )
        else:
            infos = models()
            ids = [m.id for m in infos]
            models_gone = chosen_gone("ds_models", ids, "Model")
            chosen = st.multiselect(
                "Decision models", ids, default=[RANDOM_MODEL] if RANDOM_MODEL in ids else [],
                format_func=model_names(infos), key="ds_models",
            )  # fmt: skip
            per_bias = st.number_input(
                "Test cases per bias (0: all)", min_value=0, value=10, key="ds_per_bias"
            )
            only = st.multiselect(
                "Only these biases (empty: all)",
                [c["bias"] for c in store.dataset_bias_counts(current)],
                key="ds_only",
            )
            spec = paired_plan.RunSpec(
                models=chosen, dataset=current, per_bias=int(per_bias) or None, biases=only,
                scoring=None,  # the models choose (`paired_scoring.scoring_by_models`)
            )  # fmt: skip
            plan = (
                attempt("Planning the run", lambda: paired_plan.plan(spec, store))
                if chosen and not refuse_missing_keys(chosen, infos)
                else None
            )
            if plan is not None:
                said(st.caption, plan.describe())  # names the dataset
            start = st.button("Start the run", disabled=plan is None, key="ds_start")
            if start and not (stale or models_gone):
                share_local_server()
                run_id = attempt("Starting the run", lambda: executor.launch(spec, db_path()))
                if run_id:  # said below, on this tab, with the run's progress
                    st.session_state.setdefault("ds_started", {})[current] = run_id
                    st.rerun()
        started = (st.session_state.get("ds_started") or {}).get(current)
        if started:
            st.success(
                f"Run {started} started in the background; it continues if you close the "
                "browser. Its progress is below; its pairs appear in Browse and Analysis as they "
                "finish."
            )
        runs_here = [r for r in summaries.run_summaries(store) if summaries.target(r) == current]
        active = any(r.status in _progress.ACTIVE for r in runs_here)
        # While a run on this dataset is going, this part redraws itself every two seconds.
        st.fragment(run_every=2.0 if active else None)(_dataset_runs)(store, current, active)


HUB = "Hub folder"


def _export_tab(view: _View) -> None:
    """The chosen dataset's tables as a file (its pairs and test cases, or a thesis dataset's
    effect sizes, prompts and model features), or its Hub folder, zipped."""
    store, datasets, current, stale = view
    if not current:
        st.info(
            "Nothing to export yet: import a dataset in the Import tab. Every table a page "
            "shows can also be downloaded under it (its Download menu)."
        )
        return
    tables = attempt("Listing the dataset's tables", lambda: dataset_tables(store, current))
    if tables is None:
        return
    choices = {table.label: table.name for table in tables} | {HUB: HUB}
    if st.session_state.get("ds_what") not in choices:
        st.session_state.pop("ds_what", None)  # another dataset's table
    what = choices[st.radio("What", list(choices), horizontal=True, key="ds_what")]
    if what == HUB:
        _hub_folder(store, current, stale)
        return
    scopes: dict[str, str | None] = {"all pairs on this dataset": None}
    if what == "pairs":
        if datasets[current]["meta"].get("decisions"):
            scopes["the published decisions"] = import_run_id(current)
        for r in summaries.run_summaries(store):
            if summaries.target(r) == current:
                scopes[f"run {r.id} ({summaries.table_row(r)['models']})"] = r.id
        scope = st.selectbox("Which pairs", list(scopes), key="ds_scope")
    else:
        scope = next(iter(scopes))
    fmt = st.radio("Format", ["csv", "jsonl", "parquet"], horizontal=True, key="ds_xfmt")
    key = (current, what, scope, fmt)
    if st.button("Prepare the file", key="ds_prepare") and not stale:
        run_id = scopes[scope] if what == "pairs" else None
        data = attempt(
            "Exporting",
            lambda: export_bytes(
                store, fmt, run_id=run_id, dataset=None if run_id else current,
                what=None if run_id else what,
            ),
        )  # fmt: skip
        if data is not None:
            st.session_state["ds_export"] = (key, data)
    _offer_prepared(
        key, "Download {mb} MB", f"{_tables.stem(current)}-{what.replace('_', '-')}.{fmt}",
        "ds_download",
    )  # fmt: skip


def _hub_folder(store: Store, current: str, stale: bool) -> None:
    """The dataset's Hub folder (`cogbias export --hub`), zipped for the browser."""
    st.caption(
        "A folder the Hugging Face Hub reads as a dataset: one Parquet file per table (this "
        "dataset's tables and the runs on it) and a dataset card, README.md, that says what "
        "each holds and how it was made. Unzip it, set the license in the card, and upload "
        "it on the Hub's page or with `hf upload`."
    )
    key = (current, HUB)
    if st.button("Prepare the Hub folder", key="ds_hub_prepare") and not stale:
        root = f"{_tables.stem(current)}-hub"
        data = attempt(
            "Writing the Hub folder", lambda: hub_export.hub_zip(store, root, dataset=current)
        )
        if data is not None:
            st.session_state["ds_export"] = (key, data)
    _offer_prepared(
        key, "Download the Hub folder, zipped ({mb} MB)", f"{_tables.stem(current)}-hub.zip",
        "ds_hub_download", mime="application/zip",
    )  # fmt: skip


def _offer_prepared(
    key: tuple[object, ...], label: str, file_name: str, button: str, mime: str | None = None
) -> None:
    """The download of what Prepare made for `key` (kept in the session across reruns), its
    size in `label`'s {mb}; nothing when what was prepared is another table or dataset's."""
    prepared = st.session_state.get("ds_export")
    if prepared and prepared[0] == key:
        size = f"{len(prepared[1]) / 1e6:.2f}"
        st.download_button(
            label.format(mb=size), prepared[1], file_name=file_name, mime=mime, key=button
        )


def _analysis_tab(view: _View) -> None:
    """The paper's analyses of the chosen dataset (Figures 5-7)."""
    store, datasets, current, stale = view
    if current and datasets[current]["kind"] == "mohr2025":
        _effects.show_effects(store, current)
    elif current:
        version = store.decisions_version()
        summary = _summary(str(db_path()), current, version)
        # Rows by display name, as on Explore (ids the library does not know stay as they are).
        names = {case_id: case.name for case_id, case in test_cases().items()}
        summary = summary.assign(bias=summary["bias"].map(lambda b: names.get(b, b)))
        if summary.empty:
            st.info("No decisions on this dataset yet: run it on some models first.")
        else:
            st.subheader("Mean bias score per bias and model (Figure 7)")
            st.caption(
                "Diverging scale from -1 to 1; * marks cells whose mean differs from 0 after "
                "Benjamini-Hochberg correction across the table. Average Absolute averages |score|."
            )
            st.altair_chart(charts.heatmap(analysis.figure7_table(summary), summary))
            st.subheader("Models clustered by their biases (Figure 6)")
            tree = analysis.model_dendrogram(summary)
            if len(tree.order) > 1:
                st.altair_chart(charts.dendrogram(tree))
            else:
                st.caption("Clustering needs at least two models.")
            st.subheader("Biasedness, capability and size (Figure 5)")
            capability = analysis.capability_frame(summary, models())
            if capability["arena_score"].notna().any():
                st.altair_chart(charts.bubbles(capability))
                st.caption(
                    "Bubble size: parameters. Names marked with an asterisk have no capability "
                    "score in the registry and sit at the others' mean, as in the paper."
                )
            else:
                st.caption("None of these models has a capability score in the registry.")
            drawn = ["figure7-heatmap"] + ["figure6-dendrogram"] * (len(tree.order) > 1)
            drawn += ["figure5-bubbles"] * bool(capability["arena_score"].notna().any())
            _figure.save_figure(drawn, "ds_figure", Source(dataset=current))
            with st.expander("The numbers: mean, 95% CI, p-values, failures"):
                _tables.table(
                    explore.numbers_table(summary),
                    "ds_numbers",
                    f"{current}-numbers",
                    data=summary,
                    hide_index=True,
                )


def main() -> None:
    st.title("Datasets")
    st.caption(
        "Published bias benchmarks and results: import them, read the test cases and what models "
        "answered, run them on your models to see how biased they are next to the paper's 20, and "
        "export everything with documented columns (docs/datasets.md)."
    )
    store = open_store_or_stop()
    if flash := st.session_state.pop("ds_flash", None):
        said(st.success, flash, "What was imported")  # names a dataset: imported text
    _delete.flash("ds_delete")

    datasets = {d["name"]: d for d in store.datasets()}
    # A dataset just imported (or deleted) is selected here, before the selectbox exists:
    # Streamlit refuses a change to a widget's value after the widget has been drawn.
    if "ds_select" in st.session_state:
        st.session_state["ds_current"] = st.session_state.pop("ds_select")
        _reset_browsing()
    keep("ds_current", allowed=datasets)
    keep("ds_tab", allowed=TABS)
    # A dataset deleted elsewhere since this page was drawn: named; the click that brought the
    # news (start a run, export, delete) does nothing.
    stale = chosen_gone("ds_current", datasets, "Dataset")
    current = (
        st.selectbox("Dataset", list(datasets), key="ds_current", on_change=_reset_browsing)
        if datasets
        else None
    )
    # The selected tab is session state (keyed, tracked, and kept over page switches): a rerun
    # that changes what is drawn above or inside the tabs (an import adds the dataset picker, a
    # run its progress) would otherwise put the user back on the first tab.
    tabs = st.tabs(TABS, key="ds_tab", on_change="rerun")
    view = _View(store, datasets, current, stale)
    with tabs[0]:
        _imported_tab(view)
    with tabs[1]:
        _import_tab.import_tab(store)
    with tabs[2]:
        _browse_tab(view)
    with tabs[3]:
        _run_tab(view)
    with tabs[4]:
        _export_tab(view)
    with tabs[5]:
        _analysis_tab(view)
    with tabs[6]:
        _paper_models.browse()  # built in and cited: readable with no dataset imported


main()
