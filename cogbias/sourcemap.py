"""Map a TOML key path (and an offset inside its string value) back to a line and column.

`tomllib` gives us values but not positions; a parse error that says "file:12:40" is worth
far more to an author than "somewhere in control.situation", so we recover positions from
the source text with a small scanner that knows just enough TOML for test case files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=\s*")


def _norm_path(header: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in header.split("."))


@dataclass(frozen=True)
class SourceMap:
    text: str

    def _lines(self) -> list[str]:
        return self.text.split("\n")

    def table_line(self, table: tuple[str, ...]) -> int | None:
        for number, line in enumerate(self._lines(), start=1):
            match = _HEADER_RE.match(line)
            if match and _norm_path(match.group(1)) == table:
                return number
        return None

    def key_position(self, path: tuple[str, ...]) -> tuple[int, int] | None:
        """(line, column of the value's first character) of `path`, 1-based."""
        table, key = path[:-1], path[-1]
        current: tuple[str, ...] = ()
        for number, line in enumerate(self._lines(), start=1):
            header = _HEADER_RE.match(line)
            if header:
                current = _norm_path(header.group(1))
                continue
            match = _KEY_RE.match(line)
            if match and current == table and match.group(1).strip("\"'") == key:
                return number, match.end() + 1
        return None

    def locate(
        self, path: tuple[str, ...], index: int | None = None, offset: int | None = None
    ) -> tuple[int, int]:
        """Best position for `path` (the `index`-th string of a list, `offset` chars into it)."""
        position = self.key_position(path)
        if position is None:
            for depth in range(len(path) - 1, 0, -1):
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
        return sum(len(x) + 1 for x in self._lines()[: line - 1]) + col - 1

    def _line_col(self, absolute: int) -> tuple[int, int]:
        before = self.text[:absolute]
        return before.count("\n") + 1, absolute - (before.rfind("\n") + 1) + 1

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
