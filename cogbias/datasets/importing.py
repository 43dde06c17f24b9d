"""One import = one transaction: the shared bookkeeping around every importer.

The files' content hash decides idempotency: importing the same bytes again is a no-op, other
bytes under an existing name need `replace`. Rows stream into the store in batches inside a
single transaction, so a file that turns out to be malformed on its last row leaves the
database exactly as it was, and memory stays flat for 600,000 decisions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cogbias.core.limits import name_problem
from cogbias.core.records import INSTANCE_COLUMNS, Decision, Instance
from cogbias.datasets.common import DatasetError, ImportSummary, chunked, file_digest
from cogbias.store import Store, now

BATCH = 2000


def import_run_id(dataset: str) -> str:
    """The run id of a dataset's published decisions (they were not made by a cogbias run)."""
    return f"import:{dataset}"


def instance_tuple(instance: Instance, created_at: str, metric: bool = True) -> tuple[Any, ...]:
    row = instance.to_row()
    row["created_at"] = created_at
    if not metric:
        row["metric"] = None  # unknown: the instance can be browsed but not run
    return tuple(row[c] for c in INSTANCE_COLUMNS)


class StrandedRuns(DatasetError):
    """A replace that would leave runs' decisions pointing at instances that are gone;
    refused, and nothing was written. `runs` maps each run id to its stranded decisions."""

    def __init__(self, file: str, name: str, runs: dict[str, int]) -> None:
        self.runs = runs
        listed = ", ".join(f"{run} ({n} decision(s))" for run, n in runs.items())
        super().__init__(
            file,
            f"replacing dataset '{name}' would strand the decisions of run(s) {listed} on test "
            "cases this file no longer has; nothing was changed. Delete those runs first "
            "(`cogbias delete run ID`), add --force to delete them with the replace, or "
            "import under another --name",
        )


class Import:
    """Context manager: checks the name, opens the transaction, records the dataset row."""

    def __init__(
        self, store: Store, name: str, kind: str, files: Sequence[Path], replace: bool
    ) -> None:
        problem = name_problem(name)
        if problem:  # the name is shown on every page and in every command's output
            raise DatasetError(
                files[0].name,
                f"the dataset name {name[:60]!r} {problem}; choose another with --name",
            )
        self.store, self.name, self.kind = store, name, kind
        self.files = list(files)
        self.digest = file_digest(self.files)
        self.existing = store.dataset(name)
        old = (self.existing or {}).get("meta") or "{}"
        self.unchanged = self.existing is not None and _digest_of(old) == self.digest
        if self.existing is not None and not self.unchanged and not replace:
            raise DatasetError(
                self.files[0].name,
                f"a dataset named '{name}' already exists with other content; pass --replace "
                "to replace it, or --name to import this one under another name",
            )
        replacing = self.existing is not None and not self.unchanged
        # runs with decisions on the old instances: checked in `finish`, once the new ones
        # are in, so a replace that keeps the instances a run used goes through
        self.users = store.dataset_run_users(name, import_run_id(name)) if replacing else []
        self.summary = ImportSummary(name, kind, unchanged=self.unchanged)
        self.models: set[str] = set()
        self.biases: set[str] = set()
        self.created_at = now()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Import:
        if self.unchanged:
            return self
        self._stack.enter_context(self.store.bulk_cache())
        self._stack.enter_context(self.store.atomic())
        if self.existing is not None:
            self.store.delete_dataset(self.name, import_run_id(self.name))
        return self

    def __exit__(self, *exc: object) -> bool | None:
        return self._stack.__exit__(*exc)  # type: ignore[arg-type]

    def add_instances(self, items: Iterable[tuple[Instance, bool]]) -> None:
        """(instance, has_metric) pairs; an instance without a metric is stored unrunnable."""
        for batch in chunked(items, BATCH):
            rows = []
            for instance, has_metric in batch:
                self.biases.add(instance.test_case)
                rows.append(instance_tuple(instance, self.created_at, has_metric))
            self.store.insert_rows("instances", INSTANCE_COLUMNS, rows)
            self.summary.instances += len(batch)

    def add_decisions(self, decisions: Iterable[Decision]) -> None:
        """Published decisions, stamped with the import's time unless they carry their own;
        through the store's one door (`save_decisions`: redacted, answers capped)."""
        for batch in chunked(decisions, BATCH * 5):
            self.models.update(d.model for d in batch)
            self.store.save_decisions(batch, created_at=self.created_at)
            self.summary.decisions += len(batch)

    def finish(self, source: str, **meta: Any) -> None:
        """Record the dataset; refuse (rolling everything back) a replace that strands runs."""
        stranded = self.store.stranded_decisions(self.users)
        if stranded:
            raise StrandedRuns(self.files[0].name, self.name, stranded)
        self.summary.models = sorted(self.models)
        self.summary.biases = sorted(self.biases)
        self.store.save_dataset(
            self.name,
            self.kind,
            source,
            self.summary.instances,
            {
                "digest": self.digest,
                "files": [f.name for f in self.files],
                "decisions": self.summary.decisions,
                "models": self.summary.models,
                "biases": self.summary.biases,
                "run_id": import_run_id(self.name) if self.summary.decisions else None,
                **meta,
            },
        )


def _digest_of(meta: str) -> str | None:
    import json

    try:
        return json.loads(meta).get("digest")
    except ValueError:
        return None
