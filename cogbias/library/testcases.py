"""The test case library: every built-in and user test case, loaded once, problems apart.

This module is also the library's front door: `from cogbias.library import testcases as
library` gives the whole public surface (the test case, its parser, saver and scenarios) in
one name, so callers need not know how the package is split:

- `cases`: `TestCase`, its value generators and canonical TOML;
- `problems`: how a problem in a file is reported (shared with the study parser);
- `parsing` and `checks`: reading and validating a file; `saving`: writing one;
- `scenarios`: the business scenarios a test case is instantiated in.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from cogbias.core.sourcemap import SourceMap
from cogbias.core.templates import NAME_RE
from cogbias.library.cases import (
    BUILTIN_DIR,
    DATA_DIR,
    PERCENT_OPTIONS,
    SCALES,
    VALUE_TYPES,
    SamplingError,
    TestCase,
    ValueSpec,
    to_toml,
    user_dir,
)
from cogbias.library.parsing import build_values, load_test_case, parse_test_case
from cogbias.library.problems import Checker, LibraryError, Problem, clip, read_toml
from cogbias.library.saving import AlreadyExistsError, save_test_case
from cogbias.library.scenarios import Scenario, load_scenarios

# The study parser (`studies.definitions`) still imports these by their old private names.
_Checker, _clip, _build_values = Checker, clip, build_values

__all__ = [
    "BUILTIN_DIR",
    "DATA_DIR",
    "NAME_RE",
    "PERCENT_OPTIONS",
    "SCALES",
    "VALUE_TYPES",
    "AlreadyExistsError",
    "LibraryError",
    "LibraryReport",
    "Problem",
    "SamplingError",
    "Scenario",
    "TestCase",
    "ValueSpec",
    "get_test_case",
    "load_library",
    "load_library_report",
    "load_scenarios",
    "load_test_case",
    "parse_test_case",
    "read_toml",
    "save_test_case",
    "to_toml",
    "user_dir",
]


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
    """Built-ins first, then the user's (which cannot shadow a built-in); see LibraryReport.

    Only the user's files get the dry run: the built-ins are proven by the test suite
    (`parse_test_case`'s `proven`)."""
    cases: dict[str, TestCase] = {}
    problems: list[Problem] = []
    dirs = [BUILTIN_DIR] + ([user_dir()] if include_user else [])
    for directory in dirs:
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                case = load_test_case(path, proven=directory == BUILTIN_DIR)
            except LibraryError as exc:
                problems.extend(exc.problems)
                continue
            except (ValueError, ArithmeticError, RecursionError) as exc:  # a check this missed
                problems.append(Problem(str(path), 1, 1, f"cannot be loaded: {exc}"))
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
