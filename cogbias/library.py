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

from . import expressions
from .metrics import MetricParams
from .sourcemap import SourceMap
from .templates import NAME_RE, LLMGap, Template, TemplateSyntaxError

DATA_DIR = Path(os.environ.get("COGBIAS_DATA", Path(__file__).resolve().parent.parent / "data"))
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

    def sample_values(self, rng: random.Random) -> dict[str, Any]:
        """Draw every value generator once, in file order, after the variant."""
        values: dict[str, Any] = {
            "variant": rng.choice(self.variants) if self.variants else "default"
        }
        for spec in self.values.values():
            values[spec.name] = spec.sample(rng, values)
        return values

    def metric_params(self, values: Mapping[str, Any]) -> MetricParams:
        def num(key: str, default: float) -> float:
            raw = self.metric.get(key, default)
            return float(expressions.evaluate(raw, values) if isinstance(raw, str) else raw)

        return MetricParams(
            k=num("k", 1),
            y1=num("y1", 0),
            y2=num("y2", 0),
            flip_control=bool(self.metric.get("flip_control", False)),
            flip_treatment=bool(self.metric.get("flip_treatment", False)),
        )


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
                hint = difflib.get_close_matches(key, list(schema), n=1)
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


def parse_test_case(text: str, file: str = "<string>") -> TestCase:
    """Parse and fully validate a test case; raises LibraryError listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POS_RE.search(str(exc))
        line, col = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
        message = _TOML_POS_RE.sub("", str(exc)).strip()
        raise LibraryError(
            [Problem(file, line, col, f"this is not valid TOML: {message}")]
        ) from None
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
    variants = tuple(data.get("variants", []))
    if len(set(variants)) != len(variants):
        check.add(("variants",), "variants must have distinct names")

    scale = data["scale"]
    check.fields(scale, _SCALE, ("scale",))
    kind = scale.get("kind", "")
    size = SCALES.get(kind) if isinstance(kind, str) else None
    if isinstance(kind, str) and kind not in SCALES:
        check.add(("scale", "kind"), f"unknown scale kind '{kind}'; use one of {', '.join(SCALES)}")
    options = scale.get("options")
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
        scale_options=tuple(scale["options"]) if "options" in scale else None,
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
    from .examples import MAX_EXAMPLE_CHARS, MIN_EXAMPLES

    out: dict[str, tuple[str, ...]] = {}
    for key, fills in table.items():
        path = ("examples", key)
        if not isinstance(fills, list):
            check.add(path, f"examples for '{_short(key)}' should be a list of strings")
            continue
        if len(fills) < MIN_EXAMPLES:
            check.add(
                path,
                f"gap '{_short(key)}' has {len(fills)} example fill(s); write at least "
                f"{MIN_EXAMPLES}",
            )
        for i, text in enumerate(fills):
            if not isinstance(text, str) or not text.strip():
                check.add(
                    path,
                    f"example {i + 1} of '{_short(key)}' should be a non-empty string",
                    index=i,
                )
            elif len(text) > MAX_EXAMPLE_CHARS:
                check.add(
                    path,
                    f"example {i + 1} of '{_short(key)}' is longer than {MAX_EXAMPLE_CHARS} characters",
                    index=i,
                )
            elif "[[" in text or "]]" in text or "a/an" in text:
                check.add(
                    path,
                    f"example {i + 1} of '{_short(key)}' contains '[[', ']]' or 'a/an': write the finished text",
                    index=i,
                )
        out[key] = tuple(str(t) for t in fills)
    return out


def _short(text: str, width: int = 60) -> str:
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
        if vtype not in VALUE_TYPES:
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
    if vtype in ("int", "float") and p["min"] > p["max"]:
        check.add(
            (*path, "min"), f"value '{name}': min ({p['min']}) is greater than max ({p['max']})"
        )
    if vtype == "int" and p.get("step", 1) < 1:
        check.add((*path, "step"), f"value '{name}': step must be at least 1")
    if vtype in ("choice", "sample") and not p["options"]:
        check.add((*path, "options"), f"value '{name}': options must not be empty")
    if vtype == "choice" and "weights" in p and len(p["weights"]) != len(p["options"]):
        check.add(
            (*path, "weights"),
            f"value '{name}': {len(p['weights'])} weights for {len(p['options'])} options",
        )
    if vtype == "sample" and not 1 <= p["k"] <= len(p["options"]):
        check.add((*path, "k"), f"value '{name}': k must be between 1 and {len(p['options'])}")
    if vtype == "derived":
        _check_expression(p["expr"], (*path, "expr"), known, check, f"value '{name}'")


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


def _check_examples(case: TestCase, check: _Checker) -> None:
    """Every `[examples]` key names a gap; fills refer only to known names; sets line up.

    Which keys a case needs depends on sampled values, so coverage is checked in `_dry_run`.
    """
    from .examples import COMMON_GAPS

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
            extra = f"; did you mean '{_short(hint[0])}'?" if hint else ""
            check.add(path, f"no gap has the instruction '{_short(key)}'{extra}")
        if len(sizes) > 1:
            check.add(
                path,
                f"'{_short(key)}' has {len(fills)} examples but other gaps have "
                f"{', '.join(str(n) for n in sorted(sizes - {len(fills)}))}: every gap needs "
                "the same number (the k-th examples of all gaps are used together)",
            )
        for i, text in enumerate(fills):
            for name in re.findall(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}", text):
                if name not in known:
                    check.add(
                        path,
                        f"example {i + 1} of '{_short(key)}' refers to '{{{{{name}}}}}', which "
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


def _dry_run(case: TestCase, check: _Checker, samples: int = 25) -> None:
    """Sample a few instances so that errors that only show up with values are caught now."""
    rng = random.Random(0)
    n = case.n_options
    for _ in range(samples):
        try:
            values = case.sample_values(rng)
        except expressions.ExpressionError as exc:
            check.add(("values",), f"a derived value fails when sampled: {exc.message}")
            return
        try:
            params = case.metric_params(values)
        except (expressions.ExpressionError, TypeError, ValueError) as exc:
            check.add(("metric",), f"a metric parameter fails with sampled values: {exc}")
            return
        missing = _missing_examples(case, values)
        if missing:
            half, path, gap, key = missing
            src, index = _field_source(case, half, case.templates()[half], path)
            check.add(
                src,
                f"no example fills for the gap '{_short(key)}' (values {values}); "
                "add them under [examples]",
                index=index,
                offset=gap.start,
            )
            return
        if not -1 <= params.k <= 1:
            check.add(("metric", "k"), f"k must lie in [-1, 1] (got {params.k} with {values})")
            return
        for key in ("y1", "y2"):
            y = getattr(params, key)
            if not 0 <= y <= n - 1:
                check.add(
                    ("metric", key),
                    f"{key} = {y} is not an option index between 0 and {n - 1} (0-based) "
                    f"for values {values}",
                )
                return


def _missing_examples(
    case: TestCase, values: Mapping[str, Any]
) -> tuple[str, str, LLMGap, str] | None:
    """(half, field, gap, lookup key) of the first gap without examples, when the case has any."""
    from .examples import COMMON_GAPS, example_key

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


def save_test_case(case: TestCase, path: str | Path | None = None) -> Path:
    """Write atomically to the user library (never over a built-in file)."""
    target = Path(path) if path is not None else user_dir() / f"{case.id}.toml"
    if target.resolve().parent == BUILTIN_DIR.resolve() and target.exists():
        raise PermissionError(
            f"{target} is a built-in test case; save a copy under a new id in {user_dir()}"
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


def load_library(include_user: bool = True) -> dict[str, TestCase]:
    """All test cases by id: built-ins first, then the user's (which cannot shadow a built-in)."""
    cases: dict[str, TestCase] = {}
    dirs = [BUILTIN_DIR] + ([user_dir()] if include_user else [])
    for directory in dirs:
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            case = load_test_case(path)
            if case.id not in cases:
                cases[case.id] = case
    return cases


def get_test_case(case_id: str) -> TestCase:
    cases = load_library()
    if case_id not in cases:
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
