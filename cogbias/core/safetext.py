"""Text from outside (names, answers, published cells) made safe for where it is shown.

Two places interpret text: a terminal acts on control characters (an ESC sequence in a
dataset name can set the window title or clear the screen) and a spreadsheet acts on a cell
that begins like a formula (`=HYPERLINK(...)` in an answer becomes a live link). We show such
text escaped rather than drop it, so what is printed still says what was stored.
"""

from __future__ import annotations

import re
from typing import Any

# The characters no name may hold and no renderer is handed raw (one rule, for the terminal,
# the reports, the charts and the Hub card; `core.limits.name_problem` refuses them in a name):
# C0 controls, DEL and C1 controls; the bidi marks, embeddings, overrides and isolates that
# reorder what follows on screen ("evil" behind U+202E reads "live"); the invisible zero-width
# space, word joiner, invisible operators, deprecated format characters and byte-order mark (a
# name of them alone looks blank); the line and paragraph separators; the interlinear
# annotation marks; and what XML cannot hold at all, the noncharacters U+FFFE and U+FFFF and
# lone surrogates (vl-convert aborts the whole process on one in a chart's text).
_LAYOUT = "\t\n\r"
_UNSHOWN_RANGES = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ufffe\uffff\ud800-\udfff"
)
UNSHOWN = re.compile(f"[{_LAYOUT}{_UNSHOWN_RANGES}]")
# The same, but the layout characters a printed block legitimately holds (newline, tab and the
# carriage return of a progress bar) pass.
_STREAM_CONTROL = re.compile(f"[{_UNSHOWN_RANGES}]")
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
    return UNSHOWN.sub(_escaped, "" if text is None else str(text))


def terminal_block(text: str) -> str:
    """A printed block (several lines): control characters escaped, but newlines, tabs and
    carriage returns kept as the layout they are."""
    return _STREAM_CONTROL.sub(_escaped, text)


def clipped(text: str, limit: int) -> str:
    """`text` whole when it has at most `limit` characters, else its beginning and its end
    with "…" between, `limit` characters in all: two long names that differ only at the end
    stay apart, and a drawn label cannot grow a chart without bound."""
    if len(text) <= limit:
        return text
    tail = max(limit // 4, 1)
    return text[: limit - tail - 1] + "…" + text[-tail:]


def shown(text: object, limit: int | None = None) -> str:
    """A name for a report, chart, card or picker: every character of `UNSHOWN` escaped as
    `terminal` does (`\\u202e`, `\\x07`), then `clipped` to `limit` characters."""
    escaped = terminal(text)
    return escaped if limit is None else clipped(escaped, limit)


def csv_cell(value: Any) -> Any:
    """A value for a CSV cell a spreadsheet may open: text that begins like a formula
    (=, +, -, @, tab or carriage return) gets a leading apostrophe, which spreadsheets read as
    "this is text". Numbers, and text that is just a number ("-3", "+1.5e3"), stay as they
    are; everything else is unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        if not _PLAIN_NUMBER.fullmatch(value):
            return "'" + value
    return value
