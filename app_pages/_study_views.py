"""The Studies page's views of one study run: results pivoted, conversations, self-help pairs.

Every prompt and answer is model or study text: it goes out through `st.text` (`long_text`)
or escaped Markdown, never as markup.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import _figure
from app_pages._common import attempt, db_path, db_version
from app_pages._pair import long_text, safe_caption
from cogbias.core.records import TurnStatus
from cogbias.runs import study_results
from cogbias.runs.study_plan import MITIGATION_ORDER
from cogbias.store import Store
from cogbias.studies import study_tables
from cogbias.studies.definitions import Study
from cogbias.studies.references import load_references_report, reference_dirs
from cogbias.views import charts_studies, references_view, safe_text, study_views
from cogbias.views.export import export_bytes, frame_csv
from cogbias.views.figures import Source
from cogbias.views.safe_text import escape_markdown


def _keep_valid(key: str, options: list) -> None:
    """A choice left from another run or test falls back to the first option."""
    if options and st.session_state.get(key) not in options:
        st.session_state[key] = options[0]


@st.cache_data(show_spinner="Scoring…", max_entries=16)
def _scored(path: str, version: tuple[float, ...], run_id: str) -> pd.DataFrame:
    """Scoring a full study takes seconds: once per run and database state."""
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        return study_results.results(own, run_id)


def results(run_id: str) -> None:
    """The run's headline value per test, pivoted by the dimension the reader picks."""
    path = str(db_path())
    table = attempt("Scoring this study run", lambda: _scored(path, db_version(path), run_id))
    if table is None:
        return
    if table.empty:
        st.info("No answers of this run are stored yet; they appear here as the run goes on.")
        return
    dimensions = list(charts_studies.PIVOT_LABELS)
    varying = [d for d in dimensions if table[d].nunique() > 1]
    by = st.radio(
        "Pivot by",
        dimensions,
        index=dimensions.index(varying[0]) if varying else 0,
        format_func=charts_studies.PIVOT_LABELS.get,
        horizontal=True,
        key="study_pivot",
    )
    st.altair_chart(charts_studies.study_heatmap(table, by))
    _figure.save_figure(["study-heatmap"], "study_figure", Source(run_id=run_id, by=by))
    st.caption(
        "Headline value of each test's metric: the rate difference for framing and group "
        "attribution, the status-quo share above 1/k, the first-half minus second-half choice "
        "share for primacy, the anchoring distance, the capped Cohen's d for Mohr's problems. "
        "Red always means more biased (a small anchoring distance is the biased end, so it is "
        "coloured by its negative); * marks a degenerate cell (Table 3: under 1% admitted or "
        "rejected). Each cell's condition rates, neutral share, 95% CI and p-value are in its "
        "tooltip and in the table of all figures. Grey cells had too few readable answers."
    )
    st.dataframe(study_tables.pivot(table, by), width="stretch")
    with st.expander("All figures per cell"):
        st.dataframe(table.drop(columns=["run_id", "study"]), hide_index=True, width="stretch")
    c1, c2, _ = st.columns([1, 1, 2])
    c1.download_button(
        "Download the figures (CSV)",
        (frame_csv(table) or "").encode("utf-8"),
        file_name=f"{run_id}-results.csv",
        mime="text/csv",
        key="study_download_results",
    )
    c2.download_button(
        "Download every turn (CSV)",
        _turns_csv(path, db_version(path), run_id),
        file_name=f"{run_id}-turns.csv",
        mime="text/csv",
        key="study_download_turns",
        help="One row per model call, as `cogbias export --run RUN -o turns.csv` writes it.",
    )
    humans(run_id)


def human_results(study_id: str) -> None:
    """Before a run: the human results this study's tests will be shown beside."""
    loaded = _loaded_references()
    table = references_view.human_table(loaded[0], study_id) if loaded else None
    if table is None or table.empty:
        return
    with st.expander(f"What people answered in the original experiments ({len(table)} rows)"):
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption(
            "Every result of a run of this study is shown beside these (docs/references.md)."
        )


def _references_stamp() -> tuple[tuple[str, float], ...]:
    """Changes when a reference file is added, edited or removed (the comparison's cache key)."""
    paths = [p for d in reference_dirs() if d.is_dir() for p in sorted(d.glob("*.toml"))[:1000]]
    return tuple((str(p), p.stat().st_mtime) for p in paths if p.is_file())


@st.cache_data(show_spinner=False, max_entries=4)
def _references_report(stamp: tuple[tuple[str, float], ...]) -> tuple[dict, list]:
    """The reference files, read once until one is added, edited or removed (`stamp`)."""
    del stamp  # only the cache key
    return load_references_report()


def _loaded_references() -> tuple[dict, list] | None:
    return attempt(
        "Reading the human reference results", lambda: _references_report(_references_stamp())
    )


@st.cache_data(show_spinner="Comparing with the humans…", max_entries=16)
def _compared(
    path: str, version: tuple[float, ...], run_id: str, stamp: tuple[tuple[str, float], ...]
) -> pd.DataFrame:
    references = _references_report(stamp)[0]
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        return study_results.comparison(own, run_id, references)


def humans(run_id: str) -> None:
    """The run's cells beside the original experiments' human results, where a test asks an
    original's question: one cell at a time (chart and table), every cell in the download."""
    path = str(db_path())
    loaded = _loaded_references()
    problems = loaded[1] if loaded else []
    if problems:
        st.warning(
            f"{len(problems)} problem(s) in reference files; those files are left out. Fix or "
            "remove them:"
        )
        st.code("\n".join(str(p) for p in problems[:20]), language=None)
    frame = attempt(
        "Comparing with the humans",
        lambda: _compared(path, db_version(path), run_id, _references_stamp()),
    )
    if frame is None or frame.empty:
        return
    st.subheader("Beside the humans")
    st.caption(
        "What people answered in the original experiments, beside this run's answers to the "
        "same question: the share choosing the option named (or the median of a number) per "
        "condition, with 95% intervals (Wilson for shares), the difference model − humans and "
        "Cohen's h (0.2 small, 0.5 medium, 0.8 large). An *effect* row is the first condition "
        "minus the second, as the original reports it. Sources are listed below the table."
    )
    cells = list(dict.fromkeys(references_view.cell_label(r) for r in frame.itertuples()))
    key = f"study_humans_cell:{run_id}"
    _keep_valid(key, cells)
    cell = st.selectbox("Cell", cells, key=key) if len(cells) > 1 else cells[0]
    shown = frame[[references_view.cell_label(r) == cell for r in frame.itertuples()]]
    chart = references_view.share_chart(shown)
    if chart is not None:
        st.altair_chart(chart)
    st.dataframe(
        references_view.shown_comparison(shown),
        hide_index=True,
        width="stretch",
        column_config={
            "Experiment": st.column_config.TextColumn(width="small"),
            "Condition": st.column_config.TextColumn(width="medium"),
        },
    )
    known = loaded[0] if loaded else {}
    with st.expander("Sources of the human results"):
        for ref_id, first in shown.groupby("reference", sort=False).first().iterrows():
            st.text(f"{first['experiment']}: {first['citation']}")
            reference = known.get(ref_id)
            if reference is not None and (reference.participants or reference.checked):
                safe_caption(f"{reference.participants} Checked: {reference.checked}".strip())
    st.download_button(
        "Download beside the humans (CSV)",
        (frame_csv(frame) or "").encode("utf-8"),
        file_name=f"{run_id}-humans.csv",
        mime="text/csv",
        key="study_download_humans",
        help="Every cell, as `cogbias results run RUN --humans --format csv` writes it.",
    )


@st.cache_data(show_spinner=False, max_entries=4)
def _turns_csv(path: str, version: tuple[float, ...], run_id: str) -> bytes:
    """Written once per run and database state (0.1 s per thousand turns) and handed to the
    button as bytes: Streamlit's on-click generation now and then never delivered the file."""
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        return export_bytes(own, "csv", run_id=run_id)


def conversation_viewer(store: Store, run_id: str, study: Study) -> None:
    """One conversation of a sequential test, turn by turn, as the model saw it."""
    tests = study_views.sequence_tests(study)
    if not tests:
        st.info(
            escape_markdown(
                f"The study {study.id} has no sequential tests, so its units are single "
                "questions; their answers are in the Results tab."
            )
        )
        return
    c1, c2, c3 = st.columns([1, 1, 3])
    _keep_valid("study_chat_test", tests)
    test = c1.selectbox("Test", tests, key="study_chat_test")
    turns = attempt(
        "Reading the conversations", lambda: study_results.conversations(store, run_id, test)
    )
    index = study_views.conversation_index(turns if turns is not None else pd.DataFrame())
    if index.empty:
        said = f"No conversation of the test {test} is stored in this run (yet)."
        st.info(safe_text.escape_markdown(said))  # the test's name is a study file's text
        return
    mitigations = [m for m in MITIGATION_ORDER if m in set(index["mitigation"])]
    _keep_valid("study_chat_mitigation", mitigations)
    mitigation = c2.selectbox("Mitigation", mitigations, key="study_chat_mitigation")
    shown = index[index["mitigation"] == mitigation]
    labels = dict(zip(shown["conversation"], shown["label"], strict=True))
    _keep_valid("study_chat_conversation", list(labels))
    conversation = c3.selectbox(
        "Conversation", list(labels), format_func=labels.get, key="study_chat_conversation"
    )
    picked = shown[shown["conversation"] == conversation].iloc[0]
    st.caption(
        escape_markdown(
            f"{study.tests[test].name}, {mitigation}: {picked['turns']} turns; the items in the "
            f"order shown: {study_views.presented_order(turns, conversation)}"
        )
    )
    for message in study_views.chat(turns, conversation, study):
        with st.chat_message(message.speaker):
            if message.revise and message.speaker == "user":
                st.markdown("**Revise turn** (self-help: the model may change its decisions)")
            long_text(message.text, "(no answer)")
            if message.speaker == "assistant":
                if message.ok:
                    safe_caption(f"Turn {message.turn + 1}, {message.note}")
                else:
                    st.warning(f"Turn {message.turn + 1}, {escape_markdown(message.note)}")


def selfhelp_viewer(store: Store, run_id: str, study: Study) -> None:
    """Self-help units: the original prompt beside the model's rewrite, then the decision."""
    pairs = attempt(
        "Reading the self-help units", lambda: study_results.selfhelp_pairs(store, run_id)
    )
    if pairs is None:
        return
    index = study_views.selfhelp_index(pairs, study)
    if index.empty:
        st.info(
            "This run has no self-help rewrites: start a study run with the mitigation "
            "**selfhelp**. (In sequential tests self-help is a final revise turn instead; see "
            "the Conversations tab.)"
        )
        return
    labels = dict(enumerate(index["label"]))
    key = f"study_selfhelp_unit:{run_id}"  # one per run: the browser kept the last run's label
    _keep_valid(key, list(labels))
    unit = st.selectbox("Unit", list(labels), format_func=labels.get, key=key)
    row = index.iloc[unit]
    original, rewritten = st.columns(2)
    with original, st.container(border=True):
        st.markdown("**Original prompt**")
        long_text(row["original"])
    with rewritten, st.container(border=True):
        st.markdown("**Rewritten by the model**")
        if row["rewrite_note"]:  # no rewrite, so no rewrite answer to open either
            st.info(row["rewrite_note"])
        long_text(row["rewritten"])
        rewrite_answer = (row["rewrite_answer"] or "").strip()
        if not row["rewrite_note"] and rewrite_answer != (row["rewritten"] or "").strip():
            with st.expander("The model's whole rewrite answer"):
                st.text(row["rewrite_answer"])
    with st.container(border=True):
        st.markdown("**Decision on the rewritten prompt**")
        long_text(row["answer"], "(no answer)")
        if row["status"] == TurnStatus.OK:
            safe_caption(row["reading"])
        else:
            st.warning(escape_markdown(row["reading"]))
