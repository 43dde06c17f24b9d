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
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from cogbias.core.run_record import RESUMABLE, ResultsPage, Run
from cogbias.library import designs
from cogbias.library import testcases as library
from cogbias.llm import profiles
from cogbias.llm.costs import dollars
from cogbias.llm.errors import LLMError
from cogbias.runs import kinds, summaries
from cogbias.store import Store
from cogbias.views import unread_answers
from cogbias.views.report_parts import Section, Table

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
    text, and where each departs from the paper's design (its departures and, for a
    built-in, its recorded wording differences)."""
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
            departures += [f"{name}: {what} ({why})" for what, why in designs.differences(case)]
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


def run_counts(store: Store, run: Run) -> Section:
    """A stored run's `counts_section`, from its kind's read side."""
    kind = kinds.of(run)
    unread = unread_answers.run_note(store, run) if run.failed else None
    return counts_section(run, kind.failures(store, run), kind.abstained(store, run), unread)


def counts_section(
    run: Run,
    failures: Mapping[str, int] | None = None,
    abstained: int = 0,
    unread: str | None = None,
) -> Section:
    """Failures (by kind, where the run's rows say), what was done with them, abstained
    pairs (apart from failures), tokens and cost; `unread` says in plain words how many
    answers could not be read, why, and what would read them (`unread_answers.run_note`)."""
    by_kind = ", ".join(f"{n:,} {FAILURE_KINDS.get(k, k)}" for k, n in (failures or {}).items())
    items = (
        f"Units planned {run.planned:,}, done {run.done:,}, failed {run.failed:,}"
        + (f": {by_kind}" if by_kind else "")
        + (f"; abstained {abstained:,} ({ABSTAINED_NOTE})" if abstained else ""),
        f"Tokens {run.tokens or 0:,}; cost {summaries.cost_text(run)}"
        + (f" ({dollars(run.cost_saved)} saved by the response cache)" if run.cost_saved else ""),
        f"Duration {run.duration_s:.1f} s" if run.duration_s is not None else "Duration –",
    )
    left = (
        f" The run ended {run.status}: `cogbias resume {run.id}` asks what is left."
        if run.status in RESUMABLE
        else ""
    )
    paragraphs = (FAILURES + left, *([unread] if unread else []))
    return Section("Failures, tokens and cost", paragraphs=paragraphs, items=items)


def run_methods(store: Store, run_id: str) -> tuple[Section, ...]:
    """The methods of a run of any kind, from its stored record: what it asked (its kind's
    `settings`), its models, what it was planned from (its page's sources: a paired run's
    test cases, a study run's study file) and its counts. What made the document,
    `software()`, is the document's to add (a report's, a Hub card's)."""
    run = kinds.stored(store, run_id)
    kind = kinds.of(run)
    spec = run.spec
    models = [str(m) for m in spec.get("models") or []]
    sources = SOURCES.get(kind.page) if kind.page is not None else None
    return (
        Section("What was asked", items=kind.settings(store, run)),
        Section(
            "Models",
            tables=(models_table(models, spec.get("api_base"), _temperatures(spec)),),
        ),
        *(sources(store, run) if sources is not None else ()),
        run_counts(store, run),
    )


def _temperatures(spec: Mapping[str, Any]) -> str:
    if "temperatures" in spec:
        return ", ".join(f"{t:g}" for t in spec.get("temperatures") or []) or "the study's"
    return f"{spec.get('temperature', 0.0):g}"


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
    """What each of several runs asked, its models and its counts, one after another (a
    dataset's runs, or every run behind a comparison of all results)."""
    sections = []
    for run in runs:
        kind, spec = kinds.of(run), run.spec
        models = models_table(spec.get("models") or [], spec.get("api_base"), _temperatures(spec))
        sections.append(Section(f"Run {run.id}", items=kind.settings(store, run)))
        sections.append(Section(f"Models of run {run.id}", tables=(models,)))
        sections.append(run_counts(store, run))
    return sections


def paired_sources(store: Store, run: Run) -> tuple[Section, ...]:
    """The test cases a paired run was planned from (`test_cases_sections`)."""
    return test_cases_sections(store, run.id, [str(b) for b in run.spec.get("biases") or []])


# what a run shown on each page was planned from; a kind on no page (or another) shows none
SOURCES: dict[ResultsPage, Callable[[Store, Run], tuple[Section, ...]]] = {
    ResultsPage.EXPLORE: paired_sources,
    ResultsPage.STUDIES: lambda store, run: (study_source_section(store, run),),
}
