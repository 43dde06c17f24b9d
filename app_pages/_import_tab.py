"""The Datasets page's Import tab: the Hub, a path on this machine or an upload, each run
through the command's importers (`datasets.formats.run_import`), with progress and the
importer's message in this page's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from app_pages._common import attempt, friendly
from app_pages._import_sources import checked_path, importable_note, zip_import
from cogbias.core.redact import redact
from cogbias.datasets import FIELDS, ColumnMapping, DatasetError, hub_url
from cogbias.datasets.formats import FOLDERS, FORMATS, run_import
from cogbias.datasets.tables import columns_of
from cogbias.store import Store, cogbias_home
from cogbias.views import safe_text

# The importers the command has (`datasets.formats.FORMATS`), described as the command does.
HELP = {f.name: f"{f.name}: {f.help}" for f in FORMATS}
# What an importer's message says in the command's words, and what this page calls it.
UI_TERMS = (
    ("pass --replace to replace it, or --name to import this one under another name",
     "tick 'Replace a dataset of the same name', or give this one another dataset name"),
    ("--replace", "'Replace a dataset of the same name'"),
    ("--name", "another dataset name"),
    ("check the network or pass a local FILE",
     "check the network, or download the file yourself and import it from "
     "'A path on this machine' or 'Upload a file'"),
    ("download the file yourself and pass its path",
     "download the file yourself and import it from 'A path on this machine' or "
     "'Upload a file'"),
    ("check the URL (COGBIAS_HUB_URL, --hub-file)", "check the address (COGBIAS_HUB_URL)"),
)  # fmt: skip


def _import_progress(bar: Any) -> Any:
    def update(label: str, done: int, total: int) -> None:
        share = min(done / total, 1.0) if total else 0.0
        bar.progress(share, text=f"{label}: {done / 1e6:.1f} MB")

    return update


def _in_ui_terms(text: str) -> str:
    """An importer's message with the command's flags named as this page names them."""
    for flag, words in UI_TERMS:
        text = text.replace(flag, words)
    return text


def _import(what: str, func: Any) -> None:
    """Run an import; a malformed file is reported with its file, row and column. The
    progress bar goes away when the import ends, however it ends."""
    slot = st.empty()
    try:
        summary = func(_import_progress(slot.progress(0.0, text="starting")))
    except DatasetError as exc:  # quotes the file's own text: shown as text, not Markdown
        slot.empty()
        reason = _in_ui_terms(redact(str(exc)))
        said = safe_text.escape_markdown(f"{what} failed: {reason}")
        st.error(said + "\n\nThe database was not changed.")
        return
    except Exception as exc:
        slot.empty()
        st.error(f"{what} failed: {_in_ui_terms(friendly(exc))}")
        return
    slot.empty()
    st.session_state["ds_flash"] = summary.describe()
    st.session_state["ds_select"] = summary.dataset
    st.rerun()


def _mapping_form(path: Path) -> ColumnMapping | None:
    columns = attempt("Reading the file's columns", lambda: columns_of(path))
    if not columns:
        return None
    st.markdown("**Column mapping** — which column holds what (leave unused fields empty).")
    mapped: dict[str, str] = {}
    constants: dict[str, str] = {}
    grid = st.columns(3)
    for i, (field, help_text) in enumerate(FIELDS.items()):
        if field == "answer_base":
            continue
        guess = columns.index(field) + 1 if field in columns else 0
        with grid[i % 3]:
            choice = st.selectbox(
                field, ["—", *columns], index=guess, help=help_text, key=f"ds_map_{field}"
            )
        if choice != "—":
            mapped[field] = choice
    st.markdown("Fixed values for every row (used when no column is mapped):")
    fixed = st.columns(4)
    for i, field in enumerate(("bias", "model", "k", "answer_base")):
        value = fixed[i].text_input(field, key=f"ds_set_{field}", help=FIELDS[field]).strip()
        if value and field not in mapped:
            constants[field] = value
    return ColumnMapping(mapped, constants)


def _save_upload(uploaded: Any) -> Path:
    folder = cogbias_home() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(uploaded.name).name
    target.write_bytes(uploaded.getvalue())
    return target


def import_tab(store: Store) -> None:
    """Importing from the Hub, a path on this machine or an upload."""
    source = st.radio(
        "Source", ["The Hugging Face Hub", "A path on this machine", "Upload a file"], key="ds_src"
    )
    replace = st.checkbox("Replace a dataset of the same name", key="ds_replace")
    if source == "The Hugging Face Hub":
        name = st.text_input("Dataset name", "malberg2024-hub", key="ds_hub_name")
        st.caption(
            safe_text.escape_markdown(f"Downloads {hub_url()} (30,000 test cases, CC BY-SA 4.0).")
        )
        if st.button("Download and import", key="ds_hub_go"):
            _import(
                "Importing from the Hub",
                lambda p: run_import(store, "malberg2024-hub", [], name, replace, p),
            )
    else:
        names = [f.name for f in FORMATS]
        fmt = st.selectbox("Format", names, format_func=HELP.get, key="ds_fmt")
        path: Path | None = None
        zipped: Any = None  # a folder uploaded as a zip: unpacked when it is imported
        if source == "A path on this machine":
            importable_note()
            typed = st.text_input(
                "Path (a file, or for a folder format the folder)", key="ds_path"
            ).strip()  # the server reads it: only inside the importable folders
            path = checked_path(typed) if typed else None
            stem = Path(typed).stem
        else:
            kinds = ["csv", "jsonl", "ndjson", "parquet"]
            if fmt in FOLDERS:  # a folder arrives zipped; the token-bias files also one by one
                kinds = ["zip", "json"] if fmt == "peek2024" else ["zip"]
            label = "File, or the folder as a .zip" if fmt in FOLDERS else "File"
            uploaded = st.file_uploader(label, type=kinds, key=f"ds_upload_{fmt}")
            if uploaded is not None and uploaded.name.lower().endswith(".zip"):
                zipped = uploaded
            elif uploaded is not None:
                path = _save_upload(uploaded)
            stem = Path(uploaded.name).stem if uploaded is not None else ""
        default = next(f.default_name for f in FORMATS if f.name == fmt) or stem
        name = st.text_input("Dataset name", default or "", key=f"ds_name_{fmt}")
        mapping = _mapping_form(path) if fmt == "generic" and path and path.is_file() else None
        if st.button("Import", key="ds_go", disabled=path is None and zipped is None):
            options: list[str] = []
            if mapping is not None:  # the generic format's column mapping, as its arguments
                options += [f"--map={f}={c}" for f, c in mapping.columns.items()]
                options += [f"--set={f}={v}" for f, v in mapping.constants.items()]
            if zipped is not None:
                _import("Import", zip_import(store, zipped, fmt, name or None, replace))
            elif path is not None and (fmt != "generic" or mapping is not None):
                _import(
                    "Import",
                    lambda p: run_import(store, fmt, [path], name or None, replace, p, options),
                )
