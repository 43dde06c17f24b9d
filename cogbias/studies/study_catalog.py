"""The studies the app knows: the built-in files (`data/studies/`) and the user's own
(`COGBIAS_HOME/studies/`), each read with its size bounded and parsed by `study_files`.

A broken user file or one that would shadow a built-in is left out and reported, never
allowed to hide or replace a built-in study.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from cogbias.library.testcases import LibraryError, Problem, _Checker
from cogbias.studies.definitions import MAX_STUDY_BYTES, STUDY_DIR, Study
from cogbias.studies.study_files import parse_study


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
