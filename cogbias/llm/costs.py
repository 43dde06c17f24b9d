"""Spent cost that may be partly unknown: a model without a known price is never counted as $0.

A call to a model litellm has no price for is recorded with cost NULL (unknown). A run's
total is the sum of what is known, so a run that used such a model shows its total as a lower
bound ("≥ $0.0120, some unknown") or, when nothing was priced, as "unknown". Which models
are unpriced is the profile's to say, so every page and command agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import resolve


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


def cost_text(cost: float | None, unpriced: Iterable[str] = ()) -> str:
    """ "$0.0123"; "unknown" when nothing known was spent but an unpriced model was used;
    "≥ $0.0123, some unknown" when both."""
    known = cost or 0.0
    if not list(unpriced):
        return f"${known:.4f}"
    return f"≥ ${known:.4f}, some unknown" if known > 0 else "unknown"


def spent_text(cost: float | None, models: Iterable[str], api_base: str | None = None) -> str:
    """A run's spent cost as text (see `cost_text`), from its cost and the models it asked
    (which models a run asked is the runs layer's to say: `cogbias.runs.summaries`)."""
    return cost_text(cost, unpriced_models(models, api_base))


CallSizes = Mapping[str, Mapping[tuple[int, int], int]]


def estimated_cost(sizes: CallSizes, api_base: str | None, batch: bool = False) -> float | None:
    """USD at most for a plan's calls, before any is made: `sizes` maps each model to how
    many calls of each size (prompt tokens, completion tokens) its plan makes. The `random`
    baseline and local models cost nothing; None when a priced call's model has no known
    price. With `batch`, at the providers' batch prices. The one estimate every kind of run
    that counts its calls by size gives (a study's, a class's)."""
    total = 0.0
    for model, counts in sizes.items():
        if not any(counts.values()):
            continue
        profile = resolve(model, api_base)
        if not profile.writes_text:  # the random baseline: no call, no cost
            continue
        price_of = profile.batch_price_per_call if batch else profile.price_per_call
        for (prompt, completion), n in counts.items():
            price = price_of(prompt, completion)
            if price is None:
                return None
            total += n * price
    return total


def cost_cell(cost: float | None, text: str) -> float | str:
    """A cost for a table: the number when `text` (its `spent_text`) is a plain price, else
    the text (so an unpriced run never reads as $0)."""
    return round(cost or 0.0, 6) if text.startswith("$") else text
