"""A paired run's intervention put to work (`--intervention`, `studies.interventions` says
what each is): a note before the question, a line after it, or the self-help rewrite, the
same for both halves of every pair. Only the real question of a conversation is changed: a
prompting method's worked examples stay as they are."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from cogbias.studies import interventions as defined

if TYPE_CHECKING:
    from cogbias.llm import LLMClient, LLMRequest, LLMResponse

Messages = tuple[tuple[str, str], ...]


def applied(messages: Messages, intervention: str) -> Messages:
    """`messages` with the intervention's note before (or its line after) the last user
    turn; as they are for `none` and `self_help` (which rewrites the question instead)."""
    note = defined.NOTES.get(intervention)
    line = defined.COT_LINE if intervention == defined.COT else None
    if note is None and line is None:
        return messages
    role, question = messages[-1]
    asked = f"{note}\n\n{question}" if note else f"{question}\n\n{line}"
    return (*messages[:-1], (role, asked))


async def self_help(
    client: LLMClient, request: LLMRequest, effort: str | None, budget: int | None
) -> tuple[LLMResponse, str, LLMRequest | str]:
    """The self-help rewrite of `request`'s question (the first call, thinking as the run
    asks: `effort`, `budget`): (its response, the rewrite, and the request to answer next,
    with its last user turn replaced by the rewrite, or why the rewrite cannot be asked:
    empty, too long)."""
    from cogbias.llm import LLMRequest

    profile = client.profile(request.model)
    question = request.messages[-1][1]
    thinking = profile.thinking(effort, budget)
    # a rewrite is as long as the question, and a reasoning model thinks first
    thinking["max_tokens"] += defined.REWRITE_TOKENS - profile.answer_tokens
    response = await client.complete(
        LLMRequest(
            model=request.model,
            messages=(("user", defined.rewrite_request(question)),),
            temperature=request.temperature,
            seed=request.seed,
            repeat=request.repeat,
            **thinking,
        )
    )
    text = defined.rewritten(response.text)
    problem = defined.rewrite_problem(text)
    if problem:
        return response, text, f"self-help: {problem}"
    role = request.messages[-1][0]
    return response, text, replace(request, messages=(*request.messages[:-1], (role, text)))
