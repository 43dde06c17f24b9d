"""What the command prints is shown, never obeyed: keys redacted, control characters escaped.

Names, answers and messages come from files, providers and databases anyone may have
written. `safe_streams` wraps stdout and stderr for the whole command, so no print path can
forget: an echoed key (in any disguise `core.redact` knows) becomes `***`, and an escape
sequence in a dataset name is printed as `\\x1b[2J` instead of clearing the screen. Table
cells go further (`cell`): a newline or carriage return in a name cannot break a row.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from cogbias.core.redact import Redactor, redactor
from cogbias.core.safetext import clipped, terminal, terminal_block
from cogbias.views.numbers import MISSING, gap


class SafeStream:
    """A text stream whose writes are redacted and have their control characters escaped
    (newlines, tabs and a progress bar's carriage return pass as layout)."""

    def __init__(self, stream: TextIO, clean: Redactor) -> None:
        self._stream, self._clean = stream, clean

    def write(self, text: str) -> int:
        self._stream.write(terminal_block(self._clean(text) or ""))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, fileno, …
        return getattr(self._stream, name)


@contextmanager
def safe_streams() -> Iterator[None]:
    """stdout and stderr wrapped in `SafeStream` while the command runs."""
    clean = redactor()
    saved = sys.stdout, sys.stderr
    sys.stdout = SafeStream(saved[0], clean)  # type: ignore[assignment]
    sys.stderr = SafeStream(saved[1], clean)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def print_data(frame: Any, fmt: str) -> bool:
    """Print a table (pandas) as JSON records or as CSV (formulas neutralised) when `fmt`
    asks for one; False for the text layout, which each command draws its own way."""
    if fmt == "json":
        print(frame.to_json(orient="records", indent=1))
        return True
    if fmt == "csv":
        from cogbias.views.export import frame_csv

        frame_csv(frame, sys.stdout)
        return True
    return False


def cell(value: Any) -> str:
    """A value for one table cell: every control character escaped, newlines included; a
    missing value "–" (never "None" or "nan")."""
    return MISSING if gap(value) else terminal(value)


def width() -> int:
    """The terminal's width in characters: `COLUMNS`, the terminal's own, or 120 when the
    output is a file or a pipe."""
    return shutil.get_terminal_size((120, 24)).columns


def cell_limit() -> int:
    """The most characters a text cell of a printed table shows (`clipped` in the middle),
    so one long name or path cannot push a table past the terminal's width."""
    return max(12, min(60, width() // 3))


def shown_frame(frame: Any) -> Any:
    """A table (pandas) for `to_string`: text cells, column and index labels through `cell`
    and clipped to `cell_limit`, a missing value "–"."""
    limit = cell_limit()

    def text(value: Any) -> Any:
        if gap(value) or isinstance(value, str):
            return clipped(cell(value), limit)
        return value

    return frame.rename(index=text, columns=text).map(text)


def frame_text(frame: Any, **options: Any) -> str:
    """A table (pandas) as the command prints it (`shown_frame`), its columns wrapped into
    blocks at the terminal's width (`to_string` with `options`)."""
    return str(shown_frame(frame).to_string(line_width=width(), **options))


def print_rows(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Rows as aligned columns no wider than the terminal: the widest columns' cells are
    clipped in the middle (`clipped`) until the line fits, none below 8 characters."""
    shown = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in shown)]) for i, c in enumerate(columns)]
    room = width() - 2 * (len(columns) - 1)
    while sum(widths) > room and max(widths) > 8:
        widest = widths.index(max(widths))
        widths[widest] = max(8, widths[widest] - (sum(widths) - room))
    for line in [columns, *shown]:
        cells = [clipped(v, w).ljust(w) for v, w in zip(line, widths, strict=True)]
        print("  ".join(cells).rstrip())
