"""Class sessions: open one on a question, let participants answer once each under a
balanced condition, close it, reveal it, and read the class's result beside the humans.

The teacher's page, the command and the participant server all go through these functions;
the rows live in `store.class_sessions`. A session is named by a short code that reads
unambiguously aloud and off a projector (no 0/O, no 1/I).
"""

from __future__ import annotations

import csv
import hashlib
import math
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.classroom.questions import Question
from cogbias.core.outputs import replacing
from cogbias.core.safetext import csv_cell
from cogbias.store import Store
from cogbias.studies import condition_summary as summary
from cogbias.studies.condition_summary import ConditionSummary
from cogbias.studies.references import load_references

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
MAX_ANSWER_CHARS = 40  # an option key or a number: anything longer is not an answer
# The bound of a number answer whose question states none (a session stored before every
# number question had bounds): no count, price or estimate a class gives comes near it.
NUMBER_LIMIT = 1e6


@dataclass(frozen=True)
class Session:
    code: str
    question: Question
    created_at: str
    closed_at: str | None
    revealed_at: str | None

    @property
    def open(self) -> bool:
        return self.closed_at is None

    @property
    def revealed(self) -> bool:
        return self.revealed_at is not None


# The names the participant pages (`classroom/pages.py`) read the class's and the humans'
# rows by: both are the one summary every group gets (`studies.condition_summary`).
ConditionResult = HumanResult = ConditionSummary


@dataclass(frozen=True)
class ClassResults:
    """A session's results: per condition the class, the humans beside it (where the
    question is an original's) and every model's answers, each asked way apart."""

    code: str
    question: Question
    conditions: list[ConditionSummary]
    humans: list[ConditionSummary]
    citation: str = ""
    models: list[ConditionSummary] = field(default_factory=list)


def normal_code(code: str) -> str:
    """A code as typed (any case, spaces) in its stored form."""
    return "".join(code.split()).upper()[: CODE_LENGTH * 2]


def token_hash(code: str, token: str) -> str:
    """What is stored of a participant's cookie token: its hash with the session's code, so
    the database alone cannot be used to answer as someone else, nor tie one person's
    answers in two sessions together."""
    return hashlib.sha256(f"{code}\n{token}".encode("utf-8", "replace")).hexdigest()


def open_session(store: Store, question: Question) -> str:
    """Store a session on `question` and return its code."""
    while True:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if store.add_class_session(code, question.to_json()):
            return code


def get_session(store: Store, code: str) -> Session | None:
    row = store.class_session(normal_code(code))
    if row is None:
        return None
    return Session(
        row.code, Question.from_json(row.question), row.created_at, row.closed_at, row.revealed_at
    )


def require_session(store: Store, code: str) -> Session:
    """The session, or KeyError naming the code (the command prints it)."""
    session = get_session(store, code)
    if session is None:
        raise KeyError(f"no class session with code '{normal_code(code)}' in {store.path}")
    return session


def list_sessions(store: Store) -> list[Session]:
    """Every session, newest first."""
    return [
        Session(r.code, Question.from_json(r.question), r.created_at, r.closed_at, r.revealed_at)
        for r in store.class_sessions()
    ]


def close_session(store: Store, code: str) -> None:
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


def submit_answer(store: Store, session: Session, token: str, raw: str) -> str:
    """Store a participant's answer; what happened, as one word: "saved", "invalid" (not
    one of the answers), "already" (one answer per participant), "closed" or "unassigned"."""
    answer = valid_answer(session.question, raw)
    if answer is None:
        return "invalid"
    hashed = token_hash(session.code, token)
    if store.save_class_answer(session.code, hashed, answer):
        return "saved"
    if store.class_answer_of(session.code, hashed) is not None:
        return "already"
    if store.class_assignment(session.code, hashed) is None:
        return "unassigned"
    return "closed"


def valid_answer(question: Question, answer: str) -> str | None:
    """The answer as stored, or None when it is not one: an option's key, or for a number
    question a finite number within the question's bounds."""
    answer = answer.strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    if question.kind != "number":
        return answer if answer in question.keys else None
    try:
        value = float(answer.replace(",", "."))
    except ValueError:
        return None
    low, high = number_bounds(question)
    if not math.isfinite(value) or not low <= value <= high:
        return None
    return f"{value:g}"


def number_bounds(question: Question) -> tuple[float, float]:
    """The range a number answer must lie in: the question's, else +-`NUMBER_LIMIT`."""
    low = -NUMBER_LIMIT if question.low is None else question.low
    high = NUMBER_LIMIT if question.high is None else question.high
    return low, high


def results(store: Store, code: str) -> ClassResults:
    """The class per condition, the humans beside them where the question has a reference,
    and the models' answers (`classroom.models.model_summaries`)."""
    from cogbias.classroom.models import model_summaries

    session = require_session(store, code)
    question = session.question
    by_condition: dict[str, list[str]] = {c: [] for c in question.conditions}
    for answer in store.class_answers(session.code):
        by_condition.setdefault(answer.condition, []).append(answer.answer)
    rows = [_class_summary(question, c, by_condition[c]) for c in question.conditions]
    humans, citation = _humans(question)
    models = model_summaries(store, session.code, question)
    return ClassResults(session.code, question, rows, humans, citation, models)


def _class_summary(question: Question, condition: str, answers: list[str]) -> ConditionSummary:
    """The class's stored answers (each valid when it was stored: `valid_answer`)."""
    if question.kind == "number":
        return summary.of_numbers(question, condition, summary.CLASS, [float(a) for a in answers])
    chosen = [question.keys.index(a) for a in answers if a in question.keys]
    return summary.of_choices(question, condition, summary.CLASS, chosen)


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
    humans and the models per condition, each with its answers that could not be read."""
    question = result.question
    return {
        "code": result.code,
        "title": question.title,
        "kind": question.kind,
        "conditions": list(question.conditions),
        "options": {c: list(o) for c, o in question.options.items()},
        "keys": list(question.keys),
        "class": [row.to_json() for row in result.conditions],
        "humans": [row.to_json() for row in result.humans],
        "humans_citation": result.citation,
        # n_failed: what the models' rows called their unreadable answers before
        "models": [row.to_json() | {"n_failed": row.n_unreadable} for row in result.models],
    }


EXPORT_COLUMNS = (
    "session",
    "question",
    "condition",
    "condition_label",
    "answer",
    "option",
    "answered_at",
)


def export_csv(store: Store, code: str, path: str | Path, force: bool = False) -> Path:
    """One row per answer, anonymous as stored; cells safe for a spreadsheet."""
    session = require_session(store, code)
    question = session.question
    with replacing(path, force, protect=[store.path]) as temporary:
        with temporary.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(EXPORT_COLUMNS)
            for answer in store.class_answers(session.code):
                index = question.option_index(answer.answer)
                options = question.options.get(answer.condition, ())
                option = options[index] if index is not None and index < len(options) else ""
                row = (
                    session.code,
                    question.title,
                    answer.condition,
                    question.labels.get(answer.condition, answer.condition),
                    answer.answer,
                    option,
                    answer.created_at,
                )
                writer.writerow([csv_cell(cell) for cell in row])
    return Path(path)


def join_base(store: Store) -> str | None:
    """Where `cogbias class serve` said participants join (None before it first ran)."""
    return store.class_join_url()


def join_url(base: str, code: str) -> str:
    return f"{base.rstrip('/')}/s/{normal_code(code)}"
