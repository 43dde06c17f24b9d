"""Import the token-bias paper's synthetic data files (Jiang et al. 2024).

Files are named `synthetic_dataset_<family>_<mode>.json`; each is one JSON object keyed "0",
"1", … whose items hold `question_idx`, `question`, `target_answer` (the correct answer),
`incorrect_answer` (one answer, or a list of them: `linda_variant_six` has three options) and
`generation_mode`.

Which file is P and which is P' is the paper's hypothesis table
(`data/tokenbias_hypotheses.toml`, H1-H6), not a rule about names: Table 6 compares
sets-original-random with sets-original-framing-gold, and math_original_gold has three perturbed
twins. An item of a P file pairs with the item of its P' file that has the same `question_idx`;
each pair becomes one instance (P the control half, P' the treatment half) whose test case is
the hypothesis. A gold/random pair of a family the table does not name pairs as a hypothesis
named after the family. Items without a partner (a file no hypothesis uses, a missing
`question_idx`, a partner that shows the model the very same text) are imported as unpaired
items (variant `unpaired`) and are in no 2x2 table; the import says how many per family.

The model sees the paper's question: its text as written, the options once, labelled (a), (b),
… in the order presented (`Filled.layout`); a question that does not write its options out
(Yes/No, a number) is shown alone.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cogbias.core.limits import loads_json
from cogbias.core.metrics import MetricParams
from cogbias.core.records import Instance, stable_id
from cogbias.core.templates import LETTERED, QUESTION, Filled, render_decision_text
from cogbias.datasets import importing
from cogbias.datasets.common import DatasetError, Format, ImportSummary, bias_id
from cogbias.store import Store
from cogbias.studies.tokenbias_hypotheses import (
    HypothesisTableError,
    PaperHypothesis,
    load_hypotheses,
)

KIND = "peek2024"
DEFAULT_NAME = "peek2024"
FILE_RE = re.compile(r"^synthetic_dataset_(?P<family>.+)_(?P<mode>[a-z]+)\.json$")
STEM_RE = re.compile(r"^synthetic_dataset_(?P<stem>.+)\.json$")
ORIGINAL, PERTURBED = "gold", "random"
FIELDS = ("question_idx", "question", "target_answer", "incorrect_answer")
_LABEL_RE = re.compile(r"^\s*\(([a-z])\)\s*(.*?)\s*$", re.DOTALL)
_BRACKETS_RE = re.compile(r"^\s*\[(.*)\]\s*$", re.DOTALL)
_INLINE_LABEL_RE = re.compile(r"(?:(?<=\s)|^)\(([a-z])\)[ \t]*\n?")


@dataclass(frozen=True)
class Item:
    """One published item: its question without option lines, its options, the correct one."""

    file: str
    row: int
    index: int
    question: str
    options: tuple[str, ...]
    correct: int
    mode: str
    inline: bool  # the question writes its options out, labelled (a), (b), …

    def filled(self) -> Filled:
        return Filled("", self.question, self.options, LETTERED if self.inline else QUESTION)

    def shown(self) -> str:
        """The text the model reads: a question that does not write its options out is shown
        alone, so two items that differ only in an option it does not show read the same."""
        return render_decision_text(self.filled())


@dataclass
class PeekSummary(ImportSummary):
    """The import's summary plus what was paired: per hypothesis and per family."""

    pairs: dict[str, int] = field(default_factory=dict)  # hypothesis -> true pairs
    paired_items: dict[str, int] = field(default_factory=dict)  # family -> items in a pair
    unpaired_items: dict[str, int] = field(default_factory=dict)  # family -> items in none
    by_prompting: list[str] = field(default_factory=list)  # hypotheses compared across runs

    def describe(self) -> str:
        lines = [super().describe()]
        for hypothesis, count in self.pairs.items():
            lines.append(f"  {hypothesis}: {count} true pairs")
        for name in self.by_prompting:
            lines.append(
                f"  {name}: compares prompting methods on the same items, not files: no pairs "
                "imported; run the dataset with both methods and `cogbias results hypotheses`"
                " pairs the runs"
            )
        families = sorted(set(self.paired_items) | set(self.unpaired_items))
        for family in families:
            lines.append(
                f"  family {family}: {self.paired_items.get(family, 0)} items in true pairs, "
                f"{self.unpaired_items.get(family, 0)} unpaired (in no 2x2 table)"
            )
        return "\n".join(lines)


def import_peek(
    store: Store,
    paths: Iterable[str | Path],
    name: str = DEFAULT_NAME,
    replace: bool = False,
    hypotheses: Mapping[str, PaperHypothesis] | None = None,
) -> PeekSummary:
    """Import files (or folders of them) as one dataset, in one transaction."""
    started = time.monotonic()
    files = _files(paths)
    stems: dict[str, Path] = {}
    for path in files:
        match = STEM_RE.match(path.name)
        if match is None or FILE_RE.match(path.name) is None:
            raise DatasetError(
                path.name,
                "is not named like the paper's files (synthetic_dataset_<family>_<mode>.json)",
            )
        if match["stem"] in stems:
            raise DatasetError(path.name, f"appears twice (also {stems[match['stem']]})")
        stems[match["stem"]] = path
    try:
        table = dict(hypotheses) if hypotheses is not None else load_hypotheses()
    except HypothesisTableError as exc:
        raise DatasetError("tokenbias_hypotheses.toml", str(exc)) from None
    items = {stem: read_items(path) for stem, path in stems.items()}
    built, report = _build(name, items, _applicable(table, stems))
    with importing.Import(store, name, KIND, files, replace) as job:
        if not job.unchanged:
            job.add_instances((instance, True) for instance in built)
            alternatives = {h.id: h.alternative for h in report.hypotheses if h.id in report.pairs}
            job.finish(
                source=", ".join(str(f) for f in files),
                alternatives=alternatives,
                directions={h: report.directions[h] for h in alternatives},
                prompting_hypotheses=report.prompting_hypotheses(),
            )
    summary = PeekSummary(**asdict(job.summary))
    summary.pairs = dict(report.pairs)
    summary.paired_items = dict(report.paired_items)
    summary.unpaired_items = dict(report.unpaired_items)
    summary.by_prompting = list(report.by_prompting)
    summary.seconds = time.monotonic() - started
    return summary


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


def _applicable(
    table: Mapping[str, PaperHypothesis], stems: Mapping[str, Path]
) -> list[PaperHypothesis]:
    """The table's hypotheses with those of their file pairs that are present, then a default
    pairing (family gold with family random, two-sided) for every gold/random pair the table
    does not use."""
    present = []
    for h in table.values():
        pairs = [(p, q) for p, q in h.file_pairs if p in stems and q in stems]
        if pairs:
            original, perturbed = zip(*pairs, strict=True)
            present.append(replace(h, original=original, perturbed=perturbed))
    used = {pair for h in table.values() for pair in h.file_pairs}
    for stem in sorted(stems):
        match = FILE_RE.match(f"synthetic_dataset_{stem}.json")
        if match is None or match["mode"] != ORIGINAL:
            continue
        twin = f"{match['family']}_{PERTURBED}"
        if twin in stems and (stem, twin) not in used:
            hypothesis_id = bias_id(match["family"])
            present.append(
                PaperHypothesis(
                    hypothesis_id,
                    f"{match['family']}: gold vs. random (not in the hypothesis table)",
                    "",
                    (stem,),
                    (twin,),
                    "two_sided",
                )
            )
    return present


@dataclass
class _Report:
    hypotheses: list[PaperHypothesis]
    pairs: Counter[str] = field(default_factory=Counter)
    paired_items: Counter[str] = field(default_factory=Counter)
    unpaired_items: Counter[str] = field(default_factory=Counter)
    by_prompting: list[str] = field(default_factory=list)
    directions: dict[str, str] = field(default_factory=dict)

    def prompting_hypotheses(self) -> dict[str, dict[str, Any]]:
        """H2, H6: compared across prompting runs on the P items of the pair hypotheses whose
        P files they list (stored so `results` can pair the runs' answers)."""
        out = {}
        for h in self.hypotheses:
            if not h.compares_prompting:
                continue
            files = set(h.original)
            sources = [
                s.id
                for s in self.hypotheses
                if not s.compares_prompting and s.id in self.pairs and set(s.original) <= files
            ]
            if sources:
                out[h.id] = {
                    "methods": [list(m) for m in h.prompting],
                    "sources": sources,
                    "alternative": h.alternative,
                    "direction": h.direction,
                }
        return out


def _family_of(stem: str) -> str:
    match = FILE_RE.match(f"synthetic_dataset_{stem}.json")
    return match["family"] if match else stem


def _build(
    dataset: str, items: Mapping[str, dict[int, Item]], hypotheses: list[PaperHypothesis]
) -> tuple[list[Instance], _Report]:
    report = _Report(hypotheses)
    built: list[Instance] = []
    in_pair: set[tuple[str, int]] = set()
    for hypothesis in hypotheses:
        if hypothesis.compares_prompting:
            report.by_prompting.append(hypothesis.id)
            continue
        report.directions[hypothesis.id] = hypothesis.direction
        for p_stem, q_stem in hypothesis.file_pairs:
            for index, p in sorted(items[p_stem].items()):
                q = items[q_stem].get(index)
                if q is None or q.shown() == p.shown():
                    continue  # no partner, or one the model reads as the same text: no pair
                if len(q.options) != len(p.options):
                    raise DatasetError(
                        q.file,
                        f"question_idx {index} has {len(q.options)} options, its partner in "
                        f"{p.file} {len(p.options)}; a pair shows the same number of options",
                        row=q.row,
                        column="incorrect_answer",
                    )
                built.append(_pair(dataset, hypothesis.id, p_stem, q_stem, p, q))
                report.pairs[hypothesis.id] += 1
                in_pair.update({(p_stem, index), (q_stem, index)})
    for stem, by_index in sorted(items.items()):
        family = _family_of(stem)
        for index, item in sorted(by_index.items()):
            if (stem, index) in in_pair:
                report.paired_items[family] += 1
            else:
                report.unpaired_items[family] += 1
                built.append(_unpaired(dataset, stem, item))
    return built, report


def _pair(dataset: str, hypothesis: str, p_stem: str, q_stem: str, p: Item, q: Item) -> Instance:
    return Instance(
        id=stable_id("dataset", dataset, KIND, hypothesis, p_stem, q_stem, p.index),
        test_case=hypothesis,
        test_case_hash="",
        scenario=_family_of(p_stem),
        control=p.filled(),
        treatment=q.filled(),
        metric=MetricParams(k=1.0, y1=float(p.correct), y2=float(q.correct)),
        instance_index=p.index,
        variant="pair",
        values={
            "pair_id": f"{hypothesis}:{p_stem}:{p.index}",
            "hypothesis": hypothesis,
            "question_idx": p.index,
            "correct": [p.correct, q.correct],
            "files": [p.file, q.file],
            "generation_mode": [p.mode, q.mode],
        },
        dataset=dataset,
    )


def _unpaired(dataset: str, stem: str, item: Item) -> Instance:
    return Instance(
        id=stable_id("dataset", dataset, KIND, stem, item.index, False),
        test_case=bias_id(stem),
        test_case_hash="",
        scenario=_family_of(stem),
        control=item.filled(),
        treatment=item.filled(),
        metric=MetricParams(k=1.0, y1=float(item.correct), y2=float(item.correct)),
        instance_index=item.index,
        variant="unpaired",
        values={
            "question_idx": item.index,
            "correct": [item.correct, item.correct],
            "files": [item.file],
            "generation_mode": [item.mode],
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
    for name in FIELDS:
        if name not in entry:
            raise fail(name, "is missing")
    index = entry["question_idx"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**53:
        shown = repr(index) if len(repr(index)) <= 40 else "a huge number"
        raise fail("question_idx", f"expected a whole number from 0 to 2**53, found {shown}")
    question = entry["question"]
    if not isinstance(question, str) or not question.strip():
        raise fail("question", "expected a non-empty text")
    wrong = entry["incorrect_answer"]
    raw = [("target_answer", entry["target_answer"])]
    raw += [("incorrect_answer", w) for w in (wrong if isinstance(wrong, list) else [wrong])]
    answers: list[tuple[str, str]] = []
    for name, value in raw:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise fail(name, f"expected a text or a number, found {type(value).__name__}")
        if not isinstance(value, str) and not abs(value) <= MAX_NUMBER:  # nan, inf, 10**400
            shown = repr(value) if len(repr(value)) <= 40 else "a huge number"
            raise fail(name, f"a number must be finite and within ±{MAX_NUMBER:g}, found {shown}")
        label, text = _option(value)
        if not text:
            raise fail(name, "is empty")
        if any(text == seen and label == other for other, seen in answers):
            # (labelled options may repeat a text: they are still distinct positions)
            raise fail(name, "is the same as target_answer or another incorrect answer")
        answers.append((label, text))
    body, inline = _inline_options(question)
    if inline:  # the question writes its options out: they are the options, as written
        for (name, _), answer in zip(raw, answers, strict=True):
            if _position(answer, inline) is None:
                raise fail(name, "matches none of the options written in the question")
        correct = _position(answers[0], inline)
        return Item(file, row, index, body, tuple(inline), correct or 0, _mode(entry), True)
    # the options are not written out (Yes/No, a number): the answers are the options
    order = sorted(range(len(answers)), key=lambda i: (answers[i][0] or "~", answers[i][1]))
    options = tuple(answers[i][1] for i in order)
    return Item(file, row, index, body, options, order.index(0), _mode(entry), False)


def _mode(entry: Mapping[str, Any]) -> str:
    return str(entry.get("generation_mode", ""))


def _inline_options(question: str) -> tuple[str, list[str]]:
    """The question's text before its "(a) … (b) …" options, and the options as written.

    The last "(a)" that is followed by "(b)" starts the options; each runs to the next label.
    Whitespace inside an option (a label on a line of its own) is joined to single spaces.
    """
    text = question.replace("\r\n", "\n")
    labels = list(_INLINE_LABEL_RE.finditer(text))
    for start in range(len(labels) - 1, -1, -1):
        run = [labels[start]]
        for match in labels[start + 1 :]:
            if ord(match[1]) == ord(run[-1][1]) + 1:
                run.append(match)
        if run[0][1] != "a" or len(run) < 2:
            continue
        ends = [m.start() for m in run[1:]] + [len(text)]
        options = [" ".join(text[m.end() : e].split()) for m, e in zip(run, ends, strict=True)]
        if all(options):
            return text[: run[0].start()].strip(), options
    return text.strip(), []


def _position(answer: tuple[str, str], options: list[str]) -> int | None:
    """Where an answer is among the written options: by its label, else by its text."""
    label, text = answer
    if label and ord(label) - ord("a") < len(options):
        return ord(label) - ord("a")

    def norm(value: str) -> str:
        return " ".join(value.split()).rstrip(".").strip().lower()

    matches = [i for i, option in enumerate(options) if norm(option) == norm(text)]
    return matches[0] if len(matches) == 1 else None


def _option(value: str | int | float) -> tuple[str, str]:
    """("a", text) for "(a) text"; ("", "No") for "[No]"; numbers as written (3.0 as 3)."""
    if not isinstance(value, str):
        return "", str(int(value)) if float(value).is_integer() else str(value)
    labelled = _LABEL_RE.match(value)
    if labelled:
        return labelled[1], " ".join(labelled[2].split())
    bracketed = _BRACKETS_RE.match(value)
    return "", (bracketed[1] if bracketed else value).strip()


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
    results_page="tokenbias",
)
