"""The chosen models answer exactly the question the class saw, stored with the session.

A teacher reveals the class's split beside what models answered to the same words: each
condition's question as a participant saw it (`Question.prompts`, with its system message),
either sampled `n` times at a temperature, or once asking for the option's letter and reading
every option's probability from the token log-probabilities (models whose profile lists the
most probable tokens). The offline `random` baseline answers uniformly and costs nothing; the
local model needs no key. The cost is estimated before any call (`cost_text`), keys are
checked before any call (`check_ask`), and answers go through the store's response cache, so
asking again is free. Answers are kept per session (`store.class_models`), so a restart of
the teacher's app shows them again and a re-run with the same settings replaces them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import get_session
from cogbias.core import probabilities as probs
from cogbias.core.answers import parse_letter, parse_number
from cogbias.core.limits import checked_name
from cogbias.core.reading import read_option
from cogbias.core.records import cap_text
from cogbias.llm import direct, logprobs
from cogbias.llm.errors import LLMError
from cogbias.llm.keys import missing_key, missing_key_message
from cogbias.llm.profiles import ModelProfile, resolve
from cogbias.llm.random_provider import AnswerSpace
from cogbias.llm.request import LLMRequest, cache_key
from cogbias.runs.live import cached_client
from cogbias.runs.probabilities import read_half
from cogbias.store import Store
from cogbias.store.class_models import ModelAnswer

SAMPLE = "sample"
PROBABILITIES = "probabilities"
MODES = (SAMPLE, PROBABILITIES)
MAX_MODELS = 8
MAX_N = 200  # answers per model and condition: plenty for a share, bounded for a class
EST_CHARS_PER_TOKEN = 4  # the usual rule of thumb; the estimate is an upper bound anyway
EST_OVERHEAD_TOKENS = 12  # chat formatting around the messages
LABEL_HINT = "Choose exactly one of the options. Reply with its letter only."
MAX_ERROR = 300


class ClassModelError(ValueError):
    """What is wrong with a request to run models on a session, in plain words."""


@dataclass(frozen=True)
class ModelAsk:
    """Which models answer, and how: `n` samples at `temperature` (mode "sample"), or one
    call per condition read as option probabilities (mode "probabilities")."""

    models: tuple[str, ...]
    mode: str = SAMPLE
    n: int = 10
    temperature: float = 0.7
    api_base: str | None = None

    @property
    def repeats(self) -> int:
        return self.n if self.mode == SAMPLE else 1


@dataclass(frozen=True)
class RunOutcome:
    """What a run of models on a session did: answers stored, how many unreadable or failed
    (with the first reasons), and what it cost (None: a model's price is unknown)."""

    stored: int
    failed: int
    cost: float | None
    problems: tuple[str, ...] = ()


def _profile(model: str, api_base: str | None) -> ModelProfile:
    try:
        checked_name(model, "model")  # a label on the class's pages and its report
        return resolve(model, api_base)
    except (LLMError, ValueError) as exc:
        raise ClassModelError(str(exc)) from None


def check_ask(question: Question, ask: ModelAsk) -> None:
    """Raise `ClassModelError` saying what is wrong before any call: no or too many models,
    a count or temperature out of range, probabilities on a model or question that cannot
    give them, a key that is not set."""
    if not ask.models:
        raise ClassModelError("choose at least one model to answer the class's question")
    if len(ask.models) > MAX_MODELS:
        raise ClassModelError(f"choose at most {MAX_MODELS} models at once")
    if ask.mode not in MODES:
        raise ClassModelError(f"unknown mode {ask.mode!r}: use {' or '.join(MODES)}")
    if not isinstance(ask.n, int) or not 1 <= ask.n <= MAX_N:
        raise ClassModelError(f"answers per condition must be between 1 and {MAX_N}")
    if not math.isfinite(ask.temperature) or ask.temperature < 0:
        raise ClassModelError("the temperature must be a number of 0 or more")
    if ask.mode == PROBABILITIES and question.kind == "number":
        raise ClassModelError(
            "a number question has no options to read probabilities of: sample answers instead"
        )
    if ask.mode == PROBABILITIES and len(question.keys) > len(logprobs.LABELS):
        raise ClassModelError(f"probabilities need at most {len(logprobs.LABELS)} options")
    for model in dict.fromkeys(ask.models):
        profile = _profile(model, ask.api_base)
        if ask.mode == SAMPLE and ask.temperature > profile.max_temperature:
            raise ClassModelError(
                f"{model} accepts temperatures up to {profile.max_temperature:g}, "
                f"not {ask.temperature:g}"
            )
        if ask.mode == PROBABILITIES and profile.writes_text and not profile.top_logprobs:
            raise ClassModelError(
                f"{model} does not give the probabilities of its most likely answers: "
                "sample its answers instead"
            )
        variable = missing_key(model, ask.api_base)
        if variable:
            raise ClassModelError(missing_key_message(model, variable))


def _letters(question: Question) -> bool:
    """Whether the question's own prompts label the options A, B, … (the classics)."""
    return bool(question.keys) and question.keys == tuple(
        logprobs.LABELS[: len(question.keys)].lower()
    )


def prompt_for(question: Question, condition: str, mode: str) -> str:
    """The text a model is asked for one condition: the question's own prompt; for option
    probabilities of a question whose prompt does not letter its options, the participant's
    text with the options lettered A, B, … (a letter is one token, an option number is not)."""
    if mode == SAMPLE or _letters(question):
        return question.prompts[condition]
    marks = logprobs.labels(len(question.options[condition]))
    lines = [question.texts[condition].strip(), "", "Answer options:"]
    lines += [
        f"{mark}: {text}" for mark, text in zip(marks, question.options[condition], strict=True)
    ]
    return "\n".join([*lines, "", LABEL_HINT])


def _space(question: Question, seed: str) -> AnswerSpace:
    """What the `random` baseline may answer: one of the keys, or a number in range."""
    if question.kind == "number":
        low, high = AnswerSpace.number_range(question.low, question.high, 1e6)
        return AnswerSpace(low=low, high=high, seed=seed)
    return AnswerSpace(choices=question.keys, seed=seed)


def _request(
    question: Question, condition: str, model: str, ask: ModelAsk, repeat: int, code: str
) -> LLMRequest:
    messages = [("user", prompt_for(question, condition, ask.mode))]
    if question.system:
        messages.insert(0, ("system", question.system))
    probabilities = ask.mode == PROBABILITIES
    return LLMRequest(
        model=model,
        messages=tuple(messages),
        temperature=_temperature(ask),
        repeat=repeat,
        top_logprobs=logprobs.TOP_LOGPROBS if probabilities else None,
        answer_space=_space(question, f"class:{code}:{model}:{condition}:{repeat}"),
    )


def _temperature(ask: ModelAsk) -> float:
    """The temperature an answer is stored under: probabilities are read at 0."""
    return 0.0 if ask.mode == PROBABILITIES else ask.temperature


def planned_calls(question: Question, ask: ModelAsk) -> int:
    """Model calls the ask makes when nothing is cached (the `random` model's included)."""
    return len(ask.models) * len(question.conditions) * ask.repeats


def estimated_cost(question: Question, ask: ModelAsk) -> float | None:
    """USD at most for the ask (every answer as long as the profile allows), 0 for offline
    models; None when a chosen model's price is unknown."""
    total = 0.0
    for model in dict.fromkeys(ask.models):
        profile = _profile(model, ask.api_base)
        if not profile.writes_text or profile.kind == "local":
            continue
        for condition in question.conditions:
            text = question.system + prompt_for(question, condition, ask.mode)
            prompt = len(text) // EST_CHARS_PER_TOKEN + EST_OVERHEAD_TOKENS
            completion = 1 if ask.mode == PROBABILITIES else int(profile.answer_tokens)
            price = profile.price_per_call(prompt, completion)
            if price is None:
                return None
            total += price * ask.repeats
    return total


def cost_text(question: Question, ask: ModelAsk) -> str:
    """The cost before any call, as the page and the command show it."""
    calls = planned_calls(question, ask)
    cost = estimated_cost(question, ask)
    if cost is None:
        return f"{calls} calls; cost unknown (a chosen model has no known price)"
    if cost == 0:
        return f"{calls} calls; free (offline models, no key needed)"
    return f"{calls} calls; at most ${cost:.4f} (answers already cached are free)"


def read_choice(question: Question, condition: str, text: str) -> tuple[int | None, str | None]:
    """(the 0-based option an answer names, None) or (None, why it names none)."""
    if question.kind == "number":
        number = parse_number(text, question.low, question.high)
        return (None, None) if number.ok else (None, number.error)
    stripped = text.strip()
    if stripped in question.keys:  # the random baseline answers a key as it is
        return question.keys.index(stripped), None
    if _letters(question):
        letter = parse_letter(text, "".join(question.keys))
        return (letter.value, None) if letter.ok else (None, letter.error)
    reading = read_option(text, question.options[condition])
    return reading.choice, reading.problem


def _answer(
    question: Question, key: tuple[str, str, int], ask: ModelAsk, code: str, text: str
) -> ModelAnswer:
    model, condition, repeat = key
    base = {"session": code, "model": model, "condition": condition, "mode": ask.mode}
    base |= {"temperature": _temperature(ask), "repeat": repeat}
    if ask.mode == PROBABILITIES:
        n = len(question.keys)
        try:
            shown, dist, sampled = read_half(text, n)
        except probs.NotADistribution as exc:
            return ModelAnswer(**base, answer=cap_text(text)[0], error=str(exc)[:MAX_ERROR])
        return ModelAnswer(**base, answer=cap_text(shown)[0], option=sampled, probabilities=dist.p)
    option, problem = read_choice(question, condition, text)
    error = None if problem is None else str(problem)[:MAX_ERROR]
    return ModelAnswer(**base, answer=cap_text(text)[0], option=option, error=error)


async def _ask_all(client: Any, requests: Sequence[LLMRequest]) -> list[Any]:
    try:
        return await asyncio.gather(*(client.complete(r) for r in requests), return_exceptions=True)
    finally:
        await direct.close_sessions()


def run_models(store: Store, code: str, ask: ModelAsk) -> RunOutcome:
    """Ask the models the session's question and store their answers (replacing those asked
    with the same settings). A call that fails is stored as a failed answer with its reason,
    so the teacher sees it; nothing half-written: all answers are stored in one transaction."""
    session = get_session(store, code)
    if session is None:
        raise ClassModelError(f"there is no class session {code!r}")
    question = session.question
    check_ask(question, ask)
    keys: list[tuple[str, str, int]] = []
    requests: list[LLMRequest] = []
    uniform: list[ModelAnswer] = []
    for model in dict.fromkeys(ask.models):
        offline = not _profile(model, ask.api_base).writes_text
        for condition in question.conditions:
            if offline and ask.mode == PROBABILITIES:  # the random baseline: uniform
                base = {"session": session.code, "model": model, "condition": condition}
                uniform.append(
                    ModelAnswer(**base, mode=ask.mode, temperature=0.0, repeat=0,
                                answer="", probabilities=probs.uniform(len(question.keys)).p)
                )  # fmt: skip
                continue
            for repeat in range(ask.repeats):
                keys.append((model, condition, repeat))
                requests.append(_request(question, condition, model, ask, repeat, session.code))
    with cached_client(store, api_base=ask.api_base) as client:
        replies = asyncio.run(_ask_all(client, requests)) if requests else []
    answers, cost, problems = list(uniform), 0.0, []
    for key, reply in zip(keys, replies, strict=True):
        if isinstance(reply, BaseException):
            why = f"{key[0]}: {str(reply).strip() or type(reply).__name__}"[:MAX_ERROR]
            problems.append(why)
            answers.append(_failed(session.code, key, ask, why))
            continue
        cost = None if cost is None or reply.cost is None else cost + reply.cost
        answers.append(_answer(question, key, ask, session.code, reply.text))
    store.save_model_answers(answers)
    failed = sum(a.error is not None for a in answers)
    problems += [f"{a.model}: {a.error}" for a in answers if a.error and a.answer]
    return RunOutcome(len(answers), failed, cost, tuple(dict.fromkeys(problems))[:5])


def _failed(code: str, key: tuple[str, str, int], ask: ModelAsk, why: str) -> ModelAnswer:
    model, condition, repeat = key
    return ModelAnswer(code, model, condition, ask.mode, _temperature(ask), repeat, "", error=why)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ModelResult:
    """One model's answers to one condition, asked one way, summarised as the class's are.

    Choices: the share choosing each option with its Wilson 95 % interval (sampled), or the
    model's probability of each option (then `low` = `high` = the probability: one call, no
    sampling spread). Scales: also the mean 1-based position with its t interval (for
    probabilities, the expected position). Numbers: the mean with its t interval and the
    median with its distribution-free interval (the originals report medians)."""

    model: str
    condition: str
    mode: str
    temperature: float
    n: int
    n_failed: int
    shares: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    mean: float | None = None
    mean_low: float | None = None
    mean_high: float | None = None
    median: float | None = None
    median_low: float | None = None
    median_high: float | None = None

    @property
    def who(self) -> str:
        """How a chart's legend and a table name it: 'model gpt-4o (10 × T 0.7)'."""
        how = "probabilities" if self.mode == PROBABILITIES else f"T {self.temperature:g}"
        return f"model {self.model} ({how})"


def _interval(values: Sequence[float], low: float, high: float) -> tuple[float, float]:
    from numpy import asarray

    from cogbias.studies.analysis import t_interval

    if len(values) < 2:
        return (math.nan, math.nan)
    return t_interval(asarray(values, dtype=float), bounds=(low, high))


def _summary(question: Question, answers: Sequence[ModelAnswer]) -> ModelResult:
    from cogbias.studies.reference_stats import median, median_interval, wilson_interval

    first = answers[0]
    good = [a for a in answers if a.error is None]
    n_options = len(question.keys)
    fields: dict[str, Any] = {"model": first.model, "condition": first.condition}
    fields |= {"mode": first.mode, "temperature": first.temperature, "n": len(good)}
    fields["n_failed"] = len(answers) - len(good)
    if question.kind == "number":
        numbers = [parse_number(a.answer, question.low, question.high).value for a in good]
        values = [float(v) for v in numbers if v is not None]
        fields |= {"n": len(values), "shares": (), "low": (), "high": ()}
        fields["n_failed"] = len(answers) - len(values)
        if values:
            low, high = _interval(values, -math.inf, math.inf)
            fields |= {"mean": math.fsum(values) / len(values), "mean_low": low}
            fields |= {"mean_high": high, "median": median(values)}
            fields["median_low"], fields["median_high"] = median_interval(values)
        return ModelResult(**fields)
    if first.mode == PROBABILITIES:
        rows = [a.probabilities for a in good if a.probabilities]
        shares = (
            tuple(math.fsum(p[i] for p in rows) / len(rows) for i in range(n_options))
            if rows
            else ()
        )
        fields |= {"shares": shares, "low": shares, "high": shares}
        if question.kind == "scale" and shares:
            expected = math.fsum((i + 1) * p for i, p in enumerate(shares))
            fields |= {"mean": expected, "mean_low": expected, "mean_high": expected}
        return ModelResult(**fields)
    chosen = [a.option for a in good if a.option is not None and 0 <= a.option < n_options]
    fields["n"] = len(chosen)
    fields["n_failed"] = len(answers) - len(chosen)
    counts = [chosen.count(i) for i in range(n_options)]
    shares = tuple(c / len(chosen) for c in counts) if chosen else ()
    bounds = [wilson_interval(s, len(chosen)) for s in shares]
    fields |= {"shares": shares, "low": tuple(b[0] for b in bounds)}
    fields["high"] = tuple(b[1] for b in bounds)
    if question.kind == "scale" and chosen:
        positions = [c + 1.0 for c in chosen]
        low, high = _interval(positions, 1.0, float(n_options))
        fields |= {
            "mean": math.fsum(positions) / len(positions),
            "mean_low": low,
            "mean_high": high,
        }
    return ModelResult(**fields)


def model_results(store: Store, code: str) -> list[ModelResult]:
    """Per model, way of asking and condition (in the question's order): the summary of the
    session's stored model answers (empty for an unknown session or one no model answered)."""
    session = get_session(store, code)
    if session is None:
        return []
    question = session.question
    groups: dict[tuple[str, str, float, str], list[ModelAnswer]] = {}
    for answer in store.model_answers(session.code):
        if answer.condition in question.conditions:
            key = (answer.model, answer.mode, answer.temperature, answer.condition)
            groups.setdefault(key, []).append(answer)
    order = {c: i for i, c in enumerate(question.conditions)}
    keys = sorted(groups, key=lambda k: (k[0], k[1], k[2], order[k[3]]))
    return [_summary(question, groups[k]) for k in keys]


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 6)


def model_results_json(store: Store, code: str) -> list[dict[str, Any]]:
    """`model_results` as JSON-able dicts (NaN as null), for `cogbias class results`."""
    out = []
    for r in model_results(store, code):
        out.append(
            {
                "model": r.model, "condition": r.condition, "mode": r.mode,
                "temperature": r.temperature, "n": r.n, "n_failed": r.n_failed,
                "shares": [_finite(x) for x in r.shares], "low": [_finite(x) for x in r.low],
                "high": [_finite(x) for x in r.high], "mean": _finite(r.mean),
                "mean_low": _finite(r.mean_low), "mean_high": _finite(r.mean_high),
                "median": _finite(r.median), "median_low": _finite(r.median_low),
                "median_high": _finite(r.median_high),
            }
        )  # fmt: skip
    return out


def spent(
    store: Store, code: str, api_base: str | None = None
) -> dict[tuple[str, str, float], float | None]:
    """What each (model, mode, temperature) of a session's stored answers cost when first
    asked, read back from the response cache the answers went through (the same requests,
    rebuilt; `api_base` as they were asked, the page's is None): 0 for offline and local
    models, None when a paid answer is no longer cached (`cogbias cache prune`) or its price
    was unknown. A report's methods say it."""
    session = get_session(store, code)
    if session is None:
        return {}
    totals: dict[tuple[str, str, float], float | None] = {}
    for answer in store.model_answers(session.code):
        group = (answer.model, answer.mode, answer.temperature)
        total = totals.setdefault(group, 0.0)
        try:
            profile = _profile(answer.model, api_base)
        except ValueError:  # a model no longer resolved: its price is not known
            totals[group] = None
            continue
        failed_call = answer.error is not None and not answer.answer  # nothing came back
        if not profile.writes_text or profile.kind == "local" or total is None or failed_call:
            continue
        ask = ModelAsk((answer.model,), answer.mode, 1, answer.temperature)
        request = _request(
            session.question, answer.condition, answer.model, ask, answer.repeat, session.code
        )
        hit = store.get_llm_call(cache_key(request, profile))
        cost = None if hit is None else hit.get("cost")
        totals[group] = None if cost is None else total + float(cost)
    return totals
