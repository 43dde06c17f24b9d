"""Human reference results: what people answered in the original experiments, as cited data.

A model's share or median means little alone; beside the humans who answered the same
question it teaches something. Each file (`data/references/<id>.toml`, your own in
`$COGBIAS_HOME/references/`) holds one experiment: per condition its n and the share choosing
each option (or the median of a number), the citation with page or table, and under
`[[uses]]` the study tests that ask its question (`[[differs]]` says where a study's question
is not the original's, so no reference is shown there). Format: docs/references.md.

A reference file is untrusted input like a study file: its size is bounded, every field is
checked, and every problem is reported as `file:line:col: message`. A broken user file, or
one that would shadow a built-in reference, is left out and reported.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.library.testcases import DATA_DIR, LibraryError, Problem, _Checker, read_toml
from cogbias.studies.study_variants import ID_RE

REFERENCE_DIR = DATA_DIR / "references"
MEASURES = ("share", "median")
# Bounds: a reference is a handful of numbers and a citation; these are far above any paper.
MAX_REFERENCE_BYTES = 200_000
MAX_CONDITIONS = 20
MAX_USES = 50
MAX_TEXT = 2_000  # characters of one text field
MAX_N = 10_000_000
MAX_NUMBER = 1e15
SHARE_SLACK = 0.011  # printed percentages are rounded: 72% + 28% may be 99% or 101%
_ID = ID_RE  # ids of references, conditions, studies, tests and variants

_TOP = {
    "id": (str, True),
    "experiment": (str, True),
    "citation": (str, True),
    "where": (str, True),
    "measure": (str, True),
    "unit": (str, False),
    "participants": (str, False),
    "checked": (str, False),
    "focus": (str, False),
    "options": (dict, False),
    "conditions": (dict, True),
    "uses": (list, False),
    "differs": (list, False),
}
_CONDITION = {
    "label": (str, True),
    "n": (int, False),
    "shares": (dict, False),
    "counts": (dict, False),
    "median": ((int, float), False),
}
_USE = {
    "study": (str, True),
    "test": (str, True),
    "variants": (list, False),
    "conditions": (dict, False),
    "note": (str, False),
}
_DIFFERS = {"study": (str, True), "test": (str, True), "note": (str, True)}


@dataclass(frozen=True)
class HumanCondition:
    """One condition of the original: n (None where the paper gives none) and either the share
    choosing each option (letters as in the study's question) or the median answer."""

    name: str
    label: str
    n: int | None
    shares: dict[str, float] = field(default_factory=dict)
    median: float | None = None


@dataclass(frozen=True)
class Use:
    """A study test that asks the original's question: in `variants` only (all when empty),
    with the study's condition named for each of the reference's (same names when empty)."""

    study: str
    test: str
    variants: tuple[str, ...] = ()
    conditions: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def study_condition(self, name: str) -> str | None:
        """The study's condition for the reference's `name` (None: not asked there)."""
        if not self.conditions:
            return name
        return self.conditions.get(name)


@dataclass(frozen=True)
class Difference:
    """A study test whose question is not the original's: why no reference is shown."""

    study: str
    test: str
    note: str


@dataclass(frozen=True)
class Reference:
    id: str
    experiment: str
    citation: str
    where: str
    measure: str  # share | median
    conditions: dict[str, HumanCondition]
    options: dict[str, str] = field(default_factory=dict)
    focus: str = ""  # the option whose share tables show (default: the first)
    unit: str = ""
    participants: str = ""
    checked: str = ""
    uses: tuple[Use, ...] = ()
    differs: tuple[Difference, ...] = ()
    path: Path | None = None
    builtin: bool = True

    @property
    def cited(self) -> str:
        """The citation with its page or table, as pages and exports show it."""
        return f"{self.citation} {self.where}."

    @property
    def focus_option(self) -> str:
        if self.focus:
            return self.focus
        if self.options:
            return next(iter(self.options))
        first = next(iter(self.conditions.values()))
        return sorted(first.shares)[0] if first.shares else ""


# --------------------------------------------------------------------------- parsing


def parse_reference(text: str, file: str = "<string>") -> Reference:
    """Parse and validate one reference file; raises LibraryError listing every problem."""
    text, data = read_toml(text, file)
    check = _Checker(text, file)
    if not check.fields(data, _TOP, ()):
        raise LibraryError(check.problems)
    _texts(data, (), check)
    if not _ID.fullmatch(data["id"]):
        check.add(("id",), "id must be snake_case: lower-case letters, digits, '_'")
    if data["measure"] not in MEASURES:
        check.add(("measure",), f"measure must be one of {', '.join(MEASURES)}")
    options = data.get("options", {})
    _texts(options, ("options",), check)
    for letter, label in options.items():
        if not re.fullmatch("[a-z]", letter) or not isinstance(label, str):
            check.add(("options", letter), "options are letters a-z, each with its text")
    focus = data.get("focus")
    if focus and (focus not in options if options else not re.fullmatch("[a-z]", focus)):
        check.add(("focus",), f"focus '{focus[:20]}' is not one of the options (a letter)")
    conditions = _conditions(data["conditions"], data["measure"], set(options), check)
    uses = _uses(data.get("uses", []), set(data["conditions"]), check)
    differs = _differs(data.get("differs", []), check)
    if check.problems:
        raise LibraryError(check.problems)
    return Reference(
        id=data["id"],
        experiment=data["experiment"],
        citation=data["citation"],
        where=data["where"],
        measure=data["measure"],
        conditions=conditions,
        options=dict(options),
        focus=data.get("focus", ""),
        unit=data.get("unit", ""),
        participants=data.get("participants", ""),
        checked=data.get("checked", ""),
        uses=uses,
        differs=differs,
    )


def _texts(table: dict[str, Any], path: tuple[str, ...], check: _Checker) -> None:
    for key, value in table.items():
        if isinstance(value, str) and len(value) > MAX_TEXT:
            check.add((*path, key), f"'{key}' is {len(value):,} characters; at most {MAX_TEXT:,}")


def _conditions(
    table: dict[str, Any], measure: str, options: set[str], check: _Checker
) -> dict[str, HumanCondition]:
    out: dict[str, HumanCondition] = {}
    if not table or len(table) > MAX_CONDITIONS:
        check.add(("conditions",), f"a reference has 1 to {MAX_CONDITIONS} conditions")
        return out
    for name, spec in table.items():
        path = ("conditions", name)
        if not isinstance(spec, dict):
            check.add(path, f"condition '{name[:40]}' should be a table [conditions.{name[:40]}]")
            continue
        if not _ID.fullmatch(name):
            check.add(path, "condition names are lower-case letters, digits, '_'")
        if not check.fields(spec, _CONDITION, path):
            continue
        _texts(spec, path, check)
        n = spec.get("n")
        if n is not None and not 1 <= n <= MAX_N:
            check.add((*path, "n"), f"n must be between 1 and {MAX_N:,}, not {n:,}")
            continue
        given = [k for k in ("shares", "counts", "median") if k in spec]
        wanted = ("median",) if measure == "median" else ("shares", "counts")
        if len(given) != 1 or given[0] not in wanted:
            check.add(
                path,
                f"condition '{name}' needs exactly one of {' or '.join(wanted)} "
                f"(measure = '{measure}')",
            )
            continue
        if measure == "median":
            median = spec["median"]
            if not (math.isfinite(median) and abs(median) <= MAX_NUMBER):
                check.add((*path, "median"), "median must be a finite number")
                continue
            out[name] = HumanCondition(name, spec["label"], n, median=float(median))
            continue
        shares = _shares(spec, path, n, options, check)
        if shares is not None:
            out[name] = HumanCondition(
                name, spec["label"], n or sum(spec["counts"].values()), shares
            )
    return out


def _shares(
    spec: dict[str, Any], path: tuple[str, ...], n: int | None, options: set[str], check: _Checker
) -> dict[str, float] | None:
    """Shares per option from `shares` (fractions summing to 1, give or take rounding) or
    from `counts` (summing to n)."""
    key = "shares" if "shares" in spec else "counts"
    values = spec[key]
    if key == "shares" and n is None:
        check.add(path, "shares need n (how many answered); or give counts")
        return None
    kind = (int,) if key == "counts" else (int, float)
    for letter, value in values.items():
        bad_kind = not isinstance(value, kind) or isinstance(value, bool)
        if not re.fullmatch("[a-z]", letter) or (options and letter not in options):
            check.add((*path, key), f"'{letter[:20]}' is not one of the options")
            return None
        if bad_kind or not (0 <= value <= (1 if key == "shares" else MAX_N)):
            what = "a share between 0 and 1" if key == "shares" else "a count of at least 0"
            check.add((*path, key), f"{key}.{letter} should be {what}")
            return None
    if len(values) < 1:
        check.add((*path, key), f"{key} needs at least one option")
        return None
    total = sum(values.values())
    if key == "counts":
        if n is not None and total != n:
            check.add((*path, key), f"the counts add up to {total:,}, not n = {n:,}")
            return None
        if total == 0:
            check.add((*path, key), "the counts add up to 0")
            return None
        return {k: v / total for k, v in values.items()}
    if len(values) > 1 and abs(total - 1) > SHARE_SLACK:
        check.add((*path, key), f"the shares add up to {total:g}, not 1")
        return None
    return {k: float(v) for k, v in values.items()}


def _uses(items: list[Any], names: set[str], check: _Checker) -> tuple[Use, ...]:
    out = []
    if len(items) > MAX_USES:
        check.add(("uses",), f"at most {MAX_USES} [[uses]] entries, not {len(items):,}")
        return ()
    for i, item in enumerate(items):
        where = f"[[uses]] entry {i + 1}"
        if not isinstance(item, dict) or not check.fields(item, _USE, ("uses",)):
            if not isinstance(item, dict):
                check.add(("uses",), f"{where} should be a table")
            continue
        _texts(item, ("uses",), check)
        variants = item.get("variants", [])
        mapping = item.get("conditions", {})
        if not all(isinstance(v, str) and _ID.fullmatch(v) for v in variants):
            check.add(("uses",), f"{where}: variants are a list of variant ids")
            continue
        wrong = [k for k in mapping if k not in names]
        if wrong:
            check.add(("uses",), f"{where}: '{wrong[0][:40]}' is not a condition of this file")
            continue
        if not all(isinstance(v, str) and _ID.fullmatch(v) for v in mapping.values()):
            check.add(("uses",), f"{where}: each condition maps to a study condition's name")
            continue
        out.append(
            Use(item["study"], item["test"], tuple(variants), dict(mapping), item.get("note", ""))
        )
    return tuple(out)


def _differs(items: list[Any], check: _Checker) -> tuple[Difference, ...]:
    out = []
    for i, item in enumerate(items[: MAX_USES + 1]):
        if not isinstance(item, dict):
            check.add(("differs",), f"[[differs]] entry {i + 1} should be a table")
        elif check.fields(item, _DIFFERS, ("differs",)):
            _texts(item, ("differs",), check)
            out.append(Difference(item["study"], item["test"], item["note"]))
    if len(items) > MAX_USES:
        check.add(("differs",), f"at most {MAX_USES} [[differs]] entries")
    return tuple(out)


# --------------------------------------------------------------------------- files


def load_reference(path: str | Path, builtin: bool = False) -> Reference:
    """One reference file, its size bounded, its id the file name."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_REFERENCE_BYTES:
            message = f"the file is {size:,} bytes; a reference file may be at most {MAX_REFERENCE_BYTES:,}"
            raise LibraryError([Problem(str(path), 1, 1, message)])
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise LibraryError([Problem(str(path), 1, 1, f"cannot read the file: {exc}")]) from None
    except UnicodeDecodeError:
        raise LibraryError([Problem(str(path), 1, 1, "the file is not UTF-8 text")]) from None
    reference = parse_reference(text, str(path))
    if reference.id != path.stem:
        line, col = _Checker(text, str(path)).source.locate(("id",))
        message = f"the file name should be {reference.id}.toml"
        raise LibraryError([Problem(str(path), line, col, message)])
    return Reference(**{**reference.__dict__, "path": path, "builtin": builtin})


def reference_dirs() -> list[Path]:
    """The built-in references, then the user's (`$COGBIAS_HOME/references/`)."""
    home = Path(os.environ.get("COGBIAS_HOME", Path.home() / ".cogbias"))
    return [REFERENCE_DIR, home / "references"]


def load_references_report() -> tuple[dict[str, Reference], list[Problem]]:
    """Every usable reference by id, and the problems of the files left out (a broken user
    file, or one whose id a built-in already has: it cannot replace the built-in)."""
    references: dict[str, Reference] = {}
    problems: list[Problem] = []
    for number, directory in enumerate(reference_dirs()):
        paths = sorted(directory.glob("*.toml"))[:1000] if directory.is_dir() else []
        for path in paths:
            try:
                reference = load_reference(path, builtin=number == 0)
            except LibraryError as exc:
                problems.extend(exc.problems)
                continue
            if reference.id in references:
                message = (
                    f"a built-in reference has the id '{reference.id}'; this file is ignored "
                    "(give it another id and file name)"
                )
                problems.append(Problem(str(path), 1, 1, message))
                continue
            references[reference.id] = reference
    return references, problems


def load_references() -> dict[str, Reference]:
    """Every usable reference by id (files with problems are left out)."""
    return load_references_report()[0]


def references_for(
    references: dict[str, Reference], study: str, test: str
) -> list[tuple[Reference, Use]]:
    """The references whose question a study's test asks, with how it asks it."""
    return [
        (reference, use)
        for reference in references.values()
        for use in reference.uses
        if use.study == study and use.test == test
    ]


def differences_for(
    references: dict[str, Reference], study: str, test: str
) -> list[tuple[Reference, Difference]]:
    """Where a study's test is *not* the original's question: the notes saying how."""
    return [
        (reference, difference)
        for reference in references.values()
        for difference in reference.differs
        if difference.study == study and difference.test == test
    ]
