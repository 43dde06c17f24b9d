"""Reading a free answer to a multiple-choice decision: which option it names, if any.

The decision step's answer is read here before any extraction call, the same way for every
model (docs/runs.md, "How answers are read"). The reader finds every place where the answer
names an option, in three forms:

- **by number**: "Option 3", "option #3", "Option three", "the third option" (a list such as
  "Options 2 and 3" names both);
- **by text**: the exact text of an option, ignoring case, punctuation and Markdown ("rated as
  **Very good**"); where option texts overlap ("Good", "Very good") the longest match wins;
- **by value**: on a numeric scale (every option a number, "50%" ... "150%"), a number equal
  to exactly one option's ("100 percent", "$1,000", a bare "30").

A mention within a few words after a negation ("not", "never", "rather than", ...) in the
same clause is *negated*. The answer is read when it names exactly one option and negates
none, or when the sentences that state a decision ("I choose", "my answer is") name exactly
one option and nothing negates it; anything else (nothing named, several options, a
negation) is not guessed: `Reading.problem` says why.

`confirms` checks another model's extraction against the answer, so an extractor cannot turn
an answer into a reading the answer does not support: the extracted option must be the one
option the answer names without negation, or, when it names none, the one option whose
distinctive words (words no other option has) the answer uses.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
_NUM = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_BY_NUMBER = re.compile(
    r"\boptions?\b[\s#:*_\"'`()\[\]]*(?:no\.?\s*|number\s*)?"
    + _NUM
    + r"\b((?:\s*(?:,|/|&|\band\b|\bor\b)\s*(?:options?\s*)?"
    + _NUM
    + r"\b)*)"
)
_BY_ORDINAL = re.compile(r"\b(" + "|".join(_ORDINALS) + r"|last)\s+option\b")
_LIST_ITEM = re.compile(_NUM + r"\b")
# a number: a sign that stands before it (not the hyphen of "10-20"), thousands separators,
# a decimal part; scales such as "-50%" ... "+50%" differ by the sign alone
_TOKEN = re.compile(
    r"(?:(?<![\w.,%])[-+])?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)|[^\W\d_]+|%"
)
_NEGATIONS = frozenset(
    "not never no nor neither without against instead rather except avoid avoiding reject "
    "rejecting".split()
)
NEGATION_WINDOW = 3  # words before a mention that a negation reaches
MAX_READ_CHARS = 100_000  # no honest answer within a token limit is longer
MAX_LOOK_BACK = 40  # words looked at for them, option texts included
_STOPWORDS = frozenset(
    "the and that this with from for are was were will would should could have has been "
    "into than then them they their there what which when your you our about over very "
    "more most less least much some somewhat".split()
)


@dataclass(frozen=True)
class Reading:
    """What an answer names, as presented positions (0-based).

    `choice` is the option read, or None; then `problem` says why in plain words. `named`
    holds the options named without negation (out-of-range numbers included, as the 1-based
    number's position), `negated` those named after a negation, `supported` the options
    whose distinctive words the answer uses, and `how` the forms of the reading's mentions.
    """

    choice: int | None
    problem: str | None
    named: frozenset[int] = field(default_factory=frozenset)
    negated: frozenset[int] = field(default_factory=frozenset)
    supported: frozenset[int] = field(default_factory=frozenset)
    how: tuple[str, ...] = ()

    def confirms(self, extracted: int) -> bool:
        """True when the answer supports `extracted` (a presented position) and no other:
        the one option named without negation or, when none is named, the one option whose
        distinctive words it uses."""
        if extracted in self.negated:
            return False
        if self.named:
            return self.named == {extracted}
        return self.supported == {extracted}

    @property
    def extraction_could_confirm(self) -> bool:
        """Whether an extraction could be confirmed at all (else asking for one is waste)."""
        if self.named:
            return len(self.named) == 1
        return len(self.supported - self.negated) == 1


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'")
    text = re.sub(r"n't\b", " not", text)
    text = re.sub(r"\bcannot\b", "can not", text)
    text = re.sub(r"\bper\s?cent\b|\bpct\b", "%", text)
    return re.sub(r"[\u2212\u2013](?=\d)", "-", text)  # a minus sign or dash before a number


def _canonical(token: str) -> str:
    """A number token in one spelling ("1,000.0" and "1000" alike, "-0" is "0"); a sign
    written before it is kept, so "+20" is neither "20" nor "-20": on a scale from "-50%" to
    "+50%" a bare "20" could mean either, and the reader does not guess. Words unchanged."""
    if _is_number(token):
        value = float(token.replace(",", "")) + 0.0
        sign = "+" if token[0] == "+" and value > 0 else ""
        return f"{sign}{value:.12g}"
    return token


def _is_number(token: str) -> bool:
    return token.lstrip("+-")[:1].isdigit()


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """(canonical token, start, end) of the normalised text's words, numbers and '%'."""
    return [(_canonical(m.group()), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS.index(word)


_CLAUSE_BREAK = re.compile(r"[.;:!?](?!\d)|,(?!\d{3})|\b(?:but|however|whereas|instead)\b")


class _Scope:
    """Where negations reach: a few words back within the same clause ("I would not pick
    Option 1; Option 3 fits" negates Option 1 only), skipping words of matched option texts
    ("Neither good nor poor" negates nothing after it)."""

    def __init__(self, text: str, tokens: Sequence[tuple[str, int, int]]) -> None:
        self.tokens = tokens
        self.starts = [start for _, start, _ in tokens]
        self.breaks = [m.end() for m in _CLAUSE_BREAK.finditer(text)]
        self.taken: set[int] = set()  # indices of tokens inside a matched option text

    def negated(self, offset: int) -> bool:
        at_break = bisect.bisect_right(self.breaks, offset) - 1
        begin = self.breaks[at_break] if at_break >= 0 else 0
        seen, i = 0, bisect.bisect_left(self.starts, offset) - 1
        stop = max(-1, i - MAX_LOOK_BACK)  # bounded: an answer of option texts only is linear
        while i > stop and self.starts[i] >= begin and seen < NEGATION_WINDOW:
            if i not in self.taken:
                if self.tokens[i][0] in _NEGATIONS:
                    return True
                seen += 1
            i -= 1
        return False


def _numeric_value(tokens: list[str]) -> str | None:
    """The option's value when its text is one number (with '%' or a currency sign)."""
    words = [t for t in tokens if t != "%"]
    if len(words) == 1 and _is_number(words[0]) and len(tokens) <= 2:
        return words[0]
    return None


def read_option(answer: str, options: Sequence[str]) -> Reading:
    """Which of `options` (in the order presented, numbered from 1) `answer` chooses."""
    n = len(options)
    if len(answer) > MAX_READ_CHARS:
        return Reading(
            None,
            f"the answer has {len(answer):,} characters, more than the {MAX_READ_CHARS:,} read",
        )
    text = _normalise(answer)
    masked = list(text)
    found: list[tuple[int, int, str]] = []  # (position, offset in the text, how)

    # by number; masked, so "Option 1: 0%" does not also read "1" as a value
    for match in _BY_NUMBER.finditer(text):
        numbers = [match.group(1)] + _LIST_ITEM.findall(match.group(2) or "")
        found += [(_number(x) - 1, match.start(), "number") for x in numbers]
        masked[match.start() : match.end()] = " " * (match.end() - match.start())
    for match in _BY_ORDINAL.finditer(text):
        word = match.group(1)
        position = n - 1 if word == "last" else _ORDINALS.index(word)
        found.append((position, match.start(), "number"))
        masked[match.start() : match.end()] = " " * (match.end() - match.start())
    rest = _tokens("".join(masked))
    words = [t for t, _, _ in rest]
    taken = [False] * len(words)
    scope = _Scope("".join(masked), rest)

    # by text: the longest option texts first; a matched span is not matched again
    known = _options_read(tuple(options))
    option_tokens = known.tokens
    for position in known.longest_first:
        wanted, size = option_tokens[position], len(option_tokens[position])
        for i in range(len(words) - size + 1) if size else ():
            if (
                words[i] == wanted[0]
                and words[i : i + size] == wanted
                and not any(taken[i : i + size])
            ):
                taken[i : i + size] = [True] * size
                scope.taken.update(range(i, i + size))
                found.append((position, rest[i][1], "text"))

    # by value, on a numeric scale: a number equal to one option's value
    if known.values is not None:
        where = known.values
        for i, word in enumerate(words):
            if not taken[i] and word in where:
                taken[i] = True
                scope.taken.add(i)
                found.append((where[word], rest[i][1], "value"))

    mentions = [(p, scope.negated(offset), h) for p, offset, h in found]
    named = frozenset(p for p, neg, _ in mentions if not neg)
    negated = frozenset(p for p, neg, _ in mentions if neg)
    supported = _supported(rest, scope, known.distinctive)
    kept = [(p, o) for (p, o, _), (_, neg, _) in zip(found, mentions, strict=True) if not neg]
    decided = _decided(text, kept)
    if (len(named) > 1 or negated) and len(decided) == 1 and not decided & negated:
        # "Option 1 is safe, Option 2 bold. I choose Option 2.", "I would choose Option 3, not
        # Option 2": one option named in the sentences that state the decision
        (choice,) = decided
        if 0 <= choice < n:
            how = tuple(sorted({h for p, _, h in mentions if p == choice} | {"decision"}))
            return Reading(choice, None, named, negated, supported, how)
    if len(named) == 1 and not negated:
        (choice,) = named
        if 0 <= choice < n:
            how = tuple(sorted({h for p, _, h in mentions if p == choice}))
            return Reading(choice, None, named, negated, supported, how)
        problem = f"the answer names Option {choice + 1}, but only 1-{n} exist"
    elif negated:
        problem = f"the answer negates {_listed(negated)}"
    elif named:
        problem = f"the answer names several options ({_listed(named)})"
    else:
        problem = "the answer names no option"
    return Reading(None, problem, named, negated, supported)


_DECISION_CUE = re.compile(
    r"\b(?:i|i'd|i'll|we|we'd)\s+(?:would\s+|will\s+)?(?:choose|select|pick|go\s+with|opt\s+for)\b"
    r"|\b(?:my|the|our)\s+(?:final\s+)?(?:answer|choice|decision|selection)\s+(?:is|would\s+be)\b"
    r"|\b(?:final\s+)?answer\s*:|\bi\s+am\s+(?:choosing|going\s+with|selecting)\b"
)
_SENTENCE_END = re.compile(r"[.!?;\n](?!\d)")


def _decided(text: str, mentions: Sequence[tuple[int, int]]) -> frozenset[int]:
    """Options named, without negation, in the sentences that state a decision ("I choose",
    "my answer is", "Answer:"), when the answer has such sentences."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)] + [len(text) + 1]
    cues = {bisect.bisect_right(ends, m.start()) for m in _DECISION_CUE.finditer(text)}
    return frozenset(p for p, offset in mentions if bisect.bisect_right(ends, offset) in cues)


def _listed(positions: frozenset[int]) -> str:
    return ", ".join(f"Option {p + 1}" for p in sorted(positions))


def _supported(
    tokens: Sequence[tuple[str, int, int]],
    scope: _Scope,
    distinctive: Sequence[frozenset[str]],
) -> frozenset[int]:
    """Options whose distinctive words (in no other option) the answer uses, not negated."""
    found = set()
    for position, own in enumerate(distinctive):
        if own and any(w in own and not scope.negated(start) for w, start, _ in tokens):
            found.add(position)
    return frozenset(found)


@dataclass(frozen=True)
class _Options:
    """What reading needs of a list of options, worked out once per list: a run asks the
    same few option lists thousands of times (one per test case and order)."""

    tokens: tuple[list[str], ...]  # each option's canonical tokens
    longest_first: tuple[int, ...]  # positions, the longest option texts first
    values: dict[str, int] | None  # on a numeric scale: value -> position (unique values)
    distinctive: tuple[frozenset[str], ...]  # each option's content words no other has


@lru_cache(maxsize=512)
def _options_read(options: tuple[str, ...]) -> _Options:
    tokens = tuple([t for t, _, _ in _tokens(_normalise(o))] for o in options)
    n = len(options)
    values = [_numeric_value(t) for t in tokens]
    where = None
    if n and all(v is not None for v in values):
        where = {v: i for i, v in enumerate(values) if values.count(v) == 1}
    content = [{t for t in own if len(t) >= 4 and t.isalpha()} - _STOPWORDS for own in tokens]
    distinctive = tuple(
        frozenset(own - set().union(*(c for i, c in enumerate(content) if i != position)))
        for position, own in enumerate(content)
    )
    longest = tuple(sorted(range(n), key=lambda i: -len(tokens[i])))
    return _Options(tokens, longest, where, distinctive)


_REPLY_NONE = re.compile(r"\bno\s+option\b|\bnone\b")


def read_extraction(reply: str, n_options: int) -> int | None:
    """The presented position an extraction reply names ("Option N", alone), or None when it
    says "No option selected", names several options or none."""
    text = _normalise(reply)
    if _REPLY_NONE.search(text):
        return None
    numbers = {
        _number(x)
        for match in _BY_NUMBER.finditer(text)
        for x in [match.group(1)] + _LIST_ITEM.findall(match.group(2) or "")
    }
    if len(numbers) != 1:
        return None
    (number,) = numbers
    return number - 1 if 1 <= number <= n_options else None


# How a run turns a decision's answer into a choice (`RunSpec.reading`):
# - READ_ANSWER (cogbias' own): the answer is read here first; an extraction call is asked
#   only where the answer can confirm its reply (docs/runs.md, "How answers are read");
# - READ_EXTRACTION (the Malberg paper's): every half asks the extraction call, and the first
#   "Option N" of its reply is the choice, as the paper reads it, whatever the answer says.
READ_ANSWER = "answer"
READ_EXTRACTION = "extraction"
READINGS = (READ_ANSWER, READ_EXTRACTION)

# "Option 3" or "option 3", one space, then the number: the paper reads no other spelling
# (a number of ten digits or more is no option anyway)
_PAPER_OPTION = re.compile(r"\b[Oo]ption (\d{1,9})\b")


def first_option(reply: str, n_options: int) -> int | None:
    """The presented position of the first "Option N" in an extraction reply, read as the
    Malberg paper reads it (so `READ_EXTRACTION` scores what the paper would); None when the
    reply has none ("No option selected") or N is not one of the `n_options`."""
    found = _PAPER_OPTION.search(reply)
    number = int(found.group(1)) if found else 0
    return number - 1 if 1 <= number <= n_options else None
