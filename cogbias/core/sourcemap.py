"""Map a TOML key path (and an offset inside its string value) back to a line and column.

`tomllib` gives us values but not positions; a parse error that says "file:12:40" is worth
far more to an author than "somewhere in control.situation", so we recover positions from
the source text with a small scanner that knows just enough TOML for test case files.
"""

from __future__ import annotations

import bisect
import functools
import re
import tomllib
from dataclasses import dataclass

_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ARRAY_RE = re.compile(r"^\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*(#.*)?$")
_KEY_RE = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*=\s*""")


def _key_name(written: str) -> str:
    """A key as TOML reads it: a quoted key's escapes (`\\"`, `\\u00e9`) decoded, so an
    [examples] key that quotes a word is found where it is written."""
    if written.startswith('"') and "\\" in written:
        try:
            return str(tomllib.loads(f"k = {written}")["k"])
        except tomllib.TOMLDecodeError:
            pass
    return written.strip("\"'")


def _norm_path(header: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in header.split("."))


@dataclass(frozen=True)
class SourceMap:
    """Positions in one file's text. The text is scanned once, on the first lookup, into
    indexes, so locating N problems costs O(size + N), not O(size * N)."""

    text: str

    @functools.cached_property
    def _index(
        self,
    ) -> tuple[
        list[str], dict[tuple[str, ...], int], dict[tuple[str, ...], tuple[int, int]], list[int]
    ]:
        lines = self.text.split("\n")
        tables: dict[tuple[str, ...], int] = {}
        keys: dict[tuple[str, ...], tuple[int, int]] = {}
        starts: list[int] = []
        current: tuple[str, ...] = ()
        arrays: dict[tuple[str, ...], int] = {}  # [[name]] tables seen so far, by name
        offset = 0
        for number, line in enumerate(lines, start=1):
            starts.append(offset)
            offset += len(line) + 1
            array = _ARRAY_RE.match(line)
            if array:  # the i-th [[name]] table is the path (name, "i")
                name = _norm_path(array.group(1))
                arrays[name] = arrays.get(name, -1) + 1
                current = (*name, str(arrays[name]))
                tables.setdefault(current, number)
                continue
            header = _HEADER_RE.match(line)
            if header:
                current = _norm_path(header.group(1))
                tables.setdefault(current, number)
                continue
            match = _KEY_RE.match(line)
            if match:
                keys.setdefault((*current, _key_name(match.group(1))), (number, match.end() + 1))
        return lines, tables, keys, starts

    def table_line(self, table: tuple[str, ...]) -> int | None:
        return self._index[1].get(table)

    def key_position(self, path: tuple[str, ...]) -> tuple[int, int] | None:
        """(line, column of the value's first character) of `path`, 1-based."""
        return self._index[2].get(path)

    def locate(
        self, path: tuple[str, ...], index: int | None = None, offset: int | None = None
    ) -> tuple[int, int]:
        """Best position for `path` (the `index`-th string of a list, `offset` chars into it)."""
        position = self.key_position(path)
        if position is None:
            for depth in range(len(path), 0, -1):  # the table itself, then its parents
                line = self.table_line(path[:depth])
                if line is not None:
                    return line, 1
            return 1, 1
        if index is None and offset is None:
            return position
        absolute = self._absolute(*position)
        start = self._string_start(absolute, index or 0) if index is not None else None
        if start is None:
            start = self._string_start(absolute, 0)
        if start is None:
            return position
        return self._line_col(self._advance(start, offset or 0))

    def _absolute(self, line: int, col: int) -> int:
        return self._index[3][line - 1] + col - 1

    def _line_col(self, absolute: int) -> tuple[int, int]:
        starts = self._index[3]
        line = bisect.bisect_right(starts, absolute)
        return line, absolute - starts[line - 1] + 1

    def _string_start(self, pos: int, index: int) -> int | None:
        """Start of the content of the `index`-th string literal from `pos`."""
        text, seen = self.text, -1
        while pos < len(text):
            for quote in ('"""', "'''", '"', "'"):
                if text.startswith(quote, pos):
                    seen += 1
                    content = pos + len(quote)
                    if len(quote) == 3 and text.startswith("\n", content):
                        content += 1
                    if seen == index:
                        return content
                    pos = self._string_end(content, quote)
                    break
            else:
                pos += 1
        return None

    def _string_end(self, pos: int, quote: str) -> int:
        text = self.text
        while pos < len(text):
            if text[pos] == "\\" and quote[0] == '"':
                pos += 2
                continue
            if text.startswith(quote, pos):
                return pos + len(quote)
            pos += 1
        return pos

    def _advance(self, pos: int, chars: int) -> int:
        """Move `chars` value characters forward, counting an escape sequence as one."""
        text = self.text
        while chars > 0 and pos < len(text):
            pos += 2 if text[pos] == "\\" else 1
            chars -= 1
        return pos
