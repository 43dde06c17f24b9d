"""Projector: what the room sees of a class lesson, driven by the teacher's controls on the
Class page (in another window): before the reveal the question's title, the join code, link
and QR code, the count and the countdown, in large type; after it, the chart alone, its
legend and axis on screen at 1280×720. No control here: nothing a pointer on the projected
screen can press. Open it from the Class page ("Open the projector view"), or with
`?code=CODE`; it follows the lesson by itself.
"""

from __future__ import annotations

import streamlit as st

from app_pages._common import attempt, friendly, open_store_or_stop
from cogbias.classroom import lessons, sessions
from cogbias.classroom.lessons import Lesson
from cogbias.store import Store
from cogbias.views import classroom as view
from cogbias.views import projector
from cogbias.views.safe_text import escape_markdown

SHOWN = "projector_shown"  # (lesson code, question code, state) the page last drew


def _code(store: Store) -> str | None:
    """The lesson to show: `?code=` in the address, else the newest."""
    asked = st.query_params.get("code")
    if asked:
        return sessions.normal_code(str(asked))
    listed = lessons.list_lessons(store)
    return listed[0].code if listed else None


def _join(store: Store, lesson: Lesson) -> None:
    """The code, the link and its QR code, and beside them the live count."""
    base = sessions.join_base(store)
    url = view.safe_join_url(sessions.join_url(base, lesson.code)) if base else None
    left, middle, right = st.columns([5, 4, 4])
    with left:
        st.html(projector.join_html(lesson.code, url))
        if url is None:
            st.caption("The participant server is not running: start it from the Class page.")
    if url is not None:
        svg = attempt("Drawing the QR code", lambda: view.join_qr_svg(url))
        if svg:
            middle.image(svg, width=300)
    with right:
        _live(lesson.code)


def _reveal(store: Store, lesson: Lesson) -> None:
    results = attempt(
        "Reading the results", lambda: sessions.results(store, lesson.session.code, pool=True)
    )
    if results is None:
        return
    frame = view.reveal_frame(results)
    chart = view.reveal_chart(frame, lesson.session.question, projector=True)
    if chart is None:
        st.html('<div class="room"><p class="state">Nobody answered this question.</p></div>')
        return
    st.altair_chart(chart, theme=None, width="stretch")
    notes = [view.pool_note(results), f"Humans: {results.citation}" if results.citation else ""]
    for note in filter(None, notes):
        st.caption(escape_markdown(note))


@st.fragment(run_every=1.0)
def _live(code: str) -> None:
    """The count and the countdown, every second; the whole page is drawn again when the
    teacher moves the lesson on (a new state or question)."""
    store = open_store_or_stop()
    try:
        lesson = lessons.get_lesson(store, code)
        if lesson is None:
            st.warning("This lesson was deleted.")
            return
        session = lesson.session
        shown = (lesson.code, session.code, session.state)
        if st.session_state.get(SHOWN) != shown:
            st.rerun()
        answers = sum(sessions.count_answers(store, session.code).values())
        joined = sum(store.class_joined_counts(session.code).values())
    except Exception as exc:  # the database busy for a moment: said, tried again in 1 s
        st.caption(f"The count could not be read just now: {friendly(exc)}")
        return
    st.html(projector.live_html(session, answers, joined))


def main() -> None:
    st.html(projector.STYLE)
    store = open_store_or_stop()
    code = _code(store)
    lesson = lessons.get_lesson(store, code) if code else None
    if lesson is None:
        st.title("Projector")
        st.info("No class lesson to show: open one on the Class page.")
        return
    session = lesson.session
    st.session_state[SHOWN] = (lesson.code, session.code, session.state)
    st.html(projector.heading_html(lesson, session))
    if session.state == sessions.REVEALED:
        _reveal(store, lesson)
        _live_quietly(lesson.code)
        return
    _join(store, lesson)


@st.fragment(run_every=1.0)
def _live_quietly(code: str) -> None:
    """After the reveal: nothing drawn, only a watch for the teacher's next question."""
    store = open_store_or_stop()
    lesson = lessons.get_lesson(store, code)
    if lesson is not None:
        shown = (lesson.code, lesson.session.code, lesson.session.state)
        if st.session_state.get(SHOWN) != shown:
            st.rerun()


try:
    main()
except Exception as exc:  # a last guard: a message, never a traceback
    st.error(f"The projector view failed: {friendly(exc)}")
