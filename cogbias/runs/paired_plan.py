"""What a paired run asks: its spec, its instances, and what it will cost.

A paired run crosses test cases × scenarios × instances (generated from the library) or the
instances of an imported dataset with models × repeats; a unit is one pair (both halves of
one instance answered by one model, for one repeat). The spec is stored as canonical JSON and
its hash is the run id, so the same spec is the same run (see `RunSpec.canonical`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cogbias.core import metrics, records
from cogbias.core.limits import checked_name
from cogbias.core.reading import READ_ANSWER, READ_EXTRACTION
from cogbias.library import examples
from cogbias.library import testcases as library
from cogbias.library.testcases import Scenario, TestCase
from cogbias.llm import costs
from cogbias.llm.profiles import resolve
from cogbias.runs import factors, paired_scoring, pipeline, refusals, scorers
from cogbias.runs import prompting as prompting_methods
from cogbias.store import Store
from cogbias.studies import interventions
from cogbias.studies.tokenbias_hypotheses import holds_token_bias_pairs

SPEC_VERSION = 1
# Rough token use per LLM call, for estimates before a run (measured on the built-in library).
EST_PROMPT_TOKENS = {"generate": 450, "decide": 330, "extract": 200, "rewrite": 400}
EST_COMPLETION_TOKENS = {"generate": 120, "decide": 180, "extract": 4, "rewrite": 330}


@dataclass(frozen=True)
class RunSpec:
    """What a run asks for. Two runs with equal specs are the same run."""

    models: list[str]
    biases: list[str] = field(default_factory=list)  # empty: the whole library
    scenarios: int = 1
    instances: int = 1
    generator: str = field(default_factory=examples.default_generator)
    temperature: float = 0.0
    repeats: int = 1
    seed: int = 0
    generator_temperature: float = 0.7
    api_base: str | None = None
    dataset: str | None = None
    per_bias: int | None = None
    prompting: str = prompting_methods.BASELINE  # see cogbias.runs.prompting: one method per run
    # a name in runs/scorers.py; None: the user named none, and the models' profiles choose
    # when the run is planned (`paired_scoring.scoring_by_models`): read `Plan.spec.run_id`
    scoring: str | None = scorers.DEFAULT
    extractor: str | None = None  # who reads unclear answers (default: each decision model)
    # how each pair's options are ordered (core.metrics.OPTION_ORDERS); None: the dataset's
    # own, chosen when planned (`default_option_order`), so read `Plan.spec.run_id`
    option_order: str | None = None
    # how answers become choices (core.reading.READINGS): cogbias' reader, or the Malberg
    # paper's extraction call for every half
    reading: str = READ_ANSWER
    # answers asked of each half and how they become its answer (`runs.sampling`,
    # `runs.reducers`; None: the scorer's own reducer). One spelling (`scorers.spelled`):
    # `choice` asked N times is stored as `consistency:N`, whose N `samples` then repeats
    samples: int = 1
    reducer: str | None = None
    # how much a reasoning model may think and the debiasing intervention (`runs.factors`):
    # one value each per run, as `prompting` is; None / "none" ask as runs did before
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    intervention: str = interventions.NONE

    def __post_init__(self) -> None:
        if self.scoring is None:  # spelled once the models have chosen (`plan`)
            return
        scoring, samples, reducer = scorers.spelled(self.scoring, self.samples, self.reducer)
        object.__setattr__(self, "scoring", scoring)
        object.__setattr__(self, "samples", samples)
        object.__setattr__(self, "reducer", reducer)

    def canonical(self) -> dict[str, Any]:
        """The spec as stored and hashed into the run id.

        The fields of spec version 1 are always present (so run ids made before specs were
        versioned stay valid); fields added later appear only when they differ from their
        default, so adding an optional field never changes an existing run's id. A field whose
        value is what every run did before the field existed (`_AS_BEFORE`) is left out too:
        such a run is the run stored before, under the same id. `samples` is left out where the
        scoring names it (`consistency:N`), as it always was.
        """
        out: dict[str, Any] = {}
        named = scorers.get(self.scoring).samples if scorers.unknown(self.scoring) is None else 1
        for f in fields(self):
            value = getattr(self, f.name)
            before = _AS_BEFORE.get(f.name, _default(f))
            if f.name not in _V1_FIELDS and value in (_default(f), before):
                continue
            if f.name == "samples" and value == named:
                continue
            out[f.name] = list(value) if isinstance(value, list | tuple) else value
        return out

    @property
    def run_id(self) -> str:
        return records.run_id_of(self.canonical())

    @classmethod
    def from_stored(cls, spec: Mapping[str, Any] | str) -> RunSpec:
        """The spec of a stored run (JSON text or dict); refuses fields this version lacks."""
        data = json.loads(spec) if isinstance(spec, str) else dict(spec)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"this run was made by a newer cogbias (unknown spec fields: {', '.join(unknown)}); "
                "upgrade cogbias to resume it"
            )
        return cls(**data)


_V1_FIELDS = (
    "models",
    "biases",
    "scenarios",
    "instances",
    "generator",
    "temperature",
    "repeats",
    "seed",
    "generator_temperature",
    "api_base",
    "dataset",
    "per_bias",
)


# Later fields' values that mean what a stored spec without the field meant: runs reversed
# the options of a seeded half of their pairs before they could choose (`PairedKind.replan`
# resumes a stored spec without `option_order` so).
_AS_BEFORE: dict[str, Any] = {"option_order": metrics.HALF_REVERSED}


def _default(f: Any) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default


@dataclass
class InstanceJob:
    case: TestCase
    scenario: Scenario
    index: int
    id: str


@dataclass
class Plan:
    spec: RunSpec
    cases: dict[str, TestCase]
    jobs: list[InstanceJob]  # instances of the run (generated or to generate)
    dataset_instances: list[str]  # instance ids of an imported dataset
    # test cases this existing run keeps in the version it was planned with, though the
    # library has changed them since (say so: its results are of the older design)
    kept: tuple[str, ...] = ()
    # the spec named no scoring and its models chose this one (`paired_scoring`)
    chosen_scoring: str | None = None

    @property
    def instance_ids(self) -> list[str]:
        return self.dataset_instances or [j.id for j in self.jobs]

    @property
    def option_order(self) -> str:
        """How this run orders each pair's options (`plan` always chooses one)."""
        if self.spec.option_order is None:
            raise ValueError("a plan's spec names its option order: make plans with `plan`")
        return self.spec.option_order

    @property
    def planned(self) -> int:
        return len(self.instance_ids) * len(self.spec.models) * self.spec.repeats

    def llm_calls(self) -> dict[str, int]:
        """Upper bound of LLM calls by kind (cached calls are free and not counted later)."""
        gen = 0
        if not self.dataset_instances and not answers_offline(self.spec.generator, self.spec):
            gen = sum(
                2 for j in self.jobs if j.case.control.llm_gaps() or j.case.treatment.llm_gaps()
            )
        llm_models = [m for m in self.spec.models if not answers_offline(m, self.spec)]
        scorer = scorers.get(self.spec.scoring)
        asked = len(self.instance_ids) * self.spec.repeats * 2 * self.spec.samples * len(llm_models)
        # a scorer that reads no sampled answer (log-probabilities) extracts nothing
        calls = {"generate": gen, "decide": asked, "extract": asked if scorer.reads_answers else 0}
        if self.spec.intervention == interventions.SELF_HELP:  # a rewrite before each answer
            calls["rewrite"] = asked
        return calls

    def estimated_cost(self, batch: bool = False) -> float | None:
        """USD for priced models (`costs.estimate`); None when a price is unknown. With
        `batch`, at the providers' batch prices."""
        calls = self.llm_calls()
        llm_models = [m for m in self.spec.models if not answers_offline(m, self.spec)]
        each = {k: v // max(len(llm_models), 1) for k, v in calls.items() if k != "generate"}
        asked = [_calls(self.spec, self.spec.generator, "generate", calls["generate"])]
        for model in llm_models:
            asked.append(_calls(self.spec, model, "decide", each["decide"]))
            asked.append(_calls(self.spec, model, "rewrite", each.get("rewrite", 0)))
            asked.append(
                _calls(self.spec, self.spec.extractor or model, "extract", each["extract"])
            )
        return costs.estimate(asked, self.spec.api_base, batch)

    def describe(self) -> str:
        calls = self.llm_calls()
        cost, batch_cost = self.estimated_cost(), self.estimated_cost(batch=True)
        source = (
            f"dataset {self.spec.dataset}"
            if self.spec.dataset
            else (
                f"{len(self.cases)} biases x {self.spec.scenarios} scenarios x {self.spec.instances} instances"
            )
        )
        if self.spec.prompting != prompting_methods.BASELINE:
            source += f" (prompting {self.spec.prompting})"
        source += factors.described(self.spec)
        if self.spec.reading == READ_EXTRACTION:
            reader = self.spec.extractor or "each decision model"
            source += f" (every answer read by an extraction call to {reader}, as the paper did)"
        elif self.spec.extractor:
            source += f" (unclear answers read by {self.spec.extractor})"
        source += f" (options {_ORDER_WORDS[self.option_order]})"
        scorer = scorers.get(self.spec.scoring)
        if scorer.sampled(self.spec.samples):
            reducer = self.spec.reducer or scorer.reducer
            source += f" ({self.spec.samples} samples a half, reduced by {reducer})"
        return (
            f"run {self.spec.run_id}: {source} x {len(self.spec.models)} models x {self.spec.repeats} repeats "
            f"= {self.planned} pairs; at most {sum(calls.values())} LLM calls "
            f"({calls['generate']} generate, {calls['decide']} decide, {calls['extract']} extract"
            + (f", {calls['rewrite']} self-help rewrites" if "rewrite" in calls else "")
            + f"){self.thinking_note()}; "
            f"estimated cost: {costs.estimate_text(cost)}"
            + (
                ""
                if not cost or batch_cost is None
                else f", {costs.dollars(batch_cost)} with --batch"
            )
            + " (answers already in the cache are free)"
            + (f"\nnote: {note}" if (note := self.scoring_note()) else "")
            + self.kept_note()
        )

    def scoring_note(self) -> str:
        """What the plan says of a scoring the user did not choose, or '' (a sampled answer,
        as every run was before the models chose, needs no word)."""
        if self.chosen_scoring != scorers.PROBABILITIES:
            return ""
        return paired_scoring.by_probabilities(self.spec, "--scoring choice")

    def thinking_note(self) -> str:
        """The plan's estimate of its reasoning models' thinking tokens, or ''."""
        calls = self.llm_calls()
        llm_models = [m for m in self.spec.models if not answers_offline(m, self.spec)]
        per_model = sum(v for k, v in calls.items() if k != "generate") // max(len(llm_models), 1)
        return factors.thinking_note(llm_models, self.spec, per_model)

    def kept_note(self) -> str:
        """What an existing run keeps of older test case versions, or ''."""
        if not self.kept:
            return ""
        return (
            f"\nnote: run {self.spec.run_id} keeps the version it was planned with of "
            f"{', '.join(self.kept)}, which the library has changed since; for the current "
            f"design, delete the run (cogbias delete run {self.spec.run_id}) and run it again"
        )


def _calls(spec: RunSpec, model: str, kind: str, count: int) -> costs.Calls:
    """`count` calls of one kind (generate, decide, rewrite, extract) at that kind's estimated
    size, a reasoning model's expected thinking priced as output (`factors`: an estimate)."""
    thought = factors.thinking_per_call(model, spec) if count else 0
    return costs.Calls(model, EST_PROMPT_TOKENS[kind], EST_COMPLETION_TOKENS[kind] + thought, count)


_ORDER_WORDS = {
    metrics.AS_WRITTEN: "as written",
    metrics.HALF_REVERSED: "reversed in a seeded half of the pairs",
}


def default_option_order(store: Store | None, dataset: str | None) -> str:
    """A run's option order when it names none: a token-bias dataset's items as written (the
    paper asked its released items so), anything else reversed in a seeded half of the pairs
    (a preference for a position then cancels out over many pairs)."""
    row = store.dataset(dataset) if store is not None and dataset else None
    meta = json.loads(row["meta"] or "{}") if row else {}
    return metrics.AS_WRITTEN if holds_token_bias_pairs(meta) else metrics.HALF_REVERSED


def answers_offline(model: str, spec: RunSpec) -> bool:
    """Whether `model` answers without a model call (the example fills, the `random`
    baseline): asked of its profile, never of its name."""
    if model == examples.EXAMPLES_GENERATOR:
        return True
    return not resolve(model, spec.api_base).writes_text


def plan(spec: RunSpec, store: Store | None = None) -> Plan:
    """Resolve a spec into concrete instances; raises KeyError/ValueError on bad input.

    A run that already exists in `store` asks the test case versions it was planned with
    (`pinned_cases`), whatever the library holds now, so no run is ever half one design and
    half another; `Plan.kept` names the test cases the library has changed since. A spec that
    names no option order gets the dataset's own (`default_option_order`) in `Plan.spec`.
    """
    chosen = None
    if spec.scoring is None:  # the user named none: the models' profiles choose
        chosen = paired_scoring.scoring_by_models(spec, store)
        spec = replace(spec, scoring=chosen)
    spec = _checked(spec, store)
    if spec.dataset:
        if store is None:
            raise ValueError("a dataset run needs a store")
        ids = dataset_instance_ids(store, spec.dataset, spec.biases, spec.per_bias)
        _check_scoring(spec, store.dataset_option_counts(spec.dataset))
        return Plan(spec, {}, [], ids, chosen_scoring=chosen)
    pinned = pinned_cases(store, spec.run_id) if store is not None else None
    cases = pinned or library.load_library()
    wanted = spec.biases or list(cases)
    unknown = [b for b in wanted if b not in cases]
    if unknown:
        raise KeyError(f"unknown test case id(s): {', '.join(unknown)}; see `cogbias library list`")
    if spec.generator != examples.EXAMPLES_GENERATOR and answers_offline(spec.generator, spec):
        refusals = [
            pipeline.random_generator_refusal(b, [g.instruction for g in gaps])
            for b in wanted
            if (gaps := cases[b].control.llm_gaps() + cases[b].treatment.llm_gaps())
        ]
        if refusals:
            raise ValueError(
                f"--generator random cannot fill LLM gaps: {len(refusals)} of the chosen test "
                f"cases have them, e.g. {refusals[0]}"
            )
    _check_scoring(spec, {b: cases[b].n_options for b in wanted})
    scenarios = library.load_scenarios()
    if spec.scenarios > len(scenarios):
        raise ValueError(f"only {len(scenarios)} scenarios exist")
    jobs = [
        InstanceJob(
            cases[b],
            s,
            i,
            records.instance_id(
                cases[b].content_hash,
                s.text,
                i,
                spec.generator,
                spec.seed,
                spec.generator_temperature,
            ),
        )
        for b in wanted
        for s in scenarios[: spec.scenarios]
        for i in range(spec.instances)
    ]
    kept: tuple[str, ...] = ()
    if pinned:
        current = library.load_library()
        kept = tuple(b for b in wanted if b not in current or current[b] != pinned[b])
    return Plan(spec, {b: cases[b] for b in wanted}, jobs, [], kept, chosen)


def _checked(spec: RunSpec, store: Store | None) -> RunSpec:
    """`spec` with its option order chosen, once every field is known to be usable."""
    from cogbias.llm.settings import check_api_base

    if not spec.models:
        raise ValueError("no decision models given (e.g. --models random,local/smollm2)")
    if spec.repeats < 1 or spec.instances < 1 or spec.scenarios < 1:
        raise ValueError("scenarios, instances and repeats must be at least 1")
    prompting_methods.parse(spec.prompting)
    problem = refusals.reading_refusal(spec.reading, spec.scoring) or factors.refusal(spec)
    if problem:
        raise ValueError(problem)
    if spec.option_order is None:
        spec = replace(spec, option_order=default_option_order(store, spec.dataset))
    elif problem := metrics.order_problem(spec.option_order):
        raise ValueError(problem)
    if spec.api_base:
        check_api_base(spec.api_base)
    for model in {*spec.models, spec.generator, spec.extractor or spec.generator}:
        checked_name(model, "model")  # a model is a label on every page, chart and report
        resolve(model, spec.api_base)  # unknown local models fail here, before any work
    asked = [(m, spec.temperature, factors.thinks(spec)) for m in spec.models]
    if not spec.dataset and not answers_offline(spec.generator, spec):  # it fills the gaps
        asked.append((spec.generator, spec.generator_temperature, False))
    for model, temperature, thinking in asked:
        if problem := refusals.temperature_refusal(model, spec.api_base, temperature, thinking):
            raise ValueError(problem)
    if spec.extractor is not None and not resolve(spec.extractor, spec.api_base).writes_text:
        raise ValueError(
            f"--extractor {spec.extractor} cannot read answers: it writes no text; choose a "
            "language model (e.g. local/smollm2) or leave it out (each model reads its own)"
        )
    return spec


def pinned_cases(store: Store, run_id: str) -> dict[str, TestCase] | None:
    """The test case versions a run was planned with, or None for a run that pinned none.

    Each comes back from the source stored with it; a version this cogbias cannot rebuild to
    the same hash is refused, since resuming it would write pairs of another design.
    """
    pinned = store.pinned_test_cases(run_id)
    if not pinned:
        return None
    cases: dict[str, TestCase] = {}
    for case_id, (digest, source) in sorted(pinned.items()):
        try:
            case = library.parse_test_case(source, f"{case_id} as stored") if source else None
        except library.LibraryError:
            case = None
        if case is None or case.content_hash != digest:
            raise ValueError(
                f"run {run_id} was planned with an earlier version of test case '{case_id}' "
                f"({digest}) that this cogbias cannot ask again exactly; its results stay as "
                "they are. Start a new run for the current test cases (cogbias run ...)"
            )
        cases[case_id] = case
    return cases


def _check_scoring(spec: RunSpec, option_counts: Mapping[str, int]) -> None:
    """Refuse a scoring the run's models or test cases cannot have, before any work."""
    problem = scorers.refusal(
        spec.scoring, spec.models, spec.api_base, spec.prompting, option_counts
    )
    problem = problem or scorers.sampling_refusal(
        spec.scoring, spec.samples, spec.reducer, spec.temperature
    )
    if problem:
        raise ValueError(problem)


def dataset_instance_ids(
    store: Store, dataset: str, biases: list[str], per_bias: int | None
) -> list[str]:
    rows = store.dataset_instance_rows(dataset)
    if not rows:
        names = [d["name"] for d in store.datasets()]
        raise KeyError(
            f"no dataset '{dataset}' in this database (imported: {', '.join(names) or 'none'})"
        )
    unscorable = store.dataset_unscorable(dataset)
    if unscorable:
        raise ValueError(
            f"dataset '{dataset}' has {unscorable} test case(s) without metric parameters "
            "(the paper's code format does not record them), so new decisions could not be "
            "scored; run the Hub dataset (`cogbias import malberg2024-hub`) instead"
        )
    taken: dict[str, int] = {}
    ids = []
    for row in rows:
        if biases and row["test_case"] not in biases:
            continue
        if per_bias is not None and taken.get(row["test_case"], 0) >= per_bias:
            continue
        taken[row["test_case"]] = taken.get(row["test_case"], 0) + 1
        ids.append(row["id"])
    return ids


def create_run(plan: Plan, store: Store, name: str = "", kind: str | None = None) -> str:
    """Store the run (id and canonical spec, led by its `kind`'s name: not hashed, so ids
    made before kinds were stored stay) unless it exists; returns its id. Callers go through
    `executor.create`, which names the kind; a spec stored without one loads as before."""
    spec = {"kind": kind, **plan.spec.canonical()} if kind else plan.spec.canonical()
    store.create_run(plan.spec.run_id, spec, plan.planned, name=name, spec_version=SPEC_VERSION)
    return plan.spec.run_id
