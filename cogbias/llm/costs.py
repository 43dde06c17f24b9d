"""Costs: the one estimator of what calls will cost, and the one way a cost is printed.

A plan (paired, study or class) says how many calls of which size it will make of each model
(`Calls`); `estimate` prices them at the models' profiles, or at their batch prices. A model
without a known price makes the estimate unknown (None), never $0.

A call to a model litellm has no price for is recorded with cost NULL (unknown). A run's
total is the sum of what is known, so a run that used such a model shows its total as a lower
bound ("≥ $0.0120, some unknown") or, when nothing was priced, as "unknown". Which models
are unpriced is the profile's to say, so every page and command agrees. Every amount is
printed by `dollars`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import resolve


@dataclass(frozen=True)
class Calls:
    """`count` calls of `model`, each of about `prompt_tokens` in and `completion_tokens` out."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    count: int


def estimate(
    calls: Iterable[Calls], api_base: str | None = None, batch: bool = False
) -> float | None:
    """USD for `calls` at their models' prices (with `batch`, at the providers' batch prices:
    `ModelProfile.batch_price_per_call`); None when a model asked has no known price. A model
    that writes no text (the `random` baseline) makes no call and costs nothing."""
    total = 0.0
    for asked in calls:
        if not asked.count:
            continue
        profile = resolve(asked.model, api_base)
        if not profile.writes_text:
            continue
        price_of = profile.batch_price_per_call if batch else profile.price_per_call
        price = price_of(asked.prompt_tokens, asked.completion_tokens)
        if price is None:
            return None
        total += asked.count * price
    return total


def dollars(amount: float) -> str:
    """An amount of USD as every page and command prints one: "$0.0123", "$1,234.5000"."""
    return f"${amount:,.4f}"


def estimate_text(cost: float | None) -> str:
    """An estimate (`estimate`) as text: its amount, or that a model has no known price."""
    return "unknown (unpriced model)" if cost is None else dollars(cost)


def unpriced_models(models: Iterable[str], api_base: str | None = None) -> list[str]:
    """The models among `models` whose calls cost an unknown amount (remote, no price)."""
    found = []
    for model in dict.fromkeys(m for m in models if m):
        try:
            profile = resolve(model, api_base)
        except LLMError:  # an unknown local model: it made no calls
            continue
        if profile.price_per_call(0, 0) is None:
            found.append(model)
    return found


def cost_text(cost: float | None, models: Iterable[str], api_base: str | None = None) -> str:
    """What was spent asking `models`, as text: "$0.0123"; "unknown" when nothing known was
    spent but an unpriced model was asked; "≥ $0.0123, some unknown" when both. Which models
    a run asked is the runs layer's to say (`cogbias.runs.summaries.cost_text`)."""
    known = cost or 0.0
    if not unpriced_models(models, api_base):
        return dollars(known)
    return f"≥ {dollars(known)}, some unknown" if known > 0 else "unknown"


def cost_cell(cost: float | None, text: str) -> float | str:
    """A cost for a table: the number when `text` (its `cost_text`) is a plain price, else
    the text (so an unpriced run never reads as $0)."""
    return round(cost or 0.0, 6) if text.startswith("$") else text
