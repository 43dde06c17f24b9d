"""A run's progress bars as the Run page draws them, for every page that starts paired runs.

One drawing, so a run started on the Datasets page reads the same as one started on the Run
page: gaps filled (while any are left), units done of planned, failures, tokens and cost.
The polling stays with each page's own fragment; this only draws one state of a run.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from cogbias.core.run_record import ACTIVE
from cogbias.views import safe_text

__all__ = ["ACTIVE", "bars", "counted", "totals"]  # ACTIVE: the pages' name for it


def counted(run: dict[str, Any]) -> str:
    """What a run's counts count (a `run_summaries` row says it): pairs, or a study's units."""
    return str(run["unit"])


def totals(run: dict[str, Any]) -> str:
    """Tokens, cost (with what the cache saved) and duration, in one line."""
    saved = run.get("cost_saved") or 0.0
    return (
        f"{run['tokens'] or 0:,} tokens · cost {run['cost_text']}"
        + (f" (${saved:.4f} saved by the cache)" if saved else "")
        + (f" · {run['duration_s']:.0f} s" if run.get("duration_s") is not None else "")
    )


def bars(run: dict[str, Any], prefix: str = "") -> None:
    """A `run_summaries` row's bars and its failures line; `prefix` names the run in the bar's text where
    a page shows several runs at once."""
    planned = max(run["planned"] or 0, 1)
    generated, to_generate = run.get("generated") or 0, run.get("to_generate") or 0
    if run["status"] in ACTIVE and generated < to_generate:  # gaps are filled before deciding
        st.progress(
            generated / to_generate,
            text=f"{prefix}Filling gaps: {generated:,} of {to_generate:,} instances generated",
        )
    st.progress(
        min(run["done"] / planned, 1.0),
        text=f"{prefix}{run['done']:,} of {run['planned']:,} {counted(run)}",
    )
    # escaped: two costs in one line ("$0.0000 ($0.0100 saved…") would be read as LaTeX
    st.caption(safe_text.escape_markdown(f"{run['failed']:,} failed · {totals(run)}"))
    if run.get("waiting"):
        waiting = f"{run['waiting']} call(s) waiting to retry: {run.get('wait_reason') or 'error'}"
        st.caption(safe_text.escape_markdown(waiting))  # a stored reason: text, never markup
