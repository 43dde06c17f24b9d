"""One token-bias file's items (Jiang et al. 2024's `synthetic_dataset_*.json`), read and
checked: what `peek_format` pairs.

Each file is one JSON object keyed "0", "1", … whose items hold `question_idx`, `question`,
`target_answer` (the correct answer), `incorrect_answer` (one answer, or a list of them) and
`generation_mode`. Every problem names the file, the item's row and the field; every text is
bounded (`core.limits`: a question at most MAX_PROMPT_CHARS, an answer MAX_OPTION_CHARS, 2 to
MAX_OPTIONS options), so reading an item costs time in proportion to its size.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cogbias.core.limits import (
    MAX_NAME_CHARS,
    MAX_OPTION_CHARS,
    MAX_PROMPT_CHARS,
    DuplicateKey,
    duplicate_message,
    loads_json,
)
from cogbias.core.templates import LETTERED, QUESTION, Filled, render_decision_text
from cogbias.datasets.common import MAX_OPTIONS, DatasetError, bounded

FIELDS = ("question_idx", "question", "target_answer", "incorrect_answer")
_LABEL_RE = re.compile(r"^\s*\(([a-z])\)\s*(.*?)\s*$", re.DOTALL)
_BRACKETS_RE = re.compile(r"^\s*\[(.*)\]\s*$", re.DOTALL)
_INLINE_LABEL_RE = re.compile(r"(?:(?<=\s)|^)\(([a-z])\)[ \t]*\n?")


@dataclass(frozen=True)
class Item:
    """One published item: its question without option lines, its options, the correct one."""

    file: str
    row: int
    index: int
    question: str
    options: tuple[str, ...]
    correct: int
    mode: str
    inline: bool  # the question writes its options out, labelled (a), (b), …

    def filled(self) -> Filled:
        return Filled("", self.question, self.options, LETTERED if self.inline else QUESTION)

    def shown(self) -> str:
        """The text the model reads: a question that does not write its options out is shown
        alone, so two items that differ only in an option it does not show read the same."""
        return render_decision_text(self.filled())


def read_items(path: Path) -> dict[int, Item]:
    """The items of one file by question_idx; every problem names file, row and field."""
    try:
        text = path.read_bytes().decode("utf-8")
        data = loads_json(text)
    except UnicodeDecodeError:
        raise DatasetError(path.name, "is not UTF-8 text; save it as UTF-8") from None
    except DuplicateKey as exc:
        raise _repeated_key(path.name, text, str(exc)) from None
    except json.JSONDecodeError as exc:
        raise DatasetError(
            path.name, f"is not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno
        ) from None
    except ValueError as exc:  # nested too deeply, a lone surrogate (named by its place)
        raise DatasetError(path.name, str(exc)) from None
    if not isinstance(data, dict) or not data:
        raise DatasetError(path.name, 'must be a non-empty JSON object keyed "0", "1", …')
    items: dict[int, Item] = {}
    for row, (key, entry) in enumerate(data.items(), start=1):
        item = _item(path.name, row, key, entry)
        if item.index in items:
            raise DatasetError(
                path.name,
                f"question_idx {item.index} also appears in row {items[item.index].row}",
                row=row,
                column="question_idx",
            )
        items[item.index] = item
    return items


def _repeated_key(file: str, text: str, message: str) -> DatasetError:
    """The error for a key written twice, at its item (row) and field: the file is read
    again with each object kept as its list of (key, value) pairs, on this error path only."""
    try:
        top = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except (ValueError, RecursionError):
        top = None
    if not isinstance(top, list) or not all(isinstance(p, tuple) for p in top):
        return DatasetError(file, message)
    seen: set[str] = set()
    for row, (key, value) in enumerate(top, start=1):
        if key in seen:
            return DatasetError(file, f'(item "{key}") {duplicate_message(key)}', row=row)
        seen.add(key)
        inner = _first_repeat(value)
        if inner is not None:
            return DatasetError(file, f'(item "{key}") {duplicate_message(inner)}', row, inner)
    return DatasetError(file, message)


def _first_repeat(value: Any) -> str | None:
    """The first key an object in `value` (objects as lists of pairs) writes twice."""
    stack = [value]
    while stack:
        item = stack.pop()
        if not isinstance(item, list):
            continue
        if item and all(isinstance(p, tuple) for p in item):
            seen: set[str] = set()
            for key, child in item:
                if key in seen:
                    return key
                seen.add(key)
                stack.append(child)
        else:
            stack.extend(item)
    return None


MAX_NUMBER = 1e15  # an answer written as a number; beyond this it is no answer


def _item(file: str, row: int, key: str, entry: Any) -> Item:
    def fail(column: str | None, message: str) -> DatasetError:
        return DatasetError(file, f'(item "{key}") {message}', row=row, column=column)

    if not isinstance(entry, dict):
        raise fail(None, "is not a JSON object")
    for name in FIELDS:
        if name not in entry:
            raise fail(name, "is missing")
    index = entry["question_idx"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**53:
        shown = repr(index) if len(repr(index)) <= 40 else "a huge number"
        raise fail("question_idx", f"expected a whole number from 0 to 2**53, found {shown}")
    question = entry["question"]
    if not isinstance(question, str) or not question.strip():
        raise fail("question", "expected a non-empty text")
    bounded(question, "question", fail, MAX_PROMPT_CHARS)
    wrong = entry["incorrect_answer"]
    wrong = wrong if isinstance(wrong, list) else [wrong]
    if not 1 <= len(wrong) < MAX_OPTIONS:  # with target_answer: 2 to MAX_OPTIONS options
        raise fail(
            "incorrect_answer",
            f"lists {len(wrong):,} answers; an item has 2 to {MAX_OPTIONS} options in all",
        )
    raw = [("target_answer", entry["target_answer"])]
    raw += [("incorrect_answer", w) for w in wrong]
    answers: list[tuple[str, str]] = []
    for name, value in raw:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise fail(name, f"expected a text or a number, found {type(value).__name__}")
        if isinstance(value, str):
            bounded(value, name, fail, MAX_OPTION_CHARS)
        if not isinstance(value, str) and not abs(value) <= MAX_NUMBER:  # nan, inf, 10**400
            shown = repr(value) if len(repr(value)) <= 40 else "a huge number"
            raise fail(name, f"a number must be finite and within ±{MAX_NUMBER:g}, found {shown}")
        label, text = _option(value)
        if not text:
            raise fail(name, "is empty")
        if any(text == seen and label == other for other, seen in answers):
            # (labelled options may repeat a text: they are still distinct positions)
            raise fail(name, "is the same as target_answer or another incorrect answer")
        answers.append((label, text))
    body, inline = _inline_options(question)
    if inline:  # the question writes its options out: they are the options, as written
        for (name, _), answer in zip(raw, answers, strict=True):
            if _position(answer, inline) is None:
                raise fail(name, "matches none of the options written in the question")
        correct = _position(answers[0], inline)
        return Item(file, row, index, body, tuple(inline), correct or 0, _mode(entry, fail), True)
    # the options are not written out (Yes/No, a number): the answers are the options
    order = sorted(range(len(answers)), key=lambda i: (answers[i][0] or "~", answers[i][1]))
    options = tuple(answers[i][1] for i in order)
    return Item(file, row, index, body, options, order.index(0), _mode(entry, fail), False)


def _mode(entry: Mapping[str, Any], fail: Any) -> str:
    mode = entry.get("generation_mode", "")
    if isinstance(mode, bool) or not isinstance(mode, str | int | float):
        raise fail("generation_mode", f"expected a text, found {type(mode).__name__}")
    return bounded(str(mode), "generation_mode", fail, MAX_NAME_CHARS)


def _inline_options(question: str) -> tuple[str, list[str]]:
    """The question's text before its "(a) … (b) …" options, and the options as written.

    The last "(a)" that is followed by "(b)" starts the options: from it, the first "(b)" after
    it, the first "(c)" after that, and so on; each option runs to the next label of the run.
    Whitespace inside an option (a label on a line of its own) is joined to single spaces.
    Linear in the text: each "(a)" looks its run up by bisection in the places of each letter,
    and an option's emptiness is a difference of running counts of non-space characters (a
    question of 20,000 "(a) x " took 30 s when every start rescanned the labels after it).
    """
    text = question.replace("\r\n", "\n")
    labels = list(_INLINE_LABEL_RE.finditer(text))
    places: dict[str, list[int]] = {}
    for at, match in enumerate(labels):
        places.setdefault(match[1], []).append(at)
    filled = [0]  # filled[i]: non-space characters in text[:i]
    for char in text:
        filled.append(filled[-1] + (not char.isspace()))
    for start in reversed(places.get("a", [])):
        run = [start]
        for code in range(ord("b"), ord("z") + 1):
            later = places.get(chr(code), [])
            k = bisect_right(later, run[-1])
            if k == len(later):
                break
            run.append(later[k])
        if len(run) < 2:
            continue
        ends = [labels[i].start() for i in run[1:]] + [len(text)]
        if all(filled[e] > filled[labels[i].end()] for i, e in zip(run, ends, strict=True)):
            spans = zip(run, ends, strict=True)
            options = [" ".join(text[labels[i].end() : e].split()) for i, e in spans]
            return text[: labels[run[0]].start()].strip(), options
    return text.strip(), []


def _position(answer: tuple[str, str], options: list[str]) -> int | None:
    """Where an answer is among the written options: by its label, else by its text."""
    label, text = answer
    if label and ord(label) - ord("a") < len(options):
        return ord(label) - ord("a")

    def norm(value: str) -> str:
        return " ".join(value.split()).rstrip(".").strip().lower()

    matches = [i for i, option in enumerate(options) if norm(option) == norm(text)]
    return matches[0] if len(matches) == 1 else None


def _option(value: str | int | float) -> tuple[str, str]:
    """("a", text) for "(a) text"; ("", "No") for "[No]"; numbers as written (3.0 as 3)."""
    if not isinstance(value, str):
        return "", str(int(value)) if float(value).is_integer() else str(value)
    labelled = _LABEL_RE.match(value)
    if labelled:
        return labelled[1], " ".join(labelled[2].split())
    bracketed = _BRACKETS_RE.match(value)
    return "", (bracketed[1] if bracketed else value).strip()
