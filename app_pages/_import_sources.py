"""Where the Datasets page's Import tab may read from: a path inside an importable folder, or a
folder uploaded as a zip. The page is served, so a typed path is read by the server: the
library's `datasets.importable` decides what may be read, and this module only shows it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from cogbias.datasets.common import ImportSummary
from cogbias.datasets.formats import run_import
from cogbias.datasets.importable import (
    IMPORT_DIRS_ENV,
    NotImportable,
    importable_dirs,
    resolve_importable,
    unpack_zip,
)
from cogbias.store import Store
from cogbias.views import safe_text


def importable_note() -> None:
    """Say which folders the app reads from, and how to add one."""
    folders = "; ".join(str(folder) for folder in importable_dirs())
    st.caption(
        safe_text.escape_markdown(
            f"The app reads only inside these folders: {folders}. To import from another "
            "folder, move its files into the first one, or start the app with "
            f"{IMPORT_DIRS_ENV} naming it (several separated by '{os.pathsep}'). A relative path "
            "is looked for in these folders; a folder can also be uploaded as a .zip "
            "(Source: Upload a file). The command line reads any path you give it."
        )
    )


def checked_path(typed: str) -> Path | None:
    """The real path `typed` names when the app may read it; else the reason, shown, and
    None. A refused file is never opened, so nothing it holds can be shown."""
    try:
        return resolve_importable(typed)
    except NotImportable as exc:
        st.error(safe_text.escape_markdown(str(exc)))
        return None


def zip_import(
    store: Store, uploaded: Any, fmt: str, name: str | None, replace: bool
) -> Callable[[Callable[[str, int, int], None]], ImportSummary]:
    """An import of the zipped folder `uploaded`, for the page's `_import`: unpacked into a
    temporary folder (refusals are DatasetErrors, shown as an import's), imported, removed."""

    def work(progress: Callable[[str, int, int], None]) -> ImportSummary:
        with tempfile.TemporaryDirectory(prefix="cogbias-upload-") as tmp:
            folder = unpack_zip(uploaded.getvalue(), Path(tmp), uploaded.name)
            return run_import(store, fmt, [folder], name, replace, progress)

    return work
