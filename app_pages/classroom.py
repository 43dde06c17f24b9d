"""Class: run an experiment on the room, then reveal the class beside the original humans,
your other classes and the models.

The teacher opens a session on one question, or a lesson of several under one code (classic
experiments or test cases filled once); participants join on the small participant server
(`cogbias class serve`, its own host and port: this app stays on 127.0.0.1), each answering
one condition per question. The page steps the question on screen through its states
(`_class_live`: start, countdown, lock, reveal with a confirmation, next question) and
counts answers live; the Projector page shows the room what it should see. It asks the
chosen models the same question (a class run in a worker process, as `cogbias class ask`
does, with the Run page's progress), and after the reveal shows one chart. Every session's
text (titles, options, answers, models' replies) is shown as text.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import streamlit as st

from app_pages import _class_live, _launch, _progress, _report
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    friendly,
    library_version,
    minute,
    model_names,
    models,
    open_store_or_stop,
    test_cases,
)
from cogbias.classroom import lessons, questions, sessions
from cogbias.classroom.lessons import Lesson
from cogbias.classroom.models import class_runs
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
PICKED = "class_session"  # the lesson (or session on its own) chosen
ASKING = "class_asking"  # the class run this page started last


@st.cache_data(show_spinner=False, max_entries=64)
def _classic(study: str, test: str) -> questions.Question:
    return questions.classic_question(study, test)


@st.cache_data(show_spinner="Filling the test case…", max_entries=64)
def _case(case_id: str, version: tuple[tuple[str, float], ...]) -> questions.Question:
    """A test case filled once (about 2 s): kept until a test case file changes."""
    return questions.case_question(case_id)


def _choices() -> dict[str, str]:
    """Every question a class can answer: "classic:STUDY:TEST" or "case:ID", with its name."""
    listed = attempt("Listing the classic experiments", questions.classic_choices) or []
    found = {f"classic:{s}:{t}": f"{title} ({s})" for s, t, title in listed}
    cases = test_cases()
    found |= {f"case:{cid}": f"{case.name} (test case)" for cid, case in sorted(cases.items())}
    return found


def _question(choice: str) -> questions.Question | None:
    kind, _, rest = choice.partition(":")
    if kind == "classic":
        study, _, test = rest.partition(":")
        return attempt("Preparing the question", lambda: _classic(study, test))
    version = library_version()
    return attempt("Filling the test case once", lambda: _case(rest, version))


def _open_section(store: Store) -> None:
    """Questions in the order picked (one: a session; several: a lesson under one code),
    each condition as participants read it, a countdown and whether to wait in a lobby."""
    with st.expander("Open a new session or lesson", expanded=not lessons.list_lessons(store)):
        titles = _choices()
        picked = st.multiselect(
            "Questions, in order (several make a lesson under one code)", list(titles),
            format_func=titles.get, key="class_questions",
        )  # fmt: skip
        asked = [q for q in (_question(str(c)) for c in picked) if q is not None]
        for i, question in enumerate(asked, 1):
            with st.expander(escape_markdown(f"{i}. {question.title}"), expanded=len(asked) == 1):
                _question_preview(question)
        c1, c2 = st.columns(2)
        seconds = c1.number_input(
            "Countdown per question, seconds (0: none)", 0, sessions.MAX_SECONDS, 0,
            key="class_seconds",
        )  # fmt: skip
        lobby = c2.checkbox(  # no key: its default follows the number of questions
            "Wait in a lobby until I press Start", value=len(asked) > 1,
            help="Participants join and wait; answers open when you press Start answers.",
        )  # fmt: skip
        label = "Open lesson" if len(asked) > 1 else "Open session"
        ready = bool(asked) and len(asked) == len(picked)
        if st.button(label, type="primary", disabled=not ready, key="class_open"):
            code = attempt(
                "Opening", lambda: lessons.open_lesson(store, asked, int(seconds) or None, lobby)
            )
            if code:
                st.session_state[PICKED] = code
                st.rerun()


def _question_preview(question: questions.Question) -> None:
    """Each condition as a participant reads it (text, never Markdown)."""
    for condition in question.conditions:
        st.caption(escape_markdown(f"Condition: {question.label(condition)}"))
        st.text(question.texts[condition])
        options = question.options[condition]
        if options:
            st.text("\n".join(f"( ) {o}" for o in options))
        elif question.number_label:
            st.text(f"{question.number_label} ____")


def _lesson_label(lesson: Lesson) -> str:
    """A lesson as the picker names it; its state is shown beside it, live (a label of the
    picker would keep the state it had when the picker was first drawn)."""
    kind = "" if lesson.single else f"lesson of {len(lesson.questions)}: "
    title = shown(lesson.title, 80)  # a picker shows its text raw: no U+202E acts
    return f"{lesson.code} · {kind}{title} · {minute(lesson.created_at)}"


def _pick_lesson(store: Store) -> Lesson | None:
    listed = lessons.list_lessons(store)
    if not listed:
        st.info("No class sessions yet: open one above.")
        return None
    by_code = {lesson.code: lesson for lesson in listed}
    if st.session_state.get(PICKED) not in by_code:
        st.session_state[PICKED] = listed[0].code
    code = st.selectbox(
        "Session", list(by_code), format_func=lambda c: _lesson_label(by_code[c]), key=PICKED
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


def _join(store: Store, lesson: Lesson) -> None:
    """The short code, the join link and its QR code, and the projector view's link."""
    left, right = st.columns([3, 2])
    left.markdown(f"## Code: `{lesson.code}`")
    left.link_button(
        "Open the projector view", f"projector?code={lesson.code}", icon=":material/tv:",
        help="Put this window on the projector: the question, code and count, then the chart",
    )  # fmt: skip
    base = sessions.join_base(store)
    url = view.safe_join_url(sessions.join_url(base, lesson.code)) if base else None
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
        "Models", ids, default=_last_models(store, session, ids),
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


def _last_models(store: Store, session: Session, ids: list[str]) -> list[str]:
    """The models the newest class run of this question asked (so a reload keeps the local
    model), else the random baseline."""
    for run in class_runs(store, session.code):
        asked = [m for m in run.spec.get("models", []) if m in ids]
        if asked:
            return asked
    return [RANDOM_MODEL] if RANDOM_MODEL in ids else []


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
    results = attempt(
        "Reading the results", lambda: sessions.results(store, session.code, pool=True)
    )
    if results is None:
        return
    frame = view.reveal_frame(results)
    chart = view.reveal_chart(frame, session.question)
    if chart is None:
        st.info("Nothing to show yet: no answers from the class or the models.")
        return
    st.altair_chart(chart, theme=None)  # its own larger fonts
    st.dataframe(view.reveal_table(frame, session.question), hide_index=True)
    notes = [view.pool_note(results), *view.unreadable_notes(results)]
    notes.append(f"Humans: {results.citation}" if results.citation else "")
    for note in filter(None, notes):
        st.caption(escape_markdown(note))
    st.download_button(
        "Results CSV", view.reveal_csv(results), f"class-{session.code}-results.csv", "text/csv",
        key="class_results_csv", help="The chart's numbers, one row per condition and who",
    )  # fmt: skip
    _report.offer("class", "class_report", code=session.code)  # the question, chart, methods


def _files(store: Store, lesson: Lesson, session: Session) -> None:
    """The answers as CSV and Delete, apart from the controls of the question."""
    c1, c2, _ = st.columns(3)
    csv = attempt("Exporting the answers", lambda: _export(store, session.code))
    if csv is not None:
        c1.download_button(
            "Export answers (CSV)", csv, f"class-{session.code}.csv", "text/csv",
            key="class_export",
        )  # fmt: skip
    what = "session" if lesson.single else f"lesson ({len(lesson.questions)} questions)"
    with c2.popover("Delete"):
        st.write(
            f"Delete this {what}, its answers and the models' answers? It leaves your pooled "
            "classes too. This cannot be undone."
        )
        if st.button("Yes, delete", type="primary", key="class_delete"):
            attempt("Deleting", lambda: lessons.delete(store, lesson.code))
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
        "on their phone; then reveal the class beside the original study's people, your "
        "other classes and the models. Participants give no name; only their answer and its "
        "condition are stored."
    )
    store = open_store_or_stop()
    _open_section(store)
    lesson = _pick_lesson(store)
    if lesson is None:
        return
    session = lesson.session
    _class_live.remember(lesson)
    _join(store, lesson)
    _class_live.live(lesson.code)
    if session.state == sessions.REVEALED:
        _reveal(store, session)
    else:
        st.caption(
            "Lock answers, then Reveal… shows the result here, on the projector view and on "
            "the participants' phones."
        )
    _files(store, lesson, session)
    _models_section(store, session)


try:
    main()
except Exception as exc:  # a last guard: a message, never a traceback
    st.error(f"The Class page failed: {friendly(exc)}")
