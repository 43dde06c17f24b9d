"""The study kind of run: every unit's turns asked, stored turn by turn, resumable.

What a study asks is in `study_plan`: a unit is one decision asked until its answer can be
read, a self-help rewrite followed by the decision on the rewritten prompt, or a whole
conversation whose every turn carries the earlier turns and the model's own answers. The
run itself (lease, writer, cancel, retries, progress) is the executor's, as for every kind.

Each turn is a `study_calls` row keyed by (conversation, turn). A resumed run rebuilds each
conversation from its stored turns and asks only the missing ones, so a conversation killed
midway ends with exactly its planned turns. The `random` model answers every format at random
(seeded by the turn), the baseline a bias figure should be read against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogbias.core import records
from cogbias.core.records import Turn, TurnStatus
from cogbias.core.redact import redactor
from cogbias.core.run_record import Run
from cogbias.llm.profiles import resolve as resolve_model
from cogbias.runs import study_plan
from cogbias.runs.study_answers import NO_ANSWER, _read, answer_grammar, random_space
from cogbias.runs.study_plan import (
    REVISE_TOKENS_PER_ITEM,
    Script,
    StudyPlan,
    StudySpec,
    Unit,
    compose,
)
from cogbias.runs.study_read import StudyResults
from cogbias.runs.work import Job, Writer, pool
from cogbias.store import Store
from cogbias.studies.definitions import StudyTest
from cogbias.studies.interventions import REWRITE_TOKENS, rewritten
from cogbias.studies.questions import system_message

SPEC_VERSION = 1


class StudyKind(StudyResults):
    """A study's tests × models × temperatures × variants × mitigations × repeats (its read
    side: `study_read.StudyResults`)."""

    name = "study"
    unit_name = "units"
    batchable = False  # each turn depends on the answer before it: no round to hand over

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return spec.get("kind") == "study"

    def target(self, spec: Mapping[str, Any]) -> str:
        return f"study {spec['study']}"

    def plan(self, spec: StudySpec, store: Store) -> StudyPlan:
        study = study_plan.load_study(spec.study, store)
        return study_plan.plan(study_plan.resolve(spec, study), study)

    def replan(self, store: Store, run: Run) -> StudyPlan:
        spec = StudySpec.from_stored(run.spec)
        return study_plan.plan(spec, study_plan.stored_study(store, spec))

    def create(self, plan: StudyPlan, store: Store, name: str) -> str:
        return create(plan, store, name)

    def prepare(self, plan: StudyPlan, store: Store, retry_failed: bool) -> dict[str, Any]:
        return {"done": 0, "failed": 0}  # counted again as the stored turns are read back

    async def work(self, job: Job) -> None:
        stored = stored_turns(job.store, job.plan.spec.run_id, job.retry_failed)
        conversations = _Conversations(job.plan, job.client, job.writer, stored)
        await pool(iter(job.plan.units), conversations.unit, job.concurrency)

    def save(self, store: Store, rows: Mapping[str, list[Any]]) -> None:
        store.save_study_calls(rows.get("study_calls", []))

    def incomplete(self, job: Job) -> str | None:
        run_id = job.plan.spec.run_id
        left = job.store.transient_study_turns(run_id)
        if not left:
            return None
        return (
            f"{left} turn(s) failed on transient errors (timeouts, rate limits, server "
            f"errors); run `cogbias resume {run_id}` to ask them again"
        )

    def end_fields(self, job: Job) -> dict[str, Any]:
        return {"done": job.writer.run.done, "failed": job.writer.run.failed}


def create(plan: StudyPlan, store: Store, name: str = "") -> str:
    """Store the run and the study source it was planned from; returns the run id."""
    spec = plan.spec
    with store.atomic():
        store.save_study_source(spec.study_hash, plan.study.id, plan.study.source)
        store.create_run(spec.run_id, spec.canonical(), plan.planned, name, SPEC_VERSION)
    return spec.run_id


def stored_turns(store: Store, run_id: str, retry_failed: bool) -> dict[str, dict[int, Turn]]:
    """The turns a resumed run keeps (what a resume reads of them), by conversation and turn.
    Turns that failed on a transient error are asked again; with `retry_failed`, every
    failed turn is."""
    kept: dict[str, dict[int, Turn]] = {}
    columns = ["id", "run_id", "conversation", "turn", "role", "test", "status"]
    for row in store.turn_values(run_id, [*columns, "failure_kind", "response"]):
        turn = Turn.from_row(row)
        if turn.status == TurnStatus.FAILED and (retry_failed or turn.failure_kind == "transient"):
            continue
        kept.setdefault(turn.conversation, {})[turn.turn] = turn
    return kept


@dataclass(frozen=True)
class _Talk:
    """One conversation of a unit: what each of its turns is asked in and stored under."""

    unit: Unit
    test: StudyTest
    script: Script
    conversation: str
    attempt: int = 0  # of a single decision asked again while unreadable


class _Conversations:
    """Asks the turns of units and hands finished turns to the writer."""

    def __init__(
        self,
        plan: StudyPlan,
        client: Any,
        writer: Writer,
        stored: dict[str, dict[int, Turn]],
    ) -> None:
        self.plan, self.study, self.spec = plan, plan.study, plan.spec
        self.client, self.writer, self.stored = client, writer, stored
        self.run_id = self.spec.run_id
        self.profiles = {  # resolved once: resolving reads the model registry
            m: resolve_model(m, api_base=self.spec.api_base) for m in self.spec.models
        }
        self.clean = redactor()

    async def unit(self, unit: Unit) -> None:
        test = self.study.tests[unit.test]
        try:
            script = compose(self.study, self.spec, unit)
        except (ValueError, KeyError, ArithmeticError) as exc:
            # A value that fails for this draw only (the file's dry run samples a few): this
            # unit fails with the reason, the run goes on.
            self._invalid(unit, test, f"the question could not be composed: {exc}")
            return
        if test.design == "sequence":
            ok = await self._sequence(unit, test, script)
        else:
            ok = await self._single(unit, test, script)
        self.writer.run.done += 1
        self.writer.run.failed += not ok

    async def _single(self, unit: Unit, test: StudyTest, script: Script) -> bool:
        """One decision, after a self-help rewrite when asked; again while unreadable."""
        for attempt in range(self.spec.max_attempts):
            talk = _Talk(unit, test, script, unit.conversation(self.run_id, attempt), attempt)
            rows = self.stored.get(talk.conversation, {})
            asked, turn = script.turns[0], 0
            if script.rewrite is not None:
                row = rows.get(0) or await self._ask(talk, 0, "rewrite", [script.rewrite])
                if row.status == TurnStatus.FAILED:
                    return False
                if row.status != TurnStatus.OK:
                    continue
                asked, turn = rewritten(row.response or ""), 1
            row = rows.get(turn) or await self._ask(talk, turn, "decide", [asked])
            if row.status in (TurnStatus.OK, TurnStatus.FAILED):
                return row.status == TurnStatus.OK
        return False

    async def _sequence(self, unit: Unit, test: StudyTest, script: Script) -> bool:
        """One conversation; each turn sees the earlier turns and answers."""
        talk = _Talk(unit, test, script, unit.conversation(self.run_id))
        rows = self.stored.get(talk.conversation, {})
        said: list[str] = []
        role_turns = [("decide", t) for t in script.turns]
        if script.revise is not None:
            role_turns.append(("revise", script.revise))
        for turn, (role, text) in enumerate(role_turns):
            said.append(text)
            row = rows.get(turn) or await self._ask(talk, turn, role, said)
            if row.status == TurnStatus.FAILED:
                return False
            # An empty answer goes back as a visible mark: providers refuse empty turns.
            said.append(row.response or NO_ANSWER)
        return True

    def _invalid(self, unit: Unit, test: StudyTest, error: str) -> None:
        talk = _Talk(unit, test, Script([], ""), unit.conversation(self.run_id))
        row = self._row(talk, 0, "decide", "")
        row.status, row.error, row.failure_kind = TurnStatus.FAILED, error, "invalid"
        self.writer.add("study_calls", row)
        self.writer.run.done += 1
        self.writer.run.failed += 1

    def _row(self, talk: _Talk, turn: int, role: str, prompt: str) -> Turn:
        """A turn's record before it is asked."""
        unit, script = talk.unit, talk.script
        first_decision = role == "decide" and (turn == 0 or script.rewrite is not None)
        return Turn(
            id=records.stable_id(talk.conversation, turn),
            run_id=self.run_id,
            conversation=talk.conversation,
            turn=turn,
            role=role,
            test=unit.test,
            bias=talk.test.bias,
            condition=unit.condition,
            model=unit.model,
            temperature=unit.temperature,
            variant=unit.variant,
            mitigation=unit.mitigation,
            slot=unit.slot,
            ord=unit.order,
            attempt=talk.attempt,
            presented=json.dumps(script.order),
            status_quo_at=script.status_quo_at,
            prompt=prompt,
            original=script.original if first_decision else None,
            status=TurnStatus.OK,
        )

    async def _ask(self, talk: _Talk, turn: int, role: str, said: list[str]) -> Turn:
        """Ask one turn (`said` alternates user and assistant texts, ending with the user's)
        and record it: read, unreadable, or failed with the failure's kind."""
        from cogbias.llm import FatalLLMError, LLMError, LLMRequest

        unit, test, script = talk.unit, talk.test, talk.script
        row = self._row(talk, turn, role, said[-1])
        variant = self.study.variants.get(unit.variant)
        system = system_message(self.study, test, variant)
        messages = ([("system", system)] if system else []) + [
            ("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(said)
        ]
        profile = self.profiles[unit.model]
        request = LLMRequest(
            unit.model,
            messages,
            temperature=unit.temperature,
            max_tokens=self._tokens(profile, test, role, script),
            grammar=answer_grammar(test, role) if profile.grammar else None,
            repeat=unit.slot * self.spec.max_attempts + talk.attempt,
            # what the `random` model draws from, seeded by the turn (real models ignore it)
            answer_space=random_space(test, role, script, row.id),
        )
        try:
            response = await self.client.complete(request)
        except FatalLLMError:
            raise
        except LLMError as exc:
            # an empty answer is an answer that cannot be read: asked again like one
            status = (
                TurnStatus.UNPARSEABLE if exc.failure_kind == "unparseable" else TurnStatus.FAILED
            )
            row.status, row.error, row.failure_kind = status, str(exc), exc.failure_kind
            self.writer.add("study_calls", row)
            return row
        # Redacted before anything reads it: a rewrite becomes the next prompt and its value,
        # an answer the next turns' history, as they are stored (and as a resume reads them).
        text, row.cache_key = self.clean(response.text) or "", response.key or None
        row.response = records.cap_text(text)[0]
        _read(test, role, text, row)
        self.writer.add("study_calls", row)
        return row

    @staticmethod
    def _tokens(profile: Any, test: StudyTest, role: str, script: Script) -> int:
        if role == "rewrite":  # about as long as the prompt (~4 characters a token)
            return min(REWRITE_TOKENS, len(script.original) // 3 + 64)
        if role == "revise":
            return REVISE_TOKENS_PER_ITEM * test.length + 16
        return int(profile.answer_tokens)
