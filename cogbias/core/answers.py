"""Reading answers beyond "Option N": admit/reject, yes/no, letters a-d, free numbers.

Every parser returns an `Answer`: the value it read, or an error saying in plain words why the
text could not be read (a result to store, never an exception). Two modes:

- **strict**: the whole answer must be the token and nothing else (surrounding whitespace,
  quotes, Markdown bold and one trailing full stop are tolerated) — for constrained decoding,
  structured output and the thesis' "only give the number" prompts;
- **lenient** (default): the token may sit in a sentence, but an answer that names both
  alternatives, negates one ("I would not admit"), or holds several different numbers is an
  error rather than a guess.

`permuted_orders` gives option orders in which every item appears at every position (status
quo and primacy need that); orders use `metrics.to_original`'s convention.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_ERROR_QUOTE = 60


@dataclass(frozen=True)
class Answer(Generic[T]):
    """The value read from `raw`, or `error` (then value is None)."""

    raw: str
    value: T | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= MAX_ERROR_QUOTE else text[: MAX_ERROR_QUOTE - 3] + "...")


def _fail(raw: str, why: str) -> Answer:
    return Answer(raw=raw, error=f"{why}: {_quote(raw)}" if raw.strip() else "the answer is empty")


_WRAPPING = re.compile(r"[\s\"'`*_]*")


def _unwrap(text: str) -> str:
    """`text` without surrounding whitespace, quotes and Markdown emphasis. Each end is
    matched once from its edge (the end through the reversed text): a pattern ending in `$`
    would retry every run of such characters inside the answer, quadratic in a hostile one."""
    start = _WRAPPING.match(text).end()  # type: ignore[union-attr]  # `*` always matches
    end = len(text) - _WRAPPING.match(text[::-1]).end()  # type: ignore[union-attr]
    return text[start:end] if start < end else ""


def _core(text: str) -> str:
    """The answer without surrounding whitespace, quotes, Markdown emphasis, one final '.'."""
    core = _unwrap(text)
    if core.endswith("."):
        core = _unwrap(core[:-1])
    return core


# --------------------------------------------------------------------------- two-way answers

_NEGATION = r"(?:not|never|n't|no)\s+(?:\w+\s+){0,2}"


def _two_way(
    raw: str,
    strict: bool,
    positive: Sequence[str],
    negative: Sequence[str],
    labels: tuple[str, str],
) -> Answer[bool]:
    core = _core(raw).lower()
    if strict:
        if core in positive:
            return Answer(raw=raw, value=True)
        if core in negative:
            return Answer(raw=raw, value=False)
        return _fail(raw, f"expected exactly '{labels[0]}' or '{labels[1]}'")
    pos = re.compile(r"\b(?:" + "|".join(map(re.escape, positive)) + r")\b")
    neg = re.compile(r"\b(?:" + "|".join(map(re.escape, negative)) + r")\b")
    text = " ".join(core.split())
    # A leading word decides ("Reject. The GPA is too low to admit ..."), as models put the
    # decision first when asked to.
    first = re.match(r"[a-z']+", text)
    if first and (pos.fullmatch(first.group()) or neg.fullmatch(first.group())):
        return Answer(raw=raw, value=bool(pos.fullmatch(first.group())))
    negated = re.search(_NEGATION + r"(?:" + pos.pattern + "|" + neg.pattern + ")", text)
    if negated:
        return _fail(raw, f"the answer negates '{negated.group().split()[-1]}'; give the decision")
    has_pos, has_neg = bool(pos.search(text)), bool(neg.search(text))
    if has_pos and has_neg:
        return _fail(raw, f"the answer mentions both '{labels[0]}' and '{labels[1]}'")
    if has_pos or has_neg:
        return Answer(raw=raw, value=has_pos)
    return _fail(raw, f"found neither '{labels[0]}' nor '{labels[1]}'")


ADMIT_WORDS = ("admit", "admitted", "admission", "accept", "accepted")
REJECT_WORDS = ("reject", "rejected", "rejection", "deny", "denied", "decline", "declined")


def parse_admit_reject(text: str, strict: bool = False) -> Answer[bool]:
    """True for admit, False for reject."""
    return _two_way(text, strict, ADMIT_WORDS, REJECT_WORDS, ("admit", "reject"))


def parse_yes_no(text: str, strict: bool = False) -> Answer[bool]:
    """True for yes, False for no."""
    return _two_way(text, strict, ("yes",), ("no",), ("yes", "no"))


# --------------------------------------------------------------------------- letters

_LETTER_STRICT = re.compile(r"^(?:option\s+)?\(?([a-z])\)?[).:]?$", re.IGNORECASE)


def parse_letter(text: str, letters: str = "abcd", strict: bool = False) -> Answer[int]:
    """The 0-based index of the chosen letter among `letters` ("a" → 0, "D" → 3).

    Lenient mode reads "(b)", "b)", "Option B", "answer: b", "answer is b", or a letter that
    opens the answer ("B. Student B, because ..."); the English article "a" elsewhere in a
    sentence is never taken for option a.
    """
    letters = letters.lower()
    core = _core(text)
    found: set[str] = set()
    match = _LETTER_STRICT.match(core)
    if match:
        found.add(match.group(1).lower())
    elif not strict:
        patterns = (
            r"\(([a-z])\)",
            r"(?<![\w(])([a-z])\)",
            r"\boption\s+([a-z])\b",
            r"\banswer\s*[:=]\s*\(?([a-z])\b(?![\w'])",
            r"\banswer\s+is\s+\(?([a-z])\)?(?=\s*(?:$|[.,;:!]))",
            r"^([a-z])(?:[.:)]|\s*$|\s+[-–—])",
        )
        for pattern in patterns:
            found.update(m.lower() for m in re.findall(pattern, core, re.IGNORECASE | re.M))
    wanted = "/".join(letters)
    if not found:
        return _fail(text, f"expected one of the letters {wanted}")
    if len(found) > 1:
        return _fail(text, f"the answer names several options ({', '.join(sorted(found))})")
    letter = found.pop()
    if letter not in letters:
        return _fail(text, f"'{letter}' is not one of the options {wanted}")
    return Answer(raw=text, value=letters.index(letter))


# --------------------------------------------------------------------------- numbers

_NUMBER = re.compile(
    r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])|(?<![\w.])[-−]?\.\d+"
)
_PREFIXES = ("us$", "$", "usd", "eur", "€", "£")
_SUFFIXES = ("%", "percent", "dollars", "dollar", "usd", "eur", "€")


def _without_units(core: str) -> str:
    """A strict number's text without one currency sign before it and one unit after it
    (plain string tests: a regex for this backtracks badly on long runs of spaces)."""
    low = core.lower()
    prefix = next((p for p in _PREFIXES if low.startswith(p)), "")
    suffix = next((s for s in _SUFFIXES if low.endswith(s)), "")
    body = core[len(prefix) : len(core) - len(suffix)] if len(core) > len(prefix + suffix) else ""
    return body.strip() if prefix or suffix else core


def _to_float(token: str) -> float:
    return float(token.replace(",", "").replace("−", "-"))


def parse_number(
    text: str,
    low: float | None = None,
    high: float | None = None,
    strict: bool = False,
) -> Answer[float]:
    """A free number: a percentage 0-100, a price ("$1,250.50"), an estimate.

    Thousands separators, a currency sign and a percent sign are accepted. Lenient mode takes
    the number when the answer holds one (or repeats the same one); several different numbers
    are an error, since the answer might quote the anchor. `low`/`high` bound the value.
    """
    core = _core(text)
    if strict:
        body = _without_units(core)
        if not _NUMBER.fullmatch(body):
            return _fail(text, "expected only a number")
        values = [_to_float(body)]
    else:
        values = list(dict.fromkeys(_to_float(t) for t in _NUMBER.findall(core)))
        if not values:
            return _fail(text, "found no number")
        if len(values) > 1:
            shown = ", ".join(f"{v:g}" for v in values[:4])
            return _fail(text, f"the answer holds several numbers ({shown})")
    value = values[0]
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{'' if low is None else f'{low:g}'}..{'' if high is None else f'{high:g}'}"
        return _fail(text, f"{value:g} is outside the allowed range {bounds}")
    return Answer(raw=text, value=value)


# --------------------------------------------------------------------------- option orders


def permuted_orders(n_items: int, balanced: bool = False) -> list[list[int]]:
    """n_items orders (original indices in presented order) so each item takes each position
    exactly once.

    Cyclic rotations by default. `balanced` gives a Williams design instead: for an even number
    of items every item also follows every other item exactly once, so an effect of the
    neighbouring option cancels out too (for an odd number, 2n orders are needed for that and
    this returns the 2n rows of the design).
    """
    if n_items < 1:
        raise ValueError(f"need at least one item, got {n_items}")
    if not balanced:
        return [[(start + i) % n_items for i in range(n_items)] for start in range(n_items)]
    # The Williams first row 0, 1, n-1, 2, n-2, ... shifted cyclically.
    first = [0]
    low, high = 1, n_items - 1
    while len(first) < n_items:
        first.append(low)
        low += 1
        if len(first) < n_items:
            first.append(high)
            high -= 1
    rows = [[(x + shift) % n_items for x in first] for shift in range(n_items)]
    if n_items % 2 == 1:
        rows += [row[::-1] for row in rows]
    return rows


def position_of(order: Sequence[int], item: int) -> int:
    """Where the original item `item` is presented in `order` (0-based)."""
    try:
        return list(order).index(item)
    except ValueError:
        raise ValueError(f"item {item} is not in the order {list(order)}") from None
