"""Numbers as a reader sees them: a signed score never reads "-0.00" or "+0.00", and a value
that is missing reads "–", never "None" or "nan".

Scores run from -1 to 1 and their sign is the finding, so a value that rounds to zero is
shown without one: "-0.00" would claim a direction that the shown digits do not have. Tables
built from these texts show a fixed number of digits (not "0.3333", which only says how a
float happened to print).
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"


def missing(value: Any) -> bool:
    """True for None and NaN (a value a table must show as a dash)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def signed(value: float, digits: int = 2) -> str:
    """`value` with its sign and `digits` decimals; a value that rounds to zero has no sign."""
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def fixed(value: float, digits: int = 2) -> str:
    """`value` with `digits` decimals and a sign only when negative; never "-0.00"."""
    return signed(value, digits).lstrip("+")


def signed_or_dash(value: Any, digits: int = 2) -> str:
    """`signed`, or "–" for a missing value."""
    return MISSING if missing(value) else signed(float(value), digits)


def number_or_dash(value: Any) -> str:
    """A count or size as written ("0.135", "1265"), or "–" when unknown: a table of numbers
    that may be missing shows text, since Streamlit writes a missing number as "None"."""
    return MISSING if missing(value) else f"{float(value):g}"


def interval(low: Any, high: Any, digits: int = 2, note: str = "") -> str:
    """ "-0.03 to +0.08"; "–" (followed by `note`) when the interval is missing."""
    if missing(low) or missing(high):
        return MISSING + (f" ({note})" if note else "")
    return f"{signed(float(low), digits)} to {signed(float(high), digits)}"


def percent(value: Any, digits: int = 0) -> str:
    """A share (0.42) as a percentage with `digits` decimals ("42%", "4.2%"), or "–" when
    missing: every page and command writes a share this one way."""
    return MISSING if missing(value) else f"{float(value):.{digits}%}"


def p_text(value: Any) -> str:
    """A p-value with three significant digits ("0.0123", "1"), or "–" when not tested."""
    return MISSING if missing(value) else f"{float(value):.3g}"


def text_or_blank(value: Any) -> str:
    """A stored text (an error, a name) or nothing when there is none: never "None"."""
    return "" if missing(value) else str(value)
