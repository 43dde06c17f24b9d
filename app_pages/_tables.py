"""Every table a page shows, with a way to take it away: `table` draws it (a missing value
"–", never "None" or "nan": `views.numbers.dashed`) and under it a Download menu with the
same rows as CSV, JSONL and Parquet, written by the writers `cogbias export` uses
(`views.export.frame_bytes`)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import streamlit as st

from cogbias.views.export import FORMATS, frame_bytes
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
    with st.popover(label, icon=":material/download:", help=help):
        st.caption(f"{len(frame):,} rows (numbers unrounded)")
        for fmt in FORMATS:
            st.download_button(
                LABELS[fmt],
                frame_bytes(frame, fmt),
                file_name=f"{stem(name)}.{fmt}",
                key=f"{key}:{fmt}",
                width="stretch",
            )


def stem(name: str) -> str:
    """A file name's stem from a name that may hold anything (a dataset's, a run's): letters,
    digits, dots, dashes and underscores kept, every other run of characters one dash."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:100] or "table"
