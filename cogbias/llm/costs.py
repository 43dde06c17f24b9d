"""Spent cost that may be partly unknown: a model without a known price is never counted as $0.

A call to a model litellm has no price for is recorded with cost NULL (unknown). A run's
total is the sum of what is known, so a run that used such a model shows its total as a lower
bound ("≥ $0.0120, some unknown") or, when nothing was priced, as "unknown". Which models
are unpriced is the profile's to say, so every page and command agrees.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import resolve

OFFLINE_GENERATORS = ("examples", "random")  # fill gaps without a model call


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


def run_models(spec: Mapping[str, Any] | str | None) -> list[str]:
    """Every model a stored run spec asks: its decision models and its generator."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec or "{}")
        except ValueError:
            spec = {}
    spec = spec if isinstance(spec, Mapping) else {}
    models = list(spec.get("models") or [])
    generator = spec.get("generator")
    if generator and generator not in OFFLINE_GENERATORS:
        models.append(generator)
    return [str(m) for m in models]


def cost_text(cost: float | None, unpriced: Iterable[str] = ()) -> str:
    """ "$0.0123"; "unknown" when nothing known was spent but an unpriced model was used;
    "≥ $0.0123, some unknown" when both."""
    known = cost or 0.0
    if not list(unpriced):
        return f"${known:.4f}"
    return f"≥ ${known:.4f}, some unknown" if known > 0 else "unknown"


def run_cost_text(run: Mapping[str, Any]) -> str:
    """A stored run's spent cost as text (see `cost_text`), from its row (`cost`, `spec`)."""
    spec = run.get("spec")
    models = run_models(spec)
    base = None
    if isinstance(spec, str):
        try:
            base = json.loads(spec or "{}").get("api_base")
        except (ValueError, AttributeError):
            base = None
    elif isinstance(spec, Mapping):
        base = spec.get("api_base")
    return cost_text(run.get("cost"), unpriced_models(models, base))


def run_cost_cell(run: Mapping[str, Any]) -> float | str:
    """A run's cost for a table: the number when every model it used is priced, else the text
    of `run_cost_text` (so an unpriced run never reads as $0)."""
    text = run_cost_text(run)
    return round(run.get("cost") or 0.0, 6) if text.startswith("$") else text
