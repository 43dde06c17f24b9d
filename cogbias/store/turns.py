"""Turns of study conversations (`study_calls`) and the study sources runs were planned from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cogbias.core.redact import redactor
from cogbias.store.connection import StoreBase, now

_STUDY_TEXTS = ("error", "response")


class TurnsRepo(StoreBase):
    """`study_calls` and `study_sources`."""

    def save_study_calls(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Turns of study conversations; a turn asked again replaces its earlier row.
        Provider texts are redacted, as in `save_decisions`."""
        if rows:
            clean, stamp = redactor(), now()
            self.db["study_calls"].insert_all(
                [{**r, **{k: clean(r.get(k)) for k in _STUDY_TEXTS}, "created_at": stamp}
                 for r in rows],
                pk="id",
                replace=True,
            )  # fmt: skip

    def save_study_source(self, digest: str, study: str, source: str) -> None:
        self.db["study_sources"].insert(
            {"hash": digest, "study": study, "source": source, "created_at": now()},
            pk="hash",
            ignore=True,
        )
