"""Datasets: import published bias datasets, browse them, run them on any model, export them,
and see the paper's analyses (Figures 5-7). A thin page over `cogbias.datasets`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _delete, _effects, _import_sources, _pair, _paper_models, _progress
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    chosen_gone,
    db_path,
    friendly,
    keep,
    minute,
    model_names,
    models,
    open_store_or_stop,
    refuse_missing_keys,
    run_label,
    runs_table,
    share_local_server,
    test_cases,
)
from cogbias.core.redact import redact
from cogbias.datasets import FIELDS, ColumnMapping, DatasetError, hub_url, import_run_id
from cogbias.datasets.formats import FOLDERS, FORMATS, holds, run_import
from cogbias.datasets.tables import columns_of
from cogbias.runs import executor, paired_plan, summaries
from cogbias.store import Store, cogbias_home
from cogbias.studies import analysis, cells
from cogbias.views import charts, explore, pair_tables, safe_text, shown_pairs
from cogbias.views.export import export_bytes

PAGE = 20
# The importers the command has (`datasets.formats.FORMATS`), described as the command does.
HELP = {f.name: f"{f.name}: {f.help}" for f in FORMATS}
# What an importer's message says in the command's words, and what this page calls it.
UI_TERMS = (
    ("pass --replace to replace it, or --name to import this one under another name",
     "tick 'Replace a dataset of the same name', or give this one another dataset name"),
    ("--replace", "'Replace a dataset of the same name'"),
    ("--name", "another dataset name"),
)  # fmt: skip
BROWSING = ("ds_bias", "ds_search", "ds_page", "ds_pick", "ds_pair")
TABS = ["Imported", "Import", "Browse", "Run", "Export", "Analysis", "Reference results"]


def _reset_browsing() -> None:
    """Another dataset: forget the bias, search, page and pair picked in the previous one."""
    for key in BROWSING:
        st.session_state.pop(key, None)


st.title("Datasets")
st.caption(
    "Published bias benchmarks and results: import them, read the test cases and what models "
    "answered, run them on your models to see how biased they are next to the paper's 20, and "
    "export everything with documented columns (docs/datasets.md)."
)
store = open_store_or_stop()
if flash := st.session_state.pop("ds_flash", None):
    st.success(safe_text.escape_markdown(flash))  # names a dataset: imported text
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


def _import_progress(bar: Any) -> Any:
    def update(label: str, done: int, total: int) -> None:
        share = min(done / total, 1.0) if total else 0.0
        bar.progress(share, text=f"{label}: {done / 1e6:.1f} MB")

    return update


def _in_ui_terms(text: str) -> str:
    """An importer's message with the command's flags named as this page names them."""
    for flag, words in UI_TERMS:
        text = text.replace(flag, words)
    return text


def _import(what: str, func: Any) -> None:
    """Run an import; a malformed file is reported with its file, row and column. The
    progress bar goes away when the import ends, however it ends."""
    slot = st.empty()
    try:
        summary = func(_import_progress(slot.progress(0.0, text="starting")))
    except DatasetError as exc:  # quotes the file's own text: shown as text, not Markdown
        slot.empty()
        reason = _in_ui_terms(redact(str(exc)))
        said = safe_text.escape_markdown(f"{what} failed: {reason}")
        st.error(said + "\n\nThe database was not changed.")
        return
    except Exception as exc:
        slot.empty()
        st.error(f"{what} failed: {_in_ui_terms(friendly(exc))}")
        return
    slot.empty()
    st.session_state["ds_flash"] = summary.describe()
    st.session_state["ds_select"] = summary.dataset
    st.rerun()


def _mapping_form(path: Path) -> ColumnMapping | None:
    columns = attempt("Reading the file's columns", lambda: columns_of(path))
    if not columns:
        return None
    st.markdown("**Column mapping** — which column holds what (leave unused fields empty).")
    mapped: dict[str, str] = {}
    constants: dict[str, str] = {}
    grid = st.columns(3)
    for i, (field, help_text) in enumerate(FIELDS.items()):
        if field == "answer_base":
            continue
        guess = columns.index(field) + 1 if field in columns else 0
        with grid[i % 3]:
            choice = st.selectbox(
                field, ["—", *columns], index=guess, help=help_text, key=f"ds_map_{field}"
            )
        if choice != "—":
            mapped[field] = choice
    st.markdown("Fixed values for every row (used when no column is mapped):")
    fixed = st.columns(4)
    for i, field in enumerate(("bias", "model", "k", "answer_base")):
        value = fixed[i].text_input(field, key=f"ds_set_{field}", help=FIELDS[field]).strip()
        if value and field not in mapped:
            constants[field] = value
    return ColumnMapping(mapped, constants)


def _save_upload(uploaded: Any) -> Path:
    folder = cogbias_home() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(uploaded.name).name
    target.write_bytes(uploaded.getvalue())
    return target


@st.cache_data(show_spinner=False, max_entries=16)
def _summary(db: str, dataset: str, version: tuple[Any, ...]) -> pd.DataFrame:
    """Bias x model statistics, recomputed only when decisions were added."""
    with Store(db) as fresh:
        return cells.heatmap_summary(fresh, dataset=dataset)


def _dataset_runs(dataset: str, was_active: bool) -> None:
    """The runs on `dataset`: the bars of each one still going, how the run started here
    ended, and the table of them all."""
    runs = [r for r in summaries.run_summaries(store) if r["biases"] == dataset]
    going = [r for r in runs if r["status"] in _progress.ACTIVE]
    for run in going:
        _progress.bars(run, prefix=f"Run {run['id']}: ")
    started = (st.session_state.get("ds_started") or {}).get(dataset)
    ended = next((r for r in runs if r["id"] == started and r not in going), None)
    if ended is not None:
        text = (
            f"{run_label(ended)}: {ended['done']:,} of {ended['planned']:,} "
            f"{_progress.counted(ended)}, {ended['failed']:,} failed · {_progress.totals(ended)}."
        )
        (st.success if ended["status"] == "done" else st.warning)(text)
    if runs:
        cols = ["id", "status", "models", "planned", "done", "failed", "cost", "duration_s"]
        st.dataframe(runs_table(runs, cols), hide_index=True)
    if was_active and not going:
        st.rerun()  # finished: redraw the page (Browse and Analysis show the new pairs)


# ------------------------------------------------------------------ imported
with tabs[0]:
    if not datasets:
        st.info(
            "No datasets yet. In the Import tab, fetch the paper's benchmark from the Hugging "
            "Face Hub, or import a published file or folder from this machine (the Malberg "
            "results, the Mohr thesis' data, the token-bias items). The seed papers' own model "
            "results are built in: see the Reference results tab."
        )
    else:
        contents = store.dataset_contents()  # counted in each kind's own tables
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "name": d["name"],
                        "kind": d["kind"],
                        "holds": holds(d["kind"], contents.get(d["name"], {})),
                        "biases": len(d["meta"].get("biases", [])),
                        "models": ", ".join(d["meta"].get("models", [])),
                        "imported": minute(d["imported_at"]),
                        "source": d["source"],
                    }
                    for d in datasets.values()
                ]
            ),
            hide_index=True,
        )
        if current:
            with st.expander(f"Delete the dataset {safe_text.escape_markdown(current)}"):
                _delete.delete_control(
                    store, "dataset", current, "ds_delete", ("ds_current", current), stale
                )

# ------------------------------------------------------------------ import
with tabs[1]:
    source = st.radio(
        "Source", ["The Hugging Face Hub", "A path on this machine", "Upload a file"], key="ds_src"
    )
    replace = st.checkbox("Replace a dataset of the same name", key="ds_replace")
    if source == "The Hugging Face Hub":
        name = st.text_input("Dataset name", "malberg2024-hub", key="ds_hub_name")
        st.caption(
            safe_text.escape_markdown(f"Downloads {hub_url()} (30,000 test cases, CC BY-SA 4.0).")
        )
        if st.button("Download and import", key="ds_hub_go"):
            _import(
                "Importing from the Hub",
                lambda p: run_import(store, "malberg2024-hub", [], name, replace, p),
            )
    else:
        names = [f.name for f in FORMATS]
        fmt = st.selectbox("Format", names, format_func=HELP.get, key="ds_fmt")
        path: Path | None = None
        zipped: Any = None  # a folder uploaded as a zip: unpacked when it is imported
        if source == "A path on this machine":
            _import_sources.importable_note()
            typed = st.text_input(
                "Path (a file, or for a folder format the folder)", key="ds_path"
            ).strip()  # the server reads it: only inside the importable folders
            path = _import_sources.checked_path(typed) if typed else None
            stem = Path(typed).stem
        else:
            kinds = ["csv", "jsonl", "ndjson", "parquet"]
            if fmt in FOLDERS:  # a folder arrives zipped; the token-bias files also one by one
                kinds = ["zip", "json"] if fmt == "peek2024" else ["zip"]
            label = "File, or the folder as a .zip" if fmt in FOLDERS else "File"
            uploaded = st.file_uploader(label, type=kinds, key=f"ds_upload_{fmt}")
            if uploaded is not None and uploaded.name.lower().endswith(".zip"):
                zipped = uploaded
            elif uploaded is not None:
                path = _save_upload(uploaded)
            stem = Path(uploaded.name).stem if uploaded is not None else ""
        default = next(f.default_name for f in FORMATS if f.name == fmt) or stem
        name = st.text_input("Dataset name", default or "", key=f"ds_name_{fmt}")
        mapping = _mapping_form(path) if fmt == "generic" and path and path.is_file() else None
        if st.button("Import", key="ds_go", disabled=path is None and zipped is None):
            options: list[str] = []
            if mapping is not None:  # the generic format's column mapping, as its arguments
                options += [f"--map={f}={c}" for f, c in mapping.columns.items()]
                options += [f"--set={f}={v}" for f, v in mapping.constants.items()]
            if zipped is not None:
                _import(
                    "Import", _import_sources.zip_import(store, zipped, fmt, name or None, replace)
                )
            elif path is not None and (fmt != "generic" or mapping is not None):
                _import(
                    "Import",
                    lambda p: run_import(store, fmt, [path], name or None, replace, p, options),
                )

# ------------------------------------------------------------------ browse
with tabs[2]:
    if current and datasets[current]["kind"] == "mohr2025":
        _effects.show_rows(store, current)
    elif current:
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
            st.dataframe(
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
                ),  # fmt: skip
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
            st.dataframe(pair_tables.shown_frame(pairs, with_cell=True), hide_index=True)
            st.caption(pair_tables.choice_note(pairs))
            which = st.selectbox(
                "Read a pair's answers", range(len(pairs)), key="ds_pair",
                format_func=lambda i: f"{pairs[i]['model']} · {pairs[i]['test_case']} · {pairs[i]['status']}",
            )  # fmt: skip
            shown = shown_pairs.shown_stored_pair(pairs[min(which or 0, len(pairs) - 1)])
            if shown is None:
                st.warning("This pair's stored text cannot be read.")
            else:
                _pair.show_pair(shown)

# ------------------------------------------------------------------ run
with tabs[3]:
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
                models=chosen, dataset=current, per_bias=int(per_bias) or None, biases=only
            )
            plan = (
                attempt("Planning the run", lambda: paired_plan.plan(spec, store))
                if chosen and not refuse_missing_keys(chosen, infos)
                else None
            )
            if plan is not None:
                st.caption(safe_text.escape_markdown(plan.describe()))  # names the dataset
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
        runs_here = [r for r in summaries.run_summaries(store) if r["biases"] == current]
        active = any(r["status"] in _progress.ACTIVE for r in runs_here)
        # While a run on this dataset is going, this part redraws itself every two seconds.
        st.fragment(run_every=2.0 if active else None)(_dataset_runs)(current, active)

# ------------------------------------------------------------------ export
with tabs[4]:
    if current:
        what = st.radio("What", ["pairs", "test cases"], horizontal=True, key="ds_what")
        scopes = {"all pairs on this dataset": None}
        if datasets[current]["meta"].get("decisions"):
            scopes["the published decisions"] = import_run_id(current)
        for r in summaries.run_summaries(store):
            if r["biases"] == current:
                scopes[f"run {r['id']} ({r['models']})"] = r["id"]
        scope = st.selectbox("Which pairs", list(scopes), key="ds_scope", disabled=what != "pairs")
        fmt = st.radio("Format", ["csv", "jsonl", "parquet"], horizontal=True, key="ds_xfmt")
        key = (current, what, scope, fmt)
        if st.button("Prepare the file", key="ds_prepare") and not stale:
            run_id = scopes[scope] if what == "pairs" else None
            data = attempt(
                "Exporting",
                lambda: export_bytes(
                    store, fmt, run_id=run_id, dataset=None if run_id else current,
                    what="instances" if what == "test cases" else "pairs",
                ),
            )  # fmt: skip
            if data is not None:
                st.session_state["ds_export"] = (key, data)
        prepared = st.session_state.get("ds_export")
        if prepared and prepared[0] == key:
            st.download_button(
                f"Download {len(prepared[1]) / 1e6:.2f} MB",
                prepared[1],
                file_name=f"{current}-{what.replace(' ', '-')}.{fmt}",
                key="ds_download",
            )

# ------------------------------------------------------------------ analysis
with tabs[5]:
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
            with st.expander("The numbers: mean, 95% CI, p-values, failures"):
                st.dataframe(explore.numbers_table(summary), hide_index=True)

# ------------------------------------------------------------------ reference results
with tabs[6]:
    _paper_models.browse()  # built in and cited: readable with no dataset imported
