"""A run's progress bars as the Run page draws them, for every page that starts paired runs.

One drawing, so a run started on the Datasets page reads the same as one started on the Run
page: gaps filled (while any are left), units done of planned, failures, tokens and cost.
The polling stays with each page's own fragment; this only draws one state of a run.
"""

from __future__ import annotations

import streamlit as st

from cogbias.core.run_record import ACTIVE, Run
from cogbias.llm.costs import dollars
from cogbias.runs.summaries import cost_text
from cogbias.views import safe_text

__all__ = ["ACTIVE", "bars", "counted", "totals"]  # ACTIVE: the pages' name for it


def counted(run: Run) -> str:
    """What a run's counts count (its kind says): pairs, or a study's units."""
    return run.kind.unit_name if run.kind is not None else "units"


def totals(run: Run) -> str:
    """Tokens, cost (with what the cache saved) and duration, in one line."""
    saved = run.cost_saved or 0.0
    return (
        f"{run.tokens or 0:,} tokens · cost {cost_text(run)}"
        + (f" ({dollars(saved)} saved by the cache)" if saved else "")
        + (f" · {run.duration_s:.0f} s" if run.duration_s is not None else "")
    )


def bars(run: Run, prefix: str = "") -> None:
    """A run's bars (as `summaries.run_summary` reads it) and its failures line; `prefix`
    names the run in the bar's text where a page shows several runs at once."""
    planned = max(run.planned or 0, 1)
    generated, to_generate = run.generated or 0, run.to_generate or 0
    if run.status in ACTIVE and generated < to_generate:  # gaps are filled before deciding
        st.progress(
            generated / to_generate,
            text=f"{prefix}Filling gaps: {generated:,} of {to_generate:,} instances generated",
        )
    st.progress(
        min(run.done / planned, 1.0),
        text=f"{prefix}{run.done:,} of {run.planned:,} {counted(run)}",
    )
    # escaped: two costs in one line ("$0.0000 ($0.0100 saved…") would be read as LaTeX
    st.caption(safe_text.escape_markdown(f"{run.failed:,} failed · {totals(run)}"))
    if run.waiting:
        waiting = f"{run.waiting} call(s) waiting to retry: {run.wait_reason or 'error'}"
        st.caption(safe_text.escape_markdown(waiting))  # a stored reason: text, never markup
