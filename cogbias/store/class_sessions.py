"""A class's sessions, each participant's condition and their one answer (migration 12).

`cogbias.classroom.sessions` is the only caller: it turns these rows into a session's
question and results. Every write is one short transaction, so the participant server and
the teacher's app, two processes on one file, never see half of one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from cogbias.store.connection import StoreBase, now


@dataclass(frozen=True)
class StoredSession:
    """One session's row: its question is JSON for `classroom.questions.Question`."""

    code: str
    question: str
    created_at: str
    closed_at: str | None
    revealed_at: str | None


@dataclass(frozen=True)
class StoredAnswer:
    """One participant's answer (the option's key, or a number as text)."""

    condition: str
    answer: str
    created_at: str


JOIN_URL_KEY = "class_join_url"
_SESSION_COLUMNS = "code, question, created_at, closed_at, revealed_at"


class ClassSessionsRepo(StoreBase):
    """`class_sessions`, `class_assignments` and `class_answers`."""

    def add_class_session(self, code: str, question: str) -> bool:
        """Store a new session; False when the code is taken (the caller draws another)."""
        with self.atomic():
            cursor = self.db.execute(
                "insert or ignore into class_sessions (code, question, created_at) "
                "values (?, ?, ?)",
                (code, question, now()),
            )
            return cursor.rowcount == 1

    def class_session(self, code: str) -> StoredSession | None:
        row = self.db.execute(
            f"select {_SESSION_COLUMNS} from class_sessions where code = ?", (code,)
        ).fetchone()
        return StoredSession(*row) if row else None

    def class_sessions(self) -> list[StoredSession]:
        """Every session, newest first."""
        rows = self.db.execute(
            f"select {_SESSION_COLUMNS} from class_sessions order by created_at desc, code"
        ).fetchall()
        return [StoredSession(*row) for row in rows]

    def close_class_session(self, code: str, reveal: bool = False) -> None:
        """Stop answers (the first close time is kept); `reveal` also marks it revealed."""
        at = now()
        with self.atomic():
            self.db.execute(
                "update class_sessions set closed_at = coalesce(closed_at, ?) where code = ?",
                (at, code),
            )
            if reveal:
                self.db.execute(
                    "update class_sessions set revealed_at = coalesce(revealed_at, ?) "
                    "where code = ?",
                    (at, code),
                )

    def delete_class_session(self, code: str) -> None:
        """The session and everything answered in it, by the class and by models."""
        with self.atomic():
            for table in ("class_answers", "class_assignments", "class_model_answers"):
                self.db.execute(f"delete from {table} where session = ?", (code,))
            self.db.execute("delete from class_sessions where code = ?", (code,))

    def assign_class_condition(
        self, code: str, token_hash: str, conditions: Sequence[str], rng: random.Random
    ) -> str:
        """This participant's condition: the one they already have, else the condition with
        the fewest participants so far (ties drawn with `rng`), so the room stays balanced."""
        with self.atomic():
            row = self.db.execute(
                "select condition from class_assignments where session = ? and token_hash = ?",
                (code, token_hash),
            ).fetchone()
            if row:
                return str(row[0])
            taken = dict(
                self.db.execute(
                    "select condition, count(*) from class_assignments where session = ? "
                    "group by condition",
                    (code,),
                ).fetchall()
            )
            fewest = min(taken.get(c, 0) for c in conditions)
            condition = rng.choice([c for c in conditions if taken.get(c, 0) == fewest])
            self.db.execute(
                "insert into class_assignments (session, token_hash, condition, created_at) "
                "values (?, ?, ?, ?)",
                (code, token_hash, condition, now()),
            )
            return condition

    def class_assignment(self, code: str, token_hash: str) -> str | None:
        row = self.db.execute(
            "select condition from class_assignments where session = ? and token_hash = ?",
            (code, token_hash),
        ).fetchone()
        return str(row[0]) if row else None

    def save_class_answer(self, code: str, token_hash: str, answer: str) -> bool:
        """Store the participant's one answer under their assigned condition, only while the
        session is open; False when they already answered, have no condition or it closed."""
        with self.atomic():
            cursor = self.db.execute(
                "insert or ignore into class_answers "
                "(session, token_hash, condition, answer, created_at) "
                "select a.session, a.token_hash, a.condition, ?, ? from class_assignments a "
                "join class_sessions s on s.code = a.session "
                "where a.session = ? and a.token_hash = ? and s.closed_at is null",
                (answer, now(), code, token_hash),
            )
            return cursor.rowcount == 1

    def class_answer_of(self, code: str, token_hash: str) -> str | None:
        row = self.db.execute(
            "select answer from class_answers where session = ? and token_hash = ?",
            (code, token_hash),
        ).fetchone()
        return str(row[0]) if row else None

    def class_answer_counts(self, code: str) -> dict[str, int]:
        """Answers so far per condition (conditions nobody answered are absent)."""
        rows = self.db.execute(
            "select condition, count(*) from class_answers where session = ? group by condition",
            (code,),
        ).fetchall()
        return {str(c): int(n) for c, n in rows}

    def class_answers(self, code: str) -> list[StoredAnswer]:
        """Every answer of a session, in the order they came."""
        rows = self.db.execute(
            "select condition, answer, created_at from class_answers where session = ? "
            "order by created_at, rowid",
            (code,),
        ).fetchall()
        return [StoredAnswer(*row) for row in rows]

    def set_class_join_url(self, url: str) -> None:
        """Where participants join (the running `cogbias class serve`), for the teacher's page."""
        with self.atomic():
            self.db.execute(
                "insert into meta (key, value) values (?, ?) "
                "on conflict(key) do update set value = excluded.value",
                (JOIN_URL_KEY, url),
            )

    def clear_class_join_url(self, url: str) -> None:
        """Forget the join address when its server stops (unless another took its place)."""
        with self.atomic():
            self.db.execute("delete from meta where key = ? and value = ?", (JOIN_URL_KEY, url))

    def class_join_url(self) -> str | None:
        row = self.db.execute("select value from meta where key = ?", (JOIN_URL_KEY,)).fetchone()
        return str(row[0]) if row else None
