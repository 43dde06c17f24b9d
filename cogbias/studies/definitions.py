"""Study definitions: several bias tests run together under one design, as data.

A *study* (`data/studies/<id>.toml`) bundles tests that share value generators, prompts and
run settings — BiasBuster's admissions tests, the Mohr thesis' eight classic problems. Where a
test case (`library`) is one control/treatment pair scored pair by pair, a study test says
how its answers are read (`answer`), how its prompts are laid out (`design`) and which
aggregate metric turns many answers into a figure (`metric`):

- design `conditions`: each condition's prompt is asked on its own (framing: admit vs reject
  frame; Mohr's control vs treatment groups);
- design `options`: k items drawn from the generators are listed as options a, b, c, …, in
  every order of `answers.permuted_orders`, so each item appears at each position (status quo,
  primacy);
- design `sequence`: `length` items are decided one after another in one conversation, every
  turn seeing the earlier items and answers; the same items are presented in `orders`
  different orders (anchoring).

Validation reports every problem as `file:line:col: message`, like test case files, and
samples each test a few times so that a template referring to a value that does not exist is
caught when the file is loaded, not in the middle of a run. Format: `docs/studies.md`;
presenting tests and reading answers: `study_questions`.
"""

from __future__ import annotations

import difflib
import math
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.library.testcases import (
    DATA_DIR,
    NAME_RE,
    LibraryError,
    Problem,
    ValueSpec,
    _build_values,
    _Checker,
    _clip,
    read_toml,
)

STUDY_DIR = DATA_DIR / "studies"
DESIGNS = ("conditions", "options", "sequence")
ANSWERS = ("admit_reject", "yes_no", "letter", "number")
MITIGATIONS = ("none", "awareness", "contrastive", "counterfactual", "selfhelp")
# metric → (designs it fits, answer formats it reads)
METRICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "framing_difference": (("conditions",), ("admit_reject", "yes_no")),
    "group_attribution_difference": (("conditions",), ("admit_reject", "yes_no")),
    "cohens_d": (("conditions",), ("number", "letter", "yes_no", "admit_reject")),
    "status_quo_share": (("options",), ("letter",)),
    "primacy": (("options",), ("letter",)),
    "anchoring_distance": (("sequence",), ("admit_reject", "yes_no")),
}
# Texts a run fills in itself: the option list, the item of a turn, the prompt to rewrite.
RUN_GAPS = {"options", "item", "prompt"}
# Bounds on what a file may ask for: a study file is untrusted input, and each of these
# multiplies the work or memory of a run (a sequence's orders are built in memory, a prompt
# is sent once per turn). Paper scale fits well inside them.
MAX_STUDY_BYTES = 2_000_000
MAX_REPEATS = 100_000
MAX_ATTEMPTS = 20
MAX_TESTS = 500
MAX_CONDITIONS = 20  # per test (the papers use 1 or 2)
MAX_VARIANTS = 20
MAX_NUMBER = 1e15  # bounds of number answers: beyond any price or estimate, squares stay finite
MAX_LENGTH = 50  # items of one sequential conversation (BiasBuster: 6)
MAX_TEXT_CHARS = 50_000  # one rendered prompt, item or turn
_GAP = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_ID_RE = re.compile(r"[a-z0-9][a-z0-9_]*")

_TOP = {
    "id": (str, True),
    "name": (str, True),
    "description": (str, True),
    "references": (list, False),
    "system": (str, False),
    "temperatures": (list, False),
    "repeats": (int, False),
    "max_attempts": (int, False),
    "mitigations": (list, False),
    "prompts": (dict, False),
    "variants": (dict, False),
    "values": (dict, False),
    "tests": (dict, True),
}
_PROMPTS = {
    "awareness": (str, False),
    "selfhelp": (str, False),
    "revise": (str, False),
    "persona": (str, False),
    "answer_hint": (str, False),
}
_VARIANT = {"description": (str, False), "persona": (bool, False), "scale": ((int, float), False)}
_TEST = {
    "bias": (str, True),
    "name": (str, False),
    "design": (str, True),
    "answer": (str, True),
    "metric": (str, True),
    "letters": (str, False),
    "min": ((int, float), False),
    "max": ((int, float), False),
    "target": (str, False),
    "undirected": (bool, False),
    "scaled": (list, False),
    "item": (str, False),
    "k": (int, False),
    "length": (int, False),
    "orders": (int, False),
    "turn": (str, False),
    "conditions": (dict, True),
    "examples": (dict, False),
}
_CONDITION = {"prompt": (str, True), "status_quo": (int, False), "status_quo_label": (str, False)}
_EXAMPLES = {"contrastive": (str, False), "counterfactual": (str, False)}


@dataclass(frozen=True)
class Condition:
    name: str
    prompt: str
    status_quo: int | None = None  # options design: which drawn item is the status quo
    status_quo_label: str = ""


@dataclass(frozen=True)
class Variant:
    """A prompt scenario: with or without the persona, numbers scaled by a factor."""

    id: str
    persona: bool = True
    scale: float = 1.0
    description: str = ""


@dataclass(frozen=True)
class StudyTest:
    id: str
    bias: str
    name: str
    design: str
    answer: str
    metric: str
    conditions: tuple[Condition, ...]
    letters: str = "abcd"
    min: float | None = None
    max: float | None = None
    target: str | None = None  # the answer coded 1 (Cohen's d on choices)
    undirected: bool = False
    scaled: tuple[str, ...] = ()
    item: str = ""
    k: int = 0
    length: int = 0
    orders: int = 0
    turn: str = ""
    examples: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    id: str
    name: str
    description: str
    references: tuple[str, ...]
    tests: dict[str, StudyTest]
    values: dict[str, ValueSpec]
    variants: dict[str, Variant]
    prompts: dict[str, str]
    system: str = ""
    temperatures: tuple[float, ...] = (0.7,)
    repeats: int = 1
    max_attempts: int = 3
    mitigations: tuple[str, ...] = ("none",)
    path: Path | None = None
    source: str = ""  # the TOML it was parsed from: a run stores it, to resume unchanged

    def sample_values(self, rng: random.Random) -> dict[str, Any]:
        """Draw every value generator once, in file order."""
        values: dict[str, Any] = {}
        for spec in self.values.values():
            values[spec.name] = spec.sample(rng, values)
        return values


# --------------------------------------------------------------------------- rendering


def show(value: Any) -> str:
    """How a value reads in a prompt: 9.70 → "9.7", 55555.5 → "55,555.5", lists joined."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        rounded = round(value, 2)
        if rounded == int(rounded):
            return f"{int(rounded):,}"
        return f"{rounded:,.2f}".rstrip("0")
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value)
    return str(value)


class RenderError(ValueError):
    """A rendered text would be longer than MAX_TEXT_CHARS (a hostile or runaway file)."""


def render(text: str, values: Mapping[str, Any]) -> str:
    """Replace each `{{name}}` with its value; a name without a value raises KeyError.

    Filled values are inserted as they are, never rendered again, so a value holding
    `{{prompt}}` stays text. The result is bounded: RenderError past MAX_TEXT_CHARS.
    """
    size = len(text)

    def fill(match: re.Match[str]) -> str:
        nonlocal size
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        shown = show(values[name])
        size += len(shown) - len(match.group(0))
        if size > MAX_TEXT_CHARS:
            raise RenderError(
                f"the text with its values filled in is longer than {MAX_TEXT_CHARS:,} "
                f"characters (at {{{{{name}}}}})"
            )
        return shown

    return _GAP.sub(fill, text)


def scaled_values(test: StudyTest, values: Mapping[str, Any], variant: Variant) -> dict[str, Any]:
    """The test's `scaled` numbers multiplied by the variant's factor (odd / large numbers)."""
    out = dict(values)
    for name in test.scaled:
        out[name] = values[name] * variant.scale
    return out


# --------------------------------------------------------------------------- parsing


def parse_study(text: str, file: str = "<string>") -> Study:
    """Parse and fully validate a study; raises LibraryError listing every problem."""
    text, data = read_toml(text, file)
    check = _Checker(text, file)
    if not check.fields(data, _TOP, ()):
        raise LibraryError(check.problems)
    study = _build(data, check)
    if not check.problems:
        _dry_run(study, check)
    if check.problems:
        raise LibraryError(check.problems)
    return Study(**{**study.__dict__, "source": text})


def _build(data: dict[str, Any], check: _Checker) -> Study:
    if not _ID_RE.fullmatch(data["id"]):
        check.add(
            ("id",), f"id {_clip(data['id'])!r} must be snake_case: lower-case letters, digits, '_'"
        )
    for key in ("references", "mitigations", "temperatures"):
        for i, item in enumerate(data.get(key, [])):
            kinds = (int, float) if key == "temperatures" else str
            if not isinstance(item, kinds) or isinstance(item, bool):
                check.add(
                    (key,),
                    f"{key} item {i + 1} should be a {'number' if key == 'temperatures' else 'string'}",
                )
    for temperature in data.get("temperatures", []):
        if isinstance(temperature, int | float) and not 0 <= temperature <= 2:
            check.add(("temperatures",), f"temperature {temperature} is outside 0..2")
    for i, name in enumerate(data.get("mitigations", [])):
        if isinstance(name, str) and name not in MITIGATIONS:
            check.add(
                ("mitigations",),
                f"unknown mitigation '{name}'; use {', '.join(MITIGATIONS)}",
                index=i,
            )
    for key, most in (("repeats", MAX_REPEATS), ("max_attempts", MAX_ATTEMPTS)):
        if key in data and not 1 <= data[key] <= most:
            check.add((key,), f"{key} must be between 1 and {most:,}, not {data[key]:,}")
    prompts = data.get("prompts", {})
    if check.fields(prompts, _PROMPTS, ("prompts",)):
        _check_prompt_gaps(prompts, check)
    mitigations = tuple(data.get("mitigations", ["none"]))
    for mitigation in ("awareness", "selfhelp"):
        if mitigation in mitigations and mitigation not in prompts:
            check.add(("mitigations",), f"mitigation '{mitigation}' needs prompts.{mitigation}")
    variants = _variants(data.get("variants", {}), check)
    if any(v.persona for v in variants.values()) and "persona" not in prompts:
        check.add(("variants",), "a variant with persona = true needs prompts.persona")
    values = _build_values(data.get("values", {}), (), check)
    tests = {}
    for test_id, table in data["tests"].items():
        test = _test(test_id, table, check, set(values), mitigations)
        if test is not None:
            tests[test_id] = test
    if not data["tests"]:
        check.add(("tests",), "a study needs at least one test")
    if len(data["tests"]) > MAX_TESTS:
        check.add(("tests",), f"a study has at most {MAX_TESTS} tests, not {len(data['tests']):,}")
    if check.problems:
        return Study(data["id"], "", "", (), tests, values, variants, {})
    return Study(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        references=tuple(data.get("references", [])),
        tests=tests,
        values=values,
        variants=variants,
        prompts=dict(prompts),
        system=data.get("system", ""),
        temperatures=tuple(float(t) for t in data.get("temperatures", [0.7])),
        repeats=data.get("repeats", 1),
        max_attempts=data.get("max_attempts", 3),
        mitigations=mitigations,
    )


def _check_prompt_gaps(prompts: dict[str, Any], check: _Checker) -> None:
    """The self-help prompt has exactly the gap {{prompt}}; the other prompts are used as
    written, so a gap in them would reach the model as literal braces."""
    for key, text in prompts.items():
        allowed = {"prompt"} if key == "selfhelp" else set()
        for match in _GAP.finditer(text):
            if match.group(1) not in allowed:
                what = "only {{prompt}}" if allowed else "no {{gaps}}: it is used as written"
                check.add(
                    ("prompts", key),
                    f"prompts.{key} has '{match.group(0)}'; it takes {what}",
                    offset=match.start(),
                )
    selfhelp = prompts.get("selfhelp")
    if isinstance(selfhelp, str) and "{{prompt}}" not in selfhelp.replace(" ", ""):
        check.add(
            ("prompts", "selfhelp"),
            "the self-help prompt needs {{prompt}} where the prompt to rewrite goes",
        )


def _variants(table: dict[str, Any], check: _Checker) -> dict[str, Variant]:
    variants: dict[str, Variant] = {}
    if len(table) > MAX_VARIANTS:
        check.add(
            ("variants", next(iter(table))),
            f"a study has at most {MAX_VARIANTS} variants, not {len(table)}",
        )
        return variants
    for name, spec in table.items():
        path = ("variants", name)
        if not isinstance(spec, dict):
            check.add(path, f"variant '{name}' should be a table [variants.{name}]")
            continue
        if not _ID_RE.fullmatch(name):
            check.add(path, f"variant name {_clip(name)!r} must be lower-case letters, digits, '_'")
        if not check.fields(spec, _VARIANT, path):
            continue
        scale = float(spec.get("scale", 1.0))
        if not (math.isfinite(scale) and 0 < scale <= 1e12):
            check.add(
                (*path, "scale"), f"variant '{name}': scale must be a positive number up to 1e12"
            )
        variants[name] = Variant(
            name, spec.get("persona", True), scale, spec.get("description", "")
        )
    return variants


def _test(
    test_id: str,
    table: Any,
    check: _Checker,
    value_names: set[str],
    mitigations: tuple[str, ...],
) -> StudyTest | None:
    path = ("tests", test_id)
    if not isinstance(table, dict):
        check.add(path, f"test '{test_id}' should be a table [tests.{test_id}]")
        return None
    if not check.fields(table, _TEST, path):
        return None
    problems = len(check.problems)
    if not _ID_RE.fullmatch(test_id):
        check.add(path, f"test id {_clip(test_id)!r} must be lower-case letters, digits, '_'")
    for key, allowed in (("design", DESIGNS), ("answer", ANSWERS), ("metric", tuple(METRICS))):
        if table[key] not in allowed:
            hint = difflib.get_close_matches(table[key], list(allowed), n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            check.add(
                (*path, key),
                f"unknown {key} {_clip(table[key])!r}{extra}; use {', '.join(allowed)}",
            )
    if len(check.problems) > problems:
        return None
    design, answer, metric = table["design"], table["answer"], table["metric"]
    designs, answers = METRICS[metric]
    if design not in designs:
        check.add(
            (*path, "metric"),
            f"metric '{metric}' needs design {' or '.join(designs)}, not '{design}'",
        )
    if answer not in answers:
        check.add(
            (*path, "answer"),
            f"metric '{metric}' reads {', '.join(answers)} answers, not '{answer}'",
        )
    letters = table.get("letters", "abcd")
    if answer == "letter" and (
        len(set(letters)) != len(letters) or not re.fullmatch("[a-z]{2,26}", letters)
    ):
        check.add(
            (*path, "letters"),
            f"letters {_clip(letters)!r} must be 2 or more distinct letters a-z",
        )
    for key in ("min", "max"):
        if key in table and not abs(table[key]) <= MAX_NUMBER:
            check.add((*path, key), f"{key} must be a number between -1e15 and 1e15")
            return None
    if "min" in table and "max" in table and table["min"] > table["max"]:
        check.add((*path, "min"), f"min ({table['min']}) is greater than max ({table['max']})")
    target = table.get("target")
    if metric == "cohens_d" and answer != "number":
        choices = {
            "letter": list(letters),
            "yes_no": ["yes", "no"],
            "admit_reject": ["admit", "reject"],
        }[answer]
        if target not in choices:
            check.add(
                (*path, "target" if target else "metric"),
                f"Cohen's d on {answer} answers needs target = one of {', '.join(choices)} (the answer coded 1)",
            )
    conditions = _conditions(table["conditions"], (*path, "conditions"), check)
    pairwise = ("framing_difference", "group_attribution_difference", "cohens_d")
    if metric in pairwise and len(conditions) != 2:
        check.add(
            (*path, "conditions"),
            f"metric '{metric}' compares exactly 2 conditions, found {len(conditions)}",
        )
    elif not table["conditions"]:
        check.add((*path, "conditions"), "a test needs at least one condition")
    k = table.get("k", 0)
    if design == "options":
        if "item" not in table:
            check.add(
                path, f"test '{test_id}' with design 'options' needs 'item' (one option's text)"
            )
        if not 2 <= k <= len(letters):
            check.add(
                (*path, "k"),
                f"k = {k}: an options test shows between 2 and {len(letters)} items (one per letter)",
            )
        for c in conditions:
            if c.status_quo is not None and not 0 <= c.status_quo < max(k, 1):
                check.add(
                    (*path, "conditions", c.name, "status_quo"),
                    f"status_quo = {c.status_quo} is not an item between 0 and {k - 1}",
                )
        if metric == "status_quo_share" and not any(c.status_quo is not None for c in conditions):
            check.add(
                (*path, "conditions"), "status_quo_share needs a condition with status_quo = <item>"
            )
    if design == "sequence":
        for key in ("item", "turn"):
            if key not in table:
                check.add(path, f"test '{test_id}' with design 'sequence' needs '{key}'")
        length = table.get("length", 0)
        if not 2 <= length <= MAX_LENGTH:
            check.add(
                (*path, "length"), f"a sequence has between 2 and {MAX_LENGTH} items, not {length}"
            )
        if not 2 <= table.get("orders", 0) <= 2 * max(length, 2):
            check.add(
                (*path, "orders"),
                f"a sequence needs between 2 and {2 * max(length, 2)} presentation orders (its "
                f"rotations, then the reversed ones), not {table.get('orders', 0)}",
            )
    examples = table.get("examples", {})
    check.fields(examples, _EXAMPLES, (*path, "examples"))
    for mitigation in ("contrastive", "counterfactual"):
        if mitigation in mitigations and mitigation not in examples:
            check.add(
                (*path, "examples"),
                f"the study offers '{mitigation}' but test '{test_id}' has no examples.{mitigation}",
            )
    scaled = table.get("scaled", [])
    for i, name in enumerate(scaled):
        if name not in value_names:
            check.add(
                (*path, "scaled"), f"scaled value '{name}' is not defined under [values]", index=i
            )
    _check_gaps(table, path, check, value_names)
    return StudyTest(
        id=test_id,
        bias=table["bias"],
        name=table.get("name", test_id.replace("_", " ").capitalize()),
        design=design,
        answer=answer,
        metric=metric,
        conditions=tuple(conditions),
        letters=letters,
        min=table.get("min"),
        max=table.get("max"),
        target=target,
        undirected=table.get("undirected", False),
        scaled=tuple(scaled),
        item=table.get("item", ""),
        k=k,
        length=table.get("length", 0),
        orders=table.get("orders", 0),
        turn=table.get("turn", ""),
        examples=dict(examples),
    )


def _conditions(table: Any, path: tuple[str, ...], check: _Checker) -> list[Condition]:
    out: list[Condition] = []
    if len(table) > MAX_CONDITIONS:
        check.add(path, f"a test has at most {MAX_CONDITIONS} conditions, not {len(table)}")
        return out
    for name, spec in table.items():
        if not isinstance(spec, dict):
            check.add((*path, name), f"condition '{name}' should be a table with a prompt")
            continue
        if not _ID_RE.fullmatch(name):
            check.add(
                (*path, name),
                f"condition name {_clip(name)!r} must be lower-case letters, digits, '_'",
            )
        if check.fields(spec, _CONDITION, (*path, name)):
            out.append(
                Condition(
                    name, spec["prompt"], spec.get("status_quo"), spec.get("status_quo_label", "")
                )
            )
    return out


def _check_gaps(
    table: dict[str, Any], path: tuple[str, ...], check: _Checker, known: set[str]
) -> None:
    """Every `{{name}}` must be a value, or a text the run supplies where it belongs."""
    texts: list[tuple[tuple[str, ...], str, set[str]]] = []
    design = table["design"]
    run_gap = {"options": {"options"}, "sequence": {"item"}}.get(design, set())
    for name, spec in table["conditions"].items():
        if isinstance(spec, dict) and isinstance(spec.get("prompt"), str):
            texts.append(
                (
                    (*path, "conditions", name, "prompt"),
                    spec["prompt"],
                    run_gap if design == "options" else set(),
                )
            )
    if isinstance(table.get("item"), str):
        texts.append(((*path, "item"), table["item"], set()))
    if isinstance(table.get("turn"), str):
        texts.append(((*path, "turn"), table["turn"], {"item"}))
    for field_path, text, extra in texts:
        if "[[" in text:
            check.add(
                field_path,
                "study prompts have no [[generator gaps]]; use {{values}}",
                offset=text.find("[["),
            )
        for match in _GAP.finditer(text):
            name = match.group(1)
            if name not in known | extra:
                hint = difflib.get_close_matches(name, sorted(known | extra), n=1)
                extra_hint = f"; did you mean '{hint[0]}'?" if hint else ""
                check.add(
                    field_path,
                    f"'{{{{{name}}}}}' is not a value of this study{extra_hint}",
                    offset=match.start(),
                )
            elif not NAME_RE.fullmatch(name):
                check.add(field_path, f"'{{{{{name}}}}}' is not a valid name", offset=match.start())
        for required in extra:
            if "{{" + required + "}}" not in text.replace(" ", ""):
                check.add(
                    field_path,
                    f"this text needs the gap {{{{{required}}}}} where the run puts the {required}",
                )


def _dry_run(study: Study, check: _Checker, samples: int = 10) -> None:
    """Sample and render every test so a failing expression or gap, or a text that renders
    too long, shows up at load time with where it is."""
    rng = random.Random(0)
    variants = list(study.variants.values()) or [Variant("default")]
    # one variant per draw, each at least once: the work stays tests × draws, not × variants
    for draw in range(max(samples, len(variants))):
        try:
            values = study.sample_values(rng)
        except Exception as exc:  # noqa: BLE001 - the expression module's errors are ValueErrors
            check.add(("values",), f"a value fails when sampled: {exc}")
            return
        for test in study.tests.values():
            for variant in (variants[draw % len(variants)],):
                try:
                    filled = scaled_values(test, values, variant)
                except (TypeError, ArithmeticError):
                    check.add(
                        ("tests", test.id, "scaled"),
                        "only numbers can be scaled by a variant, to a finite number",
                    )
                    return
                filled |= {gap: "" for gap in RUN_GAPS}
                texts = [(("conditions", c.name, "prompt"), c.prompt) for c in test.conditions]
                texts += [(("item",), test.item), (("turn",), test.turn)]
                for where, text in texts:
                    try:
                        render(text, filled)
                    except (ArithmeticError, ValueError) as exc:  # RenderError, show() overflow
                        check.add(("tests", test.id, *where), str(exc))
                        return


# --------------------------------------------------------------------------- loading


def _read(path: Path) -> str:
    """A study file's text: bounded in size, UTF-8 (a bad byte is located by line:col)."""
    try:
        size = path.stat().st_size
        if size > MAX_STUDY_BYTES:
            raise LibraryError(
                [
                    Problem(
                        str(path), 1, 1, f"the file is {size:,} bytes; a study file "
                        f"may be at most {MAX_STUDY_BYTES:,} bytes",
                    )
                ]
            )  # fmt: skip
        data = path.read_bytes()
    except OSError as exc:
        raise LibraryError([Problem(str(path), 1, 1, f"cannot read the file: {exc}")]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        raise LibraryError(
            [Problem(str(path), line, col, f"byte {data[exc.start]:#04x} is not UTF-8 text; "
                     "save the file as UTF-8")]
        ) from None  # fmt: skip


def load_study(path: str | Path) -> Study:
    path = Path(path)
    study = parse_study(_read(path), str(path))
    if study.id != path.stem:
        line, col = _Checker(study.source, str(path)).source.locate(("id",), None, None)
        raise LibraryError(
            [Problem(str(path), line, col, f"the file name should be {study.id}.toml")]
        )
    return Study(**{**study.__dict__, "path": path})


def study_dirs() -> list[Path]:
    home = Path(os.environ.get("COGBIAS_HOME", Path.home() / ".cogbias"))
    return [STUDY_DIR, home / "studies"]


def load_studies_report() -> tuple[dict[str, Study], list[Problem]]:
    """Built-in studies, then the user's, and the problems of the files left out: a broken
    user file, or one whose id a built-in already has (it cannot shadow the built-in)."""
    studies: dict[str, Study] = {}
    problems: list[Problem] = []
    for directory in study_dirs():
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                study = load_study(path)
            except LibraryError as exc:
                problems.extend(exc.problems)
                continue
            if study.id in studies:
                line, col = _Checker(study.source, str(path)).source.locate(("id",), None, None)
                problems.append(
                    Problem(
                        str(path), line, col, f"a built-in study has the id '{study.id}'; "
                        "this file is ignored (give it another id and file name)",
                    )
                )  # fmt: skip
                continue
            studies[study.id] = study
    return studies, problems


def load_studies() -> dict[str, Study]:
    """Every usable study by id (files with problems are left out: `load_studies_report`)."""
    return load_studies_report()[0]


def get_study(study_id: str) -> Study:
    """A study by id; a broken file of that name raises LibraryError with its problems."""
    studies, problems = load_studies_report()
    if study_id not in studies:
        broken = [p for p in problems if Path(p.file).stem == study_id]
        if broken:
            raise LibraryError(broken)
        hint = difflib.get_close_matches(study_id, list(studies), n=2)
        extra = f"; did you mean {', '.join(hint)}?" if hint else f"; known: {', '.join(studies)}"
        raise KeyError(f"no study with id '{study_id}'{extra}")
    return studies[study_id]
