"""What the projector shows the room, and the state line the teacher's page shows: before the
reveal the question's title, the join code and link with its QR code, the live count and
the countdown, in large type; after it, the chart (`views.classroom.reveal_chart` with
`projector=True`). The projector page (`app_pages/projector.py`) only draws these.

The HTML is built here with every text escaped (a title or label may come from a user's
own test case), so the page can draw it as it is; the QR code's SVG is drawn from a
checked link (`classroom.join_qr_svg`).
"""

from __future__ import annotations

import math
from html import escape

from cogbias.classroom.lessons import Lesson
from cogbias.classroom.sessions import ANSWERING, LOBBY, LOCKED, REVEALED, Session
from cogbias.core.safetext import shown

# what the room reads, per state
ROOM = {
    LOBBY: "Join now: the question opens in a moment",
    ANSWERING: "Answer on your phone",
    LOCKED: "Answers are locked",
    REVEALED: "The result",
}
# what the teacher's page says of the state
TEACHER = {
    LOBBY: "in the lobby: participants join, answers are not open yet",
    ANSWERING: "taking answers",
    LOCKED: "answers locked: reveal when you are ready",
    REVEALED: "revealed",
}
STYLE = """<style>
[data-testid="stSidebar"],[data-testid="stSidebarCollapsedControl"],
[data-testid="stHeader"],[data-testid="stToolbar"]{display:none !important}
[data-testid="stMainBlockContainer"],.block-container{padding:1rem 2rem 0 2rem !important;
max-width:100% !important}
.room h1{font-size:2.6rem;margin:0 0 .4rem 0;line-height:1.15}
.room .place{font-size:1.4rem;color:#333;margin:0}
.room .state{font-size:2rem;font-weight:700;margin:.6rem 0}
.room .code{font-size:4.6rem;font-weight:800;letter-spacing:.4rem;font-family:monospace;
margin:0;line-height:1.1}
.room .link{font-size:1.6rem;font-family:monospace;word-break:break-all;margin:.2rem 0}
.room .count{font-size:3rem;font-weight:700;margin:.4rem 0}
.room .timer{font-size:4rem;font-weight:800;font-family:monospace;color:#a00000}
</style>"""


def countdown(seconds: float | None) -> str:
    """'0:23' (minutes and seconds left, rounded up); "" without a countdown."""
    if seconds is None:
        return ""
    whole = max(0, math.ceil(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


def status_line(lesson: Lesson, session: Session) -> str:
    """'Question 1 of 2 · Asian disease · taking answers · 0:23 left', for the teacher."""
    left = countdown(session.seconds_left())
    parts = [
        lesson.place(session).capitalize(),
        session.question.title,
        TEACHER[session.state],
        f"{left} left" if left else "",
    ]
    return " · ".join(p for p in parts if p)


def heading_html(lesson: Lesson, session: Session) -> str:
    """The question's title and its place in the lesson, for the room."""
    place = lesson.place(session).capitalize()
    where = f'<p class="place">{escape(place)}</p>' if place else ""
    return f'<div class="room">{where}<h1>{escape(shown(session.question.title, 200))}</h1></div>'


def join_html(code: str, url: str | None) -> str:
    """The code in large type and the link (the QR code is drawn beside them)."""
    link = f'<p class="place">or open</p><p class="link">{escape(url)}</p>' if url else ""
    return (
        f'<div class="room"><p class="place">Join with the code</p>'
        f'<p class="code">{escape(code)}</p>{link}</div>'
    )


def live_html(session: Session, answers: int, joined: int) -> str:
    """The state, the countdown and how many have answered (and joined), for the room."""
    left = countdown(session.seconds_left())
    timer = f'<p class="timer" aria-label="time left">{escape(left)}</p>' if left else ""
    counted = f"{answers} answered" if session.state != LOBBY else f"{joined} joined"
    return (
        f'<div class="room"><p class="state">{escape(ROOM[session.state])}</p>{timer}'
        f'<p class="count">{escape(counted)}</p></div>'
    )
