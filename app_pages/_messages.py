"""Messages of several lines as a page shows them: the first line where the reader looks, the
rest as written, line by line (Markdown would run them into one paragraph)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from cogbias.views import safe_text


def said(alert: Callable[[str], Any], text: str, more: str = "Line by line") -> None:
    """A message of several lines (an import's summary, a plan) as it was written: its first
    line in `alert` (escaped: it names datasets and files), the others below it line by line
    as plain text, one click away when there are more than three."""
    first, *rest = text.splitlines() or [""]
    alert(safe_text.escape_markdown(first))
    if not rest:
        return
    if len(rest) > 3:
        with st.expander(f"{more} ({len(rest):,} more lines)"):
            st.text("\n".join(rest))
    else:
        st.text("\n".join(rest))
