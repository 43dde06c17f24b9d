"""The Mohr (2025) thesis' published data: effect sizes, prompts and model features.

Its `04_Datasets/` folder holds three CSV files (layout in
`tests/fixtures/mohr2025-format/README.md`):

- `bias_detections.csv` — a published *result set*: one Cohen's d per bias × prompt scenario ×
  model × temperature (`bias_detected`, unbounded) and its capped form (`bias_detected_mod`,
  clipped to [0, 1]), with both group sizes. Stored in `effect_sizes`.
- `biases.csv` — the prompts: two parts per bias × scenario, with `__` where the answer goes
  and JSON `variables` whose keys appear bare in the text. Stored in `study_prompts`, so the
  thesis' own questions can become a runnable study (`studies.thesis_coding` says which part
  is the control and which answer is coded 1). The thesis repository first called this file
  `experiments.csv`; either name is read, and when both are present they must hold the same
  prompts (each is validated; the prompts are stored once).
- `models.csv` — model features (release date, parameters, …) for the regression. Stored in
  `model_features` with every column kept in `features` as published.

Only `bias_detections.csv` is required. What was read and what was left out (a file that is
absent, a duplicate prompt file, other files in the folder, the `updated_at` column) is
listed in the summary's notes. Quirks handled: `None` written as a target response, temperatures written as "1" and
"1.0" (the same temperature, stored as a number and de-duplicated on it), empty feature cells,
`true`/`false` flags. All three files import in one transaction: a malformed row anywhere
leaves the database as it was. The tables belong to the store (`cogbias.store.effects`,
created by a numbered migration); this module only reads and validates the files.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.core.limits import (
    MAX_NAME_CHARS,
    MAX_OPTION_CHARS,
    MAX_PROMPT_CHARS,
    MAX_SAMPLE_SIZE,
    loads_json,
    name_problem,
)
from cogbias.core.redact import redactor
from cogbias.core.safetext import terminal
from cogbias.datasets import importing
from cogbias.datasets.common import (
    CsvFile,
    CsvRecord,
    DatasetError,
    Format,
    ImportSummary,
    Progress,
    bias_key,
    bounded,
    parse_float,
    valid_name,
)
from cogbias.llm.providers import HIGHEST_TEMPERATURE
from cogbias.store import Store
from cogbias.store.effects import CAPABILITY_COLUMNS

KIND = "mohr2025"
DEFAULT_NAME = "mohr2025"
DETECTIONS = "bias_detections.csv"
PROMPT_FILES = ("biases.csv", "experiments.csv")  # the released name, then the older one
MODELS = "models.csv"
DETECTION_COLUMNS = (
    "bias",
    "scenario",
    "model",
    "temperature",
    "sample_size_1",
    "sample_size_2",
    "bias_detected",
    "bias_detected_mod",
)
EXPERIMENT_COLUMNS = (
    "bias_id",
    "bias",
    "experiment_type",
    "scenario",
    "content",
    "variables",
    "response_type",
    "target_response",
    "part",
    "parts_total",
)
# Cohen's d beyond this is no measurement (the thesis' largest is under 200); squaring it in the
# aggregates would overflow a float.
MAX_EFFECT = 1e6
MODEL_COLUMNS = ("model", "temperature", "release_date", "number_parameters")
MAX_PARTS = 100  # parts of one bias x scenario (the thesis has 2); each further part is a test
# A parameter count beyond this is no model (the thesis writes billions: 8 to 200; raw counts
# of today's largest models are ~2e12); a capability score (an Arena rating, an MMLU %) too.
MAX_PARAMETERS = 1e13
MAX_CAPABILITY = 1e6
MAX_NUMBER = 1e15  # a number in `variables`: an anchor, a price (squares stay finite)
RESPONSE_TYPES = ("numerical", "choice")
ANSWER_SLOT = "__"


@dataclass
class MohrSummary(ImportSummary):
    effects: int = 0
    prompts: int = 0
    model_rows: int = 0
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.unchanged:
            return f"dataset '{self.dataset}' is already imported with this content: nothing to do"
        parts = [f"{self.effects} effect sizes of {len(self.models)} model(s)"]
        if self.prompts:
            parts.append(f"{self.prompts} prompts")
        if self.model_rows:
            parts.append(f"{self.model_rows} model feature rows")
        head = (
            f"imported '{self.dataset}' ({self.kind}): {', '.join(parts)}, "
            f"{len(self.biases)} biases in {self.seconds:.1f} s"
        )
        return "\n".join([head, *(f"  {note}" for note in self.notes)])


# --------------------------------------------------------------------------- cells


def _text(
    record: CsvRecord, column: str, required: bool = True, limit: int = MAX_NAME_CHARS
) -> str:
    """A cell's text, stripped; empty only when not `required`; at most `limit` characters."""
    value = record.values[column].strip()
    if required and not value:
        raise record.fail(column, "is empty")
    return bounded(value, column, record.fail, limit)


def _name(record: CsvRecord, column: str) -> str:
    """A cell that names something (a scenario, a model, a prompt id): `limits.name_problem`."""
    return valid_name(_text(record, column), column, record.fail)


def _float(record: CsvRecord, column: str, finite: bool = True) -> float:
    value = parse_float(
        record.values[column].strip(), record.file, record.row, column, record.line, finite
    )
    if math.isnan(value):
        raise record.fail(column, "is not a number (NaN)")
    return value


def _whole(record: CsvRecord, column: str, minimum: int = 1, maximum: int = MAX_PARTS) -> int:
    value = _float(record, column)
    if value != int(value) or not minimum <= value <= maximum:
        raise record.fail(
            column, f"expected a whole number from {minimum} to {maximum:,}, found {value:.15g}"
        )
    return int(value)


def _optional_float(record: CsvRecord, column: str, low: float, high: float) -> float | None:
    """An optional number; when given, finite and within [low, high]."""
    if column not in record.values or not record.values[column].strip():
        return None
    value = _float(record, column)
    if not low <= value <= high:
        raise record.fail(column, f"must lie in [{low:g}, {high:g}], found {value:.15g}")
    return value


def _date(record: CsvRecord, column: str) -> str | None:
    text = record.values.get(column, "").strip()
    if not text:
        return None
    try:
        return dt.date.fromisoformat(text[:10]).isoformat()
    except ValueError:
        raise record.fail(column, f"expected a date like 2024-05-13, found {text!r}") from None


def _flag(record: CsvRecord, column: str) -> int | None:
    text = record.values.get(column, "").strip().lower()
    if not text:
        return None
    if text in ("true", "1", "yes"):
        return 1
    if text in ("false", "0", "no"):
        return 0
    raise record.fail(column, f"expected true or false, found {text!r}")


# --------------------------------------------------------------------------- readers


def read_effects(path: Path, name: str, progress: Progress | None = None) -> Iterator[tuple]:
    """Validated `effect_sizes` rows (EFFECT_FIELDS order) from bias_detections.csv."""
    seen: dict[tuple[str, str, str, float], int] = {}
    for record in CsvFile(path, DETECTION_COLUMNS, progress).records():
        bias_name = _text(record, "bias")
        bias = bias_key(bias_name, "bias", record.fail)
        scenario = _name(record, "scenario")
        model = _name(record, "model")
        temperature = _float(record, "temperature")
        if not 0 <= temperature <= HIGHEST_TEMPERATURE:
            raise record.fail(
                "temperature",
                f"must lie in [0, {HIGHEST_TEMPERATURE:g}] (the widest range a provider accepts), "
                f"found {temperature:g}",
            )
        n1 = _whole(record, "sample_size_1", maximum=MAX_SAMPLE_SIZE)
        n2 = _whole(record, "sample_size_2", maximum=MAX_SAMPLE_SIZE)
        d = _float(record, "bias_detected", finite=False)  # ±inf: groups without spread
        if math.isfinite(d) and abs(d) > MAX_EFFECT:
            raise record.fail(
                "bias_detected",
                f"must lie within ±{MAX_EFFECT:,.0f} (or be ±inf for groups without spread), "
                f"found {d:g}",
            )
        capped = _float(record, "bias_detected_mod")
        if not 0 <= capped <= 1:
            raise record.fail("bias_detected_mod", f"must lie in [0, 1], found {capped:g}")
        key = (bias, scenario, model, temperature)
        if key in seen:
            raise record.fail(
                "temperature",
                f"repeats row {seen[key]} (same bias, scenario, model and temperature "
                f"{temperature:g}; '1' and '1.0' are the same temperature)",
            )
        seen[key] = record.row
        yield (name, key[0], bias_name, scenario, model, temperature, n1, n2, d, capped, record.row)


def read_prompts(path: Path, name: str, progress: Progress | None = None) -> list[tuple]:
    """Validated `study_prompts` rows; every bias × scenario must have parts 1..parts_total."""
    clean = redactor()
    rows: list[tuple] = []
    groups: dict[tuple[str, str], dict[int, int]] = {}
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    ids: dict[str, int] = {}
    for record in CsvFile(path, EXPERIMENT_COLUMNS, progress).records():
        prompt_id = _name(record, "bias_id")
        if prompt_id in ids:
            raise record.fail("bias_id", f"repeats row {ids[prompt_id]}")
        ids[prompt_id] = record.row
        bias_name = _text(record, "bias")
        bias = bias_key(bias_name, "bias", record.fail)
        scenario = _name(record, "scenario")
        content = _text(record, "content", limit=MAX_PROMPT_CHARS)
        variables = _variables(record)
        response_type = _text(record, "response_type").lower()
        if response_type not in RESPONSE_TYPES:
            raise record.fail(
                "response_type", f"expected numerical or choice, found {response_type!r}"
            )
        if response_type == "numerical" and ANSWER_SLOT not in content:
            raise record.fail("content", f"a numerical prompt needs the answer slot {ANSWER_SLOT}")
        part = _whole(record, "part")
        total = _whole(record, "parts_total", minimum=2)
        if part > total:
            raise record.fail("part", f"is {part} but parts_total is {total}")
        group = (bias, scenario)
        if group in totals and totals[group][0] != total:
            raise record.fail(
                "parts_total",
                f"is {total} but row {totals[group][1]} of the same bias and scenario says "
                f"{totals[group][0]}",
            )
        totals.setdefault(group, (total, record.row))
        parts = groups.setdefault(group, {})
        if part in parts:
            raise record.fail(
                "part", f"part {part} of this bias and scenario repeats row {parts[part]}"
            )
        parts[part] = record.row
        rows.append(
            (
                name,
                prompt_id,
                group[0],
                bias_name,
                _text(record, "experiment_type", required=False),
                scenario,
                clean(content),
                json.dumps(variables, sort_keys=True, ensure_ascii=False),
                response_type,
                _target(record),
                part,
                total,
                record.row,
            )
        )
    for group, parts in groups.items():
        total, first_row = totals[group]
        missing = sorted(set(range(1, total + 1)) - set(parts))
        if missing:
            raise DatasetError(
                path.name,
                f"bias '{group[0]}' in scenario '{group[1]}' has no part {missing[0]} of {total}",
                row=first_row,
                column="part",
            )
    return rows


def _target(record: CsvRecord) -> str | None:
    """The expected answer, or None: the release writes a missing one as empty or `None`."""
    text = _text(record, "target_response", required=False)
    return None if text in ("", "None", "none", "nan", "NaN") else text


def _variables(record: CsvRecord) -> dict[str, Any]:
    text = _text(record, "variables", required=False, limit=MAX_PROMPT_CHARS)
    if not text:
        return {}
    try:
        value = loads_json(text)
    except json.JSONDecodeError as exc:
        raise record.fail("variables", f"is not valid JSON ({exc.args[0]})") from None
    except ValueError as exc:  # nested too deeply, a lone surrogate
        raise record.fail("variables", str(exc)) from None
    if not isinstance(value, dict):
        raise record.fail("variables", f"expected a JSON object, found {type(value).__name__}")
    for key, item in value.items():
        problem = name_problem(key)
        if problem:
            raise record.fail("variables", f"the variable name {key[:60]!r} {problem}")
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise record.fail(
                "variables", f"'{key}' must be a number or a text, found {type(item).__name__}"
            )
        if not isinstance(item, str) and not abs(item) <= MAX_NUMBER:  # nan, inf, 10**400
            raise record.fail(
                "variables", f"'{key}' must be a finite number within ±{MAX_NUMBER:g}"
            )
    return value


def read_features(path: Path, name: str, progress: Progress | None = None) -> list[tuple]:
    """Validated `model_features` rows; every published column is kept in `features`."""
    rows: list[tuple] = []
    seen: dict[tuple[str, float | None], int] = {}
    for record in CsvFile(path, MODEL_COLUMNS, progress).records():
        model = _name(record, "model")
        temperature = _optional_float(record, "temperature", 0, HIGHEST_TEMPERATURE)
        key = (model, temperature)
        if key in seen:
            raise record.fail("model", f"repeats row {seen[key]} (same model and temperature)")
        seen[key] = record.row
        parameters = _optional_float(record, "number_parameters", 0, MAX_PARAMETERS)
        if parameters is not None and parameters <= 0:
            raise record.fail("number_parameters", f"must be positive, found {parameters:g}")
        for column in CAPABILITY_COLUMNS:  # the regression reads them as numbers
            _optional_float(record, column, -MAX_CAPABILITY, MAX_CAPABILITY)
        features = {
            k: bounded(v.strip(), k, record.fail, MAX_OPTION_CHARS)
            for k, v in record.values.items()
            if v.strip()
        }
        rows.append(
            (
                name,
                model,
                temperature,
                _flag(record, "local") if "local" in record.values else None,
                _date(record, "release_date"),
                parameters,
                json.dumps(features, sort_keys=True, ensure_ascii=False),
                record.row,
            )
        )
    return rows


# --------------------------------------------------------------------------- import


def _read_prompt_files(paths: list[Path], name: str, progress: Progress | None) -> list[tuple]:
    """The prompts of biases.csv or experiments.csv; with both, each is validated and they
    must agree (which one was meant cannot be guessed when they differ)."""
    read = [read_prompts(path, name, progress) for path in paths]
    if len(read) == 2:
        first, second = ([row[:-1] for row in rows] for rows in read)  # row numbers aside
        if first != second:
            at = next(
                (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
                min(len(first), len(second)),
            )
            raise DatasetError(
                paths[1].name,
                f"holds other prompts than {paths[0].name} (they differ from row {at + 1}); "
                "keep the one that is meant and move the other out of the folder",
                row=at + 1,
            )
    return read[0] if read else []


def _notes(
    directory: Path,
    files: list[Path],
    prompt_files: list[Path],
    prompts: list[tuple],
    features: list[tuple],
) -> list[str]:
    """What was imported from where, and what was not, for the person who imported it."""
    notes = []
    if prompt_files:
        pairs = len({(row[2], row[5]) for row in prompts})
        notes.append(
            f"prompts: {len(prompts)} from {prompt_files[0].name} ({pairs} bias × scenario "
            "experiments; column updated_at not kept)"
        )
        if len(prompt_files) == 2:
            notes.append(f"not imported: {prompt_files[1].name} (the same prompts again)")
    else:
        notes.append(
            f"not imported: prompts (no {' or '.join(PROMPT_FILES)}): the thesis' questions "
            "cannot be run from this dataset"
        )
    if not features:
        notes.append(f"not imported: model features (no {MODELS})")
    read = {f.name for f in files}
    others = sorted(
        terminal(p.name) for p in directory.iterdir() if p.is_file() and p.name not in read
    )
    if others:
        shown = ", ".join(others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
        notes.append(f"not read: {shown} (not part of the thesis' data layout)")
    return notes


def import_mohr(
    store: Store,
    directory: str | Path,
    name: str = DEFAULT_NAME,
    replace: bool = False,
    progress: Progress | None = None,
) -> MohrSummary:
    """Import the thesis' `04_Datasets/` folder (or any folder with its CSV files)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(directory, "is not a folder (expected the thesis' 04_Datasets/)")
    detections = directory / DETECTIONS
    if not detections.is_file():
        raise DatasetError(directory, f"has no {DETECTIONS} (expected the thesis' 04_Datasets/)")
    prompt_files = [directory / f for f in PROMPT_FILES if (directory / f).is_file()]
    models = directory / MODELS
    files = [detections, *prompt_files] + ([models] if models.is_file() else [])
    started = time.monotonic()
    # Read and validate everything before the first write: the transaction below then only
    # inserts rows that are known to be good.
    effects = list(read_effects(detections, name, progress))
    if not effects:
        raise DatasetError(DETECTIONS, "has no rows")
    prompts = _read_prompt_files(prompt_files, name, progress)
    features = read_features(models, name, progress) if models.is_file() else []
    notes = _notes(directory, files, prompt_files, prompts, features)
    with importing.Import(store, name, KIND, files, replace) as job:
        summary = MohrSummary(name, KIND, unchanged=job.unchanged)
        if job.unchanged:
            return summary
        store.replace_thesis_data(name, effects, prompts, features)
        job.models = {row[4] for row in effects}
        job.biases = {row[1] for row in effects}
        job.summary.instances = len(prompts)
        job.finish(
            source=str(directory),
            effects=len(effects),
            prompts=len(prompts),
            model_features=len(features),
            prompt_file=prompt_files[0].name if prompt_files else None,
            notes=notes,
        )
    summary.effects, summary.prompts, summary.model_rows = len(effects), len(prompts), len(features)
    summary.models, summary.biases = job.summary.models, job.summary.biases
    summary.notes = notes
    summary.seconds = time.monotonic() - started
    return summary


FORMAT = Format(
    "mohr2025",
    "the Mohr 2025 thesis' data: bias_detections.csv (+ biases.csv, models.csv)",
    lambda p: p.add_argument(
        "directory", help="folder with the thesis' CSV files (its 04_Datasets/)"
    ),
    lambda store, args, progress: import_mohr(
        store, args.directory, name=args.name, replace=args.replace, progress=progress
    ),
    default_name="mohr2025",
    results_page="datasets",
)
