"""What an imported dataset exports: its own tables, chosen by what it holds.

A dataset of test cases (the Malberg benchmark, a generic file, the token-bias items) exports
its pairs (every decision on it, published and run) and its test cases; a thesis dataset
(`cogbias import mohr2025`) its published effect sizes (the 1,599 rows the Datasets page
browses), its prompts and its model features. The first a dataset holds is what `cogbias
export --dataset NAME` writes unless `--table` names another; the Hub folder writes them all
(`views.hub_export`), and the Datasets page's Export tab offers each. Which tables a dataset
has is read from what the store counts for it (`Store.dataset_contents`), never from its
kind's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cogbias.core.export_columns import (
    EFFECT_EXPORT_COLUMNS,
    FEATURE_EXPORT_COLUMNS,
    INSTANCE_EXPORT_COLUMNS,
    PAIR_COLUMNS,
    PROMPT_EXPORT_COLUMNS,
    instance_record,
    pair_record,
)
from cogbias.runs.paired_results import PairedResults
from cogbias.store import Store

Rows = Callable[[Store, str, "str | None"], Iterable[list[dict[str, Any]]]]
BATCH = 1000


@dataclass(frozen=True)
class DatasetTable:
    """One table of a dataset as exported: its name (the file's and the Hub config's), what a
    reader calls it, its columns (name -> type, as in `core/export_columns.py`), its rows in
    batches (of one model, when one is given), what one row is (for a Hub card) and the count
    of `Store.dataset_contents` that says the dataset has it."""

    name: str
    label: str
    columns: Mapping[str, str]
    rows: Rows
    description: str
    counted: str


def _pairs(store: Store, dataset: str, model: str | None) -> Iterator[list[dict[str, Any]]]:
    for batch in store.iter_pairs(dataset=dataset, model=model):
        yield [pair_record(pair) for pair in batch]


def _instances(store: Store, dataset: str, model: str | None) -> Iterator[list[dict[str, Any]]]:
    del model  # a test case belongs to no model
    for batch in store.iter_instances(dataset):
        yield [instance_record(row) for row in batch]


def _thesis(table: str, typed: Mapping[str, str]) -> Rows:
    """The rows of one of the thesis' stored tables (of one model where the table names
    models), with `local` read as true/false."""

    def rows(store: Store, dataset: str, model: str | None) -> Iterator[list[dict[str, Any]]]:
        found = store.thesis_rows(table, dataset)
        if model is not None and "model" in typed:
            found = [row for row in found if row["model"] == model]
        for row in found:
            if "local" in row and row["local"] is not None:
                row["local"] = bool(row["local"])
        for start in range(0, len(found), BATCH):
            yield found[start : start + BATCH]

    return rows


PAIRS = PairedResults.exports[0]
TABLES: tuple[DatasetTable, ...] = (
    DatasetTable(
        "effect_sizes",
        "effect sizes",
        EFFECT_EXPORT_COLUMNS,
        _thesis("effect_sizes", EFFECT_EXPORT_COLUMNS),
        "one published Cohen's d per bias × prompt scenario × model × temperature, with the "
        "two groups' sizes and d capped to [0, 1]",
        "effects",
    ),
    DatasetTable(
        "prompts",
        "prompts",
        PROMPT_EXPORT_COLUMNS,
        _thesis("study_prompts", PROMPT_EXPORT_COLUMNS),
        "the published prompts: one row per part (control or treatment) of a bias × scenario",
        "prompts",
    ),
    DatasetTable(
        "model_features",
        "model features",
        FEATURE_EXPORT_COLUMNS,
        _thesis("model_features", FEATURE_EXPORT_COLUMNS),
        "the published features of each model (parameters, release date, every column of "
        "the file as JSON)",
        "features",
    ),
    DatasetTable("pairs", "pairs", PAIR_COLUMNS, _pairs, PAIRS.description, "instances"),
    DatasetTable(
        "instances",
        "test cases",
        INSTANCE_EXPORT_COLUMNS,
        _instances,
        "the dataset's filled control/treatment pairs (test instances)",
        "instances",
    ),
)


def dataset_tables(store: Store, dataset: str) -> list[DatasetTable]:
    """The tables `dataset` holds, the one its export writes by default first; a dataset
    that is not imported is a KeyError naming it."""
    contents = store.dataset_contents()
    if dataset not in contents:
        raise KeyError(f"no dataset '{dataset}' in {store.path} (see `cogbias datasets`)")
    held = [table for table in TABLES if contents[dataset].get(table.counted)]
    return held or [table for table in TABLES if table.name == "pairs"]


def dataset_table(store: Store, dataset: str, name: str | None = None) -> DatasetTable:
    """One of `dataset`'s tables by name (its first when `name` is None); a name it does not
    hold is a ValueError listing those it does."""
    tables = dataset_tables(store, dataset)
    if name is None:
        return tables[0]
    for table in tables:
        if table.name == name:
            return table
    names = ", ".join(table.name for table in tables)
    raise ValueError(f"dataset '{dataset}' has no table '{name}'; it has: {names}")
