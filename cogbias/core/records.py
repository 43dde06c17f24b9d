"""Records: the instance and decision rows, their ids, and the columns they are exported with.

This is the bottom of the package's data model. The pipeline builds records, the store keeps
them, the importers write them and the exporters read them, all through this module, so a
record means the same thing everywhere:

- one function builds each id (`instance_id`, `decision_id`, `run_id_of`), from canonical JSON;
- one codec turns a filled template half into its stored JSON (`encode_filled`/`decode_filled`);
- one list of export columns (`PAIR_COLUMNS`) and one function that builds an exported pair
  (`pair_record`), used by `cogbias export` and by the app's download alike.

Choices (`control_choice`, exported as `control_answer`) are 0-based indices in the *original*
option order; `control_order` is the order the model saw (`control_order[k]` is the original
index of the option shown at position k+1). Failed records carry a `failure_kind`:

- `transient`: a timeout, 5xx, 429 or lost connection; resuming the run retries it;
- `fatal`: the model cannot be used at all (auth, quota, unknown model); the run stops;
- `unparseable`: the answer came but could not be read; a result, retried only on request;
- `invalid`: the request or the instance itself was refused (e.g. a derived value failed for
  the drawn values, or the prompt exceeds the context window); retried only on request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cogbias.core.metrics import MetricParams
from cogbias.core.templates import Filled, render_decision_text

FailureKind = Literal["transient", "fatal", "unparseable", "invalid"]
FAILURE_KINDS: tuple[str, ...] = ("transient", "fatal", "unparseable", "invalid")
RETRIED_ON_RESUME: tuple[str, ...] = ("transient",)
# Stored answers are capped: a model (or a hostile endpoint) can send megabytes, and one such
# answer would freeze every page that shows it. The cut is recorded in `truncated`.
MAX_ANSWER_CHARS = 20_000
TRUNCATION_MARK = " […truncated]"


def dumps(value: Any) -> str:
    """Canonical JSON: stable keys make content hashes and cache keys reproducible."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def stable_id(*parts: Any) -> str:
    """A 20-hex-digit id from the canonical JSON of `parts`."""
    return hashlib.sha256(dumps(list(parts)).encode()).hexdigest()[:20]


def cap_text(text: str | None, limit: int = MAX_ANSWER_CHARS) -> tuple[str | None, bool]:
    """(text cut to `limit` characters with a visible mark, whether it was cut)."""
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARK, True


# --------------------------------------------------------------------------- filled halves


def encode_filled(filled: Filled) -> str:
    return dumps(
        {"situation": filled.situation, "prompt": filled.prompt, "options": list(filled.options)}
    )


def decode_filled(text: str) -> Filled:
    data = json.loads(text)
    return Filled(data["situation"], data["prompt"], tuple(data["options"]))


def filled_text(text: str | None) -> str | None:
    """The decision text of a stored half, as the model reads it in original option order."""
    return render_decision_text(decode_filled(text)) if text else None


# --------------------------------------------------------------------------- ids


def instance_id(
    case_hash: str,
    scenario: str,
    index: int,
    generator: str | None,
    seed: int,
    temperature: float,
) -> str:
    return stable_id("instance", case_hash, scenario, index, generator, seed, temperature)


BASELINE_PROMPTING = "baseline"  # the standard decision prompt (see `cogbias.runs.prompting`)


def decision_id(
    run_id: str,
    instance: str,
    model: str,
    repeat: int,
    temperature: float | None,
    prompting: str = BASELINE_PROMPTING,
) -> str:
    """A non-baseline prompting method is part of the key; baseline keys stay as they were."""
    if prompting != BASELINE_PROMPTING:
        return stable_id("decision", run_id, instance, model, repeat, temperature, prompting)
    return stable_id("decision", run_id, instance, model, repeat, temperature)


def run_id_of(canonical_spec: Mapping[str, Any]) -> str:
    return "run-" + stable_id("run", dict(canonical_spec))[:12]


# --------------------------------------------------------------------------- instances


@dataclass
class Instance:
    """A filled control/treatment pair, ready for decision models."""

    id: str
    test_case: str
    test_case_hash: str
    scenario: str
    control: Filled
    treatment: Filled
    metric: MetricParams
    scenario_id: int | None = None
    instance_index: int = 0
    generator: str | None = None
    temperature: float | None = None
    seed: int | None = None
    variant: str = "default"
    values: dict[str, Any] = field(default_factory=dict)
    insertions: list[dict[str, str]] = field(default_factory=list)
    dataset: str | None = None
    status: str = "ok"
    error: str | None = None
    failure_kind: str | None = None

    @property
    def n_options(self) -> int:
        return len(self.control.options)

    def half(self, name: str) -> Filled:
        return self.control if name == "control" else self.treatment

    def decision_text(self, half: str, order: Sequence[int] | None = None) -> str:
        return render_decision_text(self.half(half), order)

    def to_row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "test_case": self.test_case,
            "test_case_hash": self.test_case_hash,
            "dataset": self.dataset,
            "scenario_id": self.scenario_id,
            "scenario": self.scenario,
            "instance_index": self.instance_index,
            "generator": self.generator,
            "temperature": self.temperature,
            "seed": self.seed,
            "variant": self.variant,
            "values_json": dumps(self.values),
            "insertions": dumps(self.insertions),
            "control": encode_filled(self.control),
            "treatment": encode_filled(self.treatment),
            "n_options": self.n_options,
            "metric": dumps(self.metric.__dict__),
            "status": self.status,
            "error": self.error,
            "failure_kind": self.failure_kind,
            "created_at": None,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Instance:
        return cls(
            id=row["id"],
            test_case=row["test_case"],
            test_case_hash=row["test_case_hash"] or "",
            scenario=row["scenario"] or "",
            control=decode_filled(row["control"]),
            treatment=decode_filled(row["treatment"]),
            metric=MetricParams(**json.loads(row["metric"])),
            scenario_id=row["scenario_id"],
            instance_index=row["instance_index"] or 0,
            generator=row["generator"],
            temperature=row["temperature"],
            seed=row["seed"],
            variant=row["variant"] or "default",
            values=json.loads(row["values_json"] or "{}"),
            insertions=json.loads(row["insertions"] or "[]"),
            dataset=row["dataset"],
            status=row["status"],
            error=row["error"],
            failure_kind=row.get("failure_kind"),
        )


INSTANCE_COLUMNS: tuple[str, ...] = tuple(
    Instance("", "", "", "", Filled("", "", ()), Filled("", "", ()), MetricParams()).to_row()
)
DECISION_COLUMNS: tuple[str, ...] = (
    "id",
    "run_id",
    "instance_id",
    "test_case",
    "model",
    "temperature",
    "repeat",
    "reversed",
    "control_order",
    "treatment_order",
    "control_answer",
    "treatment_answer",
    "control_extraction",
    "treatment_extraction",
    "control_choice",
    "treatment_choice",
    "score",
    "status",
    "error",
    "failure_kind",
    "truncated",
    "cached",
    "tokens",
    "cost",
    "cost_saved",
    "created_at",
)
IMPORTED_DECISION_COLUMNS: tuple[str, ...] = tuple(
    c for c in DECISION_COLUMNS if c not in ("failure_kind", "truncated", "cached", "cost_saved")
)


# --------------------------------------------------------------------------- exports

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


def half_fields(control: str | None, treatment: str | None) -> dict[str, Any]:
    """`*_text` and `*_options` of both stored halves (original option order)."""
    out: dict[str, Any] = {}
    for half, raw in (("control", control), ("treatment", treatment)):
        filled = decode_filled(raw) if raw else None
        out[f"{half}_text"] = render_decision_text(filled) if filled else None
        out[f"{half}_options"] = list(filled.options) if filled else None
    return out


def _order(text: str | None) -> list[int] | None:
    return json.loads(text) if text else None


def pair_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """One exported pair from a decision joined to its instance (`Store.iter_pairs`)."""
    return {
        "dataset": row.get("dataset"),
        "run_id": row["run_id"],
        "decision_id": row["id"],
        "instance_id": row["instance_id"],
        "bias": row["test_case"],
        "model": row["model"],
        "temperature": row["temperature"],
        "repeat": row["repeat"],
        "scenario": row.get("scenario"),
        "variant": row.get("variant"),
        **half_fields(row.get("control_half"), row.get("treatment_half")),
        "n_options": row.get("n_options"),
        "control_order": _order(row.get("control_order")),
        "treatment_order": _order(row.get("treatment_order")),
        "reversed": None if row.get("reversed") is None else bool(row["reversed"]),
        "control_raw_answer": row.get("control_answer"),
        "treatment_raw_answer": row.get("treatment_answer"),
        "control_extraction": row.get("control_extraction"),
        "treatment_extraction": row.get("treatment_extraction"),
        "control_answer": row.get("control_choice"),
        "treatment_answer": row.get("treatment_choice"),
        **metric_fields(row.get("metric")),
        "score": row.get("score"),
        "status": row.get("status"),
        "failure_kind": row.get("failure_kind"),
        "error": row.get("error"),
        "cached": None if row.get("cached") is None else bool(row["cached"]),
        "cost": row.get("cost"),
    }
