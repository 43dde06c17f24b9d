"""Import the token-bias paper's synthetic data files (Jiang et al. 2024).

Files are named `synthetic_dataset_<family>_<variant>_<mode>.json`; each is one JSON object
keyed "0", "1", … whose items hold `question_idx`, `question`, `target_answer` (the correct
answer), `incorrect_answer` and `generation_mode`. A `…_gold.json` / `…_random.json` pair of
one family holds original and perturbed items that pair up by `question_idx`: each pair
becomes one instance with P as the control half and P' as the treatment half, exactly like the
built-in study (`cogbias.studies.tokenbias`), so it runs on any model and its 2x2 tables come
out of `cogbias results --study NAME`. A file without a partner imports as plain reasoning
items (the same item in both halves, variant `unpaired`, left out of the hypothesis tables).

Answers are option texts ("[No]", "(a) Maya is a bank clerk.", a number): the two answers are
the item's options, without their "(a)"/brackets, and the option lines written into the
question are dropped because the decision pipeline renders (and reverses) options itself.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cogbias.core.limits import loads_json
from cogbias.core.metrics import MetricParams
from cogbias.core.records import Instance, stable_id
from cogbias.core.templates import Filled
from cogbias.datasets import importing
from cogbias.datasets.common import DatasetError, Format, ImportSummary, bias_id
from cogbias.store import Store

KIND = "peek2024"
DEFAULT_NAME = "peek2024"
FILE_RE = re.compile(r"^synthetic_dataset_(?P<family>.+)_(?P<mode>[a-z]+)\.json$")
ORIGINAL, PERTURBED = "gold", "random"
FIELDS = ("question_idx", "question", "target_answer", "incorrect_answer")
_LABEL_RE = re.compile(r"^\s*\(([a-z])\)\s*(.*?)\s*$", re.DOTALL)
_BRACKETS_RE = re.compile(r"^\s*\[(.*)\]\s*$", re.DOTALL)


@dataclass(frozen=True)
class Item:
    """One published item: its question without option lines, two options, the correct one."""

    file: str
    row: int
    index: int
    question: str
    options: tuple[str, str]
    correct: int
    mode: str

    def filled(self) -> Filled:
        return Filled("", self.question, self.options)


def import_peek(
    store: Store,
    paths: Iterable[str | Path],
    name: str = DEFAULT_NAME,
    replace: bool = False,
) -> ImportSummary:
    """Import files (or folders of them) as one dataset, in one transaction."""
    started = time.monotonic()
    files = _files(paths)
    groups: dict[str, dict[str, Path]] = {}
    for path in files:
        match = FILE_RE.match(path.name)
        if match is None:
            raise DatasetError(
                path.name,
                "is not named like the paper's files (synthetic_dataset_<family>_<mode>.json)",
            )
        modes = groups.setdefault(match["family"], {})
        if match["mode"] in modes:
            raise DatasetError(path.name, f"appears twice (also {modes[match['mode']]})")
        modes[match["mode"]] = path
    built = [
        instance
        for family, modes in sorted(groups.items())
        for instance in _family(name, family, modes)
    ]
    with importing.Import(store, name, KIND, files, replace) as job:
        if job.unchanged:
            return job.summary
        job.add_instances((instance, True) for instance in built)
        from cogbias.studies.analysis import (
            TWO_SIDED,  # lazily: the CLI starts without pandas and SciPy
        )

        alternatives = {i.test_case: TWO_SIDED for i in built}
        job.finish(source=", ".join(str(f) for f in files), alternatives=alternatives)
    job.summary.seconds = time.monotonic() - started
    return job.summary


def _files(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out += sorted(p for p in path.glob("synthetic_dataset_*.json") if p.is_file())
        elif path.is_file():
            out.append(path)
        else:
            raise DatasetError(path, "no such file or folder")
    if not out:
        raise DatasetError(
            ", ".join(map(str, paths)) or "(none)", "holds no synthetic_dataset_*.json files"
        )
    return out


def _family(dataset: str, family: str, modes: Mapping[str, Path]) -> Iterator[Instance]:
    test_case = bias_id(family)
    if ORIGINAL in modes and PERTURBED in modes:
        original = read_items(modes[ORIGINAL])
        perturbed = read_items(modes[PERTURBED])
        for index, item in original.items():
            if index not in perturbed:
                raise DatasetError(
                    modes[PERTURBED].name,
                    f"has no item with question_idx {index} to pair with "
                    f"{modes[ORIGINAL].name}, row {item.row}",
                    column="question_idx",
                )
            yield _pair(dataset, test_case, family, item, perturbed[index])
        for index, item in perturbed.items():
            if index not in original:
                raise DatasetError(
                    item.file,
                    f"question_idx {index} has no original in {modes[ORIGINAL].name}",
                    row=item.row,
                    column="question_idx",
                )
        rest = {m: p for m, p in modes.items() if m not in (ORIGINAL, PERTURBED)}
    else:
        rest = dict(modes)
    for mode, path in sorted(rest.items()):
        for item in read_items(path).values():
            yield _pair(dataset, test_case, f"{family}_{mode}", item, None)


def _pair(dataset: str, test_case: str, family: str, p: Item, q: Item | None) -> Instance:
    paired = q is not None
    q = q or p
    return Instance(
        id=stable_id("dataset", dataset, KIND, family, p.index, paired),
        test_case=test_case,
        test_case_hash="",
        scenario=family,
        control=p.filled(),
        treatment=q.filled(),
        metric=MetricParams(k=1.0, y1=float(p.correct), y2=float(q.correct)),
        instance_index=p.index,
        variant="pair" if paired else "unpaired",
        values={
            "pair_id": f"{family}:{p.index}",
            "question_idx": p.index,
            "correct": [p.correct, q.correct],
            "files": [p.file, q.file] if paired else [p.file],
            "generation_mode": [p.mode, q.mode] if paired else [p.mode],
        },
        dataset=dataset,
    )


def read_items(path: Path) -> dict[int, Item]:
    """The items of one file by question_idx; every problem names file, row and field."""
    try:
        data = loads_json(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise DatasetError(path.name, "is not UTF-8 text; save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(
            path.name, f"is not valid JSON ({exc.msg}, column {exc.colno})", line=exc.lineno
        ) from None
    except ValueError as exc:  # nested too deeply, a lone surrogate (named by its place)
        raise DatasetError(path.name, str(exc)) from None
    if not isinstance(data, dict) or not data:
        raise DatasetError(path.name, 'must be a non-empty JSON object keyed "0", "1", …')
    items: dict[int, Item] = {}
    for row, (key, entry) in enumerate(data.items(), start=1):
        item = _item(path.name, row, key, entry)
        if item.index in items:
            raise DatasetError(
                path.name,
                f"question_idx {item.index} also appears in row {items[item.index].row}",
                row=row,
                column="question_idx",
            )
        items[item.index] = item
    return items


MAX_NUMBER = 1e15  # an answer written as a number; beyond this it is no answer


def _item(file: str, row: int, key: str, entry: Any) -> Item:
    def fail(column: str | None, message: str) -> DatasetError:
        return DatasetError(file, f'(item "{key}") {message}', row=row, column=column)

    if not isinstance(entry, dict):
        raise fail(None, "is not a JSON object")
    for field in FIELDS:
        if field not in entry:
            raise fail(field, "is missing")
    index = entry["question_idx"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**53:
        shown = repr(index) if len(repr(index)) <= 40 else "a huge number"
        raise fail("question_idx", f"expected a whole number from 0 to 2**53, found {shown}")
    question = entry["question"]
    if not isinstance(question, str) or not question.strip():
        raise fail("question", "expected a non-empty text")
    answers = []
    for field in ("target_answer", "incorrect_answer"):
        value = entry[field]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise fail(field, f"expected a text or a number, found {type(value).__name__}")
        if not isinstance(value, str) and not abs(value) <= MAX_NUMBER:  # nan, inf, 10**400
            shown = repr(value) if len(repr(value)) <= 40 else "a huge number"
            raise fail(field, f"a number must be finite and within ±{MAX_NUMBER:g}, found {shown}")
        label, text = _option(value)
        if not text:
            raise fail(field, "is empty")
        answers.append((label, text))
    if answers[0][1] == answers[1][1]:
        raise fail("incorrect_answer", "is the same as target_answer")
    labels = [a[0] for a in answers]
    if all(labels):  # "(a) …", "(b) …": keep the question's order
        order = sorted(range(2), key=lambda i: labels[i])
    else:
        order = sorted(range(2), key=lambda i: answers[i][1])
    options = (answers[order[0]][1], answers[order[1]][1])
    return Item(
        file=file,
        row=row,
        index=index,
        question=_strip_option_lines(question, [str(entry[f]) for f in FIELDS[2:]]),
        options=options,
        correct=order.index(0),
        mode=str(entry.get("generation_mode", "")),
    )


def _option(value: str | int | float) -> tuple[str, str]:
    """("a", text) for "(a) text"; ("", "No") for "[No]"; numbers as written (3.0 as 3)."""
    if not isinstance(value, str):
        return "", str(int(value)) if float(value).is_integer() else str(value)
    labelled = _LABEL_RE.match(value)
    if labelled:
        return labelled[1], labelled[2].strip()
    bracketed = _BRACKETS_RE.match(value)
    return "", (bracketed[1] if bracketed else value).strip()


def _strip_option_lines(question: str, answers: list[str]) -> str:
    """Drop lines of the question that are exactly one of the answers (the inline options)."""
    wanted = {a.strip() for a in answers}
    kept = [
        line for line in question.replace("\r\n", "\n").split("\n") if line.strip() not in wanted
    ]
    return "\n".join(kept).strip()


FORMAT = Format(
    "peek2024",
    "the token-bias paper's synthetic_dataset_*.json files (gold/random pairs)",
    lambda p: p.add_argument(
        "paths", nargs="+", help="files or folders of synthetic_dataset_*.json"
    ),
    lambda store, args, progress: import_peek(
        store, args.paths, name=args.name, replace=args.replace
    ),
    default_name="peek2024",
)
