"""The imported datasets as the Datasets page and `cogbias datasets` list them: one row per
dataset in its own units (`datasets.formats.holds`), where it came from said short (a list
of files as their count and folder), and the whole of it for `--format json`."""

from __future__ import annotations

import os
from typing import Any

from cogbias.datasets.formats import holds
from cogbias.store import Store
from cogbias.views.numbers import MISSING, minute

COLUMNS = ["name", "kind", "holds", "biases", "models", "imported", "source"]


def source_text(source: str | None) -> str:
    """Where a dataset was imported from, short enough for a table: a file or folder as
    stored; several files (an import of many, stored as one list) as their count and the
    folder they share."""
    parts = [part for part in (source or "").split(", ") if part]
    if len(parts) <= 1:
        return source or MISSING
    try:
        folder = os.path.commonpath(parts)
    except ValueError:  # absolute and relative paths mixed: no folder they share
        folder = ""
    return f"{len(parts):,} files" + (f" in {folder}" if folder else "")


def imported_rows(store: Store, whole: bool = False) -> list[dict[str, Any]]:
    """One row per imported dataset (`COLUMNS`), newest first: counts of its biases and
    models and its source short; `whole` keeps the lists (biases, models, every source
    file) and the stored time, for a machine to read."""
    contents = store.dataset_contents()  # counted in each kind's own tables
    rows = []
    for dataset in store.datasets():
        meta = dataset["meta"]
        biases, models = list(meta.get("biases", [])), list(meta.get("models", []))
        rows.append(
            {
                "name": dataset["name"],
                "kind": dataset["kind"],
                "holds": holds(dataset["kind"], contents.get(dataset["name"], {})),
                "biases": biases if whole else len(biases),
                "models": models if whole else len(models),
                "imported": dataset["imported_at"] if whole else minute(dataset["imported_at"]),
                "source": dataset["source"] if whole else source_text(dataset["source"]),
            }
        )
    return rows
