"""The Class page's live part: the question on screen, its state and countdown, the teacher's
controls and the count, drawn again every second (a fragment), so the countdown runs and a
lock by the countdown shows without a reload.

The controls follow the states one step at a time: Start (lobby) → Lock answers (answering)
→ Reveal… (locked; it asks first) → Next question (a lesson). Reveal is never beside Lock:
they are two steps, and revealing shows the result on every phone. The whole page is drawn
again when the state or the question changes, so the reveal and the models follow it.
"""

from __future__ import annotations

import streamlit as st

from app_pages._common import attempt, friendly, open_store_or_stop
from cogbias.classroom import lessons, sessions
from cogbias.classroom.lessons import Lesson
from cogbias.classroom.sessions import ANSWERING, LOBBY, LOCKED, REVEALED, Session
from cogbias.store import Store
from cogbias.views import classroom as view
from cogbias.views import projector
from cogbias.views.safe_text import escape_markdown

SHOWN = "class_shown"  # (lesson, question, state) the page was last drawn for


def remember(lesson: Lesson) -> None:
    """What the whole page is being drawn for now (the fragment compares against it)."""
    st.session_state[SHOWN] = (lesson.code, lesson.session.code, lesson.session.state)


@st.fragment(run_every=1.0)
def live(code: str) -> None:
    """The state line, the controls for it and the count; outside the page's own guard,
    so with its own: a message, never a traceback."""
    store = open_store_or_stop()
    try:
        lesson = lessons.get_lesson(store, code)
        session = lesson.session if lesson else None
        counts = sessions.count_answers(store, session.code) if session else {}
        joined = sum(store.class_joined_counts(session.code).values()) if session else 0
        throttled = sessions.throttled_count(store, session.code) if session else 0
    except Exception as exc:  # the database busy or gone for a moment: said, retried in 1 s
        st.warning(f"The count could not be read just now: {friendly(exc)}")
        return
    if lesson is None or session is None:
        st.warning("This session was deleted.")
        return
    if st.session_state.get(SHOWN) != (lesson.code, session.code, session.state):
        st.rerun()  # a new state or question: the whole page follows
    st.markdown(f"**{escape_markdown(projector.status_line(lesson, session))}**")
    _controls(store, lesson, session)
    if throttled:
        st.warning(
            f"{throttled} requests were refused as too fast from one network address: a "
            "crowd joining at once behind one Wi-Fi, or someone trying to answer many times."
        )
    c1, c2 = st.columns(2)
    c1.metric("Answers", sum(counts.values()))
    c2.metric("Joined", joined, help="Participants who opened this question")
    st.dataframe(view.count_table(session.question, counts), hide_index=True)


def _controls(store: Store, lesson: Lesson, session: Session) -> None:
    """One step at a time: the button for the next state, and a countdown while answers
    are (or are about to be) taken."""
    c1, c2, c3 = st.columns(3)
    code = session.code
    if session.state == LOBBY and c1.button("Start answers", type="primary", key="class_start"):
        _act("Starting", lambda: lessons.start(store, code))
    if session.state == ANSWERING and c1.button("Lock answers", key="class_close"):
        _act("Locking", lambda: lessons.lock(store, code))
    if session.state == LOCKED:
        with c1.popover("Reveal…"):
            st.write(
                "Show the result on the projector and on every participant's phone? "
                "Answers stay locked."
            )
            if st.button("Yes, reveal", type="primary", key="class_do_reveal"):
                _act("Revealing", lambda: lessons.reveal(store, code))
    if session.state in (LOCKED, REVEALED) and lesson.has_next:
        revealed = session.state == REVEALED
        where, kind = (c1, "primary") if revealed else (c2, "secondary")
        if where.button("Next question", type=kind, key="class_next"):
            _act("Opening the next question", lambda: lessons.next_question(store, lesson.code))
    if session.state in (LOBBY, ANSWERING):
        with c3.popover("Countdown…"):
            seconds = st.number_input(
                "Seconds (0: none)", 0, sessions.MAX_SECONDS, session.seconds or 30,
                key="class_timer_seconds",
            )  # fmt: skip
            st.caption("While answers are open it starts now; in the lobby, with the answers.")
            if st.button("Set the countdown", key="class_timer_set"):
                _act("Setting the countdown", lambda: lessons.set_timer(store, code, int(seconds)))


def _act(what: str, action: object) -> None:
    """Do it and draw the whole page again (a message if it failed)."""
    if attempt(what, action) is not None:  # type: ignore[arg-type]
        st.rerun()
