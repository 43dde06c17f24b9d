"""The paper's own output format: `full_dataset.csv` + `decision_results/<model>.csv`.

Test cases become instances of the dataset; each decisions file row becomes a decision of its
model with the published `individual_score` kept exactly as published (status OK → ok, ERROR
→ failed with the published error message), so the bias × model table of an import is the
paper's table. Quirks handled here: spaced bias names in the test cases and PascalCase ones in
the decisions ("Loss Aversion" / "LossAversion"), `remarks` as a Python literal, decisions as
floats ("10.0"), 0-based in the original option order.

The format does not record metric parameters (the paper's code derives them per bias from the
templates' insertions). When `remarks` carries them (`k`, `x_1`, `x_2`) they are used;
otherwise the instances are stored without a metric: browsable and analysable with their
published scores, but `cogbias run` refuses them — run the Hub dataset, which has the same
test cases with their parameters, to place a new model beside the paper's.
"""

from __future__ import annotations

import functools
import html
import math
import re
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cogbias.core.limits import MAX_NAME_CHARS, MAX_OPTION_CHARS, MAX_PROMPT_CHARS
from cogbias.core.metrics import MetricParams, params_problem
from cogbias.core.records import Decision, DecisionStatus, Instance, decision_id, dumps, stable_id
from cogbias.core.redact import redact
from cogbias.core.templates import Filled
from cogbias.datasets import importing
from cogbias.datasets.common import (
    MAX_OPTIONS,
    CsvFile,
    CsvRecord,
    DatasetError,
    Format,
    ImportSummary,
    Progress,
    bias_id,
    bias_key,
    bounded,
    finite,
    number,
    parse_float,
    parse_index,
    parse_literal,
    parse_prompt,
    valid_name,
)
from cogbias.llm.providers import HIGHEST_TEMPERATURE
from cogbias.store import Store

KIND = "malberg2024"
DEFAULT_NAME = "malberg2024"
TEST_COLUMNS = ("id", "bias", "scenario", "control", "treatment")
DECISION_REQUIRED = (
    "id",
    "model",
    "control_decision",
    "treatment_decision",
    "status",
    "individual_score",
)
_INSERTION = re.compile(r'<insertion origin="([^"]*)" instruction="([^"]*)">')
_INSERTION_END = "</insertion>"
_redact = functools.lru_cache(maxsize=4096)(redact)  # published error messages repeat a lot
HALVES = ("control", "treatment")
SCORE_SLACK = 1e-6  # published scores carry the card's 1e-8 guard; anything past ±1 is damage
# A raw template with its <insertion> tags (the fixture's are 4.5 times its prompt): read with
# a regex whose cost grows with the unclosed tags times the length, so bounded.
MAX_RAW_CHARS = 5 * MAX_PROMPT_CHARS


class _Case:
    """What the decisions need to know about a test case while they stream past."""

    __slots__ = ("instance_id", "bias", "n_options", "row", "has_metric")

    def __init__(
        self, instance_id: str, bias: str, n_options: int, row: int, has_metric: bool
    ) -> None:
        self.instance_id, self.bias, self.n_options = instance_id, bias, n_options
        self.row, self.has_metric = row, has_metric


def decision_files(directory: Path) -> list[Path]:
    folder = directory / "decision_results"
    return sorted(folder.glob("*.csv")) if folder.is_dir() else []


def read_test_cases(
    path: Path, name: str, cases: dict[str, _Case], progress: Progress | None = None
) -> Iterator[tuple[Instance, bool]]:
    """Yield (instance, has_metric) per row, filling `cases` for the decisions that follow."""
    csv_file = CsvFile(path, TEST_COLUMNS, progress)
    for record in csv_file.records():
        values, row, line = record.values, record.row, record.line

        fail = record.fail
        test_id = values["id"].strip()
        if not test_id:
            raise fail("id", "is empty")
        bounded(test_id, "id", fail, MAX_NAME_CHARS)
        if test_id in cases:
            raise fail(
                "id", f"test case id {test_id!r} appears twice (first in row {cases[test_id].row})"
            )
        bias = values["bias"].strip()
        if not bias:
            raise fail("bias", "is empty")
        halves: dict[str, Filled] = {}
        for half in ("control", "treatment"):
            parsed = parse_prompt(bounded(values[half], half, fail))
            if parsed is None:
                raise fail(half, 'has no answer options (lines "Option 1: …", "Option 2: …")')
            halves[half] = Filled(parsed.situation, parsed.prompt, parsed.options)
            bounded(values.get(f"raw_{half}", ""), f"raw_{half}", fail, MAX_RAW_CHARS)
        n = len(halves["control"].options)
        if len(halves["treatment"].options) != n:
            raise fail(
                "treatment",
                f"has {len(halves['treatment'].options)} options but the control has {n}",
            )
        if n > MAX_OPTIONS:
            raise fail("control", f"has {n} answer options; at most {MAX_OPTIONS} are allowed")
        remarks = _remarks(values.get("remarks", ""), csv_file.name, row, line)
        metric = _metric_from(remarks)
        problem = params_problem(metric, n) if metric else None
        if problem:  # the paper calls y1, y2 x_1, x_2
            raise fail("remarks", problem.replace("y1", "x_1").replace("y2", "x_2"))
        temperature = _optional_float(values.get("temperature", ""), csv_file.name, row, line)
        seed = values.get("seed", "").strip()
        if seed and not (re.fullmatch(r"-?\d{1,18}", seed)):
            shown = seed if len(seed) <= 40 else seed[:37] + "..."
            raise fail("seed", f"expected a whole number of at most 18 digits, found {shown!r}")
        instance = Instance(
            id=stable_id("dataset", name, test_id),
            test_case=bias_key(bias, "bias", fail),
            test_case_hash="",
            scenario=bounded(values["scenario"], "scenario", fail),
            control=halves["control"],
            treatment=halves["treatment"],
            metric=metric or MetricParams(),
            instance_index=row,
            generator=bounded(values.get("generator", ""), "generator", fail, MAX_NAME_CHARS)
            or None,
            temperature=temperature,
            seed=int(seed) if seed else None,
            variant=bounded(values.get("variant", ""), "variant", fail, MAX_NAME_CHARS)
            or "default",
            values={"test_id": test_id, "bias_name": bias, "remarks": remarks},
            insertions=_insertions(values.get("raw_control", ""), values.get("raw_treatment", "")),
            dataset=name,
        )
        cases[test_id] = _Case(instance.id, instance.test_case, n, row, metric is not None)
        yield instance, metric is not None


def _remarks(text: str, file: str, row: int, line: int) -> dict[str, Any] | None:
    if not text.strip() or text.strip() == "None":
        return None
    value = parse_literal(text, file, row, "remarks", line)
    if not isinstance(value, dict):
        raise DatasetError(
            file, f"expected a dict literal, found {type(value).__name__}", row, "remarks", line
        )
    return value


def _metric_from(remarks: dict[str, Any] | None) -> MetricParams | None:
    if not remarks:
        return None
    k = remarks.get("k")
    y1 = remarks.get("x_1", remarks.get("y1"))
    y2 = remarks.get("x_2", remarks.get("y2"))
    if all(number(v) for v in (k, y1, y2)):
        # inf, nan or too large for a float become nan: refused by the bounds check
        converted = [math.nan if finite(v) is None else float(v) for v in (k, y1, y2)]
        return MetricParams(*converted)
    return None


def _insertions(*raw_templates: str) -> list[dict[str, str]]:
    """The gap fills recorded in the raw XML templates (read with a regex, never parsed as XML).

    Each opening tag's text runs to the first closing tag after it; once none is left, no
    later tag can close either, so the scan stops: linear, where one regex over the whole
    tag made every unclosed tag rescan the rest (15 s for 100,000 characters of them)."""
    found: dict[str, dict[str, str]] = {}
    for raw in raw_templates:
        raw, at = raw or "", 0
        while (match := _INSERTION.search(raw, at)) is not None:
            end = raw.find(_INSERTION_END, match.end())
            if end < 0:
                break
            origin, instruction, text = match[1], match[2], raw[match.end() : end]
            at = end + len(_INSERTION_END)
            gap = html.unescape(instruction)
            found.setdefault(
                gap,
                {
                    "gap": gap,
                    "source": "value" if origin == "user" else "llm",
                    "text": html.unescape(text),
                },
            )
    return list(found.values())


def _optional_float(text: str, file: str, row: int, line: int) -> float | None:
    """A temperature: empty, or a number in [0, HIGHEST_TEMPERATURE]."""
    text = (text or "").strip()
    if not text:
        return None
    value = parse_float(text, file, row, "temperature", line)
    if not 0 <= value <= HIGHEST_TEMPERATURE:
        raise DatasetError(
            file, f"{value} is outside [0, {HIGHEST_TEMPERATURE:g}]", row, "temperature", line
        )
    return value


class FirstSeen:
    """Where each (test case, model) pair was first decided, to refuse a second decision.

    8 bytes per test case and model (20 x 30,000 pairs: 5 MB), not a dict entry per decision.
    """

    def __init__(self, n_cases: int) -> None:
        self.size = n_cases + 1  # test case rows are 1-based
        self.models: dict[str, array[int]] = {}
        self.files: list[str] = []

    def add_file(self, name: str) -> int:
        self.files.append(name)
        return len(self.files)

    def first(self, model: str, case_row: int, file_index: int, row: int) -> str | None:
        """None the first time (and remember it), else where the first decision was."""
        slots = self.models.get(model)
        if slots is None:
            slots = self.models[model] = array("q", bytes(8 * self.size))
        previous = slots[case_row]
        if previous:
            index, first_row = divmod(previous, 1 << 32)
            return f"{self.files[index - 1]} row {first_row}"
        slots[case_row] = (file_index << 32) | row
        return None


def read_decisions(
    path: Path,
    name: str,
    cases: dict[str, _Case],
    progress: Progress | None = None,
    seen: FirstSeen | None = None,
) -> Iterator[Decision]:
    """The published decisions of one model's results file."""
    csv_file = CsvFile(path, DECISION_REQUIRED, progress)
    run_id = importing.import_run_id(name)
    seen = seen or FirstSeen(len(cases))
    biases: dict[str, str] = {}
    models: set[str] = set()  # names already checked (a file holds one or a few)
    order_cache: dict[tuple[str, int], Order] = {}
    file_index = seen.add_file(csv_file.name)
    for record in csv_file.records():
        values, fail = record.values, record.fail
        test_id = values["id"].strip()
        case = cases.get(test_id)
        if case is None:
            raise fail("id", f"test case id {test_id!r} is not in full_dataset.csv")
        model = _model(values, path, models, fail)
        first = seen.first(model, case.row, file_index, record.row)
        if first:
            raise fail(
                "id", f"a second decision of {model!r} on test case {test_id!r} (first: {first})"
            )
        _check_bias(values.get("bias", "").strip(), case, biases, fail)
        status = values["status"].strip().upper()
        if status not in ("OK", "ERROR"):
            raise fail("status", f"expected OK or ERROR, found {values['status']!r}")
        control_order, treatment_order = (
            _order(values.get(f"{h}_option_order", ""), case.n_options, fail, h, order_cache)
            for h in HALVES
        )
        control_choice, treatment_choice = (_choice(record, h, case, status) for h in HALVES)
        score, error = _outcome(record, status)
        temperature = _optional_float(
            values.get("temperature", ""), record.file, record.row, record.line
        )
        yield Decision(
            id=decision_id(run_id, case.instance_id, model, 0, temperature),
            run_id=run_id,
            instance_id=case.instance_id,
            test_case=case.bias,
            model=model,
            temperature=temperature,
            repeat=0,
            reversed=bool(control_order) and control_order[0] != sorted(control_order[0]),
            control_order=control_order[0] if control_order else None,
            treatment_order=treatment_order[0] if treatment_order else None,
            control_answer=values.get("control_answer"),
            treatment_answer=values.get("treatment_answer"),
            control_extraction=_extraction(values, "control", fail),
            treatment_extraction=_extraction(values, "treatment", fail),
            control_choice=control_choice,
            treatment_choice=treatment_choice,
            score=score,
            status=DecisionStatus.OK if status == "OK" else DecisionStatus.FAILED,
            error=error,
            tokens=0,
            cost=0.0,
        )


def _model(values: dict[str, str], path: Path, checked: set[str], fail: Any) -> str:
    """The row's model (the file's name when the column is empty), its name checked once."""
    model = values["model"].strip() or path.stem
    if model not in checked:
        valid_name(model, "model" if values["model"].strip() else "model (the file name)", fail)
        checked.add(model)
    return model


def _check_bias(published: str, case: _Case, biases: dict[str, str], fail: Any) -> None:
    """A published bias name ("LossAversion") must be the test case's; each name is
    resolved once (`biases` remembers them)."""
    if not published:
        return
    if published not in biases:
        biases[published] = bias_id(published)
    if biases[published] != case.bias:
        raise fail(
            "bias",
            f"{published!r} does not match the test case's bias {case.bias!r} "
            f"(full_dataset.csv row {case.row})",
        )


def _choice(record: CsvRecord, half: str, case: _Case, status: str) -> int | None:
    """The half's published decision: a 0-based option index in the original order (None
    only in an ERROR row that published none)."""
    column = f"{half}_decision"
    text = record.values[column].strip()
    if status == "ERROR" and (not text or text.lower() == "nan"):
        return None
    choice = parse_index(text, record.file, record.row, column, record.line)
    if not 0 <= choice < case.n_options:
        raise record.fail(column, f"option index {choice} is outside 0..{case.n_options - 1}")
    return choice


def _outcome(record: CsvRecord, status: str) -> tuple[float | None, str | None]:
    """(score, error): the published score of an OK row, kept exactly; the published error
    message of an ERROR row (redacted; a placeholder when none was published)."""
    values = record.values
    if status == "OK":
        text = values["individual_score"].strip()
        score = parse_float(text, record.file, record.row, "individual_score", record.line)
        if abs(score) > 1 + SCORE_SLACK:
            raise record.fail("individual_score", f"{score} is outside [-1, 1]")
        return score, None
    message = bounded(values.get("error_message", "").strip(), "error_message", record.fail)
    return None, _redact(message) or "ERROR (no message published)"


def _extraction(values: dict[str, str], half: str, fail: Any) -> str | None:
    """The published extraction ("Option 3"), at most MAX_OPTION_CHARS characters."""
    text = values.get(f"{half}_extraction")
    return None if text is None else bounded(text, f"{half}_extraction", fail, MAX_OPTION_CHARS)


Order = tuple[list[int], str] | None  # the order and its canonical JSON


def _order(text: str, n: int, fail: Any, half: str, cache: dict[tuple[str, int], Order]) -> Order:
    """A presented option order ("[6, 5, …, 0]"); the few distinct values are parsed once."""
    text = (text or "").strip()
    if not text:
        return None
    key = (text, n)
    if key in cache:
        return cache[key]
    column = f"{half}_option_order"
    try:
        value = parse_literal(text, "", 0, column)
    except DatasetError as exc:
        raise fail(column, exc.message) from None
    if not isinstance(value, list) or sorted(value) != list(range(n)):
        raise fail(column, f"expected a permutation of 0..{n - 1}, found {text[:60]!r}")
    parsed = (value, dumps(value))
    if len(cache) < 10_000:
        cache[key] = parsed
    return parsed


def import_malberg(
    store: Store,
    directory: str | Path,
    name: str = DEFAULT_NAME,
    replace: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import test cases and every model's published decisions from the paper's output folder."""
    directory = Path(directory)
    tests = directory / "full_dataset.csv"
    if not tests.is_file():
        raise DatasetError(
            directory, "has no full_dataset.csv (expected the paper's output folder)"
        )
    files = decision_files(directory)
    started = time.monotonic()
    cases: dict[str, _Case] = {}
    with importing.Import(store, name, KIND, [tests, *files], replace) as job:
        if job.unchanged:
            return job.summary
        job.add_instances(read_test_cases(tests, name, cases, progress))
        unscorable = sum(not c.has_metric for c in cases.values())
        seen = FirstSeen(len(cases))  # a model's results may be split over files
        for path in files:
            job.add_decisions(read_decisions(path, name, cases, progress, seen))
        job.finish(source=str(directory), unscorable=unscorable)
    job.summary.seconds = time.monotonic() - started
    return job.summary


FORMAT = Format(
    "malberg2024",
    "the paper's code output: full_dataset.csv + decision_results/*.csv",
    lambda p: p.add_argument("directory"),
    lambda store, args, progress: import_malberg(
        store, args.directory, name=args.name, replace=args.replace, progress=progress
    ),
    default_name="malberg2024",
)
