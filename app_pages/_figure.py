"""A page's "Save figure" control: the chart as a paper-ready SVG and PNG, on request.

Rendering a figure takes a second or more, so nothing is drawn until the button is pressed;
the files are cached by database state and by what the figure shows, so pressing it again,
or coming back to the page, costs nothing, and switching pages never renders one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import streamlit as st

from app_pages._common import attempt, db_path, db_version
from cogbias.store import Store
from cogbias.views import figures

WIDTH_LABELS = {"page": "page width (7 in)", "column": "column width (3.5 in)"}


@st.cache_data(show_spinner="Drawing the figure…", max_entries=16)
def _files(
    path: str,
    version: tuple[float, ...],
    name: str,
    width: str,
    fields: tuple[object, ...],
) -> tuple[bytes, bytes]:
    source = figures.Source(*fields)  # type: ignore[arg-type]
    with Store(path) as own:  # cached work may run in any session's thread: its own connection
        chart = figures.figure_chart(
            name, own, run_id=source.run_id, dataset=source.dataset, width=width,
            models=source.models, by=source.by, view=source.view, order=source.order,
        )  # fmt: skip
    return figures.figure_bytes(chart, "svg"), figures.figure_bytes(chart, "png")


def save_figure(names: Sequence[str], key: str, source: figures.Source) -> None:
    """An expander offering the figures `names` of `source` as SVG and PNG downloads."""
    with st.expander("Save figure (SVG, PNG)"):
        left, right = st.columns([2, 2])
        name = names[0]
        if len(names) > 1:
            name = left.selectbox(
                "Figure", list(names), format_func=lambda n: figures.FIGURES[n].title,
                key=f"{key}_name",
            )  # fmt: skip
        else:
            left.caption(figures.FIGURES[name].title)
        width = right.radio(
            "Width", list(WIDTH_LABELS), format_func=WIDTH_LABELS.get, key=f"{key}_width"
        )
        path = str(db_path())
        wanted = (path, db_version(path), name, width, dataclasses.astuple(source))
        if st.button("Prepare the figure", key=f"{key}_prepare"):
            files = attempt("Drawing the figure", lambda: _files(*wanted))
            st.session_state[f"{key}_files"] = (wanted, files)
        prepared = st.session_state.get(f"{key}_files")
        if not prepared or prepared[0] != wanted or prepared[1] is None:
            st.caption(
                "Every label whole, the legend inside, sized for a journal; the same as "
                "`cogbias figure` writes."
            )
            return
        svg, png = prepared[1]
        c1, c2, _ = st.columns([1, 1, 2])
        c1.download_button(
            "Download SVG", svg, file_name=f"{name}.svg", mime="image/svg+xml", key=f"{key}_svg"
        )
        c2.download_button(
            "Download PNG", png, file_name=f"{name}.png", mime="image/png", key=f"{key}_png"
        )
