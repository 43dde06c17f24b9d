"""The pages' "Make report" control: `cogbias report`'s HTML file, made on request.

A report takes seconds (its charts are drawn offline, its tables recomputed), so a page
never makes one on its own: a click makes it (once per database state and selection, shared
by every session through `st.cache_data`), and the page keeps the bytes for the download, so
later reruns and page switches draw only a button.
"""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from app_pages._common import attempt, db_path, db_version
from cogbias.store import Store
from cogbias.views import report, report_html


@st.cache_data(show_spinner="Making the report…", max_entries=8)
def _html(
    path: str, version: tuple[float, ...], kind: str, what: tuple[tuple[str, Any], ...]
) -> bytes:
    del version  # only the cache key: a new database state makes a new report
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        return report_html.render(report.build(kind, own, **dict(what))).encode("utf-8")


def file_name(kind: str, what: dict[str, Any]) -> str:
    """cogbias-report-<what>.html, with only safe characters."""
    words = [str(v) for v in what.values() if v]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(words))[:80].strip("_.-") or kind
    return f"cogbias-report-{stem}.html"


def offer(kind: str, key: str, **what: Any) -> None:
    """A "Make report" button for the report of `kind` (`report.REPORTS`) on `what`; once
    made, its download, until the selection changes."""
    path = str(db_path())
    asked = (kind, tuple(what.items()))
    made = st.session_state.get(f"{key}_made")  # (asked, version, bytes)
    c1, c2 = st.columns([1, 3])
    if c1.button("Make report", key=f"{key}_make", help="One HTML file: charts, numbers, methods"):
        version = db_version(path)
        data = attempt("Making the report", lambda: _html(path, version, kind, asked[1]))
        made = (asked, version, data) if data is not None else None
        st.session_state[f"{key}_made"] = made
    if not made or made[0] != asked:
        c2.caption(
            "A self-contained HTML file of these results with the numbers behind each chart and "
            "a methods section; it opens offline (`cogbias report` writes the same)."
        )
        return
    c2.download_button(
        "Download the report (HTML)",
        made[2],
        file_name=file_name(kind, what),
        mime="text/html",
        key=f"{key}_download",
        on_click="ignore",
    )
    if made[1] != db_version(path):
        c2.caption("The results changed since it was made: make it again for the newest.")
