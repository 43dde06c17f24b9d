"""The models' answers to a class session's question (`class_model_answers`, migrations 12
and 13): the rows of the class run kind (`cogbias.runs.class_answers`).

A model answers exactly what the class saw, so its answers belong to the session: they are
kept beside the class's answers and deleted with them (and with the run that asked them), and
a restart of the teacher's app shows them again. One row per (session, run, model, condition,
mode, temperature, repeat): a run stores each of its answers once, so a resumed run asks
nothing twice; answers asked before runs existed have the run ''.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cogbias.store.connection import StoreBase, now

FIELDS = (
    "session",
    "model",
    "condition",
    "mode",
    "temperature",
    "repeat",
    "answer",
    "option",
    "probabilities",
    "error",
    "run_id",
    "failure_kind",
    "grammar",
)


@dataclass(frozen=True)
class ModelAnswer:
    """One answer of a model to one condition of a session's question.

    `option` is the 0-based option read from it (None: unreadable, or a number question,
    whose number is read from `answer` again); `probabilities` the model's probability of
    each option (mode "probabilities" only); `error` why nothing could be read, and
    `failure_kind` of what kind (`core.records`: "transient" is asked again on resume);
    `run_id` the run that asked it; `grammar` the GBNF it was asked under (None: none)."""

    session: str
    model: str
    condition: str
    mode: str  # "sample" | "probabilities"
    temperature: float
    repeat: int
    answer: str
    option: int | None = None
    probabilities: tuple[float, ...] | None = None
    error: str | None = None
    run_id: str = ""
    failure_kind: str | None = None
    grammar: str | None = None


def _row(answer: ModelAnswer) -> tuple[object, ...]:
    probabilities = None if answer.probabilities is None else json.dumps(answer.probabilities)
    return (
        answer.session,
        answer.model,
        answer.condition,
        answer.mode,
        float(answer.temperature),
        int(answer.repeat),
        answer.answer,
        answer.option,
        probabilities,
        answer.error,
        answer.run_id,
        answer.failure_kind,
        answer.grammar,
    )


def _record(row: Sequence[object]) -> ModelAnswer:
    values = dict(zip(FIELDS, row, strict=True))
    probabilities = values["probabilities"]
    return ModelAnswer(
        session=str(values["session"]),
        model=str(values["model"]),
        condition=str(values["condition"]),
        mode=str(values["mode"]),
        temperature=float(values["temperature"]),  # type: ignore[arg-type]
        repeat=int(values["repeat"]),  # type: ignore[call-overload]
        answer=str(values["answer"]),
        option=None if values["option"] is None else int(values["option"]),  # type: ignore[call-overload]
        probabilities=(None if probabilities is None else tuple(json.loads(str(probabilities)))),
        error=None if values["error"] is None else str(values["error"]),
        run_id=str(values["run_id"]),
        failure_kind=None if values["failure_kind"] is None else str(values["failure_kind"]),
        grammar=None if values["grammar"] is None else str(values["grammar"]),
    )


class ClassModelsRepo(StoreBase):
    """`class_model_answers`."""

    def save_model_answers(self, answers: Sequence[ModelAnswer]) -> None:
        """Store answers, replacing those asked with the same settings (all or none)."""
        marks = ", ".join("?" * (len(FIELDS) + 1))
        with self.atomic():
            self.db.conn.executemany(
                f"insert or replace into class_model_answers ({', '.join(FIELDS)}, created_at)"
                f" values ({marks})",
                [(*_row(a), now()) for a in answers],
            )

    def model_answers(self, session: str) -> list[ModelAnswer]:
        """A session's model answers, by model, condition, settings and repeat, each
        repeat's answers oldest first (every run's: `classroom.models` keeps the newest)."""
        rows = self.db.execute(
            f"select {', '.join(FIELDS)} from class_model_answers where session = ? "
            "order by model, condition, mode, temperature, repeat, created_at, rowid",
            (session,),
        ).fetchall()
        return [_record(row) for row in rows]

    def run_model_answers(self, run_id: str) -> list[ModelAnswer]:
        """The answers one class run stored, by model, condition and repeat."""
        rows = self.db.execute(
            f"select {', '.join(FIELDS)} from class_model_answers where run_id = ? "
            "order by model, condition, repeat",
            (run_id,),
        ).fetchall()
        return [_record(row) for row in rows]

    def delete_model_answers(self, session: str, model: str | None = None) -> int:
        """Forget a session's model answers (one model's, or all); how many went."""
        sql, params = "delete from class_model_answers where session = ?", [session]
        if model is not None:
            sql += " and model = ?"
            params.append(model)
        with self.atomic():
            return self.db.execute(sql, params).rowcount
