"""Bounds on what untrusted text may cost: how deeply JSON may nest, and how much of a
model's answer is sent on to the extraction call.

Both are pure functions so every reader (the importers, `batch import`) and the decision
step use the same bound and the same message.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 100  # published formats nest 3 or 4 levels; Python's own limit is ~1,000
MAX_EXTRACTION_CHARS = 20_000  # as much of an answer as is stored (records.MAX_ANSWER_CHARS)
EXTRACTION_CUT = "\n[…]\n"


class TooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH; a ValueError, so readers that catch malformed
    JSON report it the same way, located."""


def loads_json(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` (the parser's own limit ends
    in RecursionError, and a value just under it breaks whatever walks it next) and strings
    with a lone surrogate (`"\\ud800"` parses, but no UTF-8 file or database can hold it).
    Both are ValueErrors with a message a reader puts after the file, line and field."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"nested too deeply; at most {max_depth} levels are allowed") from None
    if depth_of(value, max_depth) > max_depth:
        raise TooDeep(f"nested more than {max_depth} levels deep; at most {max_depth} are allowed")
    return value


def depth_of(value: Any, stop: int = MAX_JSON_DEPTH) -> int:
    """How deeply lists and dicts nest in `value`, walked without recursion (the walk stops
    once it is past `stop`); a string with a lone surrogate raises ValueError on the way,
    naming where it is (`control`, `items[3].text`)."""
    deepest = 0
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            check_text(item, where)
            continue
        if not isinstance(item, list | dict):
            continue
        deepest = max(deepest, depth)
        if deepest > stop:
            break
        if isinstance(item, dict):
            for key, child in item.items():
                check_text(str(key), f"a key of {where}" if where else "a key")
                stack.append((child, depth + 1, f"{where}.{key}" if where else str(key)))
        else:
            stack.extend((child, depth + 1, f"{where}[{n}]") for n, child in enumerate(item))
    return deepest


def check_text(text: str, where: str = "") -> str:
    """`text`, or ValueError naming the first lone surrogate (half of a UTF-16 pair: JSON's
    `\\ud800` escape reads into one, and it cannot be written as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        place = f" in {where[:80]}" if where else ""
        raise ValueError(
            f"holds a lone surrogate (\\u{code:04x}){place} at character {exc.start + 1}, "
            "which is not text; write the character itself or a complete surrogate pair"
        ) from None
    return text


def extraction_input(answer: str, limit: int = MAX_EXTRACTION_CHARS) -> str:
    """The part of an answer sent to the extraction call: all of it up to `limit` characters,
    else its beginning and its end (where a model states its choice) with a mark between.
    A 5 MB answer would otherwise be paid for a second time, whole."""
    if len(answer) <= limit:
        return answer
    half = limit // 2
    return answer[:half] + EXTRACTION_CUT + answer[-half:]
