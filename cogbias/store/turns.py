"""Turns of study conversations (`study_calls`) and the study sources runs were planned from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from cogbias.core.records import TURN_FIELDS, Turn
from cogbias.core.redact import redact_row, redactor
from cogbias.store.connection import StoreBase, now, record_rows
from cogbias.store.migrations import TURN_JSON, TURN_TEXTS


class TurnsRepo(StoreBase):
    """`study_calls` and `study_sources`."""

    def save_study_calls(self, turns: Sequence[Turn]) -> None:
        """Turns of study conversations, the one door of `study_calls`; a turn asked again
        replaces its earlier row. Only `Turn` records pass (TypeError otherwise), and every
        text is redacted (`TURN_TEXTS`, `TURN_JSON`), as in `save_decisions`: a provider's
        answer becomes the next turn's prompt and its value (a self-help rewrite)."""
        rows = record_rows(turns, Turn)
        if rows:
            clean, stamp = redactor(), now()
            self.db["study_calls"].insert_all(
                [
                    {**redact_row(r, clean, TURN_TEXTS, TURN_JSON), "created_at": stamp}
                    for r in rows
                ],
                pk="id",
                replace=True,
            )

    def save_study_source(self, digest: str, study: str, source: str) -> None:
        self.db["study_sources"].insert(
            {"hash": digest, "study": study, "source": source, "created_at": now()},
            pk="hash",
            ignore=True,
        )

    def turns(self, run_id: str) -> list[Turn]:
        """Every turn of a study run, in the order they were written."""
        rows = self.query("select * from study_calls where run_id = ? order by rowid", [run_id])
        return [Turn.from_row(r) for r in rows]

    def turn_values(self, run_id: str, columns: Sequence[str]) -> list[dict[str, Any]]:
        """Some columns of every turn of a run, in the order they were written: scoring reads
        no texts (a paper-scale run has 10⁵-10⁶ turns)."""
        unknown = set(columns) - set(TURN_FIELDS)
        if unknown:
            raise ValueError(f"study_calls has no column(s) {sorted(unknown)}")
        return self.query(
            f"select {', '.join(columns)} from study_calls where run_id = ? order by rowid",
            [run_id],
        )

    def iter_turns(
        self, run_id: str, model: str | None = None, batch: int = 5000
    ) -> Iterator[list[Turn]]:
        """Batches of a run's turns (of one model), in conversation and turn order."""
        after: tuple[str, int] = ("", -1)
        while True:
            rows = self.query(
                "select * from study_calls where run_id = ? and (conversation, turn) > (?, ?) "
                "and (? is null or model = ?) order by conversation, turn limit ?",
                [run_id, *after, model, model, batch],
            )
            if not rows:
                return
            after = (rows[-1]["conversation"], rows[-1]["turn"])
            yield [Turn.from_row(r) for r in rows]

    def conversation_turns(self, run_id: str, test: str | None = None) -> list[Turn]:
        """The decide and revise turns of a run (or of one test), by conversation and turn."""
        sql = "select * from study_calls where run_id = ? and role in ('decide', 'revise')"
        params: list[Any] = [run_id]
        if test:
            sql += " and test = ?"
            params.append(test)
        return [Turn.from_row(r) for r in self.query(sql + " order by conversation, turn", params)]

    def selfhelp_turns(self, run_id: str) -> list[dict[str, Any]]:
        """Self-help units side by side: each decision with the rewrite it answered
        (`original`, `rewrite_answer`, `rewritten`, `answer` and the decision's cell)."""
        return self.query(
            "select d.test, d.condition, d.model, d.temperature, d.variant, d.slot, d.attempt, "
            "d.original, r.response as rewrite_answer, d.prompt as rewritten, "
            "d.response as answer, d.value, d.status, d.error "
            "from study_calls d join study_calls r "
            "on r.conversation = d.conversation and r.role = 'rewrite' "
            "where d.run_id = ? and d.role = 'decide' order by d.test, d.slot, d.condition",
            [run_id],
        )

    def study_source(self, digest: str) -> str | None:
        """The study source a run was planned from, by its hash."""
        rows = self.query("select source from study_sources where hash = ?", [digest])
        return rows[0]["source"] if rows else None

    def transient_study_turns(self, run_id: str) -> int:
        """Turns of a study run that failed on a transient error (asked again on resume)."""
        return self.query(
            "select count(*) n from study_calls where run_id = ? and status = 'failed' "
            "and failure_kind = 'transient'",
            [run_id],
        )[0]["n"]
