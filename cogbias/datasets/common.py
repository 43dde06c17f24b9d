"""What every importer shares: errors that point at a file, row and column; streaming CSV
reading that notices truncation and wrong encodings; bias names; option lists.

Imported files are data, never code: Python literals go through `ast.literal_eval`, nothing is
evaluated, executed or unpickled.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from cogbias.core.limits import (
    MAX_JSON_DEPTH,
    MAX_PROMPT_CHARS,
    DuplicateKey,
    depth_of,
    duplicate_message,
    length_problem,
    name_problem,
    unique_keys,
)
from cogbias.core.safetext import terminal

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # published prompts and answers are long

Progress = Callable[[str, int, int], None]
"""progress(label, done, total): bytes read or downloaded so far out of total (0 = unknown)."""

MAX_LITERAL_CHARS = 100_000  # a metric dict or an option list is small; refuse anything huge


MAX_MESSAGE_CHARS = 500


class DatasetError(ValueError):
    """A problem with an imported file, located as precisely as the file allows."""

    def __init__(
        self,
        file: str | Path,
        message: str,
        row: int | None = None,
        column: str | None = None,
        line: int | None = None,
    ) -> None:
        if len(message) > MAX_MESSAGE_CHARS:  # a message quoting a huge cell stays readable
            message = message[: MAX_MESSAGE_CHARS - 1] + "…"
        self.file, self.message = str(file), message
        self.row, self.column, self.line = row, column, line
        super().__init__(self.describe())

    def describe(self) -> str:
        """`file, row N (line L), column 'C': message`, every part shown with its control
        characters escaped: a file named with a newline or ESC is named, never acted out."""
        where = [terminal(self.file)]
        if self.row is not None:
            label = "header" if self.row == 0 else f"row {self.row}"
            where.append(label + (f" (line {self.line})" if self.line else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column '{terminal(self.column)}'")
        return ": ".join([", ".join(where), terminal(self.message)])

    def at(self, row: int | None = None, line: int | None = None) -> DatasetError:
        """The same error with a row/line filled in where the raiser could not know it."""
        return DatasetError(
            self.file, self.message, self.row or row, self.column, self.line or line
        )


@dataclass(frozen=True)
class Format:
    """A format `cogbias import NAME` reads: its own arguments and how to run its importer.

    Each importer module defines its `FORMAT` beside its import function, and
    `cogbias.datasets.formats.FORMATS` lists them; the command is built from that list.
    `run` gets the store, the parsed arguments (with `name` and `replace`) and a progress
    callback `(label, done, total)`.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Any, argparse.Namespace, Callable[[str, int, int], None]], ImportSummary]
    default_name: str | None = None  # None: the file's stem
    epilog: str = ""
    # the app page that shows its datasets' results: paired decisions go to Explore; effect
    # sizes and token-bias pairs have pages of their own (Explore's legend would misread them)
    results_page: str = "explore"


@dataclass
class ImportSummary:
    """What an import did; `unchanged` means the same content was already imported."""

    dataset: str
    kind: str
    instances: int = 0
    decisions: int = 0
    models: list[str] = field(default_factory=list)
    biases: list[str] = field(default_factory=list)
    unchanged: bool = False
    seconds: float = 0.0

    def describe(self) -> str:
        if self.unchanged:
            return f"dataset '{self.dataset}' is already imported with this content: nothing to do"
        text = f"imported '{self.dataset}' ({self.kind}): {self.instances} test cases"
        if self.decisions:
            text += f", {self.decisions} decisions of {len(self.models)} model(s)"
        return text + f", {len(self.biases)} biases in {self.seconds:.1f} s"


# --------------------------------------------------------------------------- CSV reading


@dataclass
class CsvRecord:
    row: int  # 1-based data row (the header is row 0)
    line: int  # physical line where the record starts
    values: dict[str, str]
    file: str = ""

    def fail(self, column: str, message: str) -> DatasetError:
        """An error naming this record's file, row, line and `column`."""
        return DatasetError(self.file, message, row=self.row, column=column, line=self.line)


class CsvFile:
    """Stream a UTF-8 CSV file's records as dicts, checking the shape of every row.

    The reader is strict, so a file cut off inside a quoted field is reported, not half-read.
    Decoding happens in large chunks for speed; when it fails, the file is read again line by
    line (only then) to name the exact row and line of the offending bytes.
    """

    def __init__(
        self, path: str | Path, required: Sequence[str], progress: Progress | None = None
    ) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self.required = list(required)
        self.progress = progress
        self.size = self.path.stat().st_size
        self.header: list[str] = []

    def records(self) -> Iterator[CsvRecord]:
        try:
            with self.path.open(encoding="utf-8-sig", newline="") as handle:
                yield from self._parse(csv.reader(handle, strict=True), handle)
        except UnicodeDecodeError:
            self._diagnose_encoding()
            raise DatasetError(self.name, "is not UTF-8 text; save it as UTF-8") from None
        if self.progress:
            self.progress(self.name, self.size, self.size)

    def _parse(self, reader: Any, handle: Any) -> Iterator[CsvRecord]:
        row = 0
        start = 1
        try:
            self.header = next(reader, [])
            self._check_header()
            start = reader.line_num + 1
            for fields in reader:
                if not fields:  # a blank line
                    start = reader.line_num + 1
                    continue
                row += 1
                if len(fields) != len(self.header):
                    raise DatasetError(
                        self.name,
                        f"has {len(fields)} fields but the header has {len(self.header)} "
                        "(a damaged or truncated row, or an unquoted comma)",
                        row=row,
                        line=start,
                    )
                yield CsvRecord(row, start, dict(zip(self.header, fields, strict=True)), self.name)
                start = reader.line_num + 1
                if self.progress and row % 2000 == 0 and handle is not None:
                    self.progress(self.name, handle.buffer.tell(), self.size)
        except csv.Error as exc:
            problem = str(exc)
            if "unexpected end of data" in problem:
                problem = (
                    "the file ends inside a quoted field: it is truncated or a quote is not closed"
                )
            raise DatasetError(self.name, problem, row=row + 1, line=start) from None

    def _diagnose_encoding(self) -> None:
        """Re-read line by line to raise the encoding error at its row and line."""
        position = {"line": 0}

        def lines(handle: Any) -> Iterator[str]:
            for raw in handle:
                position["line"] += 1
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DatasetError(
                        self.name,
                        f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at character "
                        f"{exc.start + 1} of the line); save the file as UTF-8 and import it again",
                        line=position["line"],
                    ) from None
                yield text.removeprefix("\ufeff") if position["line"] == 1 else text

        with self.path.open("rb") as handle:
            rows = 0
            try:
                for record in self._parse(csv.reader(lines(handle), strict=True), None):
                    rows = record.row
            except DatasetError as exc:
                if exc.row is None and exc.line and exc.line > 1:
                    raise exc.at(row=rows + 1) from None
                raise

    def _check_header(self) -> None:
        if not self.header:
            raise DatasetError(self.name, "is empty (no header row)", line=1)
        if any("\x00" in name for name in self.header):
            raise DatasetError(
                self.name, "contains NUL bytes: this is not a UTF-8 CSV file (UTF-16?)", line=1
            )
        seen: set[str] = set()
        for name in self.header:
            if name in seen:
                raise DatasetError(
                    self.name, "appears twice in the header", row=0, column=name, line=1
                )
            seen.add(name)
        missing = [c for c in self.required if c not in seen]
        if missing:
            raise DatasetError(
                self.name,
                f"missing column (the header has: {', '.join(self.header)})",
                row=0,
                column=missing[0],
                line=1,
            )


def file_digest(paths: Iterable[Path]) -> str:
    """Content hash of the imported files: the same bytes make a re-import a no-op."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- values


def parse_literal(text: str, file: str, row: int, column: str, line: int | None = None) -> Any:
    """A JSON value or a Python literal (dicts, lists, numbers, strings): data, never code."""
    where = {"row": row, "column": column, "line": line}
    if len(text) > MAX_LITERAL_CHARS:
        raise DatasetError(file, f"is too long to be a literal ({len(text)} characters)", **where)
    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise DatasetError(file, str(exc), **where) from None
    except (ValueError, RecursionError):
        try:
            value = ast.literal_eval(_unique_dict_keys(ast.parse(text.strip(), mode="eval")))
        except DuplicateKey as exc:
            raise DatasetError(file, str(exc), **where) from None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise DatasetError(
                file,
                f"cannot be read as a JSON or Python literal ({type(exc).__name__}): {shown!r}",
                **where,
            ) from None
    try:
        depth = depth_of(value)  # a lone surrogate in a string raises, naming where it is
    except ValueError as exc:
        raise DatasetError(file, str(exc), **where) from None
    if depth > MAX_JSON_DEPTH:
        raise DatasetError(file, f"is nested more than {MAX_JSON_DEPTH} levels deep", **where)
    return value


def _unique_dict_keys(tree: ast.Expression) -> ast.Expression:
    """`tree`, or DuplicateKey when a dict literal in it writes a key twice (`{'k': 1, 'k': 2}`
    evaluates to its last value silently)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            seen: set[object] = set()
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        raise DuplicateKey(duplicate_message(key.value))
                    seen.add(key.value)
    return tree


def parse_float(
    text: str, file: str, row: int, column: str, line: int | None = None, finite: bool = True
) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        raise DatasetError(
            file, f"expected a number, found {text[:60]!r}", row=row, column=column, line=line
        ) from None
    if finite and not math.isfinite(value):
        raise DatasetError(
            file,
            f"expected a finite number, found {text[:60]!r}",
            row=row,
            column=column,
            line=line,
        )
    return value


def parse_index(text: str, file: str, row: int, column: str, line: int | None = None) -> int:
    """An option index written as an integer or as a float with no fraction ("10.0")."""
    value = parse_float(text, file, row, column, line)
    if value != int(value):
        raise DatasetError(
            file,
            f"expected a whole option index, found {text[:60]!r}",
            row=row,
            column=column,
            line=line,
        )
    return int(value)


def number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite(value: Any) -> float | None:
    """A native number as a finite float; None for anything else (inf, nan, a 400-digit
    integer that no float can hold, text, true/false)."""
    if not number(value):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


MAX_OPTIONS = 100  # answer options of one test case: the paper's scales have 7 or 11

Fail = Callable[[str, str], DatasetError]
"""fail(column, message): an error naming the file, row and `column` (e.g. `CsvRecord.fail`)."""


def bounded(text: str, column: str, fail: Fail, limit: int = MAX_PROMPT_CHARS) -> str:
    """`text`, or the error `fail` makes when it is longer than `limit` characters (the
    documented bounds of core.limits: a prompt, an option, a name)."""
    problem = length_problem(text, limit)
    if problem:
        raise fail(column, problem)
    return text


def valid_name(text: str, column: str, fail: Fail) -> str:
    """`text`, or the error `fail` makes when it cannot be a name (`limits.name_problem`:
    a control character, empty, only dots, too long)."""
    problem = name_problem(text)
    if problem:
        raise fail(column, problem)
    return text


def bias_key(name: str, column: str, fail: Fail) -> str:
    """The library id of a bias (or family) name (`bias_id`), refusing a name that is not one
    or that leaves no letter or digit for the id: "!!" would become the empty id, a blank
    row on every page, and two such biases one."""
    key = bias_id(valid_name(name, column, fail))
    if not key:
        raise fail(
            column,
            f"{name[:60]!r} has no letter or digit (a-z, 0-9) to make an id of; name it with one",
        )
    return key


# --------------------------------------------------------------------------- biases


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@lru_cache(maxsize=1)
def _library_ids() -> dict[str, str]:
    from cogbias.library.testcases import LibraryError, load_library

    try:
        cases = load_library()
    except (LibraryError, OSError):  # a broken user file must not block imports
        cases = load_library(include_user=False)
    known: dict[str, str] = {}
    for case in cases.values():
        known[_key(case.id)] = case.id
        known[_key(case.name)] = case.id
    return known


def bias_id(name: str) -> str:
    """The library id for a bias name in any spelling the published data uses.

    "Loss Aversion", "LossAversion" and "loss_aversion" all give `loss_aversion`;
    "Status-Quo Bias" and "StatusQuoBias" give `status_quo_bias`. Biases that the library
    does not know keep a snake_case form of their name, so other datasets import too.
    """
    known = _library_ids().get(_key(name))
    if known:
        return known
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[^A-Za-z0-9]+", "_", snake).strip("_").lower()


# --------------------------------------------------------------------------- prompts

_OPTION_LINE = re.compile(r"^\s*Option (\d{1,4})\s*[:.)]\s?(.*?)\s*$")
_HEADER = re.compile(
    r"^[ \t]*(Situation|Prompt|Answer Options|Answer options|Options)[ \t]*:[ \t]*$", re.MULTILINE
)


@dataclass(frozen=True)
class ParsedPrompt:
    situation: str
    prompt: str
    options: tuple[str, ...]


def parse_prompt(text: str) -> ParsedPrompt | None:
    """Split a published prompt into situation, prompt and its "Option N: text" lines.

    The paper's layout is "Situation:\\n…\\n\\nPrompt:\\n…\\n\\nAnswer Options:\\nOption 1: …".
    The wording is kept verbatim; only the section headers are dropped, because the decision
    pipeline renders them itself (and must re-order options when it reverses them). Text
    without section headers becomes the prompt. Returns None when no numbered option list
    (Option 1, Option 2, … in order) ends the text.
    """
    lines = text.replace("\r\n", "\n").rstrip().split("\n")
    options: list[str] = []
    numbers: list[int] = []
    start = len(lines)
    while start > 0:
        match = _OPTION_LINE.match(lines[start - 1])
        if not match:
            break
        numbers.append(int(match.group(1)))
        options.append(match.group(2))
        start -= 1
    options.reverse()
    numbers.reverse()
    if len(options) < 2 or numbers != list(range(1, len(options) + 1)):
        return None
    body = "\n".join(lines[:start])
    parts = _HEADER.split(body)
    if len(parts) == 1:
        return ParsedPrompt("", body.strip(), tuple(options))
    sections: dict[str, list[str]] = {"situation": [], "prompt": [parts[0].strip()]}
    for name, content in zip(parts[1::2], parts[2::2], strict=True):
        if name.lower() in sections:
            sections[name.lower()].append(content.strip())
    return ParsedPrompt(
        situation="\n\n".join(p for p in sections["situation"] if p),
        prompt="\n\n".join(p for p in sections["prompt"] if p),
        options=tuple(options),
    )


def chunked(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
