"""An answer's trace and what is left to read: the client's side of `core.reasoning`.

The client takes a reasoning model's trace out of every answer it returns, fresh or cached,
whichever way the provider sent it (a field of its own, or inline tags), so what a scorer
reads is the final answer alone and the trace travels beside it (`LLMResponse.reasoning`).
An answer with nothing left to read fails: "stopped while reasoning" when the model ran out
of room thinking (the trace is kept on the error), else "empty answer".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogbias.core import reasoning
from cogbias.core.records import cap_text
from cogbias.llm import direct, logprobs
from cogbias.llm.errors import LLMError


@dataclass(slots=True)
class Attempt:
    """One attempt's answer as the transport read it, before the client makes it an
    `LLMResponse` (the trace still inline, if the model wrote it so)."""

    text: str | None
    prompt_tokens: int
    completion_tokens: int
    latency: float
    reasoning: str = ""
    reasoning_tokens: int = 0
    finish_reason: str = ""  # "length": cut at `max_tokens` (`direct.finish_of`)


def attempt_of(
    data: dict[str, Any], latency: float, kwargs: Mapping[str, Any], model_id: str
) -> Attempt:
    """A chat completion in OpenAI's shape (the direct path's, or litellm's dumped) as one
    attempt: its text (the client's JSON of log-probabilities when they were asked), tokens,
    trace field, thinking tokens and finish reason."""
    text, prompt_tokens, completion_tokens = direct.answer_of(data)
    if json_asked(kwargs):
        text = logprobs.encode_answer(data, model_id)
    trace, thought = direct.reasoning_of(data)
    finish = direct.finish_of(data)
    return Attempt(text, prompt_tokens, completion_tokens, latency, trace, thought, finish)


def cached_finish(hit: Mapping[str, Any], max_tokens: int | None) -> str:
    """A cached answer's finish reason: the store keeps none, so an answer that used all of
    `max_tokens` (its thinking included) counts as cut ("length")."""
    finish = str(hit.get("finish_reason") or "")
    if not finish and max_tokens and int(hit.get("completion_tokens") or 0) >= max_tokens:
        return "length"
    return finish


def utf8(text: str | None) -> str:
    return (text or "").encode("utf-8", "replace").decode("utf-8")


def json_asked(kwargs: Mapping[str, Any]) -> bool:
    """Whether the answer is the client's JSON of log-probabilities (never split)."""
    return kwargs.get("top_logprobs") is not None


def cached_json(hit: Mapping[str, Any]) -> bool:
    """Whether a cached answer is a JSON object (log-probabilities, a gap fill): its strings
    may hold tokens like `</think>`, and it is never split."""
    return str(hit.get("text") or "").lstrip().startswith("{")


def split(text: str | None, field: str | None, json_answer: bool) -> reasoning.Split:
    """The answer and the whole trace: the provider's field and any inline tags. A lone
    surrogate ("\\ud800", valid in JSON, not in UTF-8) would make every later write of the
    text fail (cache, records): the rest is kept and it is marked. The trace is capped."""
    text, field = utf8(text), utf8(field)
    if json_answer:
        return reasoning.Split(text, capped(reasoning.joined(field)))
    inline = reasoning.split_trace(text)
    trace = reasoning.joined(field, inline.trace)
    return reasoning.Split(inline.answer, capped(trace), inline.unfinished)


def capped(trace: str) -> str:
    """A trace cut as stored answers are (`records.cap_text`): a model thinking at length,
    or an endpoint sending megabytes, must not freeze a page that shows it."""
    return cap_text(trace)[0] or ""


def no_answer(
    answer: Attempt, split: reasoning.Split, kwargs: Mapping[str, Any], model_id: str
) -> LLMError:
    """Why an answer with nothing to read failed: out of room while thinking (its trace
    left open, or the provider stopped it at `max_tokens` with thinking done), or empty."""
    thought = bool(split.trace) or answer.reasoning_tokens > 0
    if thought and (split.unfinished or answer.finish_reason == "length"):
        room = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        spent = (
            f" ({answer.reasoning_tokens:,} of them thinking)" if answer.reasoning_tokens else ""
        )
        error = LLMError(
            f"{model_id}: stopped while reasoning: it spent its whole room of "
            f"{room or 'its'} tokens{spent} and wrote no answer; give it more with "
            "--thinking-budget TOKENS (or ask a lower --reasoning-effort)",
            kind="reasoning",
            model=model_id,
        )
        error.trace = split.trace  # type: ignore[attr-defined]  # kept with the failed half
        return error
    return LLMError(f"{model_id}: empty answer", kind="empty", model=model_id)
