"""Every table a page shows, with a way to take it away: `table` draws it (a missing value
"–", never "None" or "nan": `views.numbers.dashed`) and under it a Download menu with the
same rows as CSV, JSONL and Parquet, written by the writers `cogbias export` uses
(`views.export.frame_files`).

A page's script runs again on every click, and writing the three files of every table each
time was a good part of a rerun (0.15 s of Explore's 0.3 s); they are written once per
table content (`_files`). Not on click (a callable `data`): Streamlit's on-click generation
now and then never delivered the file (`explore._csv`)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import streamlit as st

from cogbias.views.export import FORMATS, frame_files
from cogbias.views.numbers import dashed

LABELS = {"csv": "CSV", "jsonl": "JSONL", "parquet": "Parquet"}


def table(
    shown: pd.DataFrame,
    key: str,
    name: str,
    data: pd.DataFrame | None = None,
    **options: Any,
) -> None:
    """`shown` as a table (`st.dataframe` with `options`), then its downloads: `data` (the
    same rows with their numbers unformatted) when given, else `shown` itself, in files
    named `name`.csv, .jsonl and .parquet. `key` names the download buttons (one per table
    on a page)."""
    st.dataframe(dashed(shown), **options)
    downloads(shown if data is None else data, key, name)


def downloads(
    frame: pd.DataFrame, key: str, name: str, label: str = "Download", help: str | None = None
) -> None:
    """The Download menu of one table: a button per format, each the file itself."""
    files = _files(frame)
    with st.popover(label, icon=":material/download:", help=help):
        st.caption(f"{len(frame):,} rows (numbers unrounded)")
        for fmt in FORMATS:
            st.download_button(
                LABELS[fmt],
                files[fmt],
                file_name=f"{stem(name)}.{fmt}",
                key=f"{key}:{fmt}",
                width="stretch",
            )


def _files(frame: pd.DataFrame) -> dict[str, bytes]:
    """The table's three files, from the cache when a table of the same content was written
    before (`fingerprint`), else written now; a table with cells pandas cannot hash (some
    lists) is written every time."""
    try:
        key = fingerprint(frame)
    except (TypeError, ValueError):
        return frame_files(frame)
    return _cached_files(key, frame)


@st.cache_data(show_spinner=False, max_entries=64, hash_funcs={pd.DataFrame: lambda _: 0})
def _cached_files(key: tuple[Any, ...], frame: pd.DataFrame) -> dict[str, bytes]:
    """`frame_files`, cached on `key` alone (the frame itself is not hashed again)."""
    return frame_files(frame)


def fingerprint(frame: pd.DataFrame) -> tuple[Any, ...]:
    """What the files depend on, exactly: the column names and types in order and every
    cell (pandas' 64-bit hash per row, in row order; in a column of Python objects the
    value's type too, since pandas hashes None and "None", 1 and "1" alike). Streamlit's own
    hash of a frame looks only at a sample of the rows of a large one."""
    typed = frame.copy(deep=False)
    for name in [c for c in frame.columns if pd.api.types.is_object_dtype(frame[c])]:
        typed[f"{name}\0type"] = frame[name].map(lambda value: type(value).__name__)
    rows = pd.util.hash_pandas_object(typed, index=False, categorize=False)
    return (
        tuple(map(str, frame.columns)),
        tuple(map(str, frame.dtypes)),
        len(frame),
        rows.to_numpy().tobytes(),
    )


def stem(name: str) -> str:
    """A file name's stem from a name that may hold anything (a dataset's, a run's): letters,
    digits, dots, dashes and underscores kept, every other run of characters one dash."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:100] or "table"
