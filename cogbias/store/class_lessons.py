"""A lesson: several class sessions in a row under one code (migration 15).

Participants type the lesson's code and always see its current question; each question is a
session of its own (`{code}-{n}`), with its own balanced order, answers and states, so
everything a session has (results, class runs, reports, export) works per question. Moving
to the next question locks the one on screen and starts the next in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cogbias.store.class_sessions import SESSION_COLUMNS, ClassSessionsRepo, StoredSession
from cogbias.store.connection import now


@dataclass(frozen=True)
class StoredLesson:
    code: str
    created_at: str
    current: int  # the 1-based position of the question on screen


def question_code(lesson: str, position: int) -> str:
    """The code of a lesson's question: `ABCDEF-2`."""
    return f"{lesson}-{position}"


class ClassLessonsRepo(ClassSessionsRepo):
    """`class_lessons`, and the sessions that are a lesson's questions."""

    def add_class_lesson(
        self, code: str, questions: Sequence[str], seconds: int | None, start: bool
    ) -> bool:
        """Store a lesson of these questions (JSON each), the first taking answers at once
        (`start`) or in its lobby; False when the code is taken."""
        at = now()
        with self.atomic():
            taken = [question_code(code, i) for i in range(1, len(questions) + 1)]
            if any(self.class_code_taken(c) for c in (code, *taken)):
                return False
            self.db.execute(
                "insert into class_lessons (code, created_at, current) values (?, ?, 1)",
                (code, at),
            )
            for position, question in enumerate(questions, 1):
                self._insert_class_session(
                    question_code(code, position), question, at, seconds,
                    start and position == 1, code, position,
                )  # fmt: skip
            return True

    def class_lesson(self, code: str) -> StoredLesson | None:
        row = self.db.execute(
            "select code, created_at, current from class_lessons where code = ?", (code,)
        ).fetchone()
        return StoredLesson(*row) if row else None

    def class_lessons(self) -> list[StoredLesson]:
        """Every lesson, newest first."""
        rows = self.db.execute(
            "select code, created_at, current from class_lessons order by created_at desc, code"
        ).fetchall()
        return [StoredLesson(*row) for row in rows]

    def class_lesson_sessions(self, code: str) -> list[StoredSession]:
        """A lesson's questions, in order."""
        rows = self.db.execute(
            f"select {SESSION_COLUMNS} from class_sessions where lesson = ? order by position",
            (code,),
        ).fetchall()
        return [StoredSession(*row) for row in rows]

    def next_class_question(self, code: str, at: str | None = None) -> int | None:
        """Lock the question on screen (if it still takes answers) and start the next one;
        its position, or None when the lesson has no next question (nothing changes)."""
        at = at or now()
        with self.atomic():
            row = self.db.execute(
                "select current from class_lessons where code = ?", (code,)
            ).fetchone()
            if row is None:
                return None
            current = int(row[0])
            following = question_code(code, current + 1)
            if self.class_session(following) is None:
                return None
            self.close_class_session(question_code(code, current), at=at)
            self.db.execute(
                "update class_lessons set current = ? where code = ?", (current + 1, code)
            )
            self.start_class_session(following, at)
            return current + 1

    def delete_class_lesson(self, code: str) -> None:
        """The lesson and every question of it, with all that was answered (one transaction)."""
        with self.atomic():
            for session in self.class_lesson_sessions(code):
                self.delete_class_session(session.code)
            self.db.execute("delete from class_lessons where code = ?", (code,))
