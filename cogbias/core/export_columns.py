"""The columns records are exported with, and the one function that builds an exported pair.

One list per kind of row (`PAIR_COLUMNS`, `INSTANCE_EXPORT_COLUMNS`, `TURN_COLUMNS`) with each
column's type (for Parquet), and `pair_record` (and `instance_record`), which `cogbias export`
and the app's download both use, so a CSV from either has the same columns with the same meaning (docs/datasets.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from cogbias.core.records import TURN_EXPORT_NAMES, Pair, Turn, decode_filled
from cogbias.core.templates import render_decision_text

# name -> type (for Parquet): str, int, float, bool, list. Documented in docs/datasets.md.
PAIR_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "run_id": "str",
    "decision_id": "str",
    "instance_id": "str",
    "bias": "str",
    "model": "str",
    "temperature": "float",
    "repeat": "int",
    "scenario": "str",
    "variant": "str",
    "control_text": "str",
    "treatment_text": "str",
    "control_options": "list",
    "treatment_options": "list",
    "n_options": "int",
    "control_order": "list",
    "treatment_order": "list",
    "reversed": "bool",
    "control_raw_answer": "str",
    "treatment_raw_answer": "str",
    "control_extraction": "str",
    "treatment_extraction": "str",
    "control_answer": "int",
    "treatment_answer": "int",
    "k": "float",
    "y1": "float",
    "y2": "float",
    "flip_control": "bool",
    "flip_treatment": "bool",
    "score": "float",
    "status": "str",
    "failure_kind": "str",
    "error": "str",
    "cached": "bool",
    "cost": "float",
    "control_distribution": "str",
    "treatment_distribution": "str",
    "control_samples": "str",
    "treatment_samples": "str",
    "control_reasoning": "str",
    "treatment_reasoning": "str",
    "reasoning_tokens": "int",
    "control_trace_mentions": "bool",
    "treatment_trace_mentions": "bool",
    "control_rewrite": "str",
    "treatment_rewrite": "str",
}
# A test case's columns are the pair columns that describe the test case, typed alike.
INSTANCE_EXPORT_COLUMNS: dict[str, str] = {
    name: PAIR_COLUMNS[name]
    for name in (
        "dataset", "instance_id", "bias", "scenario", "variant", "control_text",
        "treatment_text", "control_options", "treatment_options", "n_options", "k", "y1", "y2",
        "flip_control", "flip_treatment", "status", "error",
    )
}  # fmt: skip
# A study run exports its turns (docs/studies.md): every `Turn` field but its keys and stamp,
# two of them renamed, and after `value` (a letter as its index) `coded`, the answer as the
# metric counts it (the thesis' §3.4.1), which the exporter adds from the run's study.
TURN_COLUMNS: dict[str, str] = {
    column: kind
    for f in fields(Turn)
    if f.name not in ("id", "cache_key", "created_at")
    for column, kind in [(TURN_EXPORT_NAMES.get(f.name, f.name), str(f.type).split(" ")[0])]
    + [("coded", "float")] * (f.name == "value")
}
METRIC_FIELDS = ("k", "y1", "y2", "flip_control", "flip_treatment")


def metric_fields(text: str | None) -> dict[str, Any]:
    data = json.loads(text) if text else None
    if not data:
        return dict.fromkeys(METRIC_FIELDS)
    return {
        "k": data.get("k"),
        "y1": data.get("y1"),
        "y2": data.get("y2"),
        "flip_control": bool(data.get("flip_control")),
        "flip_treatment": bool(data.get("flip_treatment")),
    }


def half_fields(
    control: str | None,
    treatment: str | None,
    orders: tuple[Sequence[int] | None, Sequence[int] | None] = (None, None),
) -> dict[str, Any]:
    """`*_text` and `*_options` of both stored halves. The text is what the model read, in
    the order presented when `orders` (a decision's `control_order`, `treatment_order`) is
    given; `*_options` stay in the original order, as the answers' indices are."""
    out: dict[str, Any] = {}
    for (half, raw), order in zip(
        (("control", control), ("treatment", treatment)), orders, strict=True
    ):
        filled = decode_filled(raw) if raw else None
        if filled and order is not None and sorted(order) != list(range(len(filled.options))):
            order = None  # not an order of these options: show the original one
        out[f"{half}_text"] = render_decision_text(filled, order) if filled else None
        out[f"{half}_options"] = list(filled.options) if filled else None
    return out


def instance_record(row: dict[str, Any]) -> dict[str, Any]:
    """One exported test case (`INSTANCE_EXPORT_COLUMNS`) from a stored instance row."""
    return {
        "dataset": row["dataset"],
        "instance_id": row["id"],
        "bias": row["test_case"],
        "scenario": row["scenario"],
        "variant": row["variant"],
        **half_fields(row["control"], row["treatment"]),
        "n_options": row["n_options"],
        **metric_fields(row["metric"]),
        "status": row["status"],
        "error": row["error"],
    }


def pair_record(pair: Pair) -> dict[str, Any]:
    """One exported pair from a decision joined to its instance (`Store.iter_pairs`,
    `Store.pairs`)."""
    d = pair.decision
    return {
        "dataset": pair.dataset,
        "run_id": d.run_id,
        "decision_id": d.id,
        "instance_id": d.instance_id,
        "bias": d.test_case,
        "model": d.model,
        "temperature": d.temperature,
        "repeat": d.repeat,
        "scenario": pair.scenario,
        "variant": pair.variant,
        **half_fields(pair.control_half, pair.treatment_half, (d.control_order, d.treatment_order)),
        "n_options": pair.n_options,
        "control_order": d.control_order,
        "treatment_order": d.treatment_order,
        "reversed": d.reversed,
        "control_raw_answer": d.control_answer,
        "treatment_raw_answer": d.treatment_answer,
        "control_extraction": d.control_extraction,
        "treatment_extraction": d.treatment_extraction,
        "control_answer": d.control_choice,
        "treatment_answer": d.treatment_choice,
        **metric_fields(pair.metric),
        "score": d.score,
        "status": d.status,
        "failure_kind": d.failure_kind,
        "error": d.error,
        "cached": d.cached,
        "cost": d.cost,
        "control_distribution": d.control_distribution,
        "treatment_distribution": d.treatment_distribution,
        "control_samples": d.control_samples,
        "treatment_samples": d.treatment_samples,
        "control_reasoning": d.control_reasoning,
        "treatment_reasoning": d.treatment_reasoning,
        "reasoning_tokens": d.reasoning_tokens,
        "control_trace_mentions": d.control_trace_mentions,
        "treatment_trace_mentions": d.treatment_trace_mentions,
        "control_rewrite": d.control_rewrite,
        "treatment_rewrite": d.treatment_rewrite,
    }


# The Mohr thesis' published tables as an imported dataset exports them (docs/datasets.md):
# each stored column as `store/effects.py` holds it; `source_row` is the row of the file it
# was read from, `variables` and `features` JSON text, `local` whether the model ran locally.
EFFECT_EXPORT_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "bias": "str",
    "bias_name": "str",
    "scenario": "str",
    "model": "str",
    "temperature": "float",
    "n_control": "int",
    "n_treatment": "int",
    "d": "float",
    "d_capped": "float",
    "source_row": "int",
}
PROMPT_EXPORT_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "prompt_id": "str",
    "bias": "str",
    "bias_name": "str",
    "experiment_type": "str",
    "scenario": "str",
    "content": "str",
    "variables": "str",
    "response_type": "str",
    "target_response": "str",
    "part": "int",
    "parts_total": "int",
    "source_row": "int",
}
FEATURE_EXPORT_COLUMNS: dict[str, str] = {
    "dataset": "str",
    "model": "str",
    "temperature": "float",
    "local": "bool",
    "release_date": "str",
    "number_parameters": "float",
    "features": "str",
    "source_row": "int",
}
