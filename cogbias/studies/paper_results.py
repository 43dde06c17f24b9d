"""The seed papers' printed model results, as cited data (`data/paper_results/`).

BiasBuster's Table 3 (Echterhoff et al. 2024) and the token-bias paper's Appendix D (Jiang et al.
2024) print what GPT-3.5, GPT-4, Llama, Claude and Mistral models did on the papers' own
prompts. A teacher can show those numbers with no key and no download, and a researcher can
set a run of cogbias' own wording beside them; so they ship as data, each result one TOML file
(what it is, its citation, what each column means) naming one CSV file (the rows, digits as
printed).

Reading checks every row, because a transcription slip would be taught as a fact: the types,
the ranges, and the arithmetic the papers' own columns obey (BiasBuster's Δ is the difference of
its two rates; Appendix D's n* is n12 + n21, its z is (n21 - n12) / sqrt(n*), and it rejects
exactly where its p-value is below 0.05). A problem names the file, row and column.
"""

from __future__ import annotations

import csv
import functools
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cogbias.library.testcases import DATA_DIR

PAPER_RESULTS_DIR = DATA_DIR / "paper_results"
ALPHA = 0.05  # Appendix D rejects where its printed p-value is below this (Section 5)
Z_DIGITS = 1e-6  # z is printed to 6 decimals
DELTA_DIGITS = 0.0015  # Table 3's rates and Δ are printed to 3 decimals
MAX_ROWS = 10_000  # a built-in table is small; anything longer is not one of these files
LABEL = "the paper's models, the paper's wording"


class PaperResultError(ValueError):
    """A built-in result file that cannot be read, located by file, row and column."""


@dataclass(frozen=True)
class PaperResult:
    """One printed result of a seed paper: its citation and its rows (a DataFrame)."""

    id: str
    title: str
    study: str  # the cogbias study that asks the same design in its own words
    kind: str
    citation: str
    short_citation: str
    where: str  # the table, section or page in the paper
    digits: int  # the decimals the paper prints its numbers with
    notes: tuple[str, ...]
    columns: Mapping[str, str]  # column -> what it holds
    names: Mapping[str, Mapping[str, str]]  # e.g. mitigations: paper label -> study's name
    rows: pd.DataFrame = field(compare=False, repr=False)
    file: Path = field(compare=False, repr=False)

    @property
    def cited(self) -> str:
        """The full reference with the place in the paper, as pages and docs show it."""
        return f"{self.citation} {self.where}."

    @property
    def source(self) -> str:
        """A short source line: author, year and place ("Echterhoff et al. 2024, Table 3 …")."""
        return f"{self.short_citation}, {self.where}"

    def printed(self) -> pd.DataFrame:
        """The rows with every number as the paper prints it (its decimals, as text)."""
        floats = [c for c in self.rows if self.rows[c].dtype.kind == "f"]
        return self.rows.assign(
            **{c: [f"{v:.{self.digits}f}" for v in self.rows[c]] for c in floats}
        )

    def holds(self) -> str:
        """What the result holds, counted for listings ("20 rows, 4 models")."""
        models = self.rows["model"].nunique()
        return f"{len(self.rows)} rows, {models} models"


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _int(text: str) -> int:
    if not re.fullmatch(r"\d+", text):
        raise ValueError("not a whole number of zero or more")
    return int(text)


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError("not true or false")
    return text == "true"


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("empty")
    return text


Row = dict[str, Any]


def _check_table3(row: Row, meta: Mapping[str, Any]) -> None:
    """Rates and d in [0, 1]; each Δ the difference of its two rates (to the printed digits)."""
    for column in ("framing_admit", "framing_reject", "group_female", "group_male", "anchoring_d"):
        if not 0.0 <= row[column] <= 1.0:
            raise ValueError(f"column {column}: {row[column]} is outside 0 to 1")
    for delta, a, b in (
        ("framing_delta", "framing_admit", "framing_reject"),
        ("group_delta", "group_female", "group_male"),
    ):
        if abs(row[a] - row[b] - row[delta]) > DELTA_DIGITS:
            raise ValueError(
                f"column {delta}: {row[delta]} is not {a} - {b} ({row[a] - row[b]:.3f})"
            )
    if row["mitigation"] not in meta["names"].get("mitigations", {}):
        raise ValueError(f"column mitigation: '{row['mitigation']}' is not under [mitigations]")


def _check_appendix_d(row: Row, meta: Mapping[str, Any]) -> None:
    """n* = n12 + n21, z = (n21 - n12)/sqrt(n*), p in [0, 1], reject exactly where p < 0.05."""
    n12, n21 = row["n12"], row["n21"]
    if row["n_star"] != n12 + n21:
        raise ValueError(f"column n_star: {row['n_star']} is not n12 + n21 = {n12 + n21}")
    z = (n21 - n12) / math.sqrt(n12 + n21) if n12 + n21 else 0.0
    if abs(row["z"] - z) > Z_DIGITS:
        raise ValueError(f"column z: {row['z']} is not (n21 - n12) / sqrt(n*) = {z:.6f}")
    if not 0.0 <= row["p_value"] <= 1.0:
        raise ValueError(f"column p_value: {row['p_value']} is outside 0 to 1")
    if row["reject"] != (row["p_value"] < ALPHA):
        raise ValueError(f"column reject: {row['reject']} disagrees with p = {row['p_value']}")
    if str(row["table"]) not in meta["names"].get("tables", {}):
        raise ValueError(f"column table: {row['table']} is not under [tables]")


@dataclass(frozen=True)
class _Kind:
    types: Mapping[str, Callable[[str], Any]]
    key: tuple[str, ...]  # what names a row: no two rows share it
    check: Callable[[Row, Mapping[str, Any]], None]


KINDS: dict[str, _Kind] = {
    "biasbuster_table3": _Kind(
        {
            "model": _text,
            "mitigation": _text,
            "framing_admit": _float,
            "framing_reject": _float,
            "framing_delta": _float,
            "framing_failure": _bool,
            "group_female": _float,
            "group_male": _float,
            "group_delta": _float,
            "group_failure": _bool,
            "anchoring_d": _float,
            "anchoring_failure": _bool,
        },  # fmt: skip
        ("model", "mitigation"),
        _check_table3,
    ),
    "tokenbias_appendix_d": _Kind(
        {
            "table": _int,
            "hypothesis": _text,
            "model": _text,
            "prompting": _text,
            "n12": _int,
            "n21": _int,
            "n_star": _int,
            "z": _float,
            "p_value": _float,
            "reject": _bool,
        },  # fmt: skip
        ("table", "model", "prompting"),
        _check_appendix_d,
    ),
}
NAMES = ("mitigations", "tables")  # the tables of names a result file may carry
META_FIELDS = ("id", "title", "study", "kind", "rows", "citation", "short_citation", "where")


def _meta(path: Path) -> dict[str, Any]:
    try:
        meta = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PaperResultError(f"{path}: cannot be read: {exc}") from None
    missing = [f for f in META_FIELDS if not isinstance(meta.get(f), str) or not meta[f].strip()]
    if missing:
        raise PaperResultError(f"{path}: needs the text field(s) {', '.join(missing)}")
    if meta["kind"] not in KINDS:
        raise PaperResultError(f"{path}: kind '{meta['kind']}' is not one of {', '.join(KINDS)}")
    columns = meta.get("columns")
    expected = list(KINDS[meta["kind"]].types)
    if not isinstance(columns, dict) or list(columns) != expected:
        raise PaperResultError(
            f"{path}: [columns] must describe {', '.join(expected)}, in this order"
        )
    return meta


def _rows(path: Path, kind: _Kind, meta: Mapping[str, Any]) -> list[Row]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            lines = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise PaperResultError(f"{path}: cannot be read: {exc}") from None
    if not lines or lines[0] != list(kind.types):
        raise PaperResultError(f"{path}: the header must be {','.join(kind.types)}")
    if len(lines) > MAX_ROWS:
        raise PaperResultError(f"{path}: more than {MAX_ROWS:,} rows")
    rows, seen = [], set()
    for number, line in enumerate(lines[1:], start=2):
        where = f"{path}, row {number}"
        if len(line) != len(kind.types):
            raise PaperResultError(f"{where}: {len(line)} cells, the header has {len(kind.types)}")
        row: Row = {}
        for (column, parse), text in zip(kind.types.items(), line, strict=True):
            try:
                row[column] = parse(text)
            except ValueError as exc:
                raise PaperResultError(f"{where}, column {column}: '{text}' is {exc}") from None
        try:
            kind.check(row, meta)
        except ValueError as exc:
            raise PaperResultError(f"{where}, {exc}") from None
        key = tuple(row[k] for k in kind.key)
        if key in seen:
            raise PaperResultError(f"{where}: a second row for {' · '.join(map(str, key))}")
        seen.add(key)
        rows.append(row)
    if not rows:
        raise PaperResultError(f"{path}: no rows")
    return rows


def load_paper_result(path: Path) -> PaperResult:
    """One result from its TOML file (and the CSV file it names, beside it), checked."""
    meta = _meta(path)
    kind = KINDS[meta["kind"]]
    names = {k: {str(a): str(b) for a, b in v.items()} for k, v in meta.items() if k in NAMES}
    meta = {**meta, "names": names}
    rows_file = path.parent / meta["rows"]
    if Path(meta["rows"]).name != meta["rows"]:
        raise PaperResultError(f"{path}: rows must name a file beside it, not '{meta['rows']}'")
    frame = pd.DataFrame(_rows(rows_file, kind, meta), columns=list(kind.types))
    notes = meta.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise PaperResultError(f"{path}: notes must be a list of texts")
    digits = meta.get("digits")
    if type(digits) is not int or not 0 <= digits <= 12:
        raise PaperResultError(f"{path}: digits must be the number of decimals printed, 0 to 12")
    return PaperResult(
        id=meta["id"], title=meta["title"], study=meta["study"], kind=meta["kind"],
        citation=meta["citation"], short_citation=meta["short_citation"], where=meta["where"],
        digits=digits, notes=tuple(notes), columns=dict(meta["columns"]), names=names, rows=frame,
        file=rows_file,
    )  # fmt: skip


@functools.cache
def _builtin() -> dict[str, PaperResult]:
    return paper_results(PAPER_RESULTS_DIR)


def paper_results(folder: Path | None = None) -> dict[str, PaperResult]:
    """Every result in `folder` (default: the built-in ones, read once), by id."""
    if folder is None:
        return dict(_builtin())
    found: dict[str, PaperResult] = {}
    for path in sorted(folder.glob("*.toml")):
        result = load_paper_result(path)
        if result.id in found:
            raise PaperResultError(f"{path}: the id '{result.id}' is used twice")
        found[result.id] = result
    return found


def paper_result(result_id: str) -> PaperResult:
    """One built-in result by id; an unknown id is refused naming the ones there are."""
    results = paper_results()
    if result_id not in results:
        raise KeyError(
            f"no built-in reference result '{result_id}' (there are: {', '.join(results)})"
        )
    return results[result_id]


def for_study(study: str) -> list[PaperResult]:
    """The built-in results printed for the design of `study` (a cogbias study id)."""
    return [r for r in paper_results().values() if r.study == study]


def paper_hypothesis(name: str) -> str | None:
    """The Appendix D hypothesis a token-bias hypothesis of cogbias tests: the paper import's
    own ids (H1 … H6, H5b) and the built-in study's `tb_hN_…` (HN); None for the others."""
    if re.fullmatch(r"H[1-6]b?", name):
        return name
    found = re.fullmatch(r"tb_h([1-6])_\w+", name)
    return f"H{found.group(1)}" if found else None
