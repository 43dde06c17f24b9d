"""Records: instances, decisions and study turns, and their ids.

This is the bottom of the package's data model. The pipeline builds records, the store keeps
them, the importers write them and the exporters read them, all through this module, so a
record means the same thing everywhere:

- one dataclass per stored row (`Instance`, `Decision`, `Turn`; `Pair` is a decision joined to
  its instance), each with its row codec (`to_row`/`from_row`); their stored columns
  (`INSTANCE_COLUMNS`, `DECISION_COLUMNS`, `TURN_FIELDS`) are derived from the dataclasses, and
  `tests/test_records_schema.py` holds the schema's migrations to them;
- one function builds each id (`instance_id`, `decision_id`, `run_id_of`), from canonical JSON;
- one codec turns a filled template half into its stored JSON (`encode_filled`/`decode_filled`);
- the export columns of each kind of row, and the exported pair, are in
  `core/export_columns.py`.

Choices (`control_choice`, exported as `control_answer`) are 0-based indices in the *original*
option order; `control_order` is the order the model saw (`control_order[k]` is the original
index of the option shown at position k+1). Failed records carry a `failure_kind`:

- `transient`: a timeout, 5xx, 429 or lost connection; resuming the run retries it;
- `fatal`: the model cannot be used at all (auth, quota, unknown model); the run stops;
- `unparseable`: the answer came but could not be read; a result, retried only on request;
- `invalid`: the request or the instance itself was refused (e.g. a derived value failed for
  the drawn values, or the prompt exceeds the context window); retried only on request;
- `stopped_reasoning`: a reasoning model spent all its room thinking and wrote no answer (its
  trace is kept); a result of the budget asked, retried only on request (with more room).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, Literal

from cogbias.core.metrics import MetricParams
from cogbias.core.templates import SECTIONS, Filled, render_decision_text

FailureKind = Literal["transient", "fatal", "unparseable", "invalid", "stopped_reasoning"]
FAILURE_KINDS: tuple[str, ...] = (
    "transient", "fatal", "unparseable", "invalid", "stopped_reasoning"
)  # fmt: skip
RETRIED_ON_RESUME: tuple[str, ...] = ("transient",)


class DecisionStatus(StrEnum):
    """An instance's or a decision's status; the values are the words stored in `status`."""

    OK = "ok"  # made (an instance) or scored (a decision)
    FAILED = "failed"  # see its `failure_kind`
    # a decision only: a half whose samples the run's reducer left undecided (a tie under
    # `majority`, `runs/reducers.py`). A result, not a failure: never retried, scored by no
    # mean, counted apart from failures.
    ABSTAINED = "abstained"


class TurnStatus(StrEnum):
    """A study turn's status; the values are the words stored in `study_calls.status`."""

    OK = "ok"  # answered and read
    FAILED = "failed"  # no answer (see its `failure_kind`)
    UNPARSEABLE = "unparseable"  # answered, but no answer could be read from it (a result)


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
    data: dict[str, Any] = {
        "situation": filled.situation,
        "prompt": filled.prompt,
        "options": list(filled.options),
    }
    if filled.layout != SECTIONS:  # stored halves of the default layout keep their text
        data["layout"] = filled.layout
    return dumps(data)


def decode_filled(text: str) -> Filled:
    data = json.loads(text)
    return Filled(
        data["situation"], data["prompt"], tuple(data["options"]), data.get("layout", SECTIONS)
    )


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
    status: str = DecisionStatus.OK
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
# --------------------------------------------------------------------------- decisions and turns


@dataclass
class Decision:
    """A model's answers to both halves of one instance, and its score: a `decisions` row.

    `*_order` is the option order the model saw, `*_answer` its raw text, `*_extraction` how the
    answer was read and `*_choice` the chosen option (0-based, original order). The field
    order is the column order of `DECISION_COLUMNS`.
    """

    id: str
    run_id: str
    instance_id: str
    test_case: str
    model: str
    temperature: float | None = None
    repeat: int | None = 0
    reversed: bool | None = None
    control_order: list[int] | None = None
    treatment_order: list[int] | None = None
    control_answer: str | None = None
    treatment_answer: str | None = None
    control_extraction: str | None = None
    treatment_extraction: str | None = None
    control_choice: int | None = None
    treatment_choice: int | None = None
    score: float | None = None
    status: str = DecisionStatus.OK  # OK | FAILED | ABSTAINED
    error: str | None = None
    failure_kind: str | None = None  # FailureKind of a failed decision
    truncated: bool | None = None
    cached: bool | None = None
    tokens: int | None = None
    cost: float | None = None
    cost_saved: float | None = None
    created_at: str | None = None
    # `--scoring probabilities`: each half's option probabilities (core.probabilities JSON)
    control_distribution: str | None = None
    treatment_distribution: str | None = None
    # `--samples N` (`--scoring consistency:N`): each half's samples (runs.sampling JSON list)
    control_samples: str | None = None
    treatment_samples: str | None = None
    # A reasoning model's trace of each half (`core.reasoning`; redacted and capped as answers
    # are), the thinking tokens the pair's answers used (as providers counted them, kept for
    # cached answers), and whether each trace names the treatment's eliciting detail (a plain
    # string match; None without a trace)
    control_reasoning: str | None = None
    treatment_reasoning: str | None = None
    reasoning_tokens: int | None = None
    control_trace_mentions: bool | None = None
    treatment_trace_mentions: bool | None = None
    # `--intervention self_help`: each half's prompt as the model rewrote it, then answered
    control_rewrite: str | None = None
    treatment_rewrite: str | None = None

    def to_row(self) -> dict[str, Any]:
        """The stored row: orders as JSON arrays, flags as 0/1."""
        row = {name: getattr(self, name) for name in DECISION_COLUMNS}
        for name in _DECISION_ORDERS:
            row[name] = None if row[name] is None else dumps(list(row[name]))
        for name in _DECISION_FLAGS:
            row[name] = None if row[name] is None else int(row[name])
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Decision:
        """A decision from a stored row (extra keys, e.g. joined instance columns, are ignored)."""
        values = {name: row[name] for name in DECISION_COLUMNS if name in row}
        for name in _DECISION_ORDERS:
            if name in values:
                values[name] = json.loads(values[name]) if values[name] else None
        for name in _DECISION_FLAGS:
            if values.get(name) is not None:
                values[name] = bool(values[name])
        return cls(**values)


DECISION_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Decision))
_DECISION_ORDERS = ("control_order", "treatment_order")
_DECISION_FLAGS = (
    "reversed", "truncated", "cached", "control_trace_mentions", "treatment_trace_mentions"
)  # fmt: skip


@dataclass
class Pair:
    """A decision joined to the instance it answers: what exports and pair views read.

    `control_half`/`treatment_half` are the stored halves (`encode_filled`), `metric` the
    instance's metric parameters as JSON (None when unknown, e.g. published results only)."""

    decision: Decision
    dataset: str | None = None
    scenario: str | None = None
    variant: str | None = None
    control_half: str | None = None
    treatment_half: str | None = None
    n_options: int | None = None
    metric: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Pair:
        """From a decision row joined to its instance (`Store.pairs`, `Store.iter_pairs`)."""
        return cls(
            Decision.from_row(row),
            **{f.name: row.get(f.name) for f in fields(cls) if f.name != "decision"},
        )


@dataclass
class Turn:
    """One model call of a study conversation: a `study_calls` row.

    `slot` (exported as `repeat`) is the unit's repetition, `ord` (exported as `order`) its
    position in the study's plan; `presented` (the items in the order shown) and `value` (the
    answer as read) are JSON texts, as stored."""

    id: str
    run_id: str
    conversation: str
    turn: int
    role: str  # decide | revise | rewrite
    test: str
    bias: str | None = None
    condition: str | None = None
    model: str | None = None
    temperature: float | None = None
    variant: str | None = None
    mitigation: str | None = None
    slot: int | None = None
    ord: int | None = None
    attempt: int | None = 0
    presented: str | None = None
    status_quo_at: int | None = None
    prompt: str | None = None
    original: str | None = None
    response: str | None = None
    value: str | None = None
    status: str | None = None
    error: str | None = None
    failure_kind: str | None = None
    cache_key: str | None = None
    created_at: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in TURN_FIELDS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Turn:
        return cls(**{name: row[name] for name in TURN_FIELDS if name in row})

    def export(self) -> dict[str, Any]:
        """The turn under its exported column names (`TURN_COLUMNS`)."""
        return {TURN_EXPORT_NAMES.get(k, k): v for k, v in self.to_row().items()}


TURN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Turn))


# A study run's turns are exported under their field names but these (core/export_columns.py)
TURN_EXPORT_NAMES = {"slot": "repeat", "ord": "order"}
