"""The token-bias study (Jiang et al. 2024): paired items P / P' and their hypothesis tests.

Design: a pair becomes ONE ordinary stored instance, P as the control half and P' as the
treatment half, both with the same two options in the same (seeded) order. The metric is
k = 1, y1 = y2 = index of the correct option, so the engine's own score of a pair is
(P' correct) - (P correct) in {-1, 0, 1}. A run shows the options as the items write them
unless it chooses to reverse them in a seeded half of the pairs (`RunSpec.option_order`).
The runner, the decisions table, exports and Explore therefore work unchanged, and
the 2x2 table of a hypothesis is recomputed from any export's `control_answer`,
`treatment_answer` and `y1`/`y2` columns.

The study is data (`data/tokenbias.toml`): entity lists, item families, hypotheses
with declarative perturbations (`cogbias.studies.tokenbias_items`). `cogbias.datasets.tokenbias_study.materialise` writes its instances
into the store as the dataset `tokenbias` (one transaction, a no-op when unchanged).
"""

from __future__ import annotations

import hashlib
import json
import random
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cogbias.core.limits import name_problem
from cogbias.core.metrics import MetricParams
from cogbias.core.records import DecisionStatus, Instance, decode_filled, stable_id
from cogbias.core.run_record import Run
from cogbias.core.templates import render_decision_text, substitute
from cogbias.library.testcases import DATA_DIR
from cogbias.store import Store
from cogbias.studies import analysis
from cogbias.studies import tokenbias_items as items
from cogbias.studies.tokenbias_hypotheses import describe_alternative, holds_token_bias_pairs

STUDY_FILE = DATA_DIR / "tokenbias.toml"
KIND = "tokenbias-study"


class StudyError(ValueError):
    """A problem in a study file, located by file and entry (e.g. `hypotheses[2].perturb[1]`)."""

    def __init__(self, file: str | Path, where: str, message: str) -> None:
        super().__init__(f"{Path(file).name}: {where}: {message}")


@dataclass(frozen=True)
class Family:
    """An item template: situation, prompt, correct and incorrect option over sampled values."""

    id: str
    kind: str
    sample: dict[str, str]  # gap -> entity list
    derive: dict[str, str]  # gap -> template over sampled values
    situation: str
    prompt: str
    correct: str
    incorrect: str


@dataclass(frozen=True)
class Hypothesis:
    id: str
    title: str
    description: str
    families: tuple[str, ...]
    alternative: str
    perturb: tuple[dict[str, Any], ...]
    base: str | None = None
    items: int | None = None


@dataclass(frozen=True)
class Study:
    id: str
    name: str
    description: str
    seed: int
    items: int
    hypotheses: dict[str, Hypothesis]
    families: dict[str, Family]
    lists: dict[str, list[Any]]
    quantifiers: dict[str, str]
    phrasings: tuple[str, ...]
    path: Path
    content_hash: str

    @property
    def alternatives(self) -> dict[str, str]:
        return {h.id: h.alternative for h in self.hypotheses.values()}


# --------------------------------------------------------------------------- loading


def load_study(path: str | Path | None = None) -> Study:
    """Read and check a study file; every problem names the file and the entry."""
    path = Path(path or STUDY_FILE)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StudyError(path, "file", f"is not valid UTF-8 TOML ({exc})") from None
    check = _Checker(path)
    lists = check.table(data, "lists", "lists")
    families = {}
    for i, entry in enumerate(check.array(data, "families")):
        where = f"families[{i}]"
        family = Family(
            id=check.name(entry, "id", where),
            kind=check.text(entry, "kind", where),
            sample=check.table(entry, "sample", where, default={}),
            derive=check.table(entry, "derive", where, default={}),
            situation=check.text(entry, "situation", where),
            prompt=check.text(entry, "prompt", where),
            correct=check.text(entry, "correct", where),
            incorrect=check.text(entry, "incorrect", where),
        )
        for gap, name in family.sample.items():
            if name not in lists or not lists[name]:
                raise StudyError(path, f"{where}.sample.{gap}", f"no entity list {name!r}")
        families[family.id] = family
    hypotheses: dict[str, Hypothesis] = {}
    for i, entry in enumerate(check.array(data, "hypotheses")):
        where = f"hypotheses[{i}]"
        hypothesis = Hypothesis(
            id=check.name(entry, "id", where),
            title=check.text(entry, "title", where),
            description=str(entry.get("description", "")),
            families=tuple(entry.get("families", ())),
            alternative=check.text(entry, "alternative", where),
            perturb=tuple(check.array(entry, "perturb", where)),
            base=entry.get("base"),
            items=entry.get("items"),
        )
        _check_hypothesis(path, where, hypothesis, families, hypotheses, lists)
        hypotheses[hypothesis.id] = hypothesis
    return Study(
        id=check.text(data, "id", "file"),
        name=check.text(data, "name", "file"),
        description=str(data.get("description", "")).strip(),
        seed=check.whole(data, "seed", 0),
        items=check.whole(data, "items", 10, minimum=1),
        hypotheses=hypotheses,
        families=families,
        lists=lists,
        quantifiers=check.table(data, "quantifiers", "file", default={}),
        phrasings=tuple(check.table(data, "frame_source", "file", default={}).get("phrasings", ())),
        path=path,
        content_hash=hashlib.sha256(raw).hexdigest()[:16],
    )


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def text(self, entry: Mapping[str, Any], key: str, where: str) -> str:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise StudyError(self.path, f"{where}.{key}", "a non-empty text is required")
        return value

    def name(self, entry: Mapping[str, Any], key: str, where: str) -> str:
        """An id (a family's, a hypothesis'): a name, `limits.name_problem`."""
        value = self.text(entry, key, where)
        problem = name_problem(value)
        if problem:
            raise StudyError(self.path, f"{where}.{key}", problem)
        return value

    def whole(self, entry: Mapping[str, Any], key: str, default: int, minimum: int = 0) -> int:
        value = entry.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise StudyError(self.path, key, f"a whole number, at least {minimum}, is required")
        return value

    def table(self, entry: Mapping[str, Any], key: str, where: str, default: Any = None) -> Any:
        value = entry.get(key, default)
        if not isinstance(value, dict):
            raise StudyError(self.path, f"{where}.{key}", "a table is required")
        return value

    def array(self, entry: Mapping[str, Any], key: str, where: str = "file") -> list[Any]:
        value = entry.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise StudyError(self.path, f"{where}.{key}", "a non-empty array of tables is required")
        return value


def _check_hypothesis(
    path: Path,
    where: str,
    h: Hypothesis,
    families: Mapping[str, Family],
    earlier: Mapping[str, Hypothesis],
    lists: Mapping[str, Any],
) -> None:
    if h.alternative not in analysis.ALTERNATIVES:
        raise StudyError(
            path, f"{where}.alternative", f"use one of {', '.join(analysis.ALTERNATIVES)}"
        )
    if h.items is not None and (not isinstance(h.items, int) or h.items < 1):
        raise StudyError(path, f"{where}.items", "a whole number of pairs, at least 1")
    if h.base is not None and h.base not in earlier:
        raise StudyError(path, f"{where}.base", f"no earlier hypothesis {h.base!r} to chain from")
    if h.base is None and not h.families:
        raise StudyError(path, f"{where}.families", "name at least one item family")
    for name in h.families:
        if name not in families:
            raise StudyError(path, f"{where}.families", f"no family named {name!r}")
    for j, op in enumerate(h.perturb):
        kind = op.get("op")
        if kind not in items.OP_FUNCTIONS:
            raise StudyError(
                path, f"{where}.perturb[{j}].op", f"use one of {', '.join(items.OPS)}, not {kind!r}"
            )
        for key in items.REQUIRED[kind]:
            if key not in op:
                raise StudyError(path, f"{where}.perturb[{j}]", f"'{kind}' needs '{key}'")
        if "list" in op and "{{" not in op["list"] and op["list"] not in lists:
            raise StudyError(path, f"{where}.perturb[{j}].list", f"no entity list {op['list']!r}")


# --------------------------------------------------------------------------- building pairs


def chain(study: Study, hypothesis: Hypothesis) -> list[Hypothesis]:
    """The hypotheses from the root to this one: each one's P' is the next one's P."""
    out = [hypothesis]
    while out[0].base is not None:
        out.insert(0, study.hypotheses[out[0].base])
    return out


def sample_values(study: Study, family: Family, rng: random.Random) -> dict[str, Any]:
    """Draw every gap from its entity list; table entries spread into `{{gap_key}}` values."""
    values: dict[str, Any] = {}
    for gap, name in family.sample.items():
        value = rng.choice(study.lists[name])
        if isinstance(value, dict):
            values.update({f"{gap}_{k}": v for k, v in value.items()})
        else:
            values[gap] = value
    for gap, template in family.derive.items():
        values[gap] = substitute(template, values)
    return values


def _context(study: Study, values: Mapping[str, Any], *key: Any) -> items.Context:
    rng = random.Random(stable_id("tokenbias-perturb", study.seed, *key))
    return items.Context(values, study.lists, study.quantifiers, study.phrasings, rng)


def build_pair(study: Study, hypothesis: Hypothesis, index: int) -> Instance:
    """Item `index` of a hypothesis as one instance: P (control) and P' (treatment)."""
    path = chain(study, hypothesis)
    root = path[0]
    family = study.families[root.families[index % len(root.families)]]
    rng = random.Random(stable_id("tokenbias-item", study.seed, root.id, index))
    values = sample_values(study, family, rng)
    item = items.make_item(
        family.situation, family.prompt, family.correct, family.incorrect, values, rng
    )
    original = item
    notes: list[str] = []
    try:
        for step in path:
            original = item
            item, notes = items.apply(item, step.perturb, _context(study, values, step.id, index))
    except items.PerturbationError as exc:
        raise StudyError(study.path, f"hypothesis {step.id}, item {index}", str(exc)) from None
    perturbed = item
    return Instance(
        id=stable_id("tokenbias", study.id, study.content_hash, hypothesis.id, index),
        test_case=hypothesis.id,
        test_case_hash=study.content_hash,
        scenario=f"{family.kind}: {hypothesis.title}",
        control=original.filled(),
        treatment=perturbed.filled(),
        metric=MetricParams(k=1.0, y1=float(original.correct), y2=float(perturbed.correct)),
        instance_index=index,
        seed=study.seed,
        variant=family.id,
        values={
            "study": study.id,
            "hypothesis": hypothesis.id,
            "pair_id": f"{hypothesis.id}:{index}",
            "family": family.id,
            "alternative": hypothesis.alternative,
            "correct": [original.correct, perturbed.correct],
            "perturbations": [op["op"] for op in hypothesis.perturb],
            "sampled": values,
        },
        insertions=[{"gap": "perturbation", "source": "perturbation", "text": n} for n in notes],
        dataset=study.id,
    )


def build_instances(study: Study) -> Iterator[Instance]:
    for hypothesis in study.hypotheses.values():
        for index in range(hypothesis.items or study.items):
            yield build_pair(study, hypothesis, index)


# --------------------------------------------------------------------------- results


def promptings(store: Store) -> dict[str, Any]:
    """Each stored run's prompting method (`RunSpec.prompting`), by run id, read from its
    `Run` record (a spec that cannot be read counts as the baseline, as an unset one does)."""
    runs = [Run.from_row(row) for row in store.runs()]
    return {run.id: run.spec.get("prompting", "baseline") for run in runs}


def correctness_frame(store: Store, dataset: str) -> pd.DataFrame:
    """One row per answered pair: hypothesis, model, prompting, original/perturbed correct.

    Correctness is read exactly as an export allows: the chosen option (original order) against
    the metric's y1 (P) and y2 (P'). The prompting method is the run's (`RunSpec.prompting`).
    """
    prompting = promptings(store)
    records = []
    for batch in store.iter_pairs(dataset=dataset):
        for pair in batch:
            decision = pair.decision
            if decision.status != DecisionStatus.OK or pair.metric is None:
                continue
            metric = json.loads(pair.metric)
            records.append(
                {
                    "hypothesis": decision.test_case,
                    "model": decision.model,
                    "prompting": prompting.get(decision.run_id, "published"),
                    "original_correct": decision.control_choice == int(metric["y1"]),
                    "perturbed_correct": decision.treatment_choice == int(metric["y2"]),
                    "instance_id": decision.instance_id,
                    "repeat": decision.repeat,
                    "reversed": bool(decision.reversed),
                }
            )
    return pd.DataFrame.from_records(records, columns=CORRECTNESS_COLUMNS)


CORRECTNESS_COLUMNS = [
    "hypothesis",
    "model",
    "prompting",
    "original_correct",
    "perturbed_correct",
    "instance_id",
    "repeat",
    "reversed",
]


def prompting_pairs(frame: pd.DataFrame, hypotheses: Mapping[str, Any]) -> pd.DataFrame:
    """Rows for the hypotheses that perturb the prompt (the paper's H2 and H6).

    P is an item's P half answered under the P method, P' the same item's P half answered under
    the P' method, by the same model in the same repeat, its options shown in the same order
    (runs may choose different orders): only items answered both ways pair.
    """
    out = []
    key = ["instance_id", "model", "repeat", "reversed"]
    for name, spec in hypotheses.items():
        items = frame[frame["hypothesis"].isin(spec["sources"])]
        for p_method, q_method in spec["methods"]:
            p = items[items["prompting"] == p_method][[*key, "original_correct"]]
            q = items[items["prompting"] == q_method][[*key, "original_correct"]]
            joined = p.merge(q, on=key, suffixes=("_p", "_q")).drop_duplicates(key)
            if joined.empty:
                continue
            out.append(
                pd.DataFrame(
                    {
                        "hypothesis": name,
                        "model": joined["model"],
                        "prompting": f"{p_method} vs {q_method}",
                        "original_correct": joined["original_correct_p"],
                        "perturbed_correct": joined["original_correct_q"],
                    }
                )
            )
    columns = CORRECTNESS_COLUMNS[:5]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)


def results(
    store: Store,
    dataset: str = "tokenbias",
    alpha: float = analysis.ALPHA,
    normal_above: int = analysis.NORMAL_ABOVE,
) -> pd.DataFrame:
    """The paper's hypothesis tables for a study or an imported token-bias dataset."""
    stored = store.dataset(dataset)
    if stored is None:
        names = [d["name"] for d in store.datasets()]
        raise KeyError(
            f"no study or dataset '{dataset}' in this database (present: {', '.join(names) or 'none'}); "
            "run `cogbias run study tokenbias --models ...` first"
        )
    meta = json.loads(stored["meta"] or "{}")
    alternatives = dict(meta.get("alternatives", {}))
    by_prompting = meta.get("prompting_hypotheses", {})
    frame = correctness_frame(store, dataset)
    # only true pairs are counted: unpaired items have a test case but no hypothesis
    pairs = frame[frame["hypothesis"].isin(list(alternatives))][CORRECTNESS_COLUMNS[:5]]
    across = prompting_pairs(frame, by_prompting)
    alternatives.update({name: spec["alternative"] for name, spec in by_prompting.items()})
    both = pd.concat([pairs, across], ignore_index=True) if len(across) else pairs
    table = analysis.hypothesis_table(both, alternatives, alpha, normal_above)
    # which way each test looks, stated beside its p-value (one-sided: which side)
    table["direction"] = [describe_alternative(a) for a in table["alternative"]]
    return table


def token_bias_datasets(store: Store) -> list[str]:
    """Datasets in the store that carry hypothesis alternatives (studies and paper imports)."""
    return [d["name"] for d in store.datasets() if holds_token_bias_pairs(d.get("meta") or {})]


def pair_views(
    store: Store, dataset: str, hypothesis: str, model: str, limit: int = 20, offset: int = 0
) -> list[dict[str, Any]]:
    """Answered pairs side by side: P and P' as the model read them, answers, correctness."""
    prompting = promptings(store)
    views = []
    for pair in store.pairs(
        bias=hypothesis, model=model, dataset=dataset, limit=limit, offset=offset
    ):
        d = pair.decision
        metric = json.loads(pair.metric) if pair.metric else {}
        halves = {}
        for half, key, raw in (
            ("control", "y1", pair.control_half),
            ("treatment", "y2", pair.treatment_half),
        ):
            filled = decode_filled(raw)
            choice = getattr(d, f"{half}_choice")
            halves[half] = {
                "text": render_decision_text(filled, d.control_order),
                "answer": getattr(d, f"{half}_answer") or "",
                "chosen": None if choice is None else filled.options[choice],
                "correct_option": filled.options[int(metric[key])] if key in metric else None,
                "correct": None
                if choice is None or key not in metric
                else choice == int(metric[key]),
            }
        views.append(
            {
                "decision_id": d.id,
                "prompting": prompting.get(d.run_id, "published"),
                "status": d.status,
                "error": d.error,
                "original": halves["control"],
                "perturbed": halves["treatment"],
            }
        )
    return views
