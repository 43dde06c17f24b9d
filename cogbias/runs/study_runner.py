"""Running a study: every unit's turns asked, stored turn by turn, resumable.

The run machinery is the paired runner's (`runner`): one worker holds the run's lease, rows
are committed every 50 ms with the cache and the run's counters, cancel is seen within a
fraction of a second, transient failures leave the run `incomplete` for `cogbias resume`.
What differs is the shape of the work (`study_plan`): a unit is one decision asked until its
answer can be read, a self-help rewrite followed by the decision on the rewritten prompt, or a
whole conversation whose every turn carries the earlier turns and the model's own answers.

Each turn is a `study_calls` row keyed by (conversation, turn). A resumed run rebuilds each
conversation from its stored turns and asks only the missing ones, so a conversation killed
midway ends with exactly its planned turns. The `random` model answers every format at random
(seeded by the turn), the baseline a bias figure should be read against.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from cogbias.core import records
from cogbias.core.answers import Answer
from cogbias.llm import random_provider
from cogbias.llm.profiles import RANDOM_MODEL
from cogbias.llm.profiles import resolve as resolve_model
from cogbias.llm.random_provider import AnswerSpace
from cogbias.runs.runner import (
    BufferedCache,
    Progress,
    _pool,
    _Writer,
    end_run,
    holding_lease,
    until_stopped,
)
from cogbias.runs.study_plan import (
    REVISE_TOKENS_PER_ITEM,
    REWRITE_MARKER,
    REWRITE_TOKENS,
    Script,
    StudyPlan,
    Unit,
    compose,
    rewritten,
)
from cogbias.store import Store, now
from cogbias.studies.definitions import MAX_NUMBER, StudyTest
from cogbias.studies.questions import read_answer

SPEC_VERSION = 1
NO_ANSWER = "(no answer)"
# A rewrite is asked for at most REWRITE_TOKENS tokens; an endpoint that ignores that limit
# must not turn the next prompt into megabytes.
MAX_REWRITE_CHARS = REWRITE_TOKENS * 10


def create(plan: StudyPlan, store: Store, name: str = "") -> str:
    """Store the run and the study source it was planned from; returns the run id."""
    spec = plan.spec
    with store.atomic():
        store.save_study_source(spec.study_hash, plan.study.id, plan.study.source)
        store.create_run(spec.run_id, spec.canonical(), plan.planned, name, SPEC_VERSION)
    return spec.run_id


def execute(
    plan: StudyPlan,
    store: Store,
    concurrency: int = 16,
    progress: Progress | None = None,
    name: str = "",
    *,
    retry_failed: bool = False,
    read_cache: bool = True,
    timeout: float | None = None,
    deadline: float | None = None,
    max_retries: int = 6,
) -> dict[str, Any]:
    """Run (or resume) a study plan; returns the run row. Raises `RunBusy` when another live
    worker holds the run."""
    if concurrency < 1:  # no slot would ever be free: the run would wait forever
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    options = dict(timeout=timeout, deadline=deadline, max_retries=max_retries)
    return asyncio.run(
        _execute(plan, store, progress, name, retry_failed, read_cache, concurrency, options)
    )


async def _execute(
    plan: StudyPlan,
    store: Store,
    progress: Progress | None,
    name: str,
    retry_failed: bool,
    read_cache: bool,
    concurrency: int,
    options: dict[str, Any],
) -> dict[str, Any]:
    run_id = create(plan, store, name)
    return await holding_lease(
        store,
        run_id,
        lambda owner: _work(
            plan, store, owner, progress, retry_failed, read_cache, concurrency, options
        ),
    )


def stored_turns(store: Store, run_id: str, retry_failed: bool) -> dict[str, dict[int, dict]]:
    """The turns a resumed run keeps, by conversation and turn. Turns that failed on a
    transient error are asked again; with `retry_failed`, every failed turn is."""
    kept: dict[str, dict[int, dict]] = {}
    columns = "conversation, turn, status, failure_kind, response"
    for row in store.query(f"select {columns} from study_calls where run_id = ?", [run_id]):
        if row["status"] == "failed" and (retry_failed or row["failure_kind"] == "transient"):
            continue
        kept.setdefault(row["conversation"], {})[row["turn"]] = row
    return kept


async def _work(
    plan: StudyPlan,
    store: Store,
    owner: str,
    progress: Progress | None,
    retry_failed: bool,
    read_cache: bool,
    concurrency: int,
    options: dict[str, Any],
) -> dict[str, Any]:
    from cogbias.llm import LLMClient

    spec = plan.spec
    run_id = spec.run_id
    if (store.run(run_id) or {}).get("cancel_requested"):
        store.update_run(run_id, status="cancelled", cancel_requested=0, finished_at=now())
        return store.run(run_id) or {}
    previous = store.run(run_id) or {}
    store.update_run(
        run_id,
        status="running",
        started_at=previous.get("started_at") or now(),
        finished_at=None,
        error=None,
        waiting=0,
        wait_reason=None,
    )
    stored = stored_turns(store, run_id, retry_failed)
    store.set_busy_timeout(0.2)
    run = {"id": run_id, "planned": plan.planned, "status": "running", "done": 0, "failed": 0}
    run.update(generated=0, to_generate=0, unit="units")
    cache = BufferedCache(store)
    client = LLMClient(
        cache=cache,
        read_cache=read_cache,
        concurrency=concurrency,
        api_base=spec.api_base,
        **options,  # type: ignore[arg-type]
    )
    writer = _Writer(store, run, owner, [cache], [client], progress, {})
    conversations = _Conversations(plan, client, writer, stored)
    work = asyncio.create_task(_pool(iter(plan.units), conversations.unit, concurrency))
    status, error = await until_stopped(work, writer)
    if status == "done":
        left = store.query(
            "select count(*) n from study_calls where run_id = ? and status = 'failed' "
            "and failure_kind = 'transient'",
            [run_id],
        )[0]["n"]
        if left:
            status = "incomplete"
            error = (
                f"{left} turn(s) failed on transient errors (timeouts, rate limits, server "
                f"errors); run `cogbias resume {run_id}` to ask them again"
            )
    return end_run(store, run, status, error, progress, done=run["done"], failed=run["failed"])


class _Conversations:
    """Asks the turns of units and hands finished turns to the writer."""

    def __init__(
        self,
        plan: StudyPlan,
        client: Any,
        writer: _Writer,
        stored: dict[str, dict[int, dict]],
    ) -> None:
        self.plan, self.study, self.spec = plan, plan.study, plan.spec
        self.client, self.writer, self.stored = client, writer, stored
        self.system = [("system", self.study.system)] if self.study.system else []
        self.run_id = self.spec.run_id
        self.profiles = {  # resolved once: resolving reads the model registry
            m: resolve_model(m, api_base=self.spec.api_base)
            for m in self.spec.models
            if m != RANDOM_MODEL
        }

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
        self.writer.run["done"] += 1
        self.writer.run["failed"] += not ok

    async def _single(self, unit: Unit, test: StudyTest, script: Script) -> bool:
        """One decision, after a self-help rewrite when asked; again while unreadable."""
        for attempt in range(self.spec.max_attempts):
            conversation = unit.conversation(self.run_id, attempt)
            rows = self.stored.get(conversation, {})
            asked, turn = script.turns[0], 0
            if script.rewrite is not None:
                row = rows.get(0) or await self._ask(
                    unit, test, script, conversation, attempt, 0, "rewrite", [script.rewrite]
                )
                if row["status"] == "failed":
                    return False
                if row["status"] != "ok":
                    continue
                asked, turn = rewritten(row["response"]), 1
            row = rows.get(turn) or await self._ask(
                unit, test, script, conversation, attempt, turn, "decide", [asked]
            )
            if row["status"] in ("ok", "failed"):
                return row["status"] == "ok"
        return False

    async def _sequence(self, unit: Unit, test: StudyTest, script: Script) -> bool:
        """One conversation; each turn sees the earlier turns and answers."""
        conversation = unit.conversation(self.run_id)
        rows = self.stored.get(conversation, {})
        said: list[str] = []
        role_turns = [("decide", t) for t in script.turns]
        if script.revise is not None:
            role_turns.append(("revise", script.revise))
        for turn, (role, text) in enumerate(role_turns):
            said.append(text)
            row = rows.get(turn) or await self._ask(
                unit, test, script, conversation, 0, turn, role, said
            )
            if row["status"] == "failed":
                return False
            # An empty answer goes back as a visible mark: providers refuse empty turns.
            said.append(row["response"] or NO_ANSWER)
        return True

    def _invalid(self, unit: Unit, test: StudyTest, error: str) -> None:
        conversation = unit.conversation(self.run_id)
        row = self._row(unit, test, Script([], ""), conversation, 0, 0, "decide", "")
        row.update(status="failed", error=error, failure_kind="invalid")
        self.writer.study_calls.append(row)
        self.writer.run["done"] += 1
        self.writer.run["failed"] += 1

    def _row(
        self,
        unit: Unit,
        test: StudyTest,
        script: Script,
        conversation: str,
        attempt: int,
        turn: int,
        role: str,
        prompt: str,
    ) -> dict[str, Any]:
        """A turn's record before it is asked."""
        return {
            "id": records.stable_id(conversation, turn),
            "run_id": self.run_id,
            "conversation": conversation,
            "turn": turn,
            "role": role,
            "test": unit.test,
            "bias": test.bias,
            "condition": unit.condition,
            "model": unit.model,
            "temperature": unit.temperature,
            "variant": unit.variant,
            "mitigation": unit.mitigation,
            "slot": unit.slot,
            "ord": unit.order,
            "attempt": attempt,
            "presented": json.dumps(script.order),
            "status_quo_at": script.status_quo_at,
            "prompt": prompt,
            "original": script.original
            if role == "decide" and (turn == 0 or script.rewrite is not None)
            else None,
            "response": None,
            "value": None,
            "status": "ok",
            "error": None,
            "failure_kind": None,
            "cache_key": None,
        }

    async def _ask(
        self,
        unit: Unit,
        test: StudyTest,
        script: Script,
        conversation: str,
        attempt: int,
        turn: int,
        role: str,
        said: list[str],
    ) -> dict[str, Any]:
        """Ask one turn (`said` alternates user and assistant texts, ending with the user's)
        and record it: read, unreadable, or failed with the failure's kind."""
        from cogbias.llm import FatalLLMError, LLMError, LLMRequest

        row = self._row(unit, test, script, conversation, attempt, turn, role, said[-1])
        if unit.model == RANDOM_MODEL:
            text = random_answer(test, role, script, records.stable_id(conversation, turn))
        else:
            messages = self.system + [
                ("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(said)
            ]
            profile = self.profiles[unit.model]
            request = LLMRequest(
                unit.model,
                messages,
                temperature=unit.temperature,
                max_tokens=self._tokens(profile, test, role, script),
                grammar=answer_grammar(test, role) if profile.grammar else None,
                repeat=unit.slot * self.spec.max_attempts + attempt,
            )
            try:
                response = await self.client.complete(request)
            except FatalLLMError:
                raise
            except LLMError as exc:
                # an empty answer is an answer that cannot be read: asked again like one
                status = "unparseable" if exc.failure_kind == "unparseable" else "failed"
                row.update(status=status, error=str(exc), failure_kind=exc.failure_kind)
                self.writer.study_calls.append(row)
                return row
            text, row["cache_key"] = response.text, response.key
        row["response"] = records.cap_text(text)[0]
        _read(test, role, text, row)
        self.writer.study_calls.append(row)
        return row

    @staticmethod
    def _tokens(profile: Any, test: StudyTest, role: str, script: Script) -> int:
        if role == "rewrite":  # about as long as the prompt (~4 characters a token)
            return min(REWRITE_TOKENS, len(script.original) // 3 + 64)
        if role == "revise":
            return REVISE_TOKENS_PER_ITEM * test.length + 16
        return int(profile.answer_tokens)


def answer_grammar(test: StudyTest, role: str) -> str | None:
    """GBNF that only admits an answer in the test's format (for llama.cpp-served models,
    which otherwise ramble past the answer); a rewrite is free text."""
    if role == "rewrite":
        return None
    one = {
        "admit_reject": '("admit" | "reject")',
        "yes_no": '("yes" | "no")',
        "letter": "(" + " | ".join(f'"{c}"' for c in test.letters[: test.k or None]) + ")",
        "number": '("-"? [0-9]+ ("." [0-9]+)?)',
    }[test.answer]
    if role == "revise":
        return "root ::= " + ' "\\n" '.join(["answer"] * test.length) + "\nanswer ::= " + one
    return "root ::= " + one


def _read(test: StudyTest, role: str, text: str, row: dict[str, Any]) -> None:
    """Read a turn's answer into the row (value, or status 'unparseable' with the reason)."""
    if role == "rewrite":
        answer: Answer = Answer(text, rewritten(text) or None)
        if not answer.value:
            answer = Answer(text, error="the rewritten prompt is empty")
        elif len(answer.value) > MAX_REWRITE_CHARS:  # it becomes the next prompt: bounded
            answer = Answer(
                text,
                error=f"the rewritten prompt has {len(answer.value):,} characters, more than "
                f"the {MAX_REWRITE_CHARS:,} a rewrite may have",
            )
    elif role == "revise":
        answer = read_revision(test, text)
    else:
        answer = read_answer(test, text)
        if answer.ok and test.design == "options" and answer.value >= test.k:
            answer = Answer(text, error=f"there are only {test.k} options")
    if answer.ok:
        row["value"] = json.dumps(answer.value)
    else:
        row.update(status="unparseable", error=answer.error, failure_kind="unparseable")


def read_revision(test: StudyTest, text: str) -> Answer:
    """The revised decisions: one readable line per item of the sequence, in order."""
    lines = [line for line in text.splitlines() if line.strip()]
    values = [read_answer(test, line) for line in lines[: test.length + 1]]
    if len(lines) != test.length:
        return Answer(
            text, error=f"expected {test.length} lines, each one decision; got {len(lines)}"
        )
    bad = next((i for i, v in enumerate(values) if not v.ok), None)
    if bad is not None:
        return Answer(text, error=f"line {bad + 1} of the revision: {values[bad].error}")
    return Answer(text, [v.value for v in values])


def random_answer(test: StudyTest, role: str, script: Script, seed: str) -> str:
    """A random answer in the test's format: the baseline of every figure."""
    if role == "rewrite":
        return random_provider.answer(AnswerSpace(fixed=f"{REWRITE_MARKER}\n{script.original}"))
    lines = test.length if role == "revise" else None  # a revision: one answer a line
    return random_provider.answer(_random_space(test, int(seed, 16), lines))


def _random_space(test: StudyTest, seed: int, lines: int | None) -> AnswerSpace:
    """The answers a test admits, for `random_provider` (a number within the test's range)."""
    if test.answer in ("admit_reject", "yes_no"):
        pair = ("admit", "reject") if test.answer == "admit_reject" else ("yes", "no")
        return AnswerSpace(choices=pair, lines=lines, seed=seed)
    if test.answer == "letter":
        letters = tuple(test.letters[: test.k or len(test.letters)])
        return AnswerSpace(choices=letters, lines=lines, seed=seed)
    low, high = AnswerSpace.number_range(test.min, test.max, MAX_NUMBER)
    return AnswerSpace(low=low, high=high, lines=lines, seed=seed)


def launch(plan: StudyPlan, db: str | os.PathLike[str], name: str = "") -> str:
    """Store a study run and work on it in a background `cogbias resume` process (the app's
    way to start one: the run survives the page)."""
    from cogbias.runs.runner import launch_stored

    with Store(db) as store:
        run_id = create(plan, store, name)
    return launch_stored(run_id, db)
