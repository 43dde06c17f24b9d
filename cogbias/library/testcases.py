"""Test case files: load, validate, sample and save; plus scenarios and the model registry.

A test case file is TOML (see `docs/format.md`). Every problem is reported as
`file:line:col: message` so authors can jump straight to it, and validation collects all the
problems of a file rather than stopping at the first.
"""

from __future__ import annotations

import csv
import difflib
import functools
import hashlib
import itertools
import math
import os
import random
import re
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from cogbias.core import expressions, metrics
from cogbias.core.metrics import MetricParams
from cogbias.core.sourcemap import SourceMap
from cogbias.core.templates import NAME_RE, LLMGap, Template, TemplateSyntaxError

DATA_DIR = Path(os.environ.get("COGBIAS_DATA", Path(__file__).resolve().parents[2] / "data"))
BUILTIN_DIR = DATA_DIR / "biases"


def user_dir() -> Path:
    """Where user test cases live; built-ins are never overwritten."""
    home = Path(os.environ.get("COGBIAS_HOME", Path.home() / ".cogbias"))
    return home / "biases"


SCALES: dict[str, int | None] = {"likert7": 7, "percent11": 11, "custom": None}
PERCENT_OPTIONS = tuple(f"{p}%" for p in range(0, 101, 10))
VALUE_TYPES: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    # type -> parameter -> (accepted TOML types, required)
    "int": {"min": (int, True), "max": (int, True), "step": (int, False)},
    "float": {"min": ((int, float), True), "max": ((int, float), True), "decimals": (int, False)},
    "choice": {"options": (list, True), "weights": (list, False)},
    "sample": {"options": (list, True), "k": (int, True)},
    "derived": {"expr": (str, True)},
}
_TOP = {
    "id": (str, True),
    "name": (str, True),
    "description": (str, True),
    "references": (list, False),
    "variants": (list, False),
    "scale": (dict, True),
    "values": (dict, False),
    "control": (dict, True),
    "treatment": (dict, True),
    "metric": (dict, True),
    "examples": (dict, False),
}
_SCALE = {"kind": (str, True), "options": (list, False)}
_TEMPLATE = {"situation": (str, True), "prompt": (str, True), "options": (list, False)}
_METRIC = {
    "k": ((int, float, str), False),
    "y1": ((int, float, str), False),
    "y2": ((int, float, str), False),
    "flip_control": (bool, False),
    "flip_treatment": (bool, False),
}
_ID_RE = re.compile(r"[a-z][a-z0-9_]*")
_TOML_POS_RE = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class LibraryError(ValueError):
    """One or more problems in a test case file."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class ValueSpec:
    """A declarative value generator; `params` is the TOML table minus `type`."""

    name: str
    type: str
    params: dict[str, Any]

    def sample(self, rng: random.Random, known: Mapping[str, Any]) -> Any:
        p = self.params
        if self.type == "int":
            return rng.randrange(p["min"], p["max"] + 1, p.get("step", 1))
        if self.type == "float":
            value = rng.uniform(p["min"], p["max"])
            return round(value, p["decimals"]) if "decimals" in p else value
        if self.type == "choice":
            return rng.choices(p["options"], weights=p.get("weights"))[0]
        if self.type == "sample":
            return rng.sample(p["options"], p["k"])
        return expressions.evaluate(p["expr"], known)


@dataclass(frozen=True)
class TestCase:
    """A bias test: control and treatment templates, value generators and a metric."""

    __test__ = False  # not a pytest class

    id: str
    name: str
    description: str
    references: tuple[str, ...]
    variants: tuple[str, ...]
    scale_kind: str
    scale_options: tuple[str, ...] | None
    values: dict[str, ValueSpec]
    control: Template
    treatment: Template
    metric: dict[str, Any]
    # gap instruction -> author-written example fills (the offline `examples` generator)
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    path: Path | None = field(default=None, compare=False)

    @property
    def n_options(self) -> int:
        return len(self.control.options)

    @functools.cached_property
    def content_hash(self) -> str:
        """Version of the test case: results are tied to the exact text that produced them."""
        return hashlib.sha256(to_toml(self).encode()).hexdigest()[:16]

    @property
    def is_builtin(self) -> bool:
        return self.path is not None and self.path.parent.resolve() == BUILTIN_DIR.resolve()

    def templates(self) -> dict[str, Template]:
        return {"control": self.control, "treatment": self.treatment}

    def named_gaps(self) -> dict[str, LLMGap]:
        return {
            g.name: g
            for t in (self.control, self.treatment)
            for g in t.llm_gaps()
            if g.name is not None
        }

    def sample_values(
        self, rng: random.Random, fixed: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Draw every value generator once, in file order, after the variant.

        `fixed` gives some values instead of drawing them (the checker uses it to walk a
        domain). Raises `SamplingError` (naming this test case, the value and the values
        drawn so far) when a derived value fails for the drawn values.
        """
        fixed = fixed or {}
        values: dict[str, Any] = {
            "variant": fixed.get("variant")
            or (rng.choice(self.variants) if self.variants else "default")
        }
        for spec in self.values.values():
            values[spec.name] = (
                fixed[spec.name] if spec.name in fixed else self.draw(spec, rng, values)
            )
        return values

    def draw(self, spec: ValueSpec, rng: random.Random, known: dict[str, Any]) -> Any:
        """One value generator; its failure is this instance's, reported with the values."""
        try:
            return spec.sample(rng, known)
        except expressions.ExpressionError as exc:
            raise SamplingError(self.id, spec.name, known, exc.message, exc.offset) from None

    def metric_params(self, values: Mapping[str, Any]) -> MetricParams:
        """The metric parameters for drawn values; `SamplingError` when one is unusable."""
        resolved: dict[str, float] = {}
        for key, default in (("k", 1), ("y1", 0), ("y2", 0)):
            raw = self.metric.get(key, default)
            try:
                value = expressions.evaluate(raw, values) if isinstance(raw, str) else raw
            except expressions.ExpressionError as exc:
                raise SamplingError(
                    self.id, f"metric.{key}", values, exc.message, exc.offset
                ) from None
            problem = metrics.param_problem(key, value, self.n_options)
            if problem:
                raise SamplingError(self.id, f"metric.{key}", values, problem)
            resolved[key] = float(value)
        return MetricParams(
            k=resolved["k"],
            y1=resolved["y1"],
            y2=resolved["y2"],
            flip_control=bool(self.metric.get("flip_control", False)),
            flip_treatment=bool(self.metric.get("flip_treatment", False)),
        )


class SamplingError(expressions.ExpressionError):
    """A value or metric parameter that fails for one drawn instance (not for the file).

    The runner catches it (as any `ExpressionError`) to fail *that instance* and go on; the
    message names the test case, the value and the values drawn, so the failure can be
    reproduced. `message` is the bare reason, `offset` its position in the expression.
    """

    def __init__(
        self,
        test_case: str,
        name: str,
        values: Mapping[str, Any],
        message: str,
        offset: int | None = None,
    ) -> None:
        drawn = ", ".join(f"{k}={_short(v)}" for k, v in values.items())
        super().__init__(f"test case '{test_case}': {name} fails with {drawn}: {message}")
        self.test_case = test_case
        self.name = name
        self.values = dict(values)
        self.message = message
        self.offset = offset


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- parsing


class _Checker:
    """Collects problems with positions while a file is validated."""

    def __init__(self, text: str, file: str) -> None:
        self.source = SourceMap(text)
        self.file = file
        self.problems: list[Problem] = []

    def add(
        self,
        path: tuple[str, ...],
        message: str,
        index: int | None = None,
        offset: int | None = None,
    ) -> None:
        line, col = self.source.locate(path, index, offset)
        self.problems.append(Problem(self.file, line, col, message))

    def fields(
        self,
        table: Mapping[str, Any],
        schema: Mapping[str, tuple[Any, bool]],
        path: tuple[str, ...],
    ) -> bool:
        ok = True
        where = ".".join(path) or "the top level"
        for key, value in table.items():
            if key not in schema:
                # Spelling hints help with a typo or two; a file of thousands of unknown keys
                # gets the list of allowed keys instead (difflib is the slow part of that).
                hint = (
                    difflib.get_close_matches(key, list(schema), n=1)
                    if len(self.problems) < 100
                    else []
                )
                extra = (
                    f"; did you mean '{hint[0]}'?" if hint else f"; allowed: {', '.join(schema)}"
                )
                self.add((*path, key), f"unknown field '{key}' in {where}{extra}")
                ok = False
                continue
            kinds, _ = schema[key]
            if not isinstance(value, kinds) or (
                isinstance(value, bool) and kinds in (int, (int, float))
            ):
                self.add(
                    (*path, key),
                    f"'{key}' should be {_kind_name(kinds)}, not {_kind_name(type(value))}",
                )
                ok = False
        for key, (_, required) in schema.items():
            if required and key not in table:
                self.add((*path, key), f"missing required field '{key}' in {where}")
                ok = False
        return ok


def _kind_name(kinds: Any) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    names |= {list: "a list", dict: "a table"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def read_toml(text: str, file: str) -> tuple[str, dict[str, Any]]:
    """(text without a byte order mark, its TOML data); every way the text cannot be read is a
    LibraryError with a location (test case and study files alike)."""
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark, as some editors write
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POS_RE.search(str(exc))
        line, col = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
        message = _TOML_POS_RE.sub("", str(exc)).strip()
        problem = Problem(file, line, col, f"this is not valid TOML: {message}")
    except (RecursionError, MemoryError):
        problem = Problem(file, 1, 1, "this file nests arrays or tables too deeply to be read")
    except ValueError:  # an integer of thousands of digits (Python's int() refuses it)
        at = re.search(r"\d{1000,}", text)
        before = text[: at.start() if at else 0]
        line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
        problem = Problem(file, line, col, "this number has too many digits to be read")
    raise LibraryError([problem])


def parse_test_case(text: str, file: str = "<string>") -> TestCase:
    """Parse and fully validate a test case; raises LibraryError listing every problem."""
    text, data = read_toml(text, file)
    check = _Checker(text, file)
    if not check.fields(data, _TOP, ()):
        raise LibraryError(check.problems)
    case = _build(data, check)
    if check.problems:
        raise LibraryError(check.problems)
    _dry_run(case, check)
    if check.problems:
        raise LibraryError(check.problems)
    return case


def _build(data: dict[str, Any], check: _Checker) -> TestCase:
    if not _ID_RE.fullmatch(data["id"]):
        check.add(("id",), f"id '{data['id']}' must be snake_case: lower-case letters, digits, '_'")
    for key in ("references", "variants"):
        for i, item in enumerate(data.get(key, [])):
            if not isinstance(item, str) or not item.strip():
                check.add((key,), f"{key}[{i}] should be a non-empty string", index=i)
    variants = tuple(v for v in data.get("variants", []) if isinstance(v, str))
    if len(set(variants)) != len(variants):
        check.add(("variants",), "variants must have distinct names")

    scale = data["scale"]
    check.fields(scale, _SCALE, ("scale",))
    kind = scale.get("kind", "")
    size = SCALES.get(kind) if isinstance(kind, str) else None
    if isinstance(kind, str) and kind not in SCALES:
        check.add(("scale", "kind"), f"unknown scale kind '{kind}'; use one of {', '.join(SCALES)}")
    options = scale.get("options")
    if not isinstance(options, list):  # a wrong type is reported by check.fields above
        options = None
    if options is None and kind == "percent11":
        options = list(PERCENT_OPTIONS)
    if options is None and kind in ("likert7", "custom") and "control" in data:
        if "options" not in data["control"]:
            check.add(
                ("scale", "kind"), f"scale '{kind}' needs 'options' (in [scale] or each template)"
            )
    if isinstance(options, list) and size is not None and len(options) != size:
        check.add(
            ("scale", "options"), f"scale '{kind}' has {size} options but {len(options)} are listed"
        )

    templates: dict[str, Template] = {}
    for half in ("control", "treatment"):
        table = data[half]
        if not check.fields(table, _TEMPLATE, (half,)):
            continue
        opts = table.get("options", options) or []
        if "options" in table and size is not None and len(opts) != size:
            check.add(
                (half, "options"), f"scale '{kind}' has {size} options but {half} lists {len(opts)}"
            )
        if len(opts) < 2 and opts is not None and (kind == "custom" or "options" in table):
            check.add((half, "options"), "a template needs at least 2 answer options")
        template = Template(table["situation"], table["prompt"], tuple(str(o) for o in opts))
        ok = True
        for path, _ in template.fields():
            try:
                template.segments(path)
            except TemplateSyntaxError as exc:
                ok = False
                if path.startswith("options["):
                    i = int(path[8:-1])
                    src = (half, "options") if "options" in table else ("scale", "options")
                    check.add(
                        src, f"{half} option {i + 1}: {exc.message}", index=i, offset=exc.offset
                    )
                else:
                    check.add((half, path), exc.message, offset=exc.offset)
        if ok:
            templates[half] = template
    if len(templates) == 2 and len(templates["control"].options) != len(
        templates["treatment"].options
    ):
        check.add(
            ("treatment", "options"),
            f"control has {len(templates['control'].options)} options but treatment has "
            f"{len(templates['treatment'].options)}: both halves must answer on the same scale",
        )

    values = _build_values(data.get("values", {}), variants, check)
    check.fields(data["metric"], _METRIC, ("metric",))
    case = TestCase(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        references=tuple(data.get("references", [])),
        variants=variants,
        scale_kind=kind,
        scale_options=tuple(options) if isinstance(scale.get("options"), list) else None,
        values=values,
        control=templates.get("control", Template("", "", ())),
        treatment=templates.get("treatment", Template("", "", ())),
        metric=dict(data["metric"]),
        examples=_build_examples(data.get("examples", {}), check),
    )
    if len(templates) == 2:
        _check_references(case, check)
        _check_examples(case, check)
    return case


def _build_examples(table: dict[str, Any], check: _Checker) -> dict[str, tuple[str, ...]]:
    """`[examples]`: instruction -> list of at least MIN_EXAMPLES non-empty strings."""
    from cogbias.library.examples import MAX_EXAMPLE_CHARS, MIN_EXAMPLES

    out: dict[str, tuple[str, ...]] = {}
    for key, fills in table.items():
        path = ("examples", key)
        if not isinstance(fills, list):
            check.add(path, f"examples for '{_clip(key)}' should be a list of strings")
            continue
        if len(fills) < MIN_EXAMPLES:
            check.add(
                path,
                f"gap '{_clip(key)}' has {len(fills)} example fill(s); write at least "
                f"{MIN_EXAMPLES}",
            )
        for i, text in enumerate(fills):
            if not isinstance(text, str) or not text.strip():
                check.add(
                    path,
                    f"example {i + 1} of '{_clip(key)}' should be a non-empty string",
                    index=i,
                )
            elif len(text) > MAX_EXAMPLE_CHARS:
                check.add(
                    path,
                    f"example {i + 1} of '{_clip(key)}' is longer than {MAX_EXAMPLE_CHARS} characters",
                    index=i,
                )
            elif "[[" in text or "]]" in text or "a/an" in text:
                check.add(
                    path,
                    f"example {i + 1} of '{_clip(key)}' contains '[[', ']]' or 'a/an': write the finished text",
                    index=i,
                )
        out[key] = tuple(str(t) for t in fills)
    return out


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _build_values(
    table: dict[str, Any], variants: tuple[str, ...], check: _Checker
) -> dict[str, ValueSpec]:
    specs: dict[str, ValueSpec] = {}
    known = {"variant"}
    for name, spec in table.items():
        path = ("values", name)
        if not NAME_RE.fullmatch(name):
            check.add(
                (*path, "type"), f"value name '{name}' must be lower-case letters, digits, '_'"
            )
        if name == "variant":
            check.add((*path, "type"), "'variant' is reserved for the sampled variant name")
        if not isinstance(spec, dict):
            check.add(path, f"value '{name}' should be a table like [values.{name}] with a 'type'")
            continue
        vtype = spec.get("type")
        if not isinstance(vtype, str) or vtype not in VALUE_TYPES:
            hint = difflib.get_close_matches(str(vtype), list(VALUE_TYPES), n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            check.add(
                (*path, "type"),
                f"unknown generator type '{vtype}' for value '{name}'{extra}; "
                f"use one of {', '.join(VALUE_TYPES)}",
            )
            continue
        schema = {"type": (str, True), "description": (str, False), **VALUE_TYPES[vtype]}
        if not check.fields(spec, schema, path):
            continue
        params = {k: v for k, v in spec.items() if k != "type"}
        _check_value_params(name, vtype, params, path, known, check)
        specs[name] = ValueSpec(name, vtype, params)
        known.add(name)
    return specs


def _check_value_params(
    name: str,
    vtype: str,
    p: dict[str, Any],
    path: tuple[str, ...],
    known: set[str],
    check: _Checker,
) -> None:
    if vtype == "float":
        for key in ("min", "max"):
            if not math.isfinite(p[key]):
                check.add((*path, key), f"value '{name}': {key} must be a finite number")
                return
        if not 0 <= p.get("decimals", 0) <= 15:
            check.add((*path, "decimals"), f"value '{name}': decimals must be between 0 and 15")
    if vtype in ("int", "float") and p["min"] > p["max"]:
        check.add(
            (*path, "min"), f"value '{name}': min ({p['min']}) is greater than max ({p['max']})"
        )
    if vtype == "int" and p.get("step", 1) < 1:
        check.add((*path, "step"), f"value '{name}': step must be at least 1")
    if vtype in ("choice", "sample") and not p["options"]:
        check.add((*path, "options"), f"value '{name}': options must not be empty")
    if vtype == "choice" and "weights" in p:
        _check_weights(name, p["weights"], len(p["options"]), (*path, "weights"), check)
    if vtype == "sample" and not 1 <= p["k"] <= len(p["options"]):
        check.add((*path, "k"), f"value '{name}': k must be between 1 and {len(p['options'])}")
    if vtype == "derived":
        _check_expression(p["expr"], (*path, "expr"), known, check, f"value '{name}'")


def _check_weights(
    name: str, weights: list[Any], n_options: int, path: tuple[str, ...], check: _Checker
) -> None:
    if len(weights) != n_options:
        check.add(path, f"value '{name}': {len(weights)} weights for {n_options} options")
        return
    for i, weight in enumerate(weights):
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            check.add(path, f"value '{name}': weight {i + 1} should be a number, not {weight!r}")
            return
        if not (math.isfinite(weight) and weight >= 0):
            check.add(path, f"value '{name}': weight {i + 1} must be a finite number >= 0")
            return
    if sum(weights) <= 0:
        check.add(path, f"value '{name}': at least one weight must be greater than 0")


def _check_expression(
    expr: str, path: tuple[str, ...], known: set[str], check: _Checker, what: str
) -> bool:
    try:
        names = expressions.referenced_names(expr)
    except expressions.ExpressionError as exc:
        check.add(path, f"{what}: {exc.message}", offset=exc.offset)
        return False
    unknown = sorted(names - known)
    for missing in unknown:
        check.add(
            path,
            f"{what} uses '{missing}', which is not a value defined before it "
            f"(known: {', '.join(sorted(known)) or 'none'})",
            offset=max(expr.find(missing), 0),
        )
    return not unknown


def _check_references(case: TestCase, check: _Checker) -> None:
    named: dict[str, str] = {}
    for half, template in case.templates().items():
        for path, _ in template.fields():
            for gap in template.segments(path):
                if isinstance(gap, LLMGap) and gap.name is not None:
                    if gap.name in case.values or gap.name == "variant":
                        check.add(
                            (half, path),
                            f"gap name '{gap.name}' is already a value name",
                            offset=gap.start,
                        )
                    elif named.setdefault(gap.name, gap.instruction) != gap.instruction:
                        check.add(
                            (half, path),
                            f"gap name '{gap.name}' is used for two different instructions",
                            offset=gap.start,
                        )
    known = set(case.values) | {"variant"} | set(named)
    deps: dict[str, set[str]] = {}
    for half, template in case.templates().items():
        for path, _ in template.fields():
            src, index = _field_source(case, half, template, path)
            for seg in template.segments(path):
                if isinstance(seg, str):
                    continue
                refs = [(seg.name, seg.start)] if not isinstance(seg, LLMGap) else []
                if isinstance(seg, LLMGap):
                    refs = [(r.name, seg.start + 2 + r.start) for r in seg.refs]
                    if seg.name:
                        deps[seg.name] = {r.name for r in seg.refs}
                for name, offset in refs:
                    if name not in known:
                        what = "gap instruction" if isinstance(seg, LLMGap) else "value gap"
                        check.add(
                            src,
                            f"{what} refers to '{{{{{name}}}}}', but no value or named gap "
                            f"'{name}' exists (values: {', '.join(sorted(case.values)) or 'none'}; "
                            f"named gaps: {', '.join(sorted(named)) or 'none'})",
                            index=index,
                            offset=offset,
                        )
    for name in deps:
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            for nxt in deps.get(current, ()):
                if nxt == name:
                    check.add(
                        ("control", "situation"), f"named gap '{name}' refers to itself (cycle)"
                    )
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    metric_known = set(case.values) | {"variant"}
    for key in ("k", "y1", "y2"):
        raw = case.metric.get(key)
        if isinstance(raw, str):
            _check_expression(
                raw, ("metric", key), metric_known, check, f"metric parameter '{key}'"
            )
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            problem = metrics.param_problem(key, raw, case.n_options)
            if problem:
                check.add(("metric", key), problem)


def _check_examples(case: TestCase, check: _Checker) -> None:
    """Every `[examples]` key names a gap; fills refer only to known names; sets line up.

    Which keys a case needs depends on sampled values, so coverage is checked in `_dry_run`.
    """
    from cogbias.library.examples import COMMON_GAPS

    if not case.examples:
        return
    named = case.named_gaps()
    gaps = [g for t in (case.control, case.treatment) for g in t.llm_gaps()]
    patterns = []
    for gap in gaps:
        parts = re.split(r"(\{\{\s*[a-z][a-z0-9_]*\s*\}\})", gap.instruction)
        regex = "".join(
            (re.escape(p) if p.strip("{} ") in named else ".+?")
            if p.startswith("{{")
            else re.escape(p)
            for p in parts
        )
        patterns.append(re.compile(regex, re.DOTALL))
    known = set(case.values) | {"variant"} | set(named)
    sizes = {len(v) for v in case.examples.values()}
    for key, fills in case.examples.items():
        path = ("examples", key)
        if key in COMMON_GAPS:
            check.add(path, f"'{key}' is filled from the scenario; it needs no examples")
        elif not any(p.fullmatch(key) for p in patterns):
            hint = difflib.get_close_matches(key, [g.instruction for g in gaps], n=1, cutoff=0.5)
            extra = f"; did you mean '{_clip(hint[0])}'?" if hint else ""
            check.add(path, f"no gap has the instruction '{_clip(key)}'{extra}")
        if len(sizes) > 1:
            check.add(
                path,
                f"'{_clip(key)}' has {len(fills)} examples but other gaps have "
                f"{', '.join(str(n) for n in sorted(sizes - {len(fills)}))}: every gap needs "
                "the same number (the k-th examples of all gaps are used together)",
            )
        for i, text in enumerate(fills):
            for name in re.findall(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}", text):
                if name not in known:
                    check.add(
                        path,
                        f"example {i + 1} of '{_clip(key)}' refers to '{{{{{name}}}}}', which "
                        "is not a value or named gap of this test case",
                        index=i,
                    )


def _field_source(
    case: TestCase, half: str, template: Template, path: str
) -> tuple[tuple[str, ...], int | None]:
    """Where a template field is written in the file (options may come from [scale])."""
    if not path.startswith("options["):
        return (half, path), None
    index = int(path[8:-1])
    if case.scale_options is not None and template.options == case.scale_options:
        return ("scale", "options"), index
    return (half, "options"), index


PROOF_LIMIT = 5_000  # combinations: up to this many, the check walks them all (a proof)
SAMPLES = 1_000  # otherwise this many draws: edges, every small domain's values, random


def _dry_run(case: TestCase, check: _Checker) -> None:
    """Evaluate derived values and metric parameters over the values they can take.

    Only the values an expression reads matter. When their domain (int ranges, choices,
    samples, variants) has at most PROOF_LIMIT combinations, every combination is tried, so a
    file that passes cannot fail at run time; otherwise SAMPLES draws cover the edges, each
    value of every small domain, and random points. Each failing value is reported once.
    """
    reported: set[str] = set()
    rng = random.Random(0)
    for fixed in _assignments(case):
        try:
            values = case.sample_values(rng, fixed)
            case.metric_params(values)
        except SamplingError as exc:
            if exc.name in reported:
                continue
            reported.add(exc.name)
            drawn = ", ".join(f"{k} = {_short(v)}" for k, v in exc.values.items())
            if exc.name.startswith("metric."):
                key = exc.name.removeprefix("metric.")
                path: tuple[str, ...] = ("metric", key)
                what = f"metric parameter '{key}'"
            else:
                path, what = ("values", exc.name, "expr"), f"value '{exc.name}'"
            check.add(path, f"{what} fails for {drawn}: {exc.message}", offset=exc.offset)
            continue
        missing = _missing_examples(case, values)
        if missing and "examples" not in reported:
            reported.add("examples")
            half, field_path, gap, key = missing
            src, index = _field_source(case, half, case.templates()[half], field_path)
            check.add(
                src,
                f"no example fills for the gap '{_clip(key)}' (values {values}); "
                "add them under [examples]",
                index=index,
                offset=gap.start,
            )


def _assignments(case: TestCase) -> Iterable[dict[str, Any]]:
    """The values to fix for each checked instance (see `_dry_run`)."""
    read: set[str] = set()
    for spec in case.values.values():
        if spec.type == "derived":
            read |= _names(spec.params["expr"])
    for key in ("k", "y1", "y2"):
        if isinstance(case.metric.get(key), str):
            read |= _names(case.metric[key])
    domains: dict[str, Any] = {}
    if "variant" in read:
        domains["variant"] = list(case.variants) or ["default"]
    endless: dict[str, ValueSpec] = {}
    for spec in case.values.values():
        if spec.name in read and spec.type != "derived":
            domain = _domain(spec)
            if domain is None:
                endless[spec.name] = spec
            else:
                domains[spec.name] = domain
    sizes = [len(d) for d in domains.values()]
    if not endless and math.prod(sizes) <= PROOF_LIMIT:
        names = list(domains)
        for combo in itertools.product(*domains.values()):
            yield dict(zip(names, combo, strict=True))
        return
    rng = random.Random(0)
    offsets = {name: rng.randrange(len(d)) if len(d) else 0 for name, d in domains.items()}
    for i in range(SAMPLES):
        fixed: dict[str, Any] = {}
        for name, domain in domains.items():
            if not domain:
                continue
            if i < 2:  # all lowest, then all highest
                fixed[name] = domain[0 if i == 0 else -1]
            elif i % 2 == 0:  # walk each domain, shifted so domains do not move in lockstep
                fixed[name] = domain[(i // 2 + offsets[name]) % len(domain)]
        for name, spec in endless.items():
            if i < 2 and spec.type in ("int", "float"):
                fixed[name] = spec.params["min" if i == 0 else "max"]
        yield fixed


def _names(expr: Any) -> set[str]:
    try:
        return expressions.referenced_names(expr)
    except expressions.ExpressionError:
        return set()


def _domain(spec: ValueSpec) -> Any:
    """Every value a generator can draw, when that is a finite, indexable sequence."""
    p = spec.params
    if spec.type == "int":
        if (p["max"] - p["min"]) // p.get("step", 1) > 10**6:
            return None
        return range(p["min"], p["max"] + 1, p.get("step", 1))
    if spec.type == "choice":
        weights = p.get("weights") or [1] * len(p["options"])
        return [o for o, w in zip(p["options"], weights, strict=True) if w > 0]
    if spec.type == "sample":
        count = 1
        for i in range(p["k"]):  # the number of ordered draws, stopping once it is too many
            count *= len(p["options"]) - i
            if count > PROOF_LIMIT:
                return None
        return [list(drawn) for drawn in itertools.permutations(p["options"], p["k"])]
    return None


def _missing_examples(
    case: TestCase, values: Mapping[str, Any]
) -> tuple[str, str, LLMGap, str] | None:
    """(half, field, gap, lookup key) of the first gap without examples, when the case has any."""
    from cogbias.library.examples import COMMON_GAPS, example_key

    if not case.examples:
        return None
    named = set(case.named_gaps())
    for half, template in case.templates().items():
        for path, _ in template.fields():
            for gap in template.segments(path):
                if not isinstance(gap, LLMGap) or gap.instruction in COMMON_GAPS:
                    continue
                key = example_key(gap, values, named)
                if key not in case.examples:
                    return half, path, gap, key
    return None


def load_test_case(path: str | Path) -> TestCase:
    """Read and validate one file; errors carry the file's path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LibraryError(
            [Problem(str(path), 1, 1, f"file is not UTF-8 text: {exc.reason}")]
        ) from None
    except OSError as exc:
        raise LibraryError(
            [Problem(str(path), 1, 1, f"cannot read file: {exc.strerror}")]
        ) from None
    case = parse_test_case(text, str(path))
    return _with_path(case, path)


def _with_path(case: TestCase, path: Path) -> TestCase:
    object.__setattr__(case, "path", path)
    return case


# --------------------------------------------------------------------------- saving


def to_toml(case: TestCase) -> str:
    """Serialise in the canonical layout (the built-in files are stored in it)."""
    doc = tomlkit.document()
    doc["id"] = case.id
    doc["name"] = case.name
    doc["description"] = _text(case.description)
    doc["references"] = _list(case.references)
    if case.variants:
        doc["variants"] = list(case.variants)
    scale = tomlkit.table()
    scale["kind"] = case.scale_kind
    if case.scale_options is not None:
        scale["options"] = _list(case.scale_options)
    doc["scale"] = scale
    if case.values:
        values = tomlkit.table(is_super_table=True)
        for spec in case.values.values():
            table = tomlkit.table()
            table["type"] = spec.type
            for key, value in spec.params.items():
                table[key] = _list(value) if isinstance(value, list) and len(value) > 4 else value
            values[spec.name] = table
        doc["values"] = values
    for half, template in case.templates().items():
        table = tomlkit.table()
        table["situation"] = _text(template.situation)
        table["prompt"] = _text(template.prompt)
        if case.scale_options is None or template.options != case.scale_options:
            if not (case.scale_kind == "percent11" and template.options == PERCENT_OPTIONS):
                table["options"] = _list(template.options)
        doc[half] = table
    metric = tomlkit.table()
    for key, value in case.metric.items():
        metric[key] = value
    doc["metric"] = metric
    if case.examples:
        examples = tomlkit.table()
        for key, fills in case.examples.items():
            examples[key] = _list(fills)
        doc["examples"] = examples
    return tomlkit.dumps(doc)


def _text(value: str) -> Any:
    if "\n" in value or len(value) > 90:
        return tomlkit.string(value, multiline=True)
    return value


def _list(items: Iterable[Any]) -> Any:
    array = tomlkit.array()
    for item in items:
        array.append(item)
    array.multiline(True)
    return array


class AlreadyExistsError(FileExistsError):
    """Saving would replace an existing file; the caller must ask and pass overwrite=True."""


def save_test_case(case: TestCase, path: str | Path | None = None, overwrite: bool = False) -> Path:
    """Write atomically to the user library (never over a built-in file).

    An existing file is only replaced with `overwrite=True`: the app asks first and the CLI
    needs `--force`, so a user's work is never replaced without a word.
    """
    target = Path(path) if path is not None else user_dir() / f"{case.id}.toml"
    if target.resolve().parent == BUILTIN_DIR.resolve() and target.exists():
        raise PermissionError(
            f"{target} is a built-in test case; save a copy under a new id in {user_dir()}"
        )
    if target.exists() and not overwrite:
        raise AlreadyExistsError(
            f"you already have a test case '{case.id}' ({target}); replacing it needs "
            "confirmation (overwrite=True, or --force on the command line)"
        )
    text = to_toml(case)
    parse_test_case(text, str(target))  # never write a file that would not load back
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, target)
    return target


# --------------------------------------------------------------------------- the library


@dataclass(frozen=True)
class LibraryReport:
    """What loading the library found: the valid test cases and, apart, every problem.

    One bad file never hides the others: it is left out of `cases` and its problems (with
    file, line and column) are listed, so every page and command can still work and say
    what to fix.
    """

    cases: dict[str, TestCase]
    problems: list[Problem]

    def broken_files(self) -> list[str]:
        return sorted({p.file for p in self.problems})


def load_library_report(include_user: bool = True) -> LibraryReport:
    """Built-ins first, then the user's (which cannot shadow a built-in); see LibraryReport."""
    cases: dict[str, TestCase] = {}
    problems: list[Problem] = []
    dirs = [BUILTIN_DIR] + ([user_dir()] if include_user else [])
    for directory in dirs:
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                case = load_test_case(path)
            except LibraryError as exc:
                problems.extend(exc.problems)
                continue
            if case.id in cases:
                line, col = SourceMap(_read_quietly(path)).locate(("id",))
                problems.append(
                    Problem(
                        str(path),
                        line,
                        col,
                        f"id '{case.id}' is already used by {cases[case.id].path}; this file "
                        "is ignored (give it another id)",
                    )
                )
                continue
            cases[case.id] = case
    return LibraryReport(cases, problems)


def _read_quietly(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return ""


def load_library(include_user: bool = True) -> dict[str, TestCase]:
    """All valid test cases by id (files with problems are left out: see
    `load_library_report` for what they are)."""
    return load_library_report(include_user).cases


def get_test_case(case_id: str) -> TestCase:
    report = load_library_report()
    cases = report.cases
    if case_id not in cases:
        broken = [p for p in report.problems if Path(p.file).stem == case_id]
        if broken:
            raise KeyError(
                f"test case '{case_id}' cannot be used until its file is fixed: "
                + "; ".join(str(p) for p in broken[:3])
            )
        hint = difflib.get_close_matches(case_id, list(cases), n=3)
        extra = f"; did you mean {', '.join(hint)}?" if hint else "; see `cogbias library list`"
        raise KeyError(f"no test case with id '{case_id}'{extra}")
    return cases[case_id]


@dataclass(frozen=True)
class Scenario:
    id: int
    industry_group: str
    position: str
    decision: str

    @property
    def text(self) -> str:
        """The scenario sentence given to the generator LLM."""
        article = "An" if self.position[:1].lower() in "aeiou" else "A"
        return (
            f"{article} {self.position} at a company from the {self.industry_group} industry group "
            f"deciding {self.decision}."
        )


def load_scenarios(path: Path | None = None) -> list[Scenario]:
    path = path or DATA_DIR / "scenarios.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Scenario(int(r["id"]), r["industry_group"], r["position"], r["decision"])
            for r in csv.DictReader(handle)
        ]


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str
    developer: str = ""
    params_b: float | None = None
    arena_score: float | None = None
    json_schema: bool = False
    max_temperature: float = 1.0
    api_base: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def load_models(path: Path | None = None) -> list[ModelInfo]:
    """The model registry (data/models.toml) plus the user's own (COGBIAS_HOME/models.toml)."""
    paths = [path] if path else [DATA_DIR / "models.toml", user_dir().parent / "models.toml"]
    models: dict[str, ModelInfo] = {}
    known = set(ModelInfo.__dataclass_fields__) - {"extra"}
    for p in paths:
        if not p.is_file():
            continue
        for entry in tomllib.loads(p.read_text(encoding="utf-8")).get("models", []):
            fields = {k: v for k, v in entry.items() if k in known}
            extra = {k: v for k, v in entry.items() if k not in known}
            models[entry["id"]] = ModelInfo(**fields, extra=extra)
    return list(models.values())
