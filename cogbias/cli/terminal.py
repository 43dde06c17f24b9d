"""What the command prints is shown, never obeyed: keys redacted, control characters escaped.

Names, answers and messages come from files, providers and databases anyone may have
written. `safe_streams` wraps stdout and stderr for the whole command, so no print path can
forget: an echoed key (in any disguise `core.redact` knows) becomes `***`, and an escape
sequence in a dataset name is printed as `\\x1b[2J` instead of clearing the screen. Table
cells go further (`cell`): a newline or carriage return in a name cannot break a row.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from cogbias.core.redact import Redactor, redactor
from cogbias.core.safetext import terminal, terminal_block


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
    """A value for one table cell: every control character escaped, newlines included."""
    return "" if value is None else terminal(value)


def shown_frame(frame: Any) -> Any:
    """A table (pandas) for `to_string`: text cells, column and index labels through `cell`."""

    def text(value: Any) -> Any:
        return cell(value) if isinstance(value, str) else value

    return frame.rename(index=text, columns=text).map(text)
