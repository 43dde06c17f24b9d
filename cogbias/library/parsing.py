"""Reading a test case file: parse, validate field by field, then check it as a whole.

Every problem is reported as `file:line:col: message` so authors can jump straight to it, and
validation collects all the problems of a file rather than stopping at the first.
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from pathlib import Path
from typing import Any

from cogbias.core.limits import MAX_PROMPT_CHARS, name_problem
from cogbias.core.templates import NAME_RE, Template, TemplateSyntaxError
from cogbias.library.cases import (
    PERCENT_OPTIONS,
    SCALES,
    VALUE_TYPES,
    Departure,
    TestCase,
    ValueSpec,
)
from cogbias.library.checks import (
    check_examples,
    check_expression,
    check_references,
    dry_run,
    example_coverage,
)
from cogbias.library.example_fills import MAX_EXAMPLE_CHARS, MIN_EXAMPLES
from cogbias.library.problems import Checker, LibraryError, Problem, clip, read_toml

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
    "departures": (list, False),
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


def parse_test_case(text: str, file: str = "<string>", *, proven: bool = False) -> TestCase:
    """Parse and fully validate a test case; raises LibraryError listing every problem.

    `proven` skips the dry run (`checks.dry_run`), for the built-in files only: they ship
    with the code and the test suite proves each one (`cogbias library check`), while their
    dry runs took 0.3–0.4 s of every app start's first page."""
    text, data = read_toml(text, file)
    check = Checker(text, file)
    _check_lengths(data, check, ())
    if check.problems or not check.fields(data, _TOP, ()):
        raise LibraryError(check.problems)
    case = _build(data, check)
    if check.problems:  # the gaps without example fills are listed with the other problems
        example_coverage(case, check)
        raise LibraryError(check.problems)
    if not proven:
        dry_run(case, check)
    if check.problems:
        raise LibraryError(check.problems)
    return case


def _check_lengths(value: Any, check: Checker, path: tuple[str, ...]) -> None:
    """Every text of a test case is at most one imported prompt long: pages draw a
    description or template in full, and a 1 MB one stalled the browser for minutes."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_lengths(item, check, (*path, str(key)))
    elif isinstance(value, list):
        for item in value:
            _check_lengths(item, check, path)
    elif isinstance(value, str) and len(value) > MAX_PROMPT_CHARS:
        where = ".".join(path) or "a text"
        check.add(
            path,
            f"'{where}' has {len(value):,} characters; at most {MAX_PROMPT_CHARS:,} are allowed",
        )


def _build(data: dict[str, Any], check: Checker) -> TestCase:
    if not _ID_RE.fullmatch(data["id"]):
        check.add(("id",), f"id '{data['id']}' must be snake_case: lower-case letters, digits, '_'")
    if problem := name_problem(data["name"]):  # a label on every page, chart and report
        check.add(("name",), f"name {problem}")
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
        template = _build_template(half, table, options, kind, size, check)
        if template is not None:
            templates[half] = template
    if len(templates) == 2 and len(templates["control"].options) != len(
        templates["treatment"].options
    ):
        check.add(
            ("treatment", "options"),
            f"control has {len(templates['control'].options)} options but treatment has "
            f"{len(templates['treatment'].options)}: both halves must answer on the same scale",
        )

    values = build_values(data.get("values", {}), variants, check)
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
        departures=_build_departures(data.get("departures", []), check),
    )
    if len(templates) == 2:
        check_references(case, check)
        check_examples(case, check)
    return case


def _build_template(
    half: str,
    table: dict[str, Any],
    options: list[Any] | None,
    kind: Any,
    size: int | None,
    check: Checker,
) -> Template | None:
    """One half's template over its own options or the scale's; None when its text has
    template syntax errors (each reported where it is)."""
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
                check.add(src, f"{half} option {i + 1}: {exc.message}", index=i, offset=exc.offset)
            else:
                check.add((half, path), exc.message, offset=exc.offset)
    return template if ok else None


def _build_departures(items: list[Any], check: Checker) -> tuple[Departure, ...]:
    """`[[departures]]`: each a table with a non-empty `what` and `why`, nothing else."""
    out: list[Departure] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            check.add(("departures", str(i)), f"departures[{i}] should be a table: what, why")
            continue
        texts = {key: item.get(key) for key in ("what", "why")}
        for key, text in texts.items():
            if not isinstance(text, str) or not text.strip():
                check.add(("departures", str(i), key), f"departures[{i}] needs a non-empty '{key}'")
        extra = sorted(set(item) - {"what", "why"})
        if extra:
            check.add(
                ("departures", str(i), extra[0]),
                f"departures[{i}] has an unknown field '{extra[0]}' (only what and why)",
            )
        if all(isinstance(text, str) and text.strip() for text in texts.values()):
            out.append(Departure(what=item["what"], why=item["why"]))
    return tuple(out)


def _build_examples(table: dict[str, Any], check: Checker) -> dict[str, tuple[str, ...]]:
    """`[examples]`: instruction -> list of at least MIN_EXAMPLES non-empty strings."""
    out: dict[str, tuple[str, ...]] = {}
    for key, fills in table.items():
        path = ("examples", key)
        if not isinstance(fills, list):
            check.add(path, f"examples for '{clip(key)}' should be a list of strings")
            continue
        if len(fills) < MIN_EXAMPLES:
            check.add(
                path,
                f"gap '{clip(key)}' has {len(fills)} example fill(s); write at least "
                f"{MIN_EXAMPLES}",
            )
        for i, text in enumerate(fills):
            if not isinstance(text, str) or not text.strip():
                check.add(
                    path,
                    f"example {i + 1} of '{clip(key)}' should be a non-empty string",
                    index=i,
                )
            elif len(text) > MAX_EXAMPLE_CHARS:
                check.add(
                    path,
                    f"example {i + 1} of '{clip(key)}' is longer than {MAX_EXAMPLE_CHARS} characters",
                    index=i,
                )
            elif "[[" in text or "]]" in text or "a/an" in text:
                check.add(
                    path,
                    f"example {i + 1} of '{clip(key)}' contains '[[', ']]' or 'a/an': write the finished text",
                    index=i,
                )
        out[key] = tuple(str(t) for t in fills)
    return out


def build_values(
    table: dict[str, Any], variants: tuple[str, ...], check: Checker
) -> dict[str, ValueSpec]:
    specs: dict[str, ValueSpec] = {}
    known = {"variant"} if variants else set()
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
    check: Checker,
) -> None:
    if vtype == "float":
        for key in ("min", "max"):
            if not math.isfinite(_as_float(p[key])):
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
        check_expression(p["expr"], (*path, "expr"), known, check, f"value '{name}'")


def _check_weights(
    name: str, weights: list[Any], n_options: int, path: tuple[str, ...], check: Checker
) -> None:
    if len(weights) != n_options:
        check.add(path, f"value '{name}': {len(weights)} weights for {n_options} options")
        return
    for i, weight in enumerate(weights):
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            check.add(path, f"value '{name}': weight {i + 1} should be a number, not {weight!r}")
            return
        if not (math.isfinite(_as_float(weight)) and weight >= 0):
            check.add(path, f"value '{name}': weight {i + 1} must be a finite number >= 0")
            return
    total = _as_float(sum(weights))
    if total <= 0:
        check.add(path, f"value '{name}': at least one weight must be greater than 0")
    elif not math.isfinite(total):  # each finite, [1e308, 1e308] sums to inf: nothing is drawn
        check.add(
            path,
            f"value '{name}': the weights add up to more than a number holds (at "
            f"most {sys.float_info.max:.3g}); scale them down",
        )


def _as_float(number: float) -> float:
    """`number` as a float; an integer past the largest float (TOML's integers have no
    bound here) as inf, so the finiteness checks refuse it instead of raising."""
    try:
        return float(number)
    except OverflowError:
        return math.inf


def load_test_case(path: str | Path, *, proven: bool = False) -> TestCase:
    """Read and validate one file (see `parse_test_case` for `proven`); errors carry the
    file's path."""
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
    case = parse_test_case(text, str(path), proven=proven)
    return _with_path(case, path)


def _with_path(case: TestCase, path: Path) -> TestCase:
    object.__setattr__(case, "path", path)
    return case
