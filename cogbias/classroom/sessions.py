"""Class sessions: open one on a question, let participants answer once each under a
balanced condition, lock it, reveal it, and read the class's result beside the humans.

A session moves lobby -> answering -> locked -> revealed (`Session.state`, read from its
row and the time: a countdown that ran out has locked it). Several sessions in a row under
one code are a lesson (`classroom.lessons`).

The teacher's page, the command and the participant server all go through these functions;
the rows live in `store.class_sessions`. A session is named by a short code that reads
unambiguously aloud and off a projector (no 0/O, no 1/I).
"""

from __future__ import annotations

import csv
import hashlib
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.classroom.answer_reading import answers_by_condition, read_answer
from cogbias.classroom.pool import PoolPart, pool_results
from cogbias.classroom.questions import Question
from cogbias.classroom.reveal import option_labels
from cogbias.core.outputs import replacing
from cogbias.core.safetext import csv_cell
from cogbias.store import Store, now, parse_time
from cogbias.store.class_sessions import StoredSession
from cogbias.studies import condition_summary as summary
from cogbias.studies.condition_summary import ConditionSummary
from cogbias.studies.references import load_references

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
# A session's states, in order: participants join (lobby), answer, are stopped (locked: by the
# teacher or by the countdown), and see the result (revealed).
LOBBY, ANSWERING, LOCKED, REVEALED = "lobby", "answering", "locked", "revealed"
STATES = (LOBBY, ANSWERING, LOCKED, REVEALED)
MIN_SECONDS, MAX_SECONDS = 5, 3600  # a countdown's length


@dataclass(frozen=True)
class Session:
    """One question a class answers, as stored, and its state when it was read (`read_at`:
    a countdown that ran out by then has locked it, whether or not anyone wrote since)."""

    code: str
    question: Question
    created_at: str
    closed_at: str | None
    revealed_at: str | None
    started_at: str | None = None
    seconds: int | None = None
    deadline: str | None = None
    lesson: str | None = None
    position: int | None = None
    read_at: str = ""

    @property
    def state(self) -> str:
        if self.revealed_at is not None:
            return REVEALED
        if self.closed_at is not None or self.timed_out:
            return LOCKED
        return LOBBY if self.started_at is None else ANSWERING

    @property
    def timed_out(self) -> bool:
        return self.deadline is not None and bool(self.read_at) and self.deadline <= self.read_at

    @property
    def open(self) -> bool:
        """It takes answers now."""
        return self.state == ANSWERING

    @property
    def revealed(self) -> bool:
        return self.revealed_at is not None

    @property
    def locked_at(self) -> str | None:
        """When answers stopped: the teacher's lock, or the countdown's end."""
        if self.closed_at is not None:
            return self.closed_at
        return self.deadline if self.timed_out else None

    def seconds_left(self) -> float | None:
        """Of its countdown, when it was read (None: no countdown running)."""
        if self.deadline is None or self.state != ANSWERING or not self.read_at:
            return None
        return max(0.0, (parse_time(self.deadline) - parse_time(self.read_at)).total_seconds())


# The names the participant pages (`classroom/pages.py`) read the class's and the humans'
# rows by: both are the one summary every group gets (`studies.condition_summary`).
ConditionResult = HumanResult = ConditionSummary


@dataclass(frozen=True)
class ClassResults:
    """A session's results: per condition the class, the humans beside it (where the
    question is an original's) and every model's answers, each asked way apart; and, when
    asked for, every class that answered the same question pooled (`classroom.pool`)."""

    code: str
    question: Question
    conditions: list[ConditionSummary]
    humans: list[ConditionSummary]
    citation: str = ""
    models: list[ConditionSummary] = field(default_factory=list)
    pool: list[ConditionSummary] = field(default_factory=list)
    pool_parts: list[PoolPart] = field(default_factory=list)

    @property
    def pooled_others(self) -> bool:
        """The pool holds another class than this one (else it only repeats this class)."""
        return any(part.code != self.code for part in self.pool_parts)


def normal_code(code: str) -> str:
    """A code as typed (any case, spaces) in its stored form."""
    return "".join(code.split()).upper()[: CODE_LENGTH * 2]


def token_hash(code: str, token: str) -> str:
    """What is stored of a participant's cookie token: its hash with the session's code, so
    the database alone cannot be used to answer as someone else, nor tie one person's
    answers in two sessions together."""
    return hashlib.sha256(f"{code}\n{token}".encode("utf-8", "replace")).hexdigest()


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def open_session(
    store: Store, question: Question, start: bool = True, seconds: int | None = None
) -> str:
    """Store a session on `question` and return its code: taking answers at once, or in its
    lobby until it is started (`start` False); with a countdown of `seconds` from then."""
    seconds = checked_seconds(seconds)
    while True:
        code = new_code()
        if store.add_class_session(code, question.to_json(), start, seconds):
            return code


def checked_seconds(seconds: int | None) -> int | None:
    """A countdown's length, or ValueError naming the range (0 or None: no countdown)."""
    if not seconds:
        return None
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise ValueError(
            f"a countdown of {seconds} s is not one a class can use: give {MIN_SECONDS} to "
            f"{MAX_SECONDS} seconds (or 0 for none)"
        )
    return int(seconds)


def stored_session(row: StoredSession, at: str | None = None) -> Session:
    """A stored row as a `Session` in its state at `at` (default: now)."""
    return Session(
        row.code,
        Question.from_json(row.question),
        row.created_at,
        row.closed_at,
        row.revealed_at,
        row.started_at,
        row.seconds,
        row.deadline,
        row.lesson,
        row.position,
        at or now(),
    )


def get_session(store: Store, code: str, at: str | None = None) -> Session | None:
    row = store.class_session(normal_code(code))
    return None if row is None else stored_session(row, at)


def require_session(store: Store, code: str) -> Session:
    """The session, or KeyError naming the code (the command prints it)."""
    session = get_session(store, code)
    if session is None:
        raise KeyError(f"no class session with code '{normal_code(code)}' in {store.path}")
    return session


def list_sessions(store: Store) -> list[Session]:
    """Every session (a lesson's questions too), newest first."""
    at = now()
    return [stored_session(row, at) for row in store.class_sessions()]


def close_session(store: Store, code: str) -> None:
    """Lock answers (a countdown that ran out already did, at its end)."""
    store.close_class_session(require_session(store, code).code)


def reveal_session(store: Store, code: str) -> None:
    """Closes it too: an answer given after the split is shown would not be blind."""
    store.close_class_session(require_session(store, code).code, reveal=True)


def delete_session(store: Store, code: str) -> None:
    """The session, its answers, and the class runs that asked models its question (with
    their answers), in one transaction; refused while such a run is still asking."""
    from cogbias.classroom.models import class_runs
    from cogbias.runs import deletion
    from cogbias.runs.summaries import run_summary

    session = require_session(store, code)
    runs = [run.id for run in class_runs(store, session.code)]
    busy = [r for r in runs if (run := run_summary(store, r)) is not None and run.active]
    if busy:
        raise ValueError(
            f"class run {busy[0]} is still asking models this session's question: cancel it "
            f"first (`cogbias cancel {busy[0]}`), then delete the session"
        )
    with store.atomic():
        for run_id in runs:  # each as its kind declares its rows (`runs.deletion`)
            deletion.apply(store, deletion.plan_run(store, run_id))
        store.delete_class_session(session.code)


def throttled_count(store: Store, code: str) -> int:
    """Requests to this session the participant server refused as too fast (one address
    joining or answering faster than a room does): the teacher's page flags them."""
    return store.class_throttled(normal_code(code))


def count_answers(store: Store, code: str) -> dict[str, int]:
    """Answers so far per condition, every condition named (what the live count shows)."""
    session = require_session(store, code)
    counts = store.class_answer_counts(session.code)
    return {c: counts.get(c, 0) for c in session.question.conditions}


class Throttled(Exception):
    """A new participant was refused a place: too many joined from their address just now."""


def balanced_condition(conditions: Sequence[str], seed: int, place: int) -> str:
    """The condition at `place` of a session's sequence: blocks of one of each condition,
    each block shuffled with the session's seed, so any stretch of participants is balanced
    to within one block, whoever asks and however often."""
    block, index = divmod(place, len(conditions))
    order = list(conditions)
    random.Random(f"{seed}:{block}").shuffle(order)
    return order[index]


def assign_condition(
    store: Store, session: Session, token: str, admit: Callable[[], bool] | None = None
) -> str:
    """The participant's condition: kept per token, so a reload shows the same question; a
    new token takes the session's next place (`balanced_condition`). `admit` is asked only
    for a new participant (the server's rate limit); Throttled when it refuses."""
    hashed = token_hash(session.code, token)
    kept = store.class_assignment(session.code, hashed)  # a read: a reload writes nothing
    if kept is not None:
        return kept
    conditions = session.question.conditions
    condition = store.assign_class_condition(
        session.code, hashed, lambda seed, place: balanced_condition(conditions, seed, place), admit
    )
    if condition is None:
        raise Throttled(session.code)
    return condition


def condition_of(store: Store, session: Session, token: str) -> str | None:
    """The participant's condition, if they opened the question (without assigning one)."""
    return store.class_assignment(session.code, token_hash(session.code, token))


def answer_of(store: Store, session: Session, token: str) -> str | None:
    """The participant's stored answer, if they gave one."""
    return store.class_answer_of(session.code, token_hash(session.code, token))


def submit_answer(
    store: Store, session: Session, token: str, raw: str, at: str | None = None
) -> str:
    """Store a participant's answer (read by `answer_reading.read_answer`) if the session
    takes answers at `at` (default: now); what happened, as one word: "saved", "invalid"
    (not one of the answers), "already" (one answer per participant), "closed" (it takes
    none: lobby, locked, countdown run out) or "unassigned"."""
    answer = read_answer(session.question, raw).stored
    if answer is None:
        return "invalid"
    hashed = token_hash(session.code, token)
    if store.save_class_answer(session.code, hashed, answer, at):
        return "saved"
    if store.class_answer_of(session.code, hashed) is not None:
        return "already"
    if store.class_assignment(session.code, hashed) is None:
        return "unassigned"
    return "closed"


def results(store: Store, code: str, pool: bool = False) -> ClassResults:
    """The class per condition, the humans beside them where the question has a reference,
    the models' answers (`classroom.models.model_summaries`) and, with `pool`, every class
    that answered the same question, pooled (`classroom.pool`)."""
    from cogbias.classroom.models import model_summaries

    session = require_session(store, code)
    question = session.question
    by_condition = answers_by_condition(store, session.code, question)
    rows = [_class_summary(question, c, by_condition[c]) for c in question.conditions]
    humans, citation = _humans(question)
    models = model_summaries(store, session.code, question)
    pooled, parts = pool_results(store, session.code, question) if pool else ([], [])
    return ClassResults(session.code, question, rows, humans, citation, models, pooled, parts)


def _class_summary(question: Question, condition: str, answers: list[float]) -> ConditionSummary:
    """The class's stored answers (each valid when it was stored: `read_answer`)."""
    if question.kind == "number":
        return summary.of_numbers(question, condition, summary.CLASS, answers)
    return summary.of_choices(question, condition, summary.CLASS, [int(a) for a in answers])


def _humans(question: Question) -> tuple[list[ConditionSummary], str]:
    reference = load_references().get(question.reference or "")
    if reference is None:
        return [], ""
    rows = []
    for ours in question.conditions:  # in the question's order, as the class's rows
        human = reference.conditions.get(question.reference_conditions.get(ours, ""))
        if human is not None:
            rows.append(summary.of_reference(question, ours, human))
    return rows, f"{reference.citation} ({reference.where})"


def results_json(result: ClassResults) -> dict[str, Any]:
    """The results as JSON-able data (NaN, where nobody answered, as null): the class, the
    humans and the models per condition, each with its answers that could not be read and
    the labels of its condition's options (`reveal.option_labels`); with the pool, when it
    was asked for, each pooled session's n."""
    question = result.question
    labels = option_labels(question)

    def rows(summaries: list[ConditionSummary]) -> list[dict[str, Any]]:
        return [row.to_json() | {"option_labels": list(labels[row.condition])} for row in summaries]

    data = {
        "code": result.code,
        "title": question.title,
        "kind": question.kind,
        "conditions": list(question.conditions),
        "labels": {c: question.label(c) for c in question.conditions},
        "options": {c: list(o) for c, o in question.options.items()},
        "option_labels": {c: list(o) for c, o in labels.items()},
        "keys": list(question.keys),
        "class": rows(result.conditions),
        "humans": rows(result.humans),
        "humans_citation": result.citation,
        # n_failed: what the models' rows called their unreadable answers before
        "models": [row | {"n_failed": row["n_unreadable"]} for row in rows(result.models)],
    }
    if result.pool_parts:
        data["pool"] = {
            "who": summary.POOLED,
            "sessions": [part.to_json() for part in result.pool_parts],
            "conditions": rows(result.pool),
        }
    return data


EXPORT_COLUMNS = (
    "session",
    "question",
    "condition",
    "condition_label",
    "answer",
    "option",
    "option_label",
    "answered_at",
)


def export_csv(store: Store, code: str, path: str | Path, force: bool = False) -> Path:
    """One row per answer, anonymous as stored; cells safe for a spreadsheet."""
    session = require_session(store, code)
    question = session.question
    labels = option_labels(question)
    with replacing(path, force, protect=[store.path]) as temporary:
        with temporary.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(EXPORT_COLUMNS)
            for answer in store.class_answers(session.code):
                index = question.option_index(answer.answer)
                options = question.options.get(answer.condition, ())
                option = options[index] if index is not None and index < len(options) else ""
                shown = labels.get(answer.condition, ())
                label = shown[index] if index is not None and index < len(shown) else ""
                row = (
                    session.code,
                    question.title,
                    answer.condition,
                    question.label(answer.condition),
                    answer.answer,
                    option,
                    label,
                    answer.created_at,
                )
                writer.writerow([csv_cell(cell) for cell in row])
    return Path(path)


def join_base(store: Store) -> str | None:
    """Where `cogbias class serve` said participants join (None before it first ran)."""
    return store.class_join_url()


def join_url(base: str, code: str) -> str:
    return f"{base.rstrip('/')}/s/{normal_code(code)}"
