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
(Yes/No, a number) is shown alone. One file's items are read and checked by `peek_items`; a
family name (from the file name) must be a name (`core.limits.name_problem`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cogbias.core.metrics import MetricParams
from cogbias.core.records import Instance, stable_id
from cogbias.datasets import importing
from cogbias.datasets.common import DatasetError, Format, ImportSummary, bias_id, bias_key
from cogbias.datasets.peek_items import Item, read_items
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
        match, named = STEM_RE.match(path.name), FILE_RE.match(path.name)
        if match is None or named is None:
            raise DatasetError(
                path.name,
                "is not named like the paper's files (synthetic_dataset_<family>_<mode>.json)",
            )
        _check_family(path.name, named["family"])
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


def _check_family(file: str, family: str) -> None:
    """A family names a hypothesis (its snake_case form is the id) and a scenario: `..`
    would give the empty id, a blank row on every page; a newline would split them."""

    def fail(column: str, message: str) -> DatasetError:
        return DatasetError(file, message, column=column)

    bias_key(family, "family (in the file name)", fail)


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
