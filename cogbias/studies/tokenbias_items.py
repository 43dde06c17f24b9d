"""Reasoning items with a correctness key, and declarative perturbations of them.

An item is a question with exactly two options, one of them correct (the single event of a
conjunction-fallacy problem, "No" for an invalid syllogism). A perturbation rewrites tokens
that a reasoner should ignore and leaves the logic alone, so the correct option stays where
it is: P and P' share option positions and the correctness key. Perturbations are plain data
(`{"op": "replace", "old": ..., "new": ...}`) applied in order; each must change the text the
model reads, otherwise the study is wrong about its own text and says so.

Pure functions: values come in, text comes out, randomness only from the `rng` passed in.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cogbias.core.templates import LETTERED, Filled, render_decision_text, substitute

FIELDS = ("situation", "prompt", "options")
OPS = ("replace", "swap_name", "quantifiers", "frame_source", "hint")


class PerturbationError(ValueError):
    """A perturbation that cannot apply to an item (says which and why)."""


@dataclass(frozen=True)
class ReasoningItem:
    """Situation, question and two options; `correct` is the index of the right option."""

    situation: str
    prompt: str
    options: tuple[str, ...]
    correct: int

    def filled(self) -> Filled:
        """Shown as the paper shows its items: the question, then "(a) …", "(b) …"."""
        return Filled(self.situation, self.prompt, self.options, LETTERED)

    def shown(self) -> str:
        """The text the model reads: what a perturbation must change."""
        return render_decision_text(self.filled())

    def texts(self) -> dict[str, str]:
        out = {"situation": self.situation, "prompt": self.prompt}
        out.update({f"options[{i}]": o for i, o in enumerate(self.options)})
        return out


@dataclass(frozen=True)
class Context:
    """What an op may draw on: the item's sampled values, entity lists, study settings."""

    values: Mapping[str, Any]
    lists: Mapping[str, Sequence[Any]]
    quantifiers: Mapping[str, str]
    phrasings: Sequence[str]
    rng: random.Random


def make_item(
    situation: str,
    prompt: str,
    correct: str,
    incorrect: str,
    values: Mapping[str, Any],
    rng: random.Random,
) -> ReasoningItem:
    """Fill the templates and shuffle the two options (seeded); the key follows the shuffle."""

    def text(template: str) -> str:
        return substitute(substitute(template, values), values).strip()

    right, wrong = text(correct), text(incorrect)
    first = rng.random() < 0.5
    options = (right, wrong) if first else (wrong, right)
    return ReasoningItem(text(situation), text(prompt), options, 0 if first else 1)


def apply(
    item: ReasoningItem, ops: Sequence[Mapping[str, Any]], context: Context
) -> tuple[ReasoningItem, list[str]]:
    """Apply perturbations in order; returns P' and one readable line per change."""
    notes: list[str] = []
    for number, op in enumerate(ops, start=1):
        changed, note = OP_FUNCTIONS[op["op"]](item, op, context)
        if changed.shown() == item.shown():
            raise PerturbationError(f"perturbation {number} ({op['op']}) changed nothing: {note}")
        item = changed
        notes.append(f"{op['op']}: {note}")
    return item, notes


def _map_text(
    item: ReasoningItem, fields: Sequence[str], change: Callable[[str], str]
) -> ReasoningItem:
    updates: dict[str, Any] = {}
    for name in fields:
        if name == "options":
            updates["options"] = tuple(change(o) for o in item.options)
        else:
            updates[name] = change(getattr(item, name))
    return replace(item, **updates)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _sentence_case(text: str) -> str:
    return "\n".join(line[:1].upper() + line[1:] for line in text.split("\n"))


def _replace(item: ReasoningItem, op: Mapping[str, Any], ctx: Context) -> tuple[ReasoningItem, str]:
    """Replace a token (or a list of tokens, pairwise) everywhere in the chosen fields."""
    old = [substitute(t, ctx.values) for t in _as_list(op["old"])]
    new = [substitute(t, ctx.values) for t in _as_list(op["new"])]

    def change(text: str) -> str:
        for a, b in zip(old, new, strict=True):
            text = text.replace(a, b)
        return _sentence_case(text) if op.get("sentence_case") else text

    pairs = ", ".join(f"{a!r} -> {b!r}" for a, b in zip(old, new, strict=True))
    return _map_text(item, op.get("fields", FIELDS), change), pairs


def _swap_name(
    item: ReasoningItem, op: Mapping[str, Any], ctx: Context
) -> tuple[ReasoningItem, str]:
    """Replace a name (whole words only) by one drawn from an entity list, everywhere."""
    old = substitute(op["old"], ctx.values)
    everything = " ".join(item.texts().values())
    name = substitute(op["list"], ctx.values)  # e.g. "names_{{event_gender}}": keep the gender
    if name not in ctx.lists:
        raise PerturbationError(f"no entity list {name!r} (from {op['list']!r})")
    choices = [str(n) for n in ctx.lists[name] if str(n) != old and str(n) not in everything]
    if not choices:
        raise PerturbationError(f"list '{name}' has no name that is not already in the item")
    new = ctx.rng.choice(choices)
    pattern = re.compile(rf"\b{re.escape(old)}\b")
    return _map_text(
        item, op.get("fields", FIELDS), lambda t: pattern.sub(new, t)
    ), f"{old!r} -> {new!r}"


def _quantifiers(
    item: ReasoningItem, op: Mapping[str, Any], ctx: Context
) -> tuple[ReasoningItem, str]:
    """Say "all" and "some" differently (the study's table, or the op's `mapping`)."""
    mapping = op.get("mapping") or ctx.quantifiers
    spec = {"old": list(mapping), "new": list(mapping.values()), "sentence_case": True}
    return _replace(item, {**op, **spec, "fields": op.get("fields", ("situation",))}, ctx)


def _frame_source(
    item: ReasoningItem, op: Mapping[str, Any], ctx: Context
) -> tuple[ReasoningItem, str]:
    """Attribute chosen lines of a field to (distinct) sources from an entity list."""
    name = op.get("field", "situation")
    lines = getattr(item, name).split("\n")
    wanted = op.get("lines", list(range(len(lines) - 1)))
    sources = ctx.rng.sample([str(s) for s in ctx.lists[op.get("list", "sources")]], len(wanted))
    phrasings = op.get("phrasings") or ctx.phrasings
    for index, source in zip(wanted, sources, strict=True):
        if not -len(lines) <= index < len(lines):
            raise PerturbationError(f"line {index} does not exist (the {name} has {len(lines)})")
        claim = lines[index]
        first_word = claim.split(" ", 1)[0]
        if first_word[1:] == first_word[1:].lower():  # "Oak trees ..." -> "oak ...", "MIT" stays
            claim = claim[:1].lower() + claim[1:]
        lines[index] = substitute(ctx.rng.choice(phrasings), {"source": source, "claim": claim})
    return replace(item, **{name: "\n".join(lines)}), ", ".join(sources)


def _hint(item: ReasoningItem, op: Mapping[str, Any], ctx: Context) -> tuple[ReasoningItem, str]:
    """Put a hint before (default) or after a field's text."""
    name = op.get("field", "prompt")
    hint = substitute(op["text"], ctx.values)
    text = getattr(item, name)
    joined = f"{text} {hint}" if op.get("position") == "after" else f"{hint} {text}"
    return replace(item, **{name: joined.strip()}), repr(hint)


OP_FUNCTIONS: dict[
    str, Callable[[ReasoningItem, Mapping[str, Any], Context], tuple[ReasoningItem, str]]
] = {
    "replace": _replace,
    "swap_name": _swap_name,
    "quantifiers": _quantifiers,
    "frame_source": _frame_source,
    "hint": _hint,
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "replace": ("old", "new"),
    "swap_name": ("old", "list"),
    "quantifiers": (),
    "frame_source": (),
    "hint": ("text",),
}
