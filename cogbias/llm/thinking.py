"""How much a reasoning model may think: the effort and budget a request carries, the room its
answer gets, and what a plan expects it to spend.

A run asks one reasoning effort (`--reasoning-effort`, `core.reasoning.EFFORTS`) and may give
a thinking budget in tokens (`--thinking-budget`). Both are sent as litellm takes them
(`reasoning_effort`, which litellm maps onto each provider: OpenAI's effort, Anthropic's and
Gemini's thinking budgets; `thinking` for a budget), and as `reasoning_effort` in the body an
OpenAI-compatible server reads (vLLM, llama.cpp, Ollama). Only a model whose profile says it
reasons (`ModelProfile.reasoning`: the registry's `reasoning`, else litellm's model map) is
sent them, so a model that does not reason is asked exactly as before.

Thinking tokens count against an answer's `max_tokens` on every provider, so a reasoning
model's answer gets room for its thinking on top of the answer's own: the budget when one is
given, else `ROOM` at the effort asked (or the model's default effort). An answer that
spends all of it thinking is the failure "stopped while reasoning" (`llm.errors`), whose
message says to raise `--thinking-budget`.
"""

from __future__ import annotations

from cogbias.core.reasoning import EFFORTS

DEFAULT_EFFORT = "medium"  # what a reasoning model does when not told (OpenAI's default)
# Tokens of thinking an answer has room for at each effort (a ceiling, not an estimate):
# generous, since a cut trace is a failed half, and a model stops thinking when it is done.
ROOM = {"none": 0, "minimal": 2_048, "low": 4_096, "medium": 8_192, "high": 16_384}
# What a plan expects a short decision to cost in thinking tokens at each effort: a rough
# figure (no provider publishes one), said to be an estimate wherever it is shown; a run
# records what each answer really used (`decisions.reasoning_tokens`).
ESTIMATED = {"none": 0, "minimal": 100, "low": 500, "medium": 1_500, "high": 4_000}
# The budgets litellm sends Anthropic for an effort (its DEFAULT_REASONING_EFFORT_*), which a
# Message Batches request, built without litellm, carries the same; `none` sends none.
ANTHROPIC_BUDGETS = {"minimal": 1_024, "low": 1_024, "medium": 2_048, "high": 4_096}
MIN_BUDGET = 1_024  # Anthropic's smallest budget; a smaller one would be refused there
MAX_BUDGET = 200_000


def check_effort(effort: str | None) -> str | None:
    """`effort` when it is one of `EFFORTS` (or None); ValueError naming them otherwise."""
    if effort is not None and effort not in EFFORTS:
        raise ValueError(
            f"unknown reasoning effort {str(effort)[:20]!r}; use one of {', '.join(EFFORTS)}"
        )
    return effort


def check_budget(budget: int | None) -> int | None:
    """`budget` when it is a whole number of tokens in range (or None); ValueError otherwise."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ValueError(f"a thinking budget is a whole number of tokens, not {budget!r}")
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise ValueError(
            f"a thinking budget must be from {MIN_BUDGET:,} to {MAX_BUDGET:,} tokens, "
            f"not {budget:,}"
        )
    return budget


def effort_of(reasoning: bool, default: str | None, effort: str | None) -> str | None:
    """The effort a model thinks at: the one asked, else its default; None for a model that
    does not reason."""
    if not reasoning:
        return None
    return effort or default or DEFAULT_EFFORT


def room(reasoning: bool, default: str | None, effort: str | None, budget: int | None) -> int:
    """The thinking tokens an answer gets on top of its own (0 for a model that does not
    reason): the budget, else `ROOM` at the effort it thinks at."""
    if not reasoning:
        return 0
    if budget is not None:
        return budget
    return ROOM[effort_of(reasoning, default, effort) or DEFAULT_EFFORT]


def estimated(reasoning: bool, default: str | None, effort: str | None, budget: int | None) -> int:
    """The thinking tokens a plan expects one answer to spend (an estimate: see `ESTIMATED`),
    never more than its budget."""
    if not reasoning:
        return 0
    guess = ESTIMATED[effort_of(reasoning, default, effort) or DEFAULT_EFFORT]
    return guess if budget is None else min(guess, budget)


def billed_output(completion_tokens: int, reasoning_tokens: int) -> int:
    """The output tokens an answer is charged: OpenAI counts thinking inside
    `completion_tokens`; a provider whose reasoning count exceeds its completion count
    reported them apart, and they are charged as output too."""
    if reasoning_tokens > completion_tokens:
        return completion_tokens + reasoning_tokens
    return completion_tokens
