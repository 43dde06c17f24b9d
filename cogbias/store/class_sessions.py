"""A class's sessions, each participant's condition and their one answer (migrations 12, 14,
15; a lesson's states and questions are `store.class_lessons`).

`cogbias.classroom.sessions` is the only caller: it turns these rows into a session's
question and results. Every write is one short transaction, so the participant server and
the teacher's app, two processes on one file, never see half of one.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from cogbias.store.connection import StoreBase, now, parse_time


@dataclass(frozen=True)
class StoredSession:
    """One session's row: its question is JSON for `classroom.questions.Question`."""

    code: str
    question: str
    created_at: str
    closed_at: str | None
    revealed_at: str | None
    started_at: str | None = None  # answers opened (None: in the lobby)
    seconds: int | None = None  # the countdown's length (None: no timer)
    deadline: str | None = None  # when the countdown locks answers
    lesson: str | None = None  # the lesson's code (None: a session on its own)
    position: int | None = None  # 1-based, in its lesson


@dataclass(frozen=True)
class StoredAnswer:
    """One participant's answer (the option's key, or a number as text)."""

    condition: str
    answer: str
    created_at: str


JOIN_URL_KEY = "class_join_url"  # one record per running server: KEY:started:random
MAX_PENDING = 2000  # participants of a session who opened the question but have not answered
_PRUNE_EVERY = 100  # places handed out between two prunings of the oldest unanswered
SESSION_COLUMNS = (
    "code, question, created_at, closed_at, revealed_at, started_at, seconds, deadline, lesson, "
    "position"
)


class ClassSessionsRepo(StoreBase):
    """`class_sessions`, `class_assignments` and `class_answers`."""

    def add_class_session(
        self, code: str, question: str, start: bool = True, seconds: int | None = None
    ) -> bool:
        """Store a new session, taking answers at once (`start`) or in its lobby; False when
        the code is taken by a session or a lesson (the caller draws another)."""
        with self.atomic():
            if self.class_code_taken(code):
                return False
            self._insert_class_session(code, question, now(), seconds, start)
            return True

    def class_code_taken(self, code: str) -> bool:
        """Whether a session or a lesson has this code."""
        return bool(
            self.db.execute(
                "select 1 from class_sessions where code = ? union all "
                "select 1 from class_lessons where code = ?",
                (code, code),
            ).fetchone()
        )

    def _insert_class_session(
        self,
        code: str,
        question: str,
        at: str,
        seconds: int | None,
        start: bool,
        lesson: str | None = None,
        position: int | None = None,
    ) -> None:
        self.db.execute(
            "insert into class_sessions (code, question, created_at, seed, seconds, lesson, "
            "position) values (?, ?, ?, ?, ?, ?, ?)",
            (code, question, at, secrets.randbits(62), seconds, lesson, position),
        )
        if start:
            self.start_class_session(code, at)

    def class_session(self, code: str) -> StoredSession | None:
        row = self.db.execute(
            f"select {SESSION_COLUMNS} from class_sessions where code = ?", (code,)
        ).fetchone()
        return StoredSession(*row) if row else None

    def class_sessions(self) -> list[StoredSession]:
        """Every session, newest first."""
        rows = self.db.execute(
            f"select {SESSION_COLUMNS} from class_sessions order by created_at desc, code"
        ).fetchall()
        return [StoredSession(*row) for row in rows]

    def close_class_session(self, code: str, reveal: bool = False, at: str | None = None) -> None:
        """Lock answers (the first lock is kept: a countdown that ran out locked it at its
        deadline); `reveal` also marks it revealed."""
        at = at or now()
        with self.atomic():
            self.db.execute(
                "update class_sessions set closed_at = coalesce(closed_at, case when "
                "deadline is not null and deadline < ? then deadline else ? end) where code = ?",
                (at, at, code),
            )
            if reveal:
                self.db.execute(
                    "update class_sessions set revealed_at = coalesce(revealed_at, ?) "
                    "where code = ?",
                    (at, code),
                )

    def start_class_session(self, code: str, at: str | None = None) -> bool:
        """Open answers of a session in its lobby, its countdown (if it has one) running
        from `at`; False when it was not in its lobby (already started, or locked)."""
        at = at or now()
        with self.atomic():
            row = self.db.execute(
                "select seconds from class_sessions where code = ? and started_at is null "
                "and closed_at is null",
                (code,),
            ).fetchone()
            if row is None:
                return False
            self.db.execute(
                "update class_sessions set started_at = ?, deadline = ? where code = ?",
                (at, after(at, row[0]), code),
            )
            return True

    def set_class_timer(self, code: str, seconds: int | None, at: str | None = None) -> bool:
        """Give a session a countdown of `seconds` (None: none). While it takes answers the
        countdown starts again from `at`; in the lobby it starts with the answers. False
        when it no longer takes answers (locked, or its countdown ran out): nothing changes."""
        at = at or now()
        with self.atomic():
            row = self.db.execute(
                "select started_at from class_sessions where code = ? and closed_at is null "
                "and (deadline is null or deadline > ?)",
                (code, at),
            ).fetchone()
            if row is None:
                return False
            deadline = after(at, seconds) if row[0] is not None else None
            self.db.execute(
                "update class_sessions set seconds = ?, deadline = ? where code = ?",
                (seconds, deadline, code),
            )
            return True

    def delete_class_session(self, code: str) -> None:
        """The session and everything answered in it, by the class and by models."""
        with self.atomic():
            for table in ("class_answers", "class_assignments", "class_model_answers"):
                self.db.execute(f"delete from {table} where session = ?", (code,))
            self.db.execute("delete from class_sessions where code = ?", (code,))

    def assign_class_condition(
        self,
        code: str,
        token_hash: str,
        condition_at: Callable[[int, int], str],
        admit: Callable[[], bool] | None = None,
    ) -> str | None:
        """This participant's condition: the one they already have, else the one at the
        session's next place, `condition_at(seed, place)` (a balanced sequence), so a new
        participant takes the next place and never a choice. None when `admit` (asked only
        for a new participant) refuses them. Every so many places the oldest unanswered
        participants beyond `MAX_PENDING` are forgotten, so unanswered ones cannot fill
        the file."""
        with self.atomic():
            row = self.db.execute(
                "select condition from class_assignments where session = ? and token_hash = ?",
                (code, token_hash),
            ).fetchone()
            if row:
                return str(row[0])
            if admit is not None and not admit():
                return None
            seed, place = self.db.execute(
                "select coalesce(seed, 0), slots from class_sessions where code = ?", (code,)
            ).fetchone()
            condition = condition_at(int(seed), int(place))
            self.db.execute("update class_sessions set slots = slots + 1 where code = ?", (code,))
            self.db.execute(
                "insert into class_assignments (session, token_hash, condition, created_at) "
                "values (?, ?, ?, ?)",
                (code, token_hash, condition, now()),
            )
            if place % _PRUNE_EVERY == _PRUNE_EVERY - 1:
                self.prune_class_pending(code, MAX_PENDING)
            return condition

    def prune_class_pending(self, code: str, keep: int) -> int:
        """Forget all but the newest `keep` participants who have not answered (they get a
        new place if they come back); how many were forgotten."""
        with self.atomic():
            cursor = self.db.execute(
                "delete from class_assignments where rowid in (select a.rowid from "
                "class_assignments a where a.session = ? and not exists (select 1 from "
                "class_answers b where b.session = a.session and b.token_hash = a.token_hash) "
                "order by a.rowid desc limit -1 offset ?)",
                (code, keep),
            )
            return cursor.rowcount

    def add_class_throttled(self, counts: Mapping[str, int]) -> None:
        """Add to each session's count of requests refused as too fast (unknown codes are
        ignored)."""
        with self.atomic():
            self.db.conn.executemany(
                "update class_sessions set throttled = throttled + ? where code = ?",
                [(n, code) for code, n in counts.items()],
            )

    def class_throttled(self, code: str) -> int:
        row = self.db.execute(
            "select throttled from class_sessions where code = ?", (code,)
        ).fetchone()
        return int(row[0]) if row else 0

    def class_assignment(self, code: str, token_hash: str) -> str | None:
        row = self.db.execute(
            "select condition from class_assignments where session = ? and token_hash = ?",
            (code, token_hash),
        ).fetchone()
        return str(row[0]) if row else None

    def save_class_answer(
        self, code: str, token_hash: str, answer: str, at: str | None = None
    ) -> bool:
        """Store the participant's one answer under their assigned condition, only while the
        session takes answers (started, not locked, its countdown not run out at `at`);
        False when they already answered, have no condition or it does not take answers."""
        at = at or now()
        with self.atomic():
            cursor = self.db.execute(
                "insert or ignore into class_answers "
                "(session, token_hash, condition, answer, created_at) "
                "select a.session, a.token_hash, a.condition, ?, ? from class_assignments a "
                "join class_sessions s on s.code = a.session "
                "where a.session = ? and a.token_hash = ? and s.closed_at is null "
                "and s.started_at is not null and (s.deadline is null or s.deadline > ?)",
                (answer, at, code, token_hash, at),
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

    def class_joined_counts(self, code: str) -> dict[str, int]:
        """Participants placed so far per condition (those who opened the question)."""
        rows = self.db.execute(
            "select condition, count(*) from class_assignments where session = ? "
            "group by condition",
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

    def set_class_join_url(self, url: str) -> str:
        """Record where a running `cogbias class serve` lets participants join, for the
        teacher's page; the record's key, which only that server clears when it stops (two
        servers on one file each keep their own)."""
        key = f"{JOIN_URL_KEY}:{now()}:{secrets.token_hex(4)}"
        with self.atomic():
            self.db.execute("insert into meta (key, value) values (?, ?)", (key, url))
        return key

    def clear_class_join_url(self, key: str) -> None:
        """Forget one server's join address when it stops."""
        with self.atomic():
            self.db.execute("delete from meta where key = ?", (key,))

    def class_join_url(self) -> str | None:
        """The join address of the server started last among those still running (or of a
        record an earlier version kept under the bare key)."""
        row = self.db.execute(
            "select value from meta where key = ? or substr(key, 1, ?) = ? "
            "order by key desc limit 1",
            (JOIN_URL_KEY, len(JOIN_URL_KEY) + 1, f"{JOIN_URL_KEY}:"),
        ).fetchone()
        return str(row[0]) if row else None


def after(at: str, seconds: int | None) -> str | None:
    """The stored time `seconds` after `at` (None without seconds)."""
    if not seconds:
        return None
    return (parse_time(at) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
