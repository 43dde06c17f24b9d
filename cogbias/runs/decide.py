"""decide (answer + extract) and score: the paper's second and third steps.

Plain async functions over an `LLMClient`; the executor decides how many run at once and
where results go. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from cogbias.core import metrics, reasoning
from cogbias.core.limits import extraction_input
from cogbias.core.probabilities import Distribution
from cogbias.core.reading import (
    READ_ANSWER,
    READ_EXTRACTION,
    first_option,
    read_extraction,
    read_option,
)
from cogbias.core.records import (
    Decision,
    DecisionStatus,
    Instance,
    cap_text,
    decision_id,
    stable_id,
)
from cogbias.core.templates import (
    SECTIONS,
    Filled,
    render_decision_text,
    render_options,
)
from cogbias.llm.random_provider import option_space
from cogbias.runs import grammars
from cogbias.runs import interventions as asking
from cogbias.runs.prompting import BASELINE, decision_messages, item_kind, question_for
from cogbias.studies import interventions

if TYPE_CHECKING:
    from cogbias.llm import LLMClient, LLMRequest, LLMResponse
    from cogbias.llm.profiles import ModelProfile

T = TypeVar("T")
HALVES = ("control", "treatment")


# --------------------------------------------------------------------------- decide


# Each study asks in its paper's words (data/prompting.toml): Malberg et al.'s DEC prompt for
# test cases, the token-bias items as they are (`prompting.question_for(layout)`).
DEC_PROMPT = question_for(SECTIONS)
# A 135M model's "reasoning" adds time, not accuracy: on 2 shared cores each token costs
# 15-100 ms. Its answer budget is short (profiles.LOCAL_ANSWER_TOKENS); ask for one sentence.
LOCAL_DEC_SUFFIX = "\nReply in one short sentence that names the option you choose."
# A model that takes a grammar is held to "Option N" (`grammars.decision_grammar`) and told so: left to
# write freely, the local model names two options in one sentence ("Option 4: Very bad",
# where Option 7 reads "Very bad"), and such an answer is never guessed at.
OPTION_SUFFIX = '\nReply with the option you choose, as "Option N".'

EXTRACT_PROMPT = """Below are the answer options of a decision task and a written answer to it.

Options:
{options}

Answer:
{answer}

Which option does the answer choose? Reply with "Option N" and nothing else, where N is the \
number of the chosen option. If the answer does not choose exactly one option, reply \
"No option selected"."""


@dataclass
class HalfResult:
    answer: str = ""
    extraction: str = ""
    choice: int | None = None  # 0-based, original order
    error: str | None = None
    failure_kind: str | None = None
    tokens: int = 0  # incurred now (cached answers cost nothing)
    cost: float = 0.0
    cost_saved: float = 0.0
    cached: bool = True
    # the half's option probabilities (the `probabilities` scorer), original order
    distribution: Distribution | None = None
    # the run's reducer left the half's samples undecided (`runs.reducers`): no choice, no
    # error; the pair is `DecisionStatus.ABSTAINED`
    abstained: bool = False
    # a reasoning model's trace of the answer (`core.reasoning`) and the thinking tokens of
    # every call of the half; `--intervention self_help`: the question as the model rewrote it
    reasoning: str = ""
    reasoning_tokens: int = 0
    rewrite: str = ""

    def account(self, response: LLMResponse) -> None:
        self.tokens += 0 if response.cached else response.prompt_tokens + response.completion_tokens
        self.reasoning_tokens += response.reasoning_tokens
        self.cost += response.cost or 0.0  # the known part: an unpriced call is None
        self.cost_saved += response.cost_saved
        self.cached = self.cached and response.cached


def held_grammar(filled: Filled, order: Sequence[int]) -> str:
    """The grammar a model that takes one answers a half under: "Option N" where the options
    are numbered (the paper's layout), else the text of one option as presented (a token-bias
    item's "(a) …", a Yes/No question), which `core.reading` reads by its text."""
    if filled.layout == SECTIONS:
        return grammars.decision_grammar(len(filled.options))
    return grammars.grammar(grammars.one_of([filled.options[j].strip() for j in order]))


def random_draw(run_id: str, instance_id: str, half: str, repeat: int, seed: int) -> str:
    """The seed of the `random` model's answer to one half of one decision: each decision
    draws on its own, whatever the question's text (identical questions are independent)."""
    return stable_id("random", run_id, instance_id, half, repeat, seed)


@dataclass(frozen=True)
class PairAsk:
    """How a run asks one pair, the same for every scorer (`scorers.DecidePair`): the run's
    settings and the pair's repeat. A run makes one per repeat (`paired.pair_ask`), so a new
    setting is one field here and not one more parameter of every scorer and caller. The
    decision's id is made of `run_id`, `repeat`, `temperature` and `prompting`
    (`records.decision_id`), each request's cache key of what it sends."""

    run_id: str = ""
    temperature: float = 0.0
    repeat: int = 0
    seed: int = 0
    prompting: str = BASELINE  # see `cogbias.runs.prompting`; shapes only the first question
    extractor: str | None = None  # who reads an answer when it must be read (default: model)
    option_order: str = metrics.HALF_REVERSED  # the run's (`RunSpec.option_order`)
    reading: str = READ_ANSWER  # the run's (`RunSpec.reading`); see `decide_half`
    # answers asked of each half and how they become its answer (`RunSpec.samples`,
    # `RunSpec.reducer`; None: the scorer's own); see `runs.sampling`
    samples: int = 1
    reducer: str | None = None
    # how much a reasoning model may think (`llm.thinking`; sent only to models that reason)
    # and the run's intervention (`studies.interventions`), both the run's (`RunSpec`)
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    intervention: str = interventions.NONE


def random_draw_of(ask: PairAsk, instance: Instance, half: str) -> str:
    """`random_draw` for one half of the pair `ask` asks."""
    return random_draw(ask.run_id, instance.id, half, ask.repeat, ask.seed)


async def decide_half(
    client: LLMClient,
    filled: Filled,
    order: Sequence[int],
    model: str,
    ask: PairAsk,
    draw: str = "",
) -> HalfResult:
    """Free answer, read by `core.reading`; an extraction by `ask.extractor` (default:
    `model`) only where the answer leaves a choice it could confirm. Mapped back to the
    original order.

    With `ask.reading` READ_EXTRACTION (the Malberg paper's reading) every answer goes to the
    extraction call and its first "Option N" is the choice, unchecked; a model that writes no
    text (the `random` baseline) has already answered with an option and is not extracted.
    `ask.prompting` shapes only the first question; the extraction step is the same for every
    method. `draw` seeds the `random` model's answer (see `random_draw`); other models
    ignore it.
    """
    result = HalfResult()
    profile = client.profile(model)
    request = _decision_request(filled, order, model, ask, draw, profile)
    if ask.intervention == interventions.SELF_HELP and profile.writes_text:
        rewrite, result.rewrite, asked = await asking.self_help(
            client, request, ask.reasoning_effort, ask.thinking_budget
        )
        result.account(rewrite)
        if isinstance(asked, str):  # the rewrite cannot be asked: the half is unreadable
            result.error, result.failure_kind = asked, "unparseable"
            return result
        request = asked
    first = await client.complete(request)
    result.account(first)
    result.answer, result.reasoning = first.text, first.reasoning
    reader = ask.extractor or model
    if ask.reading != READ_EXTRACTION or not profile.writes_text:
        await _read_answer(client, result, filled, order, reader, ask)
        return result
    # the paper's reading: the extraction's first "Option N" is the choice, unchecked; the
    # paper's extraction asks at the decision's temperature, so it is asked so here
    reply = await _extract(client, result, filled, order, reader, ask.temperature, ask)
    picked = first_option(reply, len(filled.options))
    if picked is None:
        result.error = f"the extraction by {reader} named no option ({_said(reply)})"
        result.failure_kind = "unparseable"
    else:
        result.choice = order[picked]
    return result


def _decision_request(
    filled: Filled,
    order: Sequence[int],
    model: str,
    ask: PairAsk,
    draw: str,
    profile: ModelProfile,
) -> LLMRequest:
    """The first question of a half: the task in `ask.prompting`'s words. Asked plainly
    (`BASELINE`) and read by cogbias (`READ_ANSWER`), a model that takes a grammar is held to
    an option (`held_grammar`; "Option N", said in `OPTION_SUFFIX`, where the options are
    numbered); otherwise a local model is asked for one sentence (`LOCAL_DEC_SUFFIX`). Other
    prompting methods ask for reasoning, which a grammar forbids, as it forbids the `cot`
    intervention's steps and a reasoning model's trace."""
    from cogbias.llm import LLMRequest

    plain = ask.prompting == BASELINE and ask.intervention != interventions.COT
    # the paper's reading (`--reading extraction`) reads a free answer: it is not held
    held = plain and profile.grammar and not profile.reasoning and ask.reading == READ_ANSWER
    short = plain and profile.kind == "local"
    numbered = filled.layout == SECTIONS  # a study's own layout is asked in its own words
    suffix = OPTION_SUFFIX if held and numbered else LOCAL_DEC_SUFFIX if short and not held else ""
    messages = decision_messages(
        render_decision_text(filled, order),
        ask.prompting,
        question_for(filled.layout) + suffix,
        filled.layout,
        item_kind(filled.options),
    )
    return LLMRequest(
        model=model,
        messages=asking.applied(messages, ask.intervention),
        temperature=ask.temperature,
        seed=ask.seed,
        grammar=held_grammar(filled, order) if held else None,
        repeat=ask.repeat,
        # only the `random` model answers from it (a model that writes text ignores it)
        answer_space=None if profile.writes_text else option_space(len(filled.options), draw),
        **profile.thinking(ask.reasoning_effort, ask.thinking_budget),
    )


async def _read_answer(
    client: LLMClient,
    result: HalfResult,
    filled: Filled,
    order: Sequence[int],
    reader: str,
    ask: PairAsk,
) -> None:
    """Read the answer itself (`core.reading`); ask `reader` (at temperature 0) only where
    the answer leaves a choice it could confirm, and take its reply only if the answer
    confirms it."""
    read = read_option(result.answer, [filled.options[j] for j in order])
    if read.choice is not None:
        result.extraction = f"Option {read.choice + 1}"  # as the extraction prompt asks
        result.choice = order[read.choice]
        return
    why = f"no option could be extracted from the answer: {read.problem}"
    if read.extraction_could_confirm:
        reply = await _extract(client, result, filled, order, reader, 0.0, ask)
        picked = read_extraction(reply, len(filled.options))
        if picked is not None and read.confirms(picked):
            result.choice = order[picked]
            return
        why += (
            f"; the extraction by {reader} found no option ({_said(reply)})"
            if picked is None
            else f"; the extraction by {reader} said {_said(reply)}, which the answer does not "
            "confirm"
        )
    result.error = why
    result.failure_kind = "unparseable"


async def _extract(
    client: LLMClient,
    result: HalfResult,
    filled: Filled,
    order: Sequence[int],
    reader: str,
    temperature: float,
    ask: PairAsk,
) -> str:
    """Ask `reader` at `temperature` which option `result.answer` chose (the paper's second
    call); the reply is recorded in `result.extraction` and returned."""
    from cogbias.llm import LLMRequest

    thinking = client.profile(reader).thinking(ask.reasoning_effort, ask.thinking_budget)
    thinking["max_tokens"] += 12 - client.profile(reader).answer_tokens  # "Option N", and room
    second = await client.complete(
        LLMRequest(
            model=reader,
            messages=(
                (
                    "user",
                    EXTRACT_PROMPT.format(
                        options=render_options(filled.options, order),
                        answer=extraction_input(result.answer),
                    ),
                ),
            ),
            temperature=temperature,
            seed=ask.seed,
            **thinking,
            grammar=grammars.option_grammar(len(filled.options))
            if client.profile(reader).grammar
            else None,
            repeat=ask.repeat,
        )
    )
    result.account(second)
    result.extraction = f"{' '.join(second.text.split())[:120]} (extracted by {reader})"
    return second.text


def _said(reply: str) -> str:
    return repr(" ".join(reply.split())[:40])


async def decide_pair(client: LLMClient, instance: Instance, model: str, ask: PairAsk) -> Decision:
    """Answer both halves (same option order for both) and score: one decision.

    `ask.option_order` is the run's: the options as written, or reversed in a seeded half of
    the pairs; `ask.reading` is the run's: see `decide_half`.
    Raises `FatalLLMError` (the run must stop); any other failed call becomes a failed row
    whose `failure_kind` says whether resuming should retry it, and so does an answer that
    raised while it was read (`settled`).
    """
    order = metrics.presented_order(instance.n_options, ask.option_order, instance.id, ask.seed)
    asks = [
        decide_half(
            client, instance.half(h), order, model, ask, draw=random_draw_of(ask, instance, h)
        )
        for h in HALVES
    ]
    outcomes = await ask_all(asks, client is not None and client.profile(model).prefix_cache)
    control, treatment = (settled(outcome) for outcome in outcomes)
    return decision_row(instance, model, ask, order, control, treatment)


def settled(outcome: T | BaseException) -> T | HalfResult:
    """One half's outcome as `gather(..., return_exceptions=True)` hands it over: what the
    half returned, or a failed `HalfResult` for a failed call (its `failure_kind` says whether
    resuming retries it) or for an answer that raised while it was read (`unreadable_half`).
    Raised again when the run must stop: `FatalLLMError`, or `CacheMiss` (a batch collecting
    its requests)."""
    from cogbias.llm import FatalLLMError, LLMError
    from cogbias.llm.errors import CacheMiss

    if isinstance(outcome, FatalLLMError | CacheMiss):
        raise outcome
    if isinstance(outcome, LLMError):  # a trace cut off while thinking is kept
        trace = getattr(outcome, "trace", "")
        return HalfResult(error=str(outcome), failure_kind=outcome.failure_kind, reasoning=trace)
    if isinstance(outcome, Exception):  # reading one answer never stops the run
        return unreadable_half(outcome)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def unreadable_half(exc: Exception) -> HalfResult:
    """A half whose answer came but raised while it was read (a server's answer no reader
    foresaw): that half is unparseable with the reason, the pair fails, the run goes on."""
    return HalfResult(
        error=f"the answer could not be read ({type(exc).__name__}: {str(exc)[:200]})",
        failure_kind="unparseable",
    )


async def ask_all(asks: Sequence[Awaitable[T]], one_by_one: bool) -> list[T | BaseException]:
    """Await every ask like `gather(..., return_exceptions=True)`; `one_by_one` for a server
    that keeps the last prompt's prefix (a local model's KV cache): the halves of a pair, and
    the samples of a half, differ in a few words or none, so asking them in turn reuses it."""
    if not one_by_one:
        return await asyncio.gather(*asks, return_exceptions=True)
    outcomes: list[T | BaseException] = []
    for ask in asks:
        try:
            outcomes.append(await ask)
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def failed_decision(
    instance: Instance, model: str, ask: PairAsk, error: str, failure_kind: str
) -> Decision:
    """The decision of a pair that could not be asked (e.g. its generation failed)."""
    order = list(range(instance.n_options))
    failed = HalfResult(error=error, failure_kind=failure_kind)
    return decision_row(instance, model, ask, order, failed, HalfResult())


# A pair fails with its most retryable half's kind: a transient half must be asked again.
KIND_RANK = {
    kind: i
    for i, kind in enumerate(("transient", "invalid", "stopped_reasoning", "unparseable", "fatal"))
}


def decision_row(
    instance: Instance,
    model: str,
    ask: PairAsk,
    order: Sequence[int],
    c: HalfResult,
    t: HalfResult,
    score: Callable[[HalfResult, HalfResult], float | None] | None = None,
) -> Decision:
    """One decision from both halves, whatever the scorer (`runs.scorers`): the pair fails
    when a half failed, abstains (`DecisionStatus.ABSTAINED`, unscored) when a half's samples were left
    undecided by the run's reducer, and is scored otherwise by `score(control, treatment)`
    (default `choice_score`: the test case's metric on both choices). A scorer that keeps
    more of each half sets its own fields on the decision it gets back."""
    failed = [(name, h) for name, h in (("control", c), ("treatment", t)) if h.error]
    abstained = not failed and (c.abstained or t.abstained)
    scored = None
    if not failed and not abstained:
        scored = (score or partial(choice_score, instance))(c, t)
    kinds = sorted((h.failure_kind or "invalid" for _, h in failed), key=KIND_RANK.__getitem__)
    control_answer, cut_c = cap_text(c.answer)
    treatment_answer, cut_t = cap_text(t.answer)
    return Decision(
        id=decision_id(ask.run_id, instance.id, model, ask.repeat, ask.temperature, ask.prompting),
        run_id=ask.run_id,
        instance_id=instance.id,
        test_case=instance.test_case,
        model=model,
        temperature=ask.temperature,
        repeat=ask.repeat,
        reversed=list(order) != sorted(order),
        control_order=list(order),
        treatment_order=list(order),
        control_answer=control_answer,
        treatment_answer=treatment_answer,
        control_extraction=c.extraction[:200],
        treatment_extraction=t.extraction[:200],
        control_choice=c.choice,
        treatment_choice=t.choice,
        score=scored,
        status=_status(failed, abstained),
        error="; ".join(f"{name}: {h.error}" for name, h in failed) or None,
        failure_kind=kinds[0] if kinds else None,
        truncated=cut_c or cut_t,
        cached=c.cached and t.cached,
        tokens=c.tokens + t.tokens,
        cost=c.cost + t.cost,
        cost_saved=c.cost_saved + t.cost_saved,
        **traces(instance, c, t),
    )


def traces(instance: Instance, c: HalfResult, t: HalfResult) -> dict[str, Any]:
    """A decision's reasoning fields: each half's trace and rewrite, the pair's thinking
    tokens (None when no answer reported any), and whether each trace names the treatment's
    eliciting detail (`core.reasoning.signal`: a string match against the halves' texts
    without their options, which both share)."""
    texts = [f"{h.situation}\n{h.prompt}" for h in map(instance.half, HALVES)]
    control_mentions, treatment_mentions = reasoning.signal(texts, (c.reasoning, t.reasoning))
    return {
        "control_reasoning": c.reasoning or None,
        "treatment_reasoning": t.reasoning or None,
        "reasoning_tokens": (c.reasoning_tokens + t.reasoning_tokens) or None,
        "control_trace_mentions": control_mentions,
        "treatment_trace_mentions": treatment_mentions,
        "control_rewrite": c.rewrite or None,
        "treatment_rewrite": t.rewrite or None,
    }


def _status(failed: Sequence[Any], abstained: bool) -> DecisionStatus:
    """A pair fails when a half failed, abstains when a half was left undecided, else is ok."""
    if failed:
        return DecisionStatus.FAILED
    return DecisionStatus.ABSTAINED if abstained else DecisionStatus.OK


def choice_score(instance: Instance, c: HalfResult, t: HalfResult) -> float | None:
    """The pair's score from its sampled choices (None when a half chose no option)."""
    if c.choice is None or t.choice is None:
        return None
    return score_instance(instance, c.choice, t.choice)


def score_instance(instance: Instance, control_choice: int, treatment_choice: int) -> float:
    """The test case's metric on a pair of 0-based answers in original order."""
    return metrics.score_pair(control_choice, treatment_choice, instance.metric, instance.n_options)
