"""Every class that answered the same question, as one group beside the original study: the
teacher's classes over the terms ("your classes").

Two sessions ask the same question when participants read and could answer the same
(`Question.identity`). The pool is computed from the stored answers each time, so deleting
a session takes it out; it holds no participant, only each session's code, opening date and
n per condition. The statistics are the studies layer's (`condition_summary.pooled`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cogbias.classroom.answer_reading import answers_by_condition
from cogbias.core.class_question import Question
from cogbias.store import Store
from cogbias.studies import condition_summary as summary
from cogbias.studies.condition_summary import ConditionSummary


@dataclass(frozen=True)
class PoolPart:
    """One pooled session: its code, when it opened, and its answers per condition."""

    code: str
    opened: str
    n: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.n.values())

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "opened": self.opened, "n": dict(self.n), "total": self.total}


def pool_results(
    store: Store, code: str, question: Question
) -> tuple[list[ConditionSummary], list[PoolPart]]:
    """Per condition, every session of the same question pooled (session `code`, asking
    `question`, always; others once they have answers), oldest first, and what each adds."""
    identity = question.identity()
    parts: list[PoolPart] = []
    values: dict[str, list[list[float]]] = {c: [] for c in question.conditions}
    for row in sorted(store.class_sessions(), key=lambda r: (r.created_at, r.code)):
        if row.code != code and _identity(row.question) != identity:
            continue
        answers = answers_by_condition(store, row.code, question)
        if row.code != code and not any(answers.values()):
            continue
        parts.append(PoolPart(row.code, row.created_at, {c: len(answers[c]) for c in values}))
        for condition in values:
            values[condition].append(answers[condition])
    rows = [
        summary.pooled(question, condition, summary.POOLED, values[condition])
        for condition in question.conditions
    ]
    return rows, parts


def _identity(stored: str) -> str | None:
    """A stored question's identity; None for a row that cannot be read (never pooled)."""
    try:
        return Question.from_json(stored).identity()
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
