"""Numbers as a reader sees them: a signed score never reads "-0.00" or "+0.00".

Scores run from -1 to 1 and their sign is the finding, so a value that rounds to zero is
shown without one: "-0.00" would claim a direction that the shown digits do not have.
"""

from __future__ import annotations


def signed(value: float, digits: int = 2) -> str:
    """`value` with its sign and `digits` decimals; a value that rounds to zero has no sign."""
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text
