"""What the test case parser and the example filler both need to know about example fills.

The parser checks a file's `[examples]` (how many fills, how long, which gaps need none) and
the filler (`examples`) uses them; both import these from here, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cogbias.core.templates import LLMGap, substitute

ARTICLE_GAP = "a/an"
COMMON_GAPS = (ARTICLE_GAP, "type", "organization")  # filled from the scenario's fields
MIN_EXAMPLES = 3
MAX_EXAMPLE_CHARS = 400


def example_key(gap: LLMGap, sampled: Mapping[str, Any], named: set[str]) -> str:
    """How a gap is looked up in `[examples]`: its instruction with sampled values put in.

    References to named gaps stay as written (`{{metric}}`), so one key serves every fill of
    the earlier gap; references to values (including `variant`) are substituted, so a gap
    whose meaning depends on a value (a positive or negative tone) has one key per value.
    """
    return substitute(gap.instruction, {k: v for k, v in sampled.items() if k not in named})
