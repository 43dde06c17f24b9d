"""The class kind of run: models answer a class session's question, one stored row each.

What is asked is `class_plan` (each model, each condition, sampled or read as option
probabilities); how it is worked (lease, writer, cancel, resume, progress, the response
cache) is the executor's, as for every kind. Each answer is a `class_model_answers` row
keyed by (session, run, model, condition, mode, temperature, repeat): a resumed run asks only
the answers it has not stored (and those that failed on a transient error), so nothing is
asked twice and a re-run stores nothing twice.

A model whose profile takes a grammar (the local model) is asked under one that admits only
an answer (`class_plan.answer_grammar`), and the row keeps the grammar it was sent, so a
report says "grammar" only when one was. The `random` baseline answers from the question's
answer space (sampled), or uniformly (probabilities: no call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cogbias.core import probabilities as probs
from cogbias.core.answers import parse_letter, parse_number
from cogbias.core.class_question import Question
from cogbias.core.reading import read_option
from cogbias.core.records import cap_text
from cogbias.core.redact import redactor
from cogbias.core.run_record import ResultsPage, Run, RunRows
from cogbias.llm import logprobs
from cogbias.llm.random_provider import AnswerSpace
from cogbias.llm.request import LLMRequest
from cogbias.runs import class_plan
from cogbias.runs.class_plan import PROBABILITIES, ClassPlan, ClassSpec, Unit, lettered, prompt_for
from cogbias.runs.probabilities import read_half
from cogbias.runs.read_side import ReadSide
from cogbias.runs.work import Job, pool
from cogbias.store import Store
from cogbias.store.class_models import ModelAnswer

TABLE = "class_model_answers"
MAX_ERROR = 300
SPEC_VERSION = 1


class ClassKind(ReadSide):
    """Models answer a class session's question: models × conditions × samples. Its answers
    are shown on the Class page, beside the class and the humans, and its report is its
    session's (`views/report.py`, `PAGE_REPORTS`)."""

    name = class_plan.KIND
    unit_name = "answers"
    batchable = False  # a class waits for its answers: no batch round of hours
    page = ResultsPage.CLASS
    tables = (RunRows(TABLE),)
    noun = "answer"
    failed_noun = "unreadable or failed"

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return False  # its specs always name it

    def target(self, spec: Mapping[str, Any]) -> str:
        return f"class {spec.get('session', '?')}"

    def plan(self, spec: ClassSpec, store: Store) -> ClassPlan:
        return class_plan.plan(spec, store)

    def replan(self, store: Store, run: Run) -> ClassPlan:
        return class_plan.plan(ClassSpec.from_stored(run.spec), store)

    def create(self, plan: ClassPlan, store: Store, name: str) -> str:
        spec = plan.spec
        store.create_run(spec.run_id, spec.canonical(), plan.planned, name, SPEC_VERSION)
        return spec.run_id

    def prepare(self, plan: ClassPlan, store: Store, retry_failed: bool) -> dict[str, Any]:
        kept = kept_answers(store, plan.spec.run_id, retry_failed)
        return {"done": len(kept), "failed": sum(a.error is not None for a in kept.values())}

    async def work(self, job: Job) -> None:
        plan: ClassPlan = job.plan
        kept = kept_answers(job.store, plan.spec.run_id, job.retry_failed)
        stored = {(a.model, a.condition, a.repeat): a for a in job.store.run_model_answers(
            plan.spec.run_id
        )}  # fmt: skip
        asker = _Asker(plan, job)
        todo = (u for u in plan.units if (u.model, u.condition, u.repeat) not in kept)

        async def unit(u: Unit) -> None:
            again = stored.get((u.model, u.condition, u.repeat))
            row = await asker.answer(u, fresh=again is not None and again.error is not None)
            job.writer.run.done += 1
            job.writer.run.failed += row.error is not None
            job.writer.add(TABLE, row)

        await pool(todo, unit, job.concurrency)

    def save(self, store: Store, rows: Mapping[str, list[Any]]) -> None:
        if rows.get(TABLE):
            store.save_model_answers(rows[TABLE])

    def incomplete(self, job: Job) -> str | None:
        run_id = job.plan.spec.run_id
        left = sum(a.failure_kind == "transient" for a in job.store.run_model_answers(run_id))
        if not left:
            return None
        return (
            f"{left} answer(s) failed on transient errors (timeouts, rate limits, server "
            f"errors); run `cogbias resume {run_id}` to ask them again"
        )

    def end_fields(self, job: Job) -> dict[str, Any]:
        return {"done": job.writer.run.done, "failed": job.writer.run.failed}


def spent(store: Store, run: Run) -> dict[str, float | None]:
    """What each model's answers in a class run cost when first asked, read back from the
    response cache they went through (the same requests, rebuilt): 0 for the `random` and
    local models, None when a paid answer is no longer cached (`cogbias cache prune`), its
    price was unknown, or the model no longer resolves. A report's methods say it."""
    from cogbias.llm.errors import LLMError
    from cogbias.llm.profiles import resolve
    from cogbias.llm.request import cache_key

    spec = ClassSpec.from_stored(run.spec)
    question = class_plan.stored_question(store, spec.session)
    totals: dict[str, float | None] = {}
    profiles = {}
    for model in spec.models:
        try:
            profiles[model] = resolve(model, spec.api_base)
        except (LLMError, ValueError):
            totals[model] = None
    plan = ClassPlan(spec, question, [], profiles)
    paid: list[tuple[str, str]] = []  # (model, cache key) of each answer that was paid for
    for answer in store.run_model_answers(run.id):
        profile = profiles.get(answer.model)
        totals.setdefault(answer.model, 0.0)
        if profile is None or profile.kind != "remote":
            continue  # unresolved (None already), or the random and local models: free
        if answer.error is not None and not answer.answer:  # the call failed: nothing paid
            continue
        request = request_for(plan, Unit(answer.model, answer.condition, answer.repeat))
        paid.append((answer.model, cache_key(request, profile)))
    hits = store.get_llm_calls([key for _, key in paid])  # one read for the whole class
    for model, key in paid:
        total, cost = totals[model], hits.get(key, {}).get("cost")
        if total is not None:
            totals[model] = None if cost is None else total + float(cost)
    return totals


def kept_answers(
    store: Store, run_id: str, retry_failed: bool
) -> dict[tuple[str, str, int], ModelAnswer]:
    """The answers a resumed run keeps, by (model, condition, repeat): all but those that
    failed on a transient error, and with `retry_failed` all but those that failed."""
    kept = {}
    for answer in store.run_model_answers(run_id):
        failed = answer.error is not None
        if failed and (retry_failed or answer.failure_kind == "transient"):
            continue
        kept[(answer.model, answer.condition, answer.repeat)] = answer
    return kept


def request_for(plan: ClassPlan, unit: Unit) -> LLMRequest:
    """The call for one answer: the condition's question as the class read it (the system
    message first), at the run's temperature, with the grammar when the profile takes one,
    and for option probabilities the most probable tokens."""
    spec, question = plan.spec, plan.question
    messages = [("user", prompt_for(question, unit.condition, spec))]
    if question.system:
        messages.insert(0, ("system", question.system))
    profile = plan.profiles[unit.model]
    probabilities = spec.scoring == PROBABILITIES
    return LLMRequest(
        model=unit.model,
        messages=tuple(messages),
        temperature=spec.temperature,
        repeat=unit.repeat,
        max_tokens=class_plan.completion_tokens(question, spec, profile)
        if profile.grammar
        else None,
        grammar=class_plan.answer_grammar(question, spec) if profile.grammar else None,
        top_logprobs=logprobs.TOP_LOGPROBS if probabilities else None,
        answer_space=_space(question, f"class:{spec.session}:{unit.model}:{unit.condition}:"
                            f"{unit.repeat}"),
    )  # fmt: skip


def _space(question: Question, seed: str) -> AnswerSpace:
    """What the `random` baseline may answer: one of the keys, or a number in range."""
    if question.kind == "number":
        low, high = AnswerSpace.number_range(question.low, question.high, 1e6)
        return AnswerSpace(low=low, high=high, seed=seed)
    return AnswerSpace(choices=question.keys, seed=seed)


def read_choice(question: Question, condition: str, text: str) -> tuple[int | None, str | None]:
    """(the 0-based option an answer names, None) or (None, why it names none); a number
    question's answer names no option, only whether its number can be read."""
    if question.kind == "number":
        number = parse_number(text, question.low, question.high)
        return (None, None) if number.ok else (None, number.error)
    stripped = text.strip()
    if stripped in question.keys:  # the random baseline answers a key as it is
        return question.keys.index(stripped), None
    if lettered(question):
        letter = parse_letter(text, "".join(question.keys))
        return (letter.value, None) if letter.ok else (None, letter.error)
    reading = read_option(text, question.options[condition])
    return reading.choice, reading.problem


class _Asker:
    """Asks one answer and makes its row: read, unreadable, or failed with its kind."""

    def __init__(self, plan: ClassPlan, job: Job) -> None:
        self.plan, self.spec, self.job = plan, plan.spec, job
        self.clean = redactor()

    def _row(self, unit: Unit, grammar: str | None = None, **fields: Any) -> ModelAnswer:
        spec = self.spec
        return ModelAnswer(
            session=spec.session, model=unit.model, condition=unit.condition,
            mode=spec.scoring, temperature=spec.temperature, repeat=unit.repeat,
            run_id=spec.run_id, grammar=grammar, **{"answer": "", **fields},
        )  # fmt: skip

    async def answer(self, unit: Unit, fresh: bool = False) -> ModelAnswer:
        from cogbias.llm import FatalLLMError, LLMError

        question = self.plan.question
        if not self.plan.asks(unit.model):  # the random baseline's probabilities: uniform
            return self._row(unit, probabilities=probs.uniform(len(question.keys)).p)
        request = request_for(self.plan, unit)
        client = self.job.fresh if fresh else self.job.client
        try:
            response = await client.complete(request)
        except FatalLLMError:
            raise
        except LLMError as exc:
            why = (str(exc).strip() or type(exc).__name__)[:MAX_ERROR]
            return self._row(unit, request.grammar, error=why, failure_kind=exc.failure_kind)
        try:
            return self._read(unit, request.grammar, self.clean(response.text) or "")
        except Exception as exc:  # an answer no reader foresaw fails alone, never the run
            why = f"the answer could not be read ({type(exc).__name__}: {str(exc)[:200]})"
            return self._row(unit, request.grammar, error=why, failure_kind="unparseable")

    def _read(self, unit: Unit, grammar: str | None, text: str) -> ModelAnswer:
        question = self.plan.question
        if self.spec.scoring == PROBABILITIES:
            try:
                shown, dist, sampled = read_half(text, len(question.keys))
            except probs.NotADistribution as exc:
                error = f"the log-probabilities are no distribution over the options: {exc}"
                return self._row(
                    unit, grammar, answer=cap_text(text)[0], error=error[:MAX_ERROR],
                    failure_kind="unparseable",
                )  # fmt: skip
            return self._row(
                unit, grammar, answer=cap_text(shown)[0], option=sampled, probabilities=dist.p
            )
        option, problem = read_choice(question, unit.condition, text)
        if problem is None:
            return self._row(unit, grammar, answer=cap_text(text)[0], option=option)
        return self._row(
            unit, grammar, answer=cap_text(text)[0], option=option,
            error=str(problem)[:MAX_ERROR], failure_kind="unparseable",
        )  # fmt: skip
