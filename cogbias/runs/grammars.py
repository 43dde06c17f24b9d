"""GBNF rules that admit only an answer in a question's format, for llama.cpp-served models
(the local model's profile says `grammar`), which otherwise ramble past the answer: one of a
few words or letters, or a number within a question's bounds.

A study's answers (`study_answers.answer_grammar`) and a class's (`class_answers`) are built
from these, so the same format is constrained the same way. A rule is an expression; a
grammar is "root ::= " and the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_BOUNDED = 10**9  # above this a bound is no help to the model: any number it is
DECIMALS = 2  # a bound with a fraction (a price: $9.25) admits cents
# Any decimal number a reader takes (`studies.definitions.MAX_NUMBER`, 1e15: 15 digits),
# with up to 4 decimals. Bounded in length too: with `[0-9]+` a small model may write
# digits until its answer budget ends, and an answer cut there is no answer.
NUMBER = '("-"? [0-9]' + " [0-9]?" * 14 + ' ("." [0-9]' + " [0-9]?" * 3 + ")?)"


def literal(text: str) -> str:
    """A GBNF string literal of `text` (an option's text may hold a line break)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


def one_of(choices: Sequence[str]) -> str:
    """A rule admitting exactly one of `choices`."""
    return "(" + " | ".join(literal(c) for c in choices) + ")"


def _digits(count: int) -> str:
    return " ".join(["[0-9]"] * count)


def _whole_up_to(bound: int) -> list[str]:
    """Alternatives admitting the whole numbers 0..bound, written without leading zeros."""
    text = str(bound)
    if len(text) == 1:
        return [f"[0-{bound}]"]
    alternatives = ["[0-9]"]
    alternatives += [f"[1-9] {_digits(k - 1)}" for k in range(2, len(text))]
    for i, c in enumerate(text):  # as many digits as the bound: below it at digit i
        lowest = 1 if i == 0 else 0
        if int(c) > lowest:
            head = f"{literal(text[:i])} " if i else ""
            tail = f" {_digits(len(text) - i - 1)}" if len(text) - i - 1 else ""
            alternatives.append(f"{head}[{lowest}-{int(c) - 1}]{tail}")
    return [*alternatives, literal(text)]


def _fraction_up_to(digits: str) -> str:
    """A rule admitting the decimals d₁d₂… (at least one) that are at most 0.`digits`."""
    alternatives = []
    for i, c in enumerate(digits):
        if int(c) > 0:
            head = f"{literal(digits[:i])} " if i else ""
            rest = len(digits) - i - 1
            alternatives.append(f"{head}[0-{int(c) - 1}]" + " [0-9]?" * rest)
    alternatives += [literal(digits[:k]) for k in range(1, len(digits) + 1)]
    return "(" + " | ".join(alternatives) + ")"


def number_within(low: float | None, high: float | None) -> str:
    """A rule admitting a number from 0 to `high` (a whole number, or with up to DECIMALS
    decimals when `high` has a fraction, never above it), so a model asked "from 0 to 100"
    cannot answer 150 or ramble. A question that may be answered below 0, or has no upper
    bound (or one above MAX_BOUNDED), gets any number (`NUMBER`); a lower bound above 0 is
    left to the reader (the grammar admits 0..`high`)."""
    if low is None or low < 0 or high is None or not math.isfinite(high) or high > MAX_BOUNDED:
        return NUMBER
    whole = math.floor(high)
    cents = round((high - whole) * 10**DECIMALS)
    if cents == 0:
        return "(" + " | ".join(_whole_up_to(whole)) + ")"
    fraction = str(cents).rjust(DECIMALS, "0").rstrip("0")
    top = f'{literal(str(whole))} ("." {_fraction_up_to(fraction)})?'
    if whole == 0:
        return f"({top})"
    below = "(" + " | ".join(_whole_up_to(whole - 1)) + ")"
    return f'({below} ("." [0-9]{" [0-9]?" * (DECIMALS - 1)})? | {top})'


def grammar(rule: str) -> str:
    """The grammar whose answer is `rule` alone."""
    return f"root ::= {rule}"


def option_grammar(n_options: int) -> str:
    """GBNF for llama.cpp-served extractors: "Option 1" .. "Option n", or "No option
    selected" (the prompt offers it; a grammar without it forces a guess).

    One ':' or '.' may follow the number: with ten or more options a model that wants
    "Option 1:" would otherwise be pushed onto "Option 10" when ':' is forbidden and '0' is
    not.
    """
    choices = " | ".join(f'"{i}"' for i in range(n_options, 0, -1))
    return f'root ::= "Option " ({choices}) [.:]? | "No option selected" "."?'


def decision_grammar(n_options: int) -> str:
    """GBNF for a decision of a model that takes a grammar: "Option 1" .. "Option n" alone."""
    choices = " | ".join(f'"{i}"' for i in range(n_options, 0, -1))
    return f'root ::= "Option " ({choices})'
