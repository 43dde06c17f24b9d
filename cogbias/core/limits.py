"""Bounds on what untrusted text may cost: how deeply JSON may nest, how long an imported
text or name may be, what a name may hold, and how much of a model's answer is sent on to the
extraction call.

All are pure functions so every reader (the importers, `batch import`) and the decision
step use the same bound and the same message. The sizes are documented in docs/datasets.md;
each is many times the largest the papers' released data holds, so real files never meet
them and a hostile one is refused in seconds instead of costing minutes downstream (a 10 MB
prompt made every dry run of its study spend ten minutes escaping it for TOML).
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from typing import Any

from cogbias.core.safetext import UNSHOWN, shown, terminal

MAX_JSON_DEPTH = 100  # published formats nest 3 or 4 levels; Python's own limit is ~1,000
MAX_EXTRACTION_CHARS = 20_000  # as much of an answer as is stored (records.MAX_ANSWER_CHARS)
EXTRACTION_CUT = "\n[…]\n"
# One imported prompt: a test case half, a token-bias question, a thesis prompt or its
# variables. The released data's longest are 1,172 characters (a token-bias question) and
# 669 (a thesis prompt); 20,000 is about 5,000 tokens.
MAX_PROMPT_CHARS = 20_000
# One answer option, a token-bias answer or a model feature cell (the released longest: 333).
MAX_OPTION_CHARS = 2_000
# A name that becomes an id or a label: a dataset, bias, scenario, model, family or
# hypothesis (the released longest: 19).
MAX_NAME_CHARS = 200
# Answers per group of a published effect size (the thesis asked 100 per group).
MAX_SAMPLE_SIZE = 10_000_000


class TooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH; a ValueError, so readers that catch malformed
    JSON report it the same way, located."""


def loads_json(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` (the parser's own limit ends
    in RecursionError, and a value just under it breaks whatever walks it next), strings
    with a lone surrogate (`"\\ud800"` parses, but no UTF-8 file or database can hold it)
    and an object that repeats a key (`json.loads` keeps the last one silently, so a second
    item "0" would replace the first unseen). All are ValueErrors with a message a reader
    puts after the file, line and field."""
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise TooDeep(f"nested too deeply; at most {max_depth} levels are allowed") from None
    if depth_of(value, max_depth) > max_depth:
        raise TooDeep(f"nested more than {max_depth} levels deep; at most {max_depth} are allowed")
    return value


class DuplicateKey(ValueError):
    """A JSON object (or a Python dict literal) that names one key twice."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`object_pairs_hook` for `json.loads`: the object as a dict, or DuplicateKey naming the
    first key it repeats (a dict built in C first, so files without repeats stay fast)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(duplicate_message(key))
            seen.add(key)
    return value


def duplicate_message(key: object) -> str:
    """The message for a key written twice in one object."""
    quoted = json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)
    if len(quoted) > 80:
        quoted = quoted[:79] + "…"
    return (
        f"repeats the key {terminal(quoted)} in one object (only one value can be kept, and "
        "which one was meant cannot be told); write each key once"
    )


def name_problem(text: str, limit: int = MAX_NAME_CHARS) -> str | None:
    """Why `text` cannot be a name (a dataset, bias, scenario, model, family or hypothesis
    that becomes an id and a label on every page), or None.

    A name is one line of visible text: no character of `safetext.UNSHOWN` (a newline
    printed raw splits a table row, ESC acts on the terminal, U+202E reverses what follows,
    BEL aborts the chart renderer), not empty once Unicode-normalised (NFKC) and
    stripped, not only dots (`..` becomes an empty id, and reads as a path), at most `limit`
    characters. The message is worded to follow the file, row and field it names.
    """
    if len(text) > limit:
        return f"is {len(text):,} characters long; a name has at most {limit:,}"
    return _visible_problem(text)


def checked_name(text: str, what: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text` when it can be a name (`name_problem`), else ValueError naming `what` ("model",
    "--name") and the name shown escaped and cut short: where a name is made (a model given
    to a run, a label), so nothing a renderer draws can hold what it cannot draw."""
    problem = name_problem(text, limit)
    if problem:
        raise ValueError(f"{what} '{shown(text, 60)}' {problem}")
    return text


@lru_cache(maxsize=4096)  # importers check the same model and bias names row after row
def _visible_problem(text: str) -> str | None:
    bad = UNSHOWN.search(text)
    if bad:
        char = terminal(bad.group())
        return (
            f"holds a control or invisible character ({char}) at character "
            f"{bad.start() + 1}; a name is one line of visible text"
        )
    visible = unicodedata.normalize("NFKC", text).strip()
    if not visible:
        return "is empty; a name needs a visible character"
    if not visible.replace(".", "").strip():
        return "is only dots, which is no name"
    return None


def length_problem(text: str, limit: int) -> str | None:
    """Why `text` is too long for its field (`limit` characters), or None."""
    if len(text) > limit:
        return f"is {len(text):,} characters long; at most {limit:,} are allowed"
    return None


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
