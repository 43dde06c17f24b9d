"""A lesson: one code for several questions in a row, each revealed in turn, and what the
teacher does to the question on screen (start, countdown, lock, reveal, next).

Each question is a session of its own (`ABCDEF-1`, `ABCDEF-2`, ... under the lesson's code
`ABCDEF`; `store.class_lessons`), so a participant gets one condition per question, placed
in that question's own balanced order, and every question has its own results, class runs,
report and export. A session opened on its own is a lesson of one question under its own
code: the participant server, the teacher's page and the command treat both alike.

The states and the countdown live in the store, so the participant server, the teacher's
page, the projector and the command always agree; a countdown that runs out locks the
question at its end with no one writing (`sessions.Session.state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cogbias.classroom import sessions
from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import ANSWERING, LOBBY, LOCKED, REVEALED, Session
from cogbias.store import Store, now
from cogbias.store.class_lessons import StoredLesson

MAX_QUESTIONS = 20


@dataclass(frozen=True)
class Lesson:
    """Questions under one code, and the one on screen (`current`, 1-based)."""

    code: str
    created_at: str
    questions: tuple[Session, ...]
    current: int = 1

    @property
    def session(self) -> Session:
        """The question on screen."""
        return self.questions[min(self.current, len(self.questions)) - 1]

    @property
    def single(self) -> bool:
        return len(self.questions) == 1

    @property
    def has_next(self) -> bool:
        return self.current < len(self.questions)

    @property
    def title(self) -> str:
        return " · ".join(q.question.title for q in self.questions)

    def place(self, session: Session | None = None) -> str:
        """'question 2 of 3' ("" for a lesson of one question)."""
        position = (session or self.session).position or self.current
        return "" if self.single else f"question {position} of {len(self.questions)}"


def open_lesson(
    store: Store,
    questions: Sequence[Question],
    seconds: int | None = None,
    lobby: bool | None = None,
) -> str:
    """Store a lesson of `questions` and return the code participants type. One question is
    a session on its own; several start in the lobby (`lobby` None), so the room joins
    before the first question opens. `seconds`: each question's countdown, from its start."""
    if not questions:
        raise ValueError("choose at least one question")
    if len(questions) > MAX_QUESTIONS:
        raise ValueError(f"a lesson has at most {MAX_QUESTIONS} questions, not {len(questions)}")
    seconds = sessions.checked_seconds(seconds)
    start = not (len(questions) > 1 if lobby is None else lobby)
    if len(questions) == 1:
        return sessions.open_session(store, questions[0], start, seconds)
    texts = [q.to_json() for q in questions]
    while True:
        code = sessions.new_code()
        if store.add_class_lesson(code, texts, seconds, start):
            return code


def get_lesson(store: Store, code: str, at: str | None = None) -> Lesson | None:
    """The lesson `code` names: a lesson's code, one of its questions' codes, or a session
    on its own (a lesson of one); None when there is none."""
    at = at or now()
    code = sessions.normal_code(code)
    stored = store.class_lesson(code)
    if stored is None:
        session = sessions.get_session(store, code, at)
        if session is None:
            return None
        if session.lesson is None:
            return Lesson(session.code, session.created_at, (session,))
        stored = store.class_lesson(session.lesson)
        if stored is None:  # a question whose lesson row is gone: on its own
            return Lesson(session.code, session.created_at, (session,))
    return _lesson(store, stored, at)


def _lesson(store: Store, stored: StoredLesson, at: str) -> Lesson:
    questions = tuple(
        sessions.stored_session(row, at) for row in store.class_lesson_sessions(stored.code)
    )
    return Lesson(stored.code, stored.created_at, questions, stored.current)


def resolve(store: Store, code: str, at: str | None = None) -> tuple[Lesson, Session]:
    """The lesson `code` names and the question it means: a lesson's code means the question
    on screen, a question's code that question. KeyError naming the code when unknown."""
    lesson = get_lesson(store, code, at)
    if lesson is None:
        raise KeyError(
            f"no class session with code '{sessions.normal_code(code)}' in {store.path} "
            "(`cogbias class list` lists the sessions and lessons)"
        )
    named = sessions.normal_code(code)
    chosen = next((q for q in lesson.questions if q.code == named), lesson.session)
    return lesson, chosen


def list_lessons(store: Store) -> list[Lesson]:
    """Every lesson and every session on its own, newest first."""
    at = now()
    lessons = [_lesson(store, stored, at) for stored in store.class_lessons()]
    alone = [
        Lesson(s.code, s.created_at, (s,))
        for s in (sessions.stored_session(row, at) for row in store.class_sessions())
        if s.lesson is None
    ]
    return sorted(lessons + alone, key=lambda lesson: (lesson.created_at, lesson.code))[::-1]


def start(store: Store, code: str) -> Session:
    """Open answers of the question in its lobby (its countdown, if any, starts now)."""
    _, session = resolve(store, code)
    if session.state != LOBBY:
        raise ValueError(f"{session.code} is {session.state}, not in its lobby: nothing started")
    store.start_class_session(session.code)
    return sessions.require_session(store, session.code)


def lock(store: Store, code: str) -> Session:
    """Stop answers to the question (already locked: nothing changes)."""
    _, session = resolve(store, code)
    if session.state == REVEALED:
        raise ValueError(f"{session.code} is already revealed")
    store.close_class_session(session.code)
    return sessions.require_session(store, session.code)


def reveal(store: Store, code: str) -> Session:
    """Show the question's result to the room and to those who answered (locks it first)."""
    _, session = resolve(store, code)
    store.close_class_session(session.code, reveal=True)
    return sessions.require_session(store, session.code)


def set_timer(store: Store, code: str, seconds: int | None) -> Session:
    """Give the question a countdown (0 or None: none): while it takes answers, from now;
    in its lobby, from its start."""
    _, session = resolve(store, code)
    seconds = sessions.checked_seconds(seconds)
    if session.state not in (LOBBY, ANSWERING):
        raise ValueError(f"{session.code} is {session.state}: it takes no answers to time")
    if not store.set_class_timer(session.code, seconds):
        raise ValueError(f"{session.code} stopped taking answers just now: nothing changed")
    return sessions.require_session(store, session.code)


def next_question(store: Store, code: str) -> Session:
    """Lock the question on screen (if it still takes answers) and open the next one."""
    lesson, _ = resolve(store, code)
    if not lesson.has_next:
        where = "a session on its own" if lesson.single else "at its last question"
        raise ValueError(f"{lesson.code} is {where}: there is no next question")
    position = store.next_class_question(lesson.code)
    if position is None:
        raise ValueError(f"{lesson.code} has no next question")
    return sessions.require_session(store, lesson.questions[position - 1].code)


def delete(store: Store, code: str) -> Lesson:
    """A lesson with all its questions, or a session on its own, with everything answered
    and the class runs that asked models its questions; a question of a lesson alone is
    refused (the lesson would have a hole)."""
    lesson, session = resolve(store, code)
    if not lesson.single and sessions.normal_code(code) != lesson.code:
        raise ValueError(
            f"{session.code} is {lesson.place(session)} of lesson {lesson.code}: delete the "
            f"lesson (`cogbias class delete {lesson.code}`)"
        )
    with store.atomic():
        for question in lesson.questions:
            sessions.delete_session(store, question.code)
        if not lesson.single or lesson.questions[0].lesson is not None:
            store.delete_class_lesson(lesson.code)
    return lesson


STATE_WORDS = {
    LOBBY: "in the lobby (participants join; answers not open yet)",
    ANSWERING: "taking answers",
    LOCKED: "answers locked",
    REVEALED: "revealed",
}
