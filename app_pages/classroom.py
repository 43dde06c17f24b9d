"""Class: run an experiment on the room, then reveal the class beside the original humans and
the models.

The teacher opens a session on one question (a classic experiment or a test case filled
once); participants join on the small participant server (`cogbias class serve`, its own
host and port: this app stays on 127.0.0.1), each answering one condition. The page counts
answers live, asks the chosen models the same question (a class run in a worker process,
as `cogbias class ask` does, with the Run page's progress), and on Reveal shows one chart.
Every session's text (titles, options, answers, models' replies) is shown as text.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import streamlit as st

from app_pages import _launch, _progress, _report
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    case_label,
    friendly,
    library_version,
    minute,
    model_names,
    models,
    open_store_or_stop,
    test_cases,
)
from cogbias.classroom import questions, sessions
from cogbias.classroom.sessions import Session
from cogbias.core.redact import redact
from cogbias.core.run_record import Run, RunStatus
from cogbias.core.safetext import shown
from cogbias.runs import kinds
from cogbias.runs.class_plan import MAX_SAMPLES, ClassPlan, ClassSpec
from cogbias.runs.summaries import cost_text, run_summary
from cogbias.store import Store, pid_alive
from cogbias.views import classroom as view
from cogbias.views.safe_text import escape_markdown

SERVE = "cogbias class serve --host 0.0.0.0 --port 8765"
PICKED = "class_session"
ASKING = "class_asking"  # the class run this page started last


@st.cache_data(show_spinner=False, max_entries=64)
def _classic(study: str, test: str) -> questions.Question:
    return questions.classic_question(study, test)


@st.cache_data(show_spinner="Filling the test case…", max_entries=64)
def _case(case_id: str, version: tuple[tuple[str, float], ...]) -> questions.Question:
    """A test case filled once (about 2 s): kept until a test case file changes."""
    return questions.case_question(case_id)


def _question_picker() -> questions.Question | None:
    """The question a new session asks, or None (nothing chosen, or it could not be built)."""
    source = st.radio(
        "Question",
        ["A classic experiment or study test", "A test case"],
        horizontal=True,
        key="class_source",
    )
    if source != "A test case":
        choices = attempt("Listing the classic experiments", questions.classic_choices) or []
        if not choices:
            return None
        titles = {f"{s}:{t}": f"{title} ({s})" for s, t, title in choices}
        picked = st.selectbox(
            "Experiment", list(titles), format_func=titles.get, key="class_classic"
        )
        study, _, test = str(picked).partition(":")
        return attempt("Preparing the question", lambda: _classic(study, test))
    cases = test_cases()
    if not cases:
        st.info("No test cases found: add one on the Templates page.")
        return None
    case = st.selectbox("Test case", sorted(cases), format_func=case_label(cases), key="class_case")
    version = library_version()
    return attempt("Filling the test case once", lambda: _case(str(case), version))


def _open_section(store: Store) -> None:
    with st.expander("Open a new session", expanded=not sessions.list_sessions(store)):
        question = _question_picker()
        if question is not None:
            _question_preview(question)
        if st.button("Open session", type="primary", disabled=question is None, key="class_open"):
            code = attempt("Opening the session", lambda: sessions.open_session(store, question))
            if code:
                st.session_state[PICKED] = code
                st.rerun()


def _question_preview(question: questions.Question) -> None:
    """Each condition as a participant reads it (text, never Markdown)."""
    for condition in question.conditions:
        st.caption(escape_markdown(f"Condition: {question.labels.get(condition, condition)}"))
        st.text(question.texts[condition])
        options = question.options[condition]
        if options:
            st.text("\n".join(f"( ) {o}" for o in options))
        elif question.number_label:
            st.text(f"{question.number_label} ____")


def _session_label(session: Session) -> str:
    state = "revealed" if session.revealed else "open" if session.open else "closed"
    title = shown(session.question.title, 80)  # a picker shows its text raw: no U+202E acts
    return f"{session.code} · {title} · {state} · {minute(session.created_at)}"


def _pick_session(store: Store) -> Session | None:
    listed = sessions.list_sessions(store)
    if not listed:
        st.info("No class sessions yet: open one above.")
        return None
    by_code = {s.code: s for s in listed}
    if st.session_state.get(PICKED) not in by_code:
        st.session_state[PICKED] = listed[0].code
    code = st.selectbox(
        "Session", list(by_code), format_func=lambda c: _session_label(by_code[c]), key=PICKED
    )
    return by_code[str(code)]


def _server_running(base: str) -> bool:
    """Whether something answers at the join link's host and port (a quick connect)."""
    parts = urlsplit(base)
    host = parts.hostname or ""
    if parts.scheme == "https" and not host.replace(".", "").isdigit():
        return True  # a public URL behind a proxy: assume it is served
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for _ in range(3):  # a busy machine can miss one quick connect; a stopped server misses all
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            continue
    return False


def _join(store: Store, session: Session) -> None:
    """The short code, the join link and its QR code, for the projector."""
    left, right = st.columns([3, 2])
    left.markdown(f"## Code: `{session.code}`")
    base = sessions.join_base(store)
    url = view.safe_join_url(sessions.join_url(base, session.code)) if base else None
    if url is None or not _server_running(base or ""):
        left.warning(
            "The participant server is not running. Start it on this machine (participants on "
            "the same Wi-Fi join it), then reload this page:"
        )
        left.code(SERVE, language="bash")
        return
    left.markdown("Participants open:")
    left.code(url, language=None)
    left.caption("or scan the QR code, or open the server's address and type the code.")
    svg = attempt("Drawing the QR code", lambda: view.join_qr_svg(url))
    if svg:
        right.image(svg, width=260)


@st.fragment(run_every=1.0)
def _live_count(code: str) -> None:
    """Answers so far per condition; only this part reruns, every second (outside the
    page's own guard, so it has its own: a message, never a traceback)."""
    store = open_store_or_stop()
    try:
        session = sessions.get_session(store, code)
        counts = sessions.count_answers(store, code) if session else {}
        throttled = sessions.throttled_count(store, code) if session else 0
    except Exception as exc:  # the database busy or gone for a moment: said, retried in 1 s
        st.warning(f"The count could not be read just now: {friendly(exc)}")
        return
    if session is None:
        st.warning("This session was deleted.")
        return
    if throttled:
        st.warning(
            f"{throttled} requests were refused as too fast from one network address: a "
            "crowd joining at once behind one Wi-Fi, or someone trying to answer many times."
        )
    st.metric("Answers", sum(counts.values()))
    st.dataframe(view.count_table(session.question, counts), hide_index=True)


WAYS = {
    "": "the models' default",
    "sample": "sampled answers (n at a temperature)",
    "probabilities": "option probabilities (one call)",
}


def _ask_plan(store: Store, session: Session) -> ClassPlan | None:
    """The class run the chosen models, way and n make, with its notes and cost; None after
    saying what is missing or refused (no model, a key not set, two endpoints, a way the
    models or the question cannot take)."""
    infos = models()
    ids = [m.id for m in infos]
    chosen = st.multiselect(
        "Models", ids, default=[RANDOM_MODEL] if RANDOM_MODEL in ids else [],
        format_func=model_names(infos), key="class_models",
    )  # fmt: skip
    mode = st.radio("How", list(WAYS), format_func=WAYS.get, horizontal=True, key="class_mode")
    c1, c2 = st.columns(2)
    n = c1.number_input("Answers per condition (n)", 1, MAX_SAMPLES, 20, key="class_n")
    temperature = c2.slider("Temperature", 0.0, 2.0, 0.7, 0.1, key="class_temperature")
    bases = _launch.endpoints(chosen, infos)
    if chosen and _launch.refused(chosen, infos, bases):  # said on the page
        return None
    spec = ClassSpec(
        session.code, tuple(chosen), int(n), float(temperature), str(mode), next(iter(bases), None)
    )
    try:
        plan = kinds.plan(spec, store)
    except (KeyError, ValueError) as exc:  # ClassAskError is a ValueError
        st.info(escape_markdown(friendly(exc)))
        return None
    for note in plan.notes:
        st.caption(escape_markdown(note))
    st.caption(escape_markdown(f"Before any call: {plan.cost_text()}"))
    return plan


def _models_section(store: Store, session: Session) -> None:
    """Ask the models in a worker process (a class run: closing the tab does not stop it),
    its progress while it runs, and how it ended."""
    st.subheader("Models on the same question")
    started = st.session_state.get(ASKING)
    run = run_summary(store, started) if started else None
    if run is not None and run.spec.get("session") != session.code:
        run = None  # started for another session
    working = run is not None and _working(run)
    if working:
        _ask_progress(str(started))
    elif run is not None:
        _outcome(store, session, run)
    plan = _ask_plan(store, session)
    if plan is None:
        return
    if st.button("Ask the models", key="class_ask", disabled=working):
        run_id = _launch.launch("class run", plan)
        if run_id is not None:
            st.session_state[ASKING] = run_id
            st.rerun()


def _working(run: Run) -> bool:
    """A worker is on the run, or one started for it has not claimed it yet."""
    if run.status == RunStatus.PLANNED:
        return pid_alive(run.pid)
    return run.active


@st.fragment(run_every=1.0)
def _ask_progress(run_id: str) -> None:
    """The class run's progress, as the Run and Studies pages draw it, with Cancel; the
    whole page is drawn again once it ends."""
    store = open_store_or_stop()
    run = run_summary(store, run_id)
    if run is None or not _working(run):
        st.rerun()
        return
    _progress.bars(run, prefix="Asking the models: ")
    if run.status == RunStatus.CANCELLING:
        st.warning("cancelling… the run stops within seconds and keeps what is finished.")
    elif st.button("Cancel", key="class_cancel"):
        store.request_cancel(run_id)
        st.warning("cancelling… the run stops within seconds and keeps what is finished.")


def _outcome(store: Store, session: Session, run: Run) -> None:
    """How the class run started here ended, and every answer that could not be read."""
    text = f"{run.done} answers stored ({run.failed} unreadable or failed); spent {cost_text(run)}."
    if run.status == RunStatus.DONE:
        st.success(escape_markdown(text))
    else:
        error = redact(run.error or "")
        st.warning(escape_markdown(f"Run {run.status}: {text} {error}".strip()))
    results = attempt("Reading the answers", lambda: sessions.results(store, session.code))
    for note in view.unreadable_notes(results) if results else []:
        st.caption(escape_markdown(note))


def _reveal(store: Store, session: Session) -> None:
    st.subheader("Reveal")
    results = attempt("Reading the results", lambda: sessions.results(store, session.code))
    if results is None:
        return
    frame = view.reveal_frame(results)
    chart = view.reveal_chart(frame, session.question)
    if chart is None:
        st.info("Nothing to show yet: no answers from the class or the models.")
        return
    st.altair_chart(chart, theme=None)  # its own larger fonts: it goes on a projector
    st.dataframe(view.reveal_table(frame, session.question), hide_index=True)
    for note in view.unreadable_notes(results):
        st.caption(escape_markdown(note))
    if results.citation:
        st.caption(escape_markdown(f"Humans: {results.citation}"))
    _report.offer("class", "class_report", code=session.code)  # the question, chart, methods


def _actions(store: Store, session: Session) -> None:
    c1, c2, c3, c4 = st.columns(4)
    if session.open and c1.button("Close answers", key="class_close"):
        attempt("Closing the session", lambda: sessions.close_session(store, session.code))
        st.rerun()
    if not session.revealed and c2.button("Reveal", type="primary", key="class_do_reveal"):
        attempt("Revealing", lambda: sessions.reveal_session(store, session.code))
        st.rerun()
    csv = attempt("Exporting the answers", lambda: _export(store, session.code))
    if csv is not None:
        c3.download_button(
            "Export CSV", csv, f"class-{session.code}.csv", "text/csv", key="class_export"
        )
    with c4.popover("Delete"):
        st.write("Delete this session, its answers and the models' answers? This cannot be undone.")
        if st.button("Yes, delete", type="primary", key="class_delete"):
            attempt("Deleting the session", lambda: sessions.delete_session(store, session.code))
            st.session_state.pop(PICKED, None)
            st.rerun()


def _export(store: Store, code: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.csv"
        sessions.export_csv(store, code, path)
        return path.read_bytes()


def main() -> None:
    st.title("Class")
    st.caption(
        "Run the experiment on the room: each participant answers one version of the question "
        "on their phone; then reveal the class beside the original study's people and the "
        "models. Participants give no name; only their answer and its condition are stored."
    )
    store = open_store_or_stop()
    _open_section(store)
    session = _pick_session(store)
    if session is None:
        return
    _join(store, session)
    _live_count(session.code)
    _actions(store, session)
    if session.revealed:
        _reveal(store, session)
    else:
        st.caption("Press Reveal to show the class's result here and on the participants' phones.")
    _models_section(store, session)


try:
    main()
except Exception as exc:  # a last guard: a message, never a traceback
    st.error(f"The Class page failed: {friendly(exc)}")
