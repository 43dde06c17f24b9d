"""What a study run asks: its spec, its units of work, and the words of every turn.

A run crosses a study's tests with models × temperatures × prompt variants × mitigations ×
repeats. The unit of work is a `Unit`: one condition of one test in one such cell, for one
repeat (`slot`) and one presentation order. Conditions and options tests answer a unit with
one decision (asked again, up to `max_attempts` times, while the answer cannot be read: the
thesis' "repeat until n valid answers"); a sequence test's unit is one conversation of
`length` decisions. `compose` turns a unit into its `Script` — the same words every time for
the same spec, so a resumed run asks exactly what the first worker would have asked.

The spec stored with a run is fully resolved (defaults filled in, the study's source hashed
and kept in the store), so a run can be resumed after the study file changed.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cogbias.core import records
from cogbias.core.answers import permuted_orders
from cogbias.core.limits import checked_name
from cogbias.studies import interventions
from cogbias.studies.definitions import (
    MAX_ATTEMPTS,
    MAX_REPEATS,
    Study,
    Variant,
    render,
)
from cogbias.studies.questions import option_list, option_name, question, sequence_turns
from cogbias.studies.study_catalog import get_study
from cogbias.studies.study_files import parse_study

MAX_UNITS = 2_000_000  # ~1 GB of plan in memory; paper scale (the thesis) is ~320,000
LOCAL_REPEATS = 2  # a study on the local model runs in miniature unless --repeats says more
REVISE_TOKENS_PER_ITEM = 8
# Rough token use per call, for the estimate before a run: a question, and what each earlier
# turn of a conversation adds to the prompt (its item and the model's short answer).
EST_PROMPT_TOKENS = 300
EST_TOKENS_PER_EARLIER_TURN = 80
EST_REWRITE_COMPLETION_TOKENS = 300

# Mitigation texts for studies that do not bring their own (written for any test): the
# awareness note and the self-help request are the paired runs' (`studies.interventions`).
DEFAULT_PROMPTS = {
    "awareness": interventions.AWARENESS_NOTE,
    "selfhelp": interventions.SELF_HELP_REQUEST,
    "revise": "Look back at all your decisions above, side by side. If an earlier item may "
    "have swayed a later decision, change it. Reply with one line per item, in the same "
    "order, each line only your final decision.",
}
MITIGATION_ORDER = ("none", "awareness", "contrastive", "counterfactual", "selfhelp")


class StudyPlanError(ValueError):
    """The run asks for something the study cannot do (named in the message)."""


@dataclass(frozen=True)
class StudySpec:
    """A study run as asked for; `resolved` fills in the study's defaults."""

    study: str
    models: list[str]
    tests: list[str] = field(default_factory=list)  # empty: all
    temperatures: list[float] = field(default_factory=list)  # empty: the study's sweep
    variants: list[str] = field(default_factory=list)  # empty: all the study's variants
    mitigations: list[str] = field(default_factory=lambda: ["none"])
    repeats: int = 0  # 0: the study's (in miniature on the local model)
    max_attempts: int = 0  # 0: the study's
    seed: int = 0
    api_base: str | None = None
    study_hash: str = ""  # the study source the run was planned from

    def canonical(self) -> dict[str, Any]:
        return {"kind": "study", **asdict(self)}

    @property
    def run_id(self) -> str:
        return records.run_id_of(self.canonical())

    @classmethod
    def from_stored(cls, spec: dict[str, Any] | str) -> StudySpec:
        data = json.loads(spec) if isinstance(spec, str) else dict(spec)
        data.pop("kind", None)
        return cls(**data)


@dataclass(frozen=True)
class Unit:
    test: str
    condition: str
    model: str
    temperature: float
    variant: str
    mitigation: str
    slot: int
    order: int = 0

    def conversation(self, run_id: str, attempt: int = 0) -> str:
        return records.stable_id(
            run_id, self.test, self.condition, self.model, self.temperature, self.variant,
            self.mitigation, self.slot, self.order, attempt,
        )  # fmt: skip


@dataclass(frozen=True)
class Script:
    """The words of one unit. `turns` are the user messages of the decisions (one, or one per
    item of a sequence); `rewrite` is the self-help request that precedes a single decision,
    `revise` the self-help turn that ends a sequence; `original` the question as the study
    wrote it (before a mitigation changed it)."""

    turns: list[str]
    original: str
    rewrite: str | None = None
    revise: str | None = None
    order: list[int] = field(default_factory=list)  # item indices in presented order
    status_quo_at: int | None = None


@dataclass
class StudyPlan:
    spec: StudySpec
    study: Study
    units: list[Unit]
    notes: list[str]

    @property
    def planned(self) -> int:
        return len(self.units)

    def calls(self) -> int:
        """Model calls when every answer is read at the first attempt."""
        total = 0
        for unit in self.units:
            test = self.study.tests[unit.test]
            turns = test.length if test.design == "sequence" else 1
            total += turns + (unit.mitigation == "selfhelp")
        return total

    def call_sizes(self) -> dict[str, dict[tuple[int, int], int]]:
        """Per model: (prompt tokens, completion tokens) -> how many calls of that size, when
        every answer is read at the first attempt (a conversation's prompt grows per turn)."""
        from cogbias.llm.profiles import resolve as resolve_model

        sizes: dict[str, dict[tuple[int, int], int]] = {}
        answer = {
            m: int(resolve_model(m, self.spec.api_base).answer_tokens) for m in self.spec.models
        }
        for unit in self.units:
            test = self.study.tests[unit.test]
            counts = sizes.setdefault(unit.model, {})
            turns = test.length if test.design == "sequence" else 1
            if unit.mitigation == "selfhelp" and test.design != "sequence":
                key = (EST_PROMPT_TOKENS, EST_REWRITE_COMPLETION_TOKENS)
                counts[key] = counts.get(key, 0) + 1
            revise = unit.mitigation == "selfhelp" and test.design == "sequence"
            for turn in range(turns + revise):
                key = (EST_PROMPT_TOKENS + turn * EST_TOKENS_PER_EARLIER_TURN, answer[unit.model])
                counts[key] = counts.get(key, 0) + 1
        return sizes

    def estimated_cost(self, batch: bool = False) -> float | None:
        """USD for priced models when every answer is read at the first attempt
        (`costs.estimate`); None when a model's price is unknown (the `random` model and
        local models cost nothing)."""
        from cogbias.llm import costs

        asked = [
            costs.Calls(model, prompt, completion, n)
            for model, sizes in self.call_sizes().items()
            for (prompt, completion), n in sizes.items()
        ]
        return costs.estimate(asked, self.spec.api_base, batch)

    def too_few_repeats(self) -> str | None:
        """What to say before Start when the repeats cannot give some test a figure (Cohen's
        d with one answer per condition): every such cell would read "–"."""
        from cogbias.studies.study_tables import needed_repeats

        needed, metrics = needed_repeats(self.study, self.spec.tests)
        if self.spec.repeats >= needed:
            return None
        return (
            f"{' and '.join(metrics)} needs at least {needed} answers per condition: with "
            f"{self.spec.repeats} repeat{'s' * (self.spec.repeats != 1)} its cells will have "
            f"no value. Choose {needed} repeats or more (the study asks "
            f"{self.study.repeats:,})."
        )

    def describe(self) -> str:
        from cogbias.llm import costs

        spec = self.spec
        cost = self.estimated_cost()
        lines = [
            f"study {self.study.id}: {len(self.units)} units, {self.calls()} model calls at "
            f"least ({len(spec.tests)} tests × {len(spec.models)} models × "
            f"{len(spec.temperatures)} temperatures × {len(spec.variants)} variants × "
            f"{len(spec.mitigations)} mitigations × {spec.repeats} repeats; up to "
            f"{spec.max_attempts} attempts per answer); estimated cost: "
            + costs.estimate_text(cost)
            + " (answers already in the cache are free)",
            *self.notes,
        ]
        return "\n".join(lines)


def load_study(name: str, store: Any = None) -> Study:
    """A built-in or user study by id, or the prompts of an imported thesis dataset; a name
    that is both is refused (which one was meant cannot be guessed)."""
    rows = store.study_prompts(name) if store is not None else []
    try:
        study = get_study(name)
    except KeyError as missing:
        if rows:
            from cogbias.studies.questions import study_from_prompts

            meta = json.loads((store.dataset(name) or {}).get("meta") or "{}")
            # imports before biases.csv was read had only experiments.csv
            return study_from_prompts(rows, name, meta.get("prompt_file") or "experiments.csv")
        raise KeyError(f"no study or dataset '{name}': {missing.args[0]}") from None
    if rows:
        raise StudyPlanError(
            f"'{name}' names both a study and an imported dataset's prompts; import the "
            f"dataset again under another name (`cogbias import mohr2025 FOLDER --name "
            f"{name}_data`) and delete this one (`cogbias delete dataset {name}`)"
        )
    return study


def shadowing_problems(name: str) -> list[str]:
    """Why a user's study file of this name is ignored (a built-in has its id), for a note."""
    from cogbias.studies.study_catalog import load_studies_report

    return [str(p) for p in load_studies_report()[1] if Path(p.file).stem == name]


def stored_study(store: Any, spec: StudySpec) -> Study:
    source = store.study_source(spec.study_hash)
    if source is None:
        raise KeyError(
            f"the study {spec.study!r} this run was planned from ({spec.study_hash}) is no "
            "longer in the store, so the run cannot be scored or resumed; delete the run with "
            "`cogbias delete run RUN_ID`"
        )
    return parse_study(source, f"<study {spec.study} of the run>")


def max_temperature(profile: Any) -> float:
    """The highest temperature a provider accepts (Anthropic's API stops at 1.0)."""
    return float(profile.max_temperature)  # resolved once by the profile


def _pick(asked: list[str], known: list[str], what: str) -> list[str]:
    unknown = [a for a in asked if a not in known]
    if unknown:
        raise StudyPlanError(f"unknown {what} '{unknown[0]}'; the study has: {', '.join(known)}")
    return asked or known


def default_repeats(study: Study, models: list[str]) -> int:
    """The repeats a run asks when none are given: the study's own, or at most
    LOCAL_REPEATS (a miniature) when every model is the local one. The Studies page shows
    this number in its box, so the box and the plan always name the same count."""
    from cogbias.llm.profiles import resolve as resolve_model

    local = bool(models) and all(resolve_model(m).kind == "local" for m in models)
    return min(study.repeats, LOCAL_REPEATS) if local else study.repeats


def resolve(spec: StudySpec, study: Study) -> StudySpec:
    """The spec with every default filled in and the study's source hash."""
    if not spec.models:
        raise StudyPlanError("give at least one model")
    for model in spec.models:
        try:
            checked_name(model, "model")  # a label on every page, chart and report
        except ValueError as exc:
            raise StudyPlanError(str(exc)) from None
    # A name given twice is asked once (twice would plan the same conversations twice).
    tests = _pick(list(dict.fromkeys(spec.tests)), list(study.tests), "test")
    variants = _pick(
        list(dict.fromkeys(spec.variants)), list(study.variants) or ["default"], "variant"
    )
    temperatures = list(dict.fromkeys(float(t) for t in spec.temperatures)) or list(
        study.temperatures
    )
    for t in temperatures:
        if not 0.0 <= t <= 2.0:
            raise StudyPlanError(f"temperature {t} is outside 0..2")
    bad = [m for m in spec.mitigations if m not in MITIGATION_ORDER]
    if bad:
        raise StudyPlanError(f"unknown mitigation '{bad[0]}'; use {', '.join(MITIGATION_ORDER)}")
    mitigations = sorted(set(spec.mitigations) or {"none"}, key=MITIGATION_ORDER.index)
    for mitigation in ("contrastive", "counterfactual"):
        if mitigation in mitigations:
            lacking = [t for t in tests if mitigation not in study.tests[t].examples]
            if lacking:
                raise StudyPlanError(
                    f"mitigation '{mitigation}' needs examples in every test; "
                    f"test '{lacking[0]}' has none ([tests.{lacking[0]}.examples])"
                )
    repeats = spec.repeats
    if not 0 <= repeats <= MAX_REPEATS:
        raise StudyPlanError(f"repeats must be between 1 and {MAX_REPEATS:,}, not {repeats}")
    if not 0 <= spec.max_attempts <= MAX_ATTEMPTS:
        raise StudyPlanError(
            f"attempts must be between 1 and {MAX_ATTEMPTS}, not {spec.max_attempts}"
        )
    if repeats == 0:
        repeats = default_repeats(study, spec.models)
    return StudySpec(
        study=study.id if not spec.study else spec.study,
        models=list(dict.fromkeys(spec.models)),
        tests=tests,
        temperatures=temperatures,
        variants=variants,
        mitigations=mitigations,
        repeats=repeats,
        max_attempts=spec.max_attempts or study.max_attempts,
        seed=spec.seed,
        api_base=spec.api_base,
        study_hash=records.stable_id(study.source),
    )


def n_orders(study: Study, test_id: str) -> int:
    test = study.tests[test_id]
    return {"options": test.k, "sequence": test.orders}.get(test.design, 1)


def plan(spec: StudySpec, study: Study) -> StudyPlan:
    """The units of a resolved spec, in a stable order; temperatures above what a model's
    provider accepts are left out, with a note."""
    from cogbias.llm.profiles import resolve as resolve_model

    per_model = (
        len(spec.variants)
        * len(spec.mitigations)
        * spec.repeats
        * sum(len(study.tests[t].conditions) * n_orders(study, t) for t in spec.tests)
    )
    total = per_model * len(spec.models) * len(spec.temperatures)
    if total > MAX_UNITS:
        raise StudyPlanError(
            f"this run would hold {total:,} units; one run takes at most {MAX_UNITS:,}: "
            "fewer repeats, tests, temperatures or models, or several runs"
        )
    units, notes, held = [], [], []  # held: the grammar notes
    for model in spec.models:
        profile = resolve_model(model, api_base=spec.api_base)
        limit = max_temperature(profile)
        skipped = [t for t in spec.temperatures if t > limit]
        if skipped:
            notes.append(
                f"note: {model} accepts temperatures up to {limit:g}; "
                f"{', '.join(f'{t:g}' for t in skipped)} left out for it"
            )
        if profile.grammar and len(skipped) < len(spec.temperatures):
            held.append(grammar_note(model, study, spec))
        for test_id in spec.tests:
            test = study.tests[test_id]
            for temperature in (t for t in spec.temperatures if t <= limit):
                for variant in spec.variants:
                    for mitigation in spec.mitigations:
                        for slot in range(spec.repeats):
                            for condition in test.conditions:
                                for order in range(n_orders(study, test_id)):
                                    units.append(
                                        Unit(
                                            test_id,
                                            condition.name,
                                            model,
                                            temperature,
                                            variant,
                                            mitigation,
                                            slot,
                                            order,
                                        )
                                    )
    if not units:  # every temperature is above what the models accept
        raise StudyPlanError(
            "nothing to run: " + "; ".join(n.removeprefix("note: ") for n in notes)
        )
    return StudyPlan(spec, study, units, notes + held)


# What the grammar of each answer format admits (`study_answers.answer_grammar`), in words.
GRAMMAR_WORDS = {
    "admit_reject": "admit or reject",
    "yes_no": "yes or no",
    "letter": "one of the letters offered",
    "number": "a number within the test's bounds",
}


def grammar_note(model: str, study: Study, spec: StudySpec) -> str:
    """What a plan says of a model whose profile takes a grammar (the local model): each of
    its answers is held to its test's format, so none rambles past it."""
    kinds = dict.fromkeys(study.tests[t].answer for t in spec.tests)
    held = " / ".join(GRAMMAR_WORDS.get(k, k) for k in kinds)
    free = "; a self-help rewrite is free text" if "selfhelp" in spec.mitigations else ""
    return f"note: {model} answers under a grammar admitting only {held}{free}"


def prompt_text(study: Study, name: str) -> str:
    return study.prompts.get(name) or DEFAULT_PROMPTS[name]


def compose(study: Study, spec: StudySpec, unit: Unit) -> Script:
    """The words of a unit: values drawn from a generator seeded by (seed, test, slot), so
    every condition, model, temperature and mitigation of a slot sees the same applicant."""
    test = study.tests[unit.test]
    condition = next(c for c in test.conditions if c.name == unit.condition)
    variant = study.variants.get(unit.variant) or Variant("default", persona=False)
    rng = random.Random(int(records.stable_id(spec.seed, test.id, unit.slot), 16))
    values = study.sample_values(rng)
    order: list[int] = []
    status_quo_at = None
    if test.design == "conditions":
        turns = [question(study, test, condition, values, variant)]
    elif test.design == "options":
        items = [render(test.item, study.sample_values(rng)) for _ in range(test.k)]
        order = permuted_orders(test.k)[unit.order]
        options, status_quo_at = option_list(test, condition, items, order)
        named = "" if status_quo_at is None else option_name(test, status_quo_at)
        turns = [
            question(study, test, condition, values, variant, options=options, status_quo=named)
        ]
    else:
        items = [render(test.item, study.sample_values(rng)) for _ in range(test.length)]
        order = sequence_order(test.length, unit.order)
        turns = sequence_turns(test, items, order)
        turns[0] = question(study, test, condition, values, variant) + "\n\n" + turns[0]
    original = turns[0]
    prefix = {
        "awareness": prompt_text(study, "awareness"),
        "contrastive": test.examples.get("contrastive", ""),
        "counterfactual": test.examples.get("counterfactual", ""),
    }.get(unit.mitigation)
    if prefix:
        turns[0] = prefix + "\n\n" + turns[0]
    rewrite = revise = None
    if unit.mitigation == "selfhelp":
        if test.design == "sequence":
            revise = prompt_text(study, "revise")
        else:
            rewrite = render(prompt_text(study, "selfhelp"), {"prompt": original})
    return Script(turns, original, rewrite, revise, order, status_quo_at)


def sequence_order(length: int, index: int) -> list[int]:
    """Presentation order `index` of a sequential test: the rows of a Williams design, so that
    every item is at every position once *and* follows every other item once (for an odd
    length the design has 2·length rows); past its rows, the rows reversed. Cyclic rotations
    would keep each item's predecessor fixed, and the anchoring test is about what came
    just before (BiasBuster §3, sequential bias)."""
    rows = permuted_orders(length, balanced=True)
    order = rows[index % len(rows)]
    return order[::-1] if index >= len(rows) else order
