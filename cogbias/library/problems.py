"""How a problem in a test case or study file is reported: `file:line:col: message`.

Shared by the test case parser and the study parser (`studies.definitions`), so both report
the same way and collect every problem of a file instead of stopping at the first.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogbias.core.sourcemap import SourceMap

_TOML_POS_RE = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class LibraryError(ValueError):
    """One or more problems in a test case file."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class Checker:
    """Collects problems with positions while a file is validated."""

    def __init__(self, text: str, file: str) -> None:
        self.source = SourceMap(text)
        self.file = file
        self.problems: list[Problem] = []

    def add(
        self,
        path: tuple[str, ...],
        message: str,
        index: int | None = None,
        offset: int | None = None,
    ) -> None:
        line, col = self.source.locate(path, index, offset)
        self.problems.append(Problem(self.file, line, col, message))

    def fields(
        self,
        table: Mapping[str, Any],
        schema: Mapping[str, tuple[Any, bool]],
        path: tuple[str, ...],
    ) -> bool:
        ok = True
        where = ".".join(path) or "the top level"
        for key, value in table.items():
            if key not in schema:
                # Spelling hints help with a typo or two; a file of thousands of unknown keys
                # gets the list of allowed keys instead (difflib is the slow part of that).
                hint = (
                    difflib.get_close_matches(key, list(schema), n=1)
                    if len(self.problems) < 100
                    else []
                )
                extra = (
                    f"; did you mean '{hint[0]}'?" if hint else f"; allowed: {', '.join(schema)}"
                )
                self.add((*path, key), f"unknown field '{key}' in {where}{extra}")
                ok = False
                continue
            kinds, _ = schema[key]
            if not isinstance(value, kinds) or (
                isinstance(value, bool) and kinds in (int, (int, float))
            ):
                self.add(
                    (*path, key),
                    f"'{key}' should be {_kind_name(kinds)}, not {_kind_name(type(value))}",
                )
                ok = False
        for key, (_, required) in schema.items():
            if required and key not in table:
                self.add((*path, key), f"missing required field '{key}' in {where}")
                ok = False
        return ok


def _kind_name(kinds: Any) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    names |= {list: "a list", dict: "a table"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def read_toml(text: str, file: str) -> tuple[str, dict[str, Any]]:
    """(text without a byte order mark, its TOML data); every way the text cannot be read is a
    LibraryError with a location (test case and study files alike)."""
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark, as some editors write
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POS_RE.search(str(exc))
        line, col = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
        message = _TOML_POS_RE.sub("", str(exc)).strip()
        problem = _unclosed_text(file, text, message, line) or Problem(
            file, line, col, f"this is not valid TOML: {message}"
        )
    except (RecursionError, MemoryError):
        problem = Problem(file, 1, 1, "this file nests arrays or tables too deeply to be read")
    except ValueError:  # an integer of thousands of digits (Python's int() refuses it)
        at = re.search(r"\d{1000,}", text)
        before = text[: at.start() if at else 0]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        problem = Problem(file, line, col, "this number has too many digits to be read")
    raise LibraryError([problem])


def _unclosed_text(file: str, text: str, message: str, line: int) -> Problem | None:
    """A text whose closing quote is missing, said in an author's words: TOML's own message for
    it is "Illegal character '\\n'", or "Unterminated string" at the end of the document."""
    if message == "Illegal character '\\n'":
        return Problem(file, line, 1, f"a text is not closed on line {line}: add its closing quote")
    if message.startswith(("Unterminated string", 'Expected "\'"', "Expected '\"'")):
        lines = text.splitlines()
        for quote in ('"""', "'''", '"', "'"):
            opened = [i for i, t in enumerate(lines, 1) if t.count(quote) % 2 == 1]
            if opened:
                at = opened[-1] if len(quote) == 3 else opened[0]
                return Problem(
                    file, at, 1, f"a text is not closed on line {at}: add its closing quote"
                )
    return None


def clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
