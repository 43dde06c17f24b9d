"""Any CSV / JSONL / Parquet file of paired prompts (and optionally answers), via a mapping.

A mapping says which column holds which field (`ColumnMapping.columns`) or gives a field one
value for every row (`ColumnMapping.constants`, e.g. the bias of a single-bias file). Rows with
the same test case content (or the same mapped `id`) share one instance; rows with answers
become decisions of their model, scored with the published score when one is mapped and with
the row's metric otherwise. This is how other published sets (BiasBuster's, a lab's own
spreadsheets) get browsed, analysed and run next to the paper's.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.core import metrics
from cogbias.core.limits import MAX_NAME_CHARS, MAX_OPTION_CHARS
from cogbias.core.metrics import MetricParams, param_problem
from cogbias.core.records import Decision, DecisionStatus, Instance, decision_id, dumps, stable_id
from cogbias.core.redact import redact
from cogbias.core.templates import Filled
from cogbias.datasets import importing
from cogbias.datasets.common import (
    MAX_OPTIONS,
    DatasetError,
    Format,
    ImportSummary,
    Progress,
    bias_key,
    bounded,
    finite,
    number,
    parse_float,
    parse_literal,
    parse_prompt,
    valid_name,
)
from cogbias.datasets.tables import read_table
from cogbias.store import Store

KIND = "generic"
FIELDS: dict[str, str] = {
    "id": "test case key: rows with the same key share a test case (default: its content)",
    "bias": "bias name in any spelling (required)",
    "scenario": "scenario text",
    "control": "control prompt (required)",
    "treatment": "treatment prompt (required)",
    "control_options": "control options: a JSON/Python list or one per line "
    '(default: the "Option N:" lines ending the prompt)',
    "treatment_options": "treatment options (as control_options)",
    "metric_params": "dict with k, x_1 (or y1), x_2 (or y2), as JSON or a Python literal",
    "k": "metric k (default 1)",
    "y1": "metric reference point of the control answer (default 0)",
    "y2": "metric reference point of the treatment answer (default 0)",
    "model": "the model that answered (needed with answers)",
    "control_answer": 'chosen control option: an index or "Option N"',
    "treatment_answer": 'chosen treatment option: an index or "Option N"',
    "answer_base": "0 or 1: what the first option's index is in the answer columns (default 0)",
    "control_raw_answer": "the model's full control answer text",
    "treatment_raw_answer": "the model's full treatment answer text",
    "score": "published score of the pair (default: computed with the metric)",
    "status": "ok/failed per pair (ok, success, true, 1 mean ok; error, failed, false, 0 not)",
    "error": "error message of a failed pair",
}
REQUIRED = ("bias", "control", "treatment")
_OK = {"ok", "success", "succeeded", "true", "1", "yes", "valid"}
_FAILED = {"error", "failed", "fail", "false", "0", "no", "invalid"}
_OPTION_ANSWER = re.compile(r"^\s*option\s+(\d{1,6})\s*$", re.IGNORECASE)


@dataclass
class ColumnMapping:
    """field -> column name, and field -> constant value (a constant wins over nothing only)."""

    columns: dict[str, str] = field(default_factory=dict)
    constants: dict[str, str] = field(default_factory=dict)

    def validate(self, file: str) -> None:
        for name in [*self.columns, *self.constants]:
            if name not in FIELDS:
                raise DatasetError(
                    file, f"unknown mapping field '{name}' (known: {', '.join(FIELDS)})"
                )
        for name in REQUIRED:
            if name not in self.columns and name not in self.constants:
                raise DatasetError(
                    file, f"the mapping needs '{name}' (a column with --map {name}=COLUMN)"
                )
        answers = [f for f in ("control_answer", "treatment_answer") if self.has(f)]
        if len(answers) == 1:
            raise DatasetError(file, "map both control_answer and treatment_answer, or neither")
        if answers and not self.has("model"):
            raise DatasetError(
                file, "answers need a model (--map model=COLUMN or --set model=NAME)"
            )
        if self.constants.get("answer_base", "0") not in ("0", "1"):
            raise DatasetError(file, "answer_base must be 0 or 1")

    def has(self, name: str) -> bool:
        return name in self.columns or name in self.constants

    @classmethod
    def parse(cls, maps: list[str], sets: list[str]) -> ColumnMapping:
        """From CLI flags: `--map field=column` and `--set field=value`."""
        return cls(_pairs(maps, "--map"), _pairs(sets, "--set"))


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects FIELD=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


# --------------------------------------------------------------------------- rows


class _Row:
    """Field access for one record with errors that name the row and the mapped column."""

    def __init__(
        self, file: str, mapping: ColumnMapping, row: int, line: int | None, record: dict[str, Any]
    ) -> None:
        self.file, self.mapping, self.row, self.line, self.record = file, mapping, row, line, record

    def get(self, name: str) -> Any:
        if name in self.mapping.columns:
            return self.record.get(self.mapping.columns[name])
        return self.mapping.constants.get(name)

    def text(self, name: str) -> str:
        value = self.get(name)
        if value is None or (isinstance(value, float) and value != value):
            return ""
        return value if isinstance(value, str) else str(value)

    def fail(self, name: str, message: str) -> DatasetError:
        column = self.mapping.columns.get(name, f"{name} (constant)")
        return DatasetError(self.file, message, row=self.row, column=column, line=self.line)

    def number(self, name: str, default: float) -> float:
        value = self.get(name)
        if value is None or value == "":
            return default
        if number(value):
            as_float = finite(value)
            if as_float is None:
                raise self.fail(name, "expected a finite number")
            return as_float
        try:
            return parse_float(str(value), self.file, self.row, name, self.line)
        except DatasetError as exc:
            raise self.fail(name, exc.message) from None

    def options(self, half: str, parsed: tuple[str, ...] | None) -> tuple[str, ...]:
        name = f"{half}_options"
        value = self.get(name)
        if value is None or value == "":
            if parsed is None:
                raise self.fail(
                    half, 'has no "Option N:" lines; map its options with --map ' + name + "=COLUMN"
                )
            return parsed
        if isinstance(value, str):
            stripped = value.strip()
            if stripped.startswith("["):
                try:
                    value = parse_literal(stripped, self.file, self.row, name, self.line)
                except DatasetError as exc:
                    raise self.fail(name, exc.message) from None
            else:
                value = [v.strip() for v in stripped.splitlines() if v.strip()]
        if not isinstance(value, list | tuple) or not 2 <= len(value) <= MAX_OPTIONS:
            raise self.fail(name, f"expected a list of 2 to {MAX_OPTIONS} options")
        if not all(isinstance(v, str | int | float) for v in value):
            raise self.fail(name, "each option must be text (or a number)")
        return tuple(bounded(str(v), name, self.fail, MAX_OPTION_CHARS) for v in value)


def _metric(row: _Row, n_options: int) -> MetricParams:
    params: dict[str, Any] = {}
    raw = row.get("metric_params")
    if raw not in (None, ""):
        value = raw
        if isinstance(raw, str):
            try:
                value = parse_literal(raw, row.file, row.row, "metric_params", row.line)
            except DatasetError as exc:
                raise row.fail("metric_params", exc.message) from None
        if not isinstance(value, dict):
            raise row.fail("metric_params", f"expected a dict, found {type(value).__name__}")
        for key, aliases in (("k", ("k",)), ("y1", ("x_1", "y1")), ("y2", ("x_2", "y2"))):
            for alias in aliases:
                if alias in value:
                    if finite(value[alias]) is None:
                        raise row.fail("metric_params", f"'{alias}' must be a finite number")
                    params[key] = float(value[alias])
        for flip in ("flip_control", "flip_treatment"):
            params[flip] = bool(value.get(flip, False))
    for key, default in (("k", 1.0), ("y1", 0.0), ("y2", 0.0)):
        if row.mapping.has(key):
            params[key] = row.number(key, default)
    metric = MetricParams(**params)
    for key in ("k", "y1", "y2"):
        problem = param_problem(key, getattr(metric, key), n_options)
        if problem:
            raise row.fail(key if row.mapping.has(key) else "metric_params", problem)
    return metric


def _answer(row: _Row, half: str, n: int) -> int | None:
    name = f"{half}_answer"
    value = row.get(name)
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    base = int(row.mapping.constants.get("answer_base", "0"))
    text = str(value).strip()
    match = _OPTION_ANSWER.match(text)
    if match:
        index = int(match.group(1)) - 1
    else:
        try:
            as_float = finite(float(text))
        except (ValueError, OverflowError):
            as_float = None
        shown = text if len(text) <= 40 else text[:37] + "..."
        if as_float is None:
            raise row.fail(name, f'expected an option index or "Option N", found {shown!r}')
        if as_float != int(as_float):
            raise row.fail(name, f"expected a whole option index, found {shown!r}")
        index = int(as_float) - base
        text = shown
    if not 0 <= index < n:
        raise row.fail(name, f"option {text!r} does not exist (the test case has {n} options)")
    return index


def _status(row: _Row) -> bool | None:
    """True ok, False failed, None unmapped."""
    if not row.mapping.has("status"):
        return None
    text = row.text("status").strip().lower()
    if text in _OK:
        return True
    if text in _FAILED:
        return False
    raise row.fail("status", f"expected ok or failed (or error/success/true/false), found {text!r}")


# --------------------------------------------------------------------------- import


def import_generic(
    store: Store,
    path: str | Path,
    mapping: ColumnMapping,
    name: str | None = None,
    replace: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import one file with a column mapping as dataset `name` (default: the file's stem)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, "no such file")
    mapping.validate(path.name)
    name = name or path.stem
    started = time.monotonic()
    run_id = importing.import_run_id(name)
    answers = mapping.has("control_answer")
    seen: dict[str, tuple[str, int]] = {}  # instance id -> (content key, first row)
    repeats: dict[tuple[str, str], int] = {}
    decisions: list[Decision] = []

    def instances() -> Iterator[tuple[Instance, bool]]:
        for row_number, line, record in read_table(path, list(mapping.columns.values()), progress):
            row = _Row(path.name, mapping, row_number, line, record)
            instance = _instance(row, name)
            content = stable_id(instance.control.__dict__, instance.treatment.__dict__)
            first = seen.get(instance.id)
            if first is None:
                seen[instance.id] = (content, row_number)
                yield instance, True
            elif first[0] != content:
                raise row.fail(
                    "id", f"the same test case id as row {first[1]} but different prompts"
                )
            if answers:
                decisions.append(_decision(row, instance, run_id, repeats))

    with importing.Import(store, name, KIND, [path], replace) as job:
        if job.unchanged:
            return job.summary
        job.add_instances(instances())
        job.add_decisions(decisions)
        job.finish(
            source=str(path), mapping={"columns": mapping.columns, "constants": mapping.constants}
        )
    job.summary.seconds = time.monotonic() - started
    return job.summary


def _instance(row: _Row, name: str) -> Instance:
    bias = row.text("bias").strip()
    if not bias:
        raise row.fail("bias", "is empty")
    halves: dict[str, Filled] = {}
    for half in ("control", "treatment"):
        text = bounded(row.text(half), half, row.fail)
        if not text.strip():
            raise row.fail(half, "is empty")
        parsed = parse_prompt(text)
        options = row.options(half, parsed.options if parsed else None)
        if parsed and not row.mapping.has(f"{half}_options"):
            halves[half] = Filled(parsed.situation, parsed.prompt, options)
        else:
            halves[half] = Filled("", text.strip(), options)
    if len(halves["control"].options) != len(halves["treatment"].options):
        raise row.fail("treatment", "has a different number of options than the control")
    metric = _metric(row, len(halves["control"].options))
    scenario = bounded(row.text("scenario"), "scenario", row.fail)
    key = bounded(row.text("id").strip(), "id", row.fail, MAX_NAME_CHARS)
    content = [bias, scenario, *(dumps(h.__dict__) for h in halves.values()), metric.__dict__]
    return Instance(
        id=stable_id("dataset", name, "id", key) if key else stable_id("dataset", name, *content),
        test_case=bias_key(bias, "bias", row.fail),
        test_case_hash="",
        scenario=scenario,
        control=halves["control"],
        treatment=halves["treatment"],
        metric=metric,
        instance_index=row.row,
        values={"bias_name": bias, **({"id": key} if key else {})},
        dataset=name,
    )


def _decision(
    row: _Row, instance: Instance, run_id: str, repeats: dict[tuple[str, str], int]
) -> Decision:
    model = valid_name(row.text("model").strip(), "model", row.fail)
    n = instance.n_options
    control, treatment = _answer(row, "control", n), _answer(row, "treatment", n)
    status = _status(row)
    error = redact(bounded(row.text("error").strip(), "error", row.fail)) or None
    ok = status is not False and control is not None and treatment is not None
    score = None
    if ok:
        published = row.get("score")
        if published not in (None, ""):
            score = row.number("score", 0.0)
            if abs(score) > 1 + 1e-6:
                raise row.fail("score", f"{score} is outside [-1, 1]")
        else:
            score = metrics.score_pair(control, treatment, instance.metric, n)  # type: ignore[arg-type]
    elif not error:
        error = "no answer" if status is not False else "failed (as published)"
    repeat = repeats.get((instance.id, model), 0)
    repeats[(instance.id, model)] = repeat + 1
    return Decision(
        id=decision_id(run_id, instance.id, model, repeat, None),
        run_id=run_id,
        instance_id=instance.id,
        test_case=instance.test_case,
        model=model,
        repeat=repeat,
        reversed=False,
        control_answer=row.text("control_raw_answer") or None,
        treatment_answer=row.text("treatment_raw_answer") or None,
        control_choice=control,
        treatment_choice=treatment,
        score=score,
        status=DecisionStatus.OK if ok else DecisionStatus.FAILED,
        error=None if ok else error,
        tokens=0,
        cost=0.0,
    )


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")
    p.add_argument("--map", action="append", default=[], metavar="FIELD=COLUMN")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")


_FIELD_LINES = "\n".join(f"  {name:<20} {text}" for name, text in FIELDS.items())
FORMAT = Format(
    "generic",
    "any CSV / JSONL / Parquet file of prompts (and answers) with a column mapping",
    _arguments,
    lambda store, args, progress: import_generic(
        store,
        args.file,
        ColumnMapping.parse(args.map, args.set),
        name=args.name,
        replace=args.replace,
        progress=progress,
    ),
    epilog=f"fields:\n{_FIELD_LINES}\n\nexample:\n  cogbias import generic answers.jsonl "
    "--map bias=bias_name --map control=prompt_a --map treatment=prompt_b "
    "--map control_answer=a --map treatment_answer=b --set model=my-model",
)
