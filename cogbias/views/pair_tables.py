"""Paired responses as a flat table, for reading on a page and for CSV export."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from cogbias.core.records import decode_filled
from cogbias.core.templates import render_decision_text


def _half_text(raw: str | None) -> str:
    """The decision text of a stored half (JSON of situation, prompt, options)."""
    if not raw:
        return ""
    try:
        filled = decode_filled(raw)  # the one codec: keeps the item's layout
    except (ValueError, KeyError, TypeError):
        return str(raw)
    return render_decision_text(filled)


PAIR_VIEW_COLUMNS = [
    "bias",
    "model",
    "score",
    "status",
    "scenario",
    "control_text",
    "control_answer",
    "control_extraction",
    "control_choice",
    "treatment_text",
    "treatment_answer",
    "treatment_extraction",
    "treatment_choice",
    "error",
    "run_id",
    "dataset",
    "instance_id",
    "repeat",
]


def pairs_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Paired responses (as `Store.pairs` returns them) flattened for reading and CSV export.

    Choices are 1-based option numbers in the original option order, as people count.
    """
    records = []
    for r in rows:
        records.append(
            {
                "bias": r.get("test_case"),
                "model": r.get("model"),
                "score": r.get("score"),
                "status": r.get("status"),
                "scenario": r.get("scenario"),
                "control_text": _half_text(r.get("control_template")),
                "control_answer": r.get("control_answer"),
                "control_extraction": r.get("control_extraction"),
                "control_choice": _one_based(r.get("control_choice")),
                "treatment_text": _half_text(r.get("treatment_template")),
                "treatment_answer": r.get("treatment_answer"),
                "treatment_extraction": r.get("treatment_extraction"),
                "treatment_choice": _one_based(r.get("treatment_choice")),
                "error": r.get("error"),
                "run_id": r.get("run_id"),
                "dataset": r.get("dataset"),
                "instance_id": r.get("instance_id"),
                "repeat": r.get("repeat"),
            }
        )
    return pd.DataFrame(records, columns=PAIR_VIEW_COLUMNS)


def _one_based(choice: Any) -> int | None:
    return None if choice is None else int(choice) + 1
