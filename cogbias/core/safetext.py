"""Text from outside (names, answers, published cells) made safe for where it is shown.

Two places interpret text: a terminal acts on control characters (an ESC sequence in a
dataset name can set the window title or clear the screen) and a spreadsheet acts on a cell
that begins like a formula (`=HYPERLINK(...)` in an answer becomes a live link). We show such
text escaped rather than drop it, so what is printed still says what was stored.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL and C1 controls, and the Unicode bidi overrides and isolates that reorder
# what follows them on screen.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The same, but the layout characters a printed block legitimately holds (newline, tab and the
# carriage return of a progress bar) pass.
_STREAM_CONTROL = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """One value for a terminal line or table cell: every control character escaped
    (`\\x1b`, `\\n`, `\\u202e`), so it can neither act on the terminal nor break the line."""
    return _CONTROL.sub(_escaped, "" if text is None else str(text))


def terminal_block(text: str) -> str:
    """A printed block (several lines): control characters escaped, but newlines, tabs and
    carriage returns kept as the layout they are."""
    return _STREAM_CONTROL.sub(_escaped, text)


def csv_cell(value: Any) -> Any:
    """A value for a CSV cell a spreadsheet may open: text that begins like a formula
    (=, +, -, @, tab or carriage return) gets a leading apostrophe, which spreadsheets read as
    "this is text". Numbers, and text that is just a number ("-3", "+1.5e3"), stay as they
    are; everything else is unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        if not _PLAIN_NUMBER.fullmatch(value):
            return "'" + value
    return value
