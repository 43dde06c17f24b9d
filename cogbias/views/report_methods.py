"""The methods of a report (`views/report.py`) and of a Hub dataset card
(`views/hub_card.py`), generated from what the store kept: the run's stored spec, the test
case versions it was pinned to, the models' profiles and the run's counts. One generator,
so a report and a published dataset say what ran in the same words.

A methods paragraph written by hand drifts from what ran; this one is read back from the
same records a resume reads, so it says what the run asked, not what a page would ask today.
Nothing here prints a key: models are described by their profile (provider, endpoint host,
settings, price), never by the variable or value of a key, and the report is redacted whole
on its way out (`report_html.render`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from cogbias.core.run_record import RESUMABLE, Run
from cogbias.library import testcases as library
from cogbias.llm import profiles
from cogbias.llm.errors import LLMError
from cogbias.runs import kinds, scorers, summaries
from cogbias.store import Store
from cogbias.views.report_parts import Section, Table

OFFLINE_GENERATORS = {
    "examples": "the offline generator: each gap filled from its author-written example fills",
    "random": "the offline generator: gaps filled at random from their example fills",
    "none": "none: gaps left as written",
}
FAILURES = (
    "A failed pair (no answer, an answer no option could be read from, or an error) is left "
    "out of every mean and counted in the failure columns. Transient failures (timeouts, "
    "rate limits, server errors) are retried when the run is resumed; fatal ones (a refused "
    "key, an unknown model) stop the run; an unreadable answer is a result, asked again only "
    "on request."
)


def version() -> str:
    """The installed cogbias' version (the package metadata's, as `pip show` says it)."""
    try:
        return importlib.metadata.version("cogbias")
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown: not installed)"


def software() -> Section:
    """What made the numbers: the package version and the interpreter."""
    items = (
        f"cogbias {version()}",
        f"Python {platform.python_version()}",
        "Charts rendered offline by vl-convert (a bundled Vega engine); no script in this file.",
    )
    return Section("Software", items=items)


def endpoint(api_base: str | None) -> str:
    """An endpoint as its host only: no scheme, no user or password, no path."""
    if not api_base:
        return "the provider's own"
    parts = urlsplit(api_base)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: say nothing of it
        port = None
    if not parts.hostname:
        return "set (not a URL)"
    return f"{parts.hostname}:{port}" if port else parts.hostname


def _provider(litellm_model: str) -> str:
    """The provider part of a litellm model string ("openai/gpt-4o" -> openai)."""
    first = litellm_model.split("/")[0] if "/" in litellm_model else ""
    return first if re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", first) else "litellm's choice"


def _price(per_token: float | None) -> str:
    return "unknown" if per_token is None else f"${per_token * 1e6:.2f}"


def models_table(
    models: Sequence[str],
    api_base: str | None,
    temperature: Any,
    structured: Mapping[str, str] | None = None,
) -> Table:
    """One row per model: its provider and the settings it was asked with (its profile).
    `structured` says per model what structured output its answers were really asked under
    (a class run stores the grammar it sent); without it, what the profile takes."""
    rows = []
    for model in models:
        try:
            p = profiles.resolve(model, api_base)
        except (LLMError, ValueError) as exc:  # an unknown local model, a broken registry
            rows.append({"model": model, "provider": f"not resolved ({exc})"})
            continue
        provider = p.kind if p.kind != "remote" else _provider(p.litellm_model or model)
        rows.append(
            {
                "model": model,
                "provider": provider,
                "endpoint": endpoint(p.api_base) if p.kind == "remote" else "this machine",
                "temperature": temperature,
                "answer tokens (max)": p.answer_tokens or "–",
                "structured output": structured.get(model, "none")
                if structured is not None
                else (
                    "JSON schema"
                    if p.json_schema and p.kind == "remote"
                    else ("grammar" if p.grammar else "–")
                ),
                "input $ / 1M tokens": _price(p.input_price) if p.kind == "remote" else "0",
                "output $ / 1M tokens": _price(p.output_price) if p.kind == "remote" else "0",
            }
        )
    return Table("Models and their settings", pd.DataFrame(rows), "models")


def test_cases_sections(store: Store, run_id: str, asked: Sequence[str]) -> tuple[Section, ...]:
    """The test case versions the run was pinned to, with a SHA-256 of each one's stored
    text, and the departures from the paper's design each one records."""
    pinned = store.pinned_test_cases(run_id)
    cases = library.load_library_report().cases
    rows, departures = [], []
    for case_id in sorted(set(pinned) | set(asked)):
        version, source = pinned.get(case_id, ("", None))
        case = cases.get(case_id)
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest() if source else "not kept"
        name = case.name if case else case_id
        rows.append({"id": case_id, "name": name, "version": version or "–", "sha256": digest})
        if case is not None and (not version or version == case.content_hash):
            departures += [f"{name}: {d.what.strip()} ({d.why.strip()})" for d in case.departures]
    note = (
        "The version is the test case's content hash as pinned when the run was planned; the "
        "SHA-256 is of the test case text the store kept for that version."
    )
    if not departures:
        departures = ["None recorded for these test cases (or their text changed since)."]
    table = Table("Test cases", pd.DataFrame(rows), "test-cases")
    return (
        Section("Test cases", paragraphs=(note,), tables=(table,)),
        Section(
            "Departures from the paper's design",
            paragraphs=("Where each test case departs from the published design it follows:",),
            items=tuple(departures),
        ),
    )


def _generator(spec: Mapping[str, Any]) -> str:
    generator = str(spec.get("generator") or "")
    if spec.get("dataset"):
        return "none: the dataset's pairs were asked as stored"
    if generator in OFFLINE_GENERATORS:
        return OFFLINE_GENERATORS[generator]
    temperature = spec.get("generator_temperature", 0.7)
    return f"the model {generator}, at temperature {temperature}"


def _sampled(spec: Mapping[str, Any]) -> str:
    """How many answers each half was asked and how they were reduced, or '' for one."""
    try:
        scoring, samples, reducer = scorers.spelled(
            str(spec.get("scoring") or scorers.DEFAULT),
            int(spec.get("samples") or 1),
            spec.get("reducer"),
        )
        scorer = scorers.get(scoring)
    except (TypeError, ValueError):
        return ""
    if not scorer.sampled(samples):
        return ""
    return f"; {samples} sample(s) a half, reduced by {reducer or scorer.reducer}"


def paired_settings(run: Run) -> tuple[str, ...]:
    """The paired run's stored spec in words."""
    spec = run.spec
    try:
        scorer = scorers.get(str(spec.get("scoring") or scorers.DEFAULT)).label
    except ValueError:
        scorer = str(spec.get("scoring"))
    target = f"the dataset {spec['dataset']}" if spec.get("dataset") else "the library"
    return (
        f"Run {run.id}"
        + (f" ({run.name})" if run.name else "")
        + f": a {run.kind.name if run.kind else 'paired'} run on {target}, status {run.status}",
        f"Scorer: {scorer} ({spec.get('scoring') or scorers.DEFAULT}); answers read by {spec.get('reading') or 'answer'}"
        + _sampled(spec),
        f"Decision temperature {spec.get('temperature', 0.0)}, seed {spec.get('seed', 0)}, "
        f"{spec.get('repeats', 1)} repeat(s) per pair",
        f"Prompting: {spec.get('prompting') or 'baseline'}; option order: "
        f"{spec.get('option_order') or 'half_reversed'}; extraction by "
        f"{spec.get('extractor') or 'each decision model'}",
        f"Reasoning effort: {spec.get('reasoning_effort') or 'each model’s own'}"
        + (
            f", thinking budget {spec['thinking_budget']:,} tokens"
            if spec.get("thinking_budget")
            else ""
        )
        + f"; intervention: {spec.get('intervention') or 'none'}",
        f"Scenarios: {spec.get('scenarios', 1)}, instances per test case and scenario: "
        f"{spec.get('instances', 1)}"
        + (f", at most {spec['per_bias']} per bias" if spec.get("per_bias") else ""),
        f"Gaps filled by {_generator(spec)}",
        f"Created {run.created_at or '–'}, started {run.started_at or '–'}, finished "
        f"{run.finished_at or '–'}",
    )


ABSTAINED_NOTE = (
    "a half's samples left undecided by the run's reducer: a result, counted among the done "
    "pairs, in no mean and in no failure count"
)
FAILURE_KINDS = {
    "transient": "transient (a timeout, rate limit or server error: retried on resume)",
    "fatal": "fatal (a refused key, an unknown model: the run stopped)",
    "unparseable": "unreadable (no option could be read from the answer: a result)",
    "stopped_reasoning": "stopped while reasoning (the model spent its whole room thinking and "
    "wrote no answer: a result of the budget asked)",
}


def counts_section(
    run: Run, failures: Mapping[str, int] | None = None, abstained: int = 0
) -> Section:
    """Failures (by kind, where the run's rows say), what was done with them, abstained
    pairs (apart from failures), tokens and cost."""
    by_kind = ", ".join(f"{n:,} {FAILURE_KINDS.get(k, k)}" for k, n in (failures or {}).items())
    items = (
        f"Units planned {run.planned:,}, done {run.done:,}, failed {run.failed:,}"
        + (f": {by_kind}" if by_kind else "")
        + (f"; abstained {abstained:,} ({ABSTAINED_NOTE})" if abstained else ""),
        f"Tokens {run.tokens or 0:,}; cost {summaries.cost_text(run)}"
        + (f" (${run.cost_saved:.4f} saved by the response cache)" if run.cost_saved else ""),
        f"Duration {run.duration_s:.1f} s" if run.duration_s is not None else "Duration –",
    )
    left = (
        f" The run ended {run.status}: `cogbias resume {run.id}` asks what is left."
        if run.status in RESUMABLE
        else ""
    )
    return Section("Failures, tokens and cost", paragraphs=(FAILURES + left,), items=items)


def run_methods(store: Store, run_id: str) -> tuple[Section, ...]:
    """The methods of a paired, dataset or study run, from its stored record (what made the
    document, `software()`, is the document's to add: a report's, a Hub card's)."""
    run = kinds.stored(store, run_id)
    spec = run.spec
    models = [str(m) for m in spec.get("models") or []]
    study = run.kind is not None and run.kind.name == "study"
    if study:
        settings = study_settings(store, run)
        cases: tuple[Section, ...] = (study_source_section(store, run),)
    else:
        settings = paired_settings(run)
        cases = test_cases_sections(store, run.id, [str(b) for b in spec.get("biases") or []])
    return (
        Section("What was asked", items=settings),
        Section(
            "Models",
            tables=(models_table(models, spec.get("api_base"), _temperatures(spec)),),
        ),
        *cases,
        counts_section(run)
        if study
        else counts_section(run, store.run_failure_kinds(run.id), store.run_abstained(run.id)),
    )


def _temperatures(spec: Mapping[str, Any]) -> str:
    if "temperatures" in spec:
        return ", ".join(f"{t:g}" for t in spec.get("temperatures") or []) or "the study's"
    return f"{spec.get('temperature', 0.0):g}"


def study_settings(store: Store, run: Run) -> tuple[str, ...]:
    """A study run's stored spec in words."""
    spec = run.spec

    def listed(key: str, default: str) -> str:
        return ", ".join(str(v) for v in spec.get(key) or []) or default

    return (
        f"Run {run.id}"
        + (f" ({run.name})" if run.name else "")
        + f": a study run of {spec.get('study')}, status {run.status}",
        f"Tests: {listed('tests', 'all')}",
        f"Temperatures: {_temperatures(spec)}; prompt variants: {listed('variants', 'all')}",
        f"Mitigations: {listed('mitigations', 'none')}",
        f"Repeats (valid answers wanted per condition): {spec.get('repeats') or 'the study’s'}; "
        f"attempts per answer: {spec.get('max_attempts') or 'the study’s'}; seed {spec.get('seed', 0)}",
        "Gaps: none (a study asks its own prompts, no generator)",
        f"Created {run.created_at or '–'}, started {run.started_at or '–'}, finished "
        f"{run.finished_at or '–'}",
    )


def study_source_section(store: Store, run: Run) -> Section:
    """The study file the run was planned from, by hash."""
    digest = str(run.spec.get("study_hash") or "")
    source = store.study_source(digest) if digest else None
    full = hashlib.sha256(source.encode("utf-8")).hexdigest() if source else "not kept"
    rows = [{"study": run.spec.get("study"), "version": digest or "–", "sha256": full}]
    return Section(
        "Study file",
        paragraphs=(
            "The study's tests, prompts and scoring come from the study file the run was "
            "planned from, kept in the store by its hash; the SHA-256 is of that text.",
        ),
        tables=(Table("Study file", pd.DataFrame(rows), "study-file"),),
    )


def dataset_methods(store: Store, name: str) -> tuple[Section, ...]:
    """A dataset's origin and, one after the other, the methods of each run on it."""
    row = next((d for d in store.datasets() if d["name"] == name), {})
    items = [
        f"Dataset {name}: {row.get('kind') or 'imported'}, {row.get('rows') or 0:,} rows",
        f"Imported {row.get('imported_at') or '–'} from {row.get('source') or 'a file'}",
        "Published decisions in the dataset (if any) are shown as their authors stored them; "
        "runs of cogbias on it are listed below with what they asked.",
    ]
    runs = [r for r in kinds.records(store) if r.spec.get("dataset") == name]
    return (Section("The dataset", items=tuple(items)), *runs_methods(store, runs))


def runs_methods(store: Store, runs: Sequence[Run]) -> list[Section]:
    """What each of several paired runs asked, its models and its counts, one after another
    (a dataset's runs, or every run behind a comparison of all results)."""
    sections = []
    for run in runs:
        if run.kind is None or run.kind.results != "decisions":  # a study's, a class's
            continue
        spec = run.spec
        models = models_table(spec.get("models") or [], spec.get("api_base"), _temperatures(spec))
        sections.append(Section(f"Run {run.id}", items=paired_settings(run)))
        sections.append(Section(f"Models of run {run.id}", tables=(models,)))
        sections.append(
            counts_section(run, store.run_failure_kinds(run.id), store.run_abstained(run.id))
        )
    return sections
