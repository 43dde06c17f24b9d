"""Run: choose biases x scenarios x models, see the cost, start, watch, cancel, resume.

A run executes in its own process (`python -m cogbias run`), so reloading the page or closing
the browser does not stop it; this page only reads its progress from the database.
The page is `main`, at the bottom: what to run, its plan, the run watched, the runs.
"""

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _launch, _live, _progress, _run_factors, _tables
from app_pages._common import (
    OPEN_IN,
    RANDOM_MODEL,
    case_label,
    chosen_gone,
    db_path,
    friendly,
    generator_label,
    keep,
    library_version,
    model_names,
    models,
    open_store_or_stop,
    pick_run,
    run_label,
    scenarios,
    test_cases,
)
from cogbias.core import run_record
from cogbias.core.reading import READ_ANSWER, READ_EXTRACTION, READINGS
from cogbias.core.redact import redact
from cogbias.core.run_record import ResultsPage, Run, RunStatus
from cogbias.library import examples
from cogbias.llm.costs import dollars
from cogbias.runs import paired_plan, scorers
from cogbias.runs.paired_plan import RunSpec
from cogbias.runs.summaries import run_summaries, run_summary
from cogbias.store import Store, now
from cogbias.views import unread_answers
from cogbias.views.safe_text import escape_markdown

ACTIVE = _progress.ACTIVE
counted, totals = _progress.counted, _progress.totals
RESUMABLE = run_record.RESUMABLE
SELF_READER = ""  # the extractor choice "each decision model itself", as in the paper
READING_LABELS = {
    READ_ANSWER: "cogbias reads each answer",
    READ_EXTRACTION: "an extraction call for every answer (the paper's)",
}
# What a run is set up with outlives a look at another page (the Models page, say).
KEPT = (
    "run_source run_all run_scenarios run_instances run_per_bias run_base run_custom_model "
    "run_temperature run_repeats run_seed run_scoring run_scoring_samples run_scoring_reducer "
    "run_reading run_effort run_budget run_intervention run_max_cost"
).split()

st.title("Run a batch")
st.page_link(
    "app_pages/studies.py",
    label="Whole studies (BiasBuster, Mohr's eight problems, imported thesis prompts) with "
    "mitigations and temperature sweeps are run on the Studies page",
    icon=":material/lab_profile:",
)
store = open_store_or_stop()
cases = test_cases()
infos = models()
label = model_names(infos)
ids = [m.id for m in infos]


# ------------------------------------------------------------------ what to run
def what_to_run() -> tuple[RunSpec | None, bool]:
    """The run the widgets ask for (None after saying what is missing or refused), and
    whether a choice went stale: deleted elsewhere since the page was drawn."""
    datasets = [d["name"] for d in store.datasets()]
    generators = examples.generator_choices(ids)  # the default first
    stale = kept_choices(datasets, generators)
    every, instances = instances_asked(datasets)
    decision_models, generator = models_asked(instances["dataset"] is not None, generators)
    custom_base = _launch.custom_endpoint(decision_models, "run")
    c1, c2, c3 = st.columns(3)
    temperature = c1.slider("Decision temperature", 0.0, 2.0, 0.0, 0.1, key="run_temperature")
    repeats = int(c2.number_input("Repeats", 1, 50, 1, key="run_repeats"))
    seed = int(c3.number_input("Seed", 0, 10**9, 0, key="run_seed"))
    bases = _launch.endpoints([*decision_models, generator], infos) | custom_base
    factors = _run_factors.factors_asked()
    asked = RunSpec(
        models=decision_models, api_base=next(iter(bases), None), **factors, **instances
    )
    scoring = _live.run_scoring_controls("run_scoring", asked, store)
    reading, extractor = reading_asked(scoring["scoring"])
    asked = [*decision_models, generator, *([extractor] if extractor else [])]
    bases |= _launch.endpoints(asked, infos)
    if not decision_models:
        st.info("Choose at least one decision model.")
        return None, stale
    if not every and not instances["biases"]:
        st.info("Choose the test cases to run, or tick “All test cases”.")
        return None, stale
    if _launch.refused(asked, infos, bases):
        return None, stale
    spec = RunSpec(
        models=decision_models,
        generator=generator,
        temperature=float(temperature),
        repeats=repeats,
        seed=seed,
        api_base=next(iter(bases), None),
        **scoring,
        extractor=extractor,
        reading=reading,
        **factors,
        **instances,
    )
    return spec, stale


def kept_choices(datasets: list[str], generators: list[str]) -> bool:
    """Keep the run's set-up across pages; True when a choice was deleted elsewhere (another
    tab, the command line) since this page was drawn: it is named, and the click that
    brought the news starts nothing."""
    keep(*KEPT)
    keep("run_biases", allowed=cases)
    keep("run_dataset", allowed=datasets)
    keep("run_models", allowed=ids)
    keep("run_generator", allowed=generators)
    keep("run_extractor", allowed=[SELF_READER, *ids])
    return any(
        [
            chosen_gone("run_biases", cases, "Test case"),
            chosen_gone("run_dataset", datasets, "Dataset"),
            chosen_gone("run_models", ids, "Model"),
            chosen_gone("run_generator", generators, "Model"),
            chosen_gone("run_extractor", [SELF_READER, *ids], "Model"),
        ]
    )


def instances_asked(datasets: list[str]) -> tuple[bool, dict[str, Any]]:
    """Whether every test case is asked for, and the `RunSpec` fields that say which
    instances: generated from test cases, or drawn from an imported dataset."""
    source = "library"
    if datasets:
        source = st.radio(
            "Instances from",
            ["library", "dataset"],
            format_func=lambda s: (
                "generate from test cases" if s == "library" else "an imported dataset"
            ),
            horizontal=True,
            key="run_source",
        )
    c1, c2, c3 = st.columns([3, 1, 1])
    if source == "dataset":
        dataset = c1.selectbox("Dataset", datasets, key="run_dataset")
        per_bias = int(c2.number_input("Instances per bias", 1, 100000, 10, key="run_per_bias"))
        return True, dict(biases=[], scenarios=1, instances=1, dataset=dataset, per_bias=per_bias)
    every = c1.checkbox(f"All {len(cases)} test cases", value=False, key="run_all")
    biases = (
        []
        if every
        else c1.multiselect(
            "Test cases", list(cases), default=None, format_func=case_label(cases), key="run_biases"
        )
    )
    n_scenarios = int(c2.number_input("Scenarios", 1, len(scenarios()), 1, key="run_scenarios"))
    n_instances = int(c3.number_input("Instances each", 1, 100, 1, key="run_instances"))
    return every, dict(
        biases=list(biases),
        scenarios=n_scenarios,
        instances=n_instances,
        dataset=None,
        per_bias=None,
    )


def models_asked(from_dataset: bool, generators: list[str]) -> tuple[list[str], str]:
    """The decision models chosen and the generator that fills gaps (unused on a dataset)."""
    c1, c2 = st.columns(2)
    chosen = c1.multiselect(
        "Decision models", ids, default=[RANDOM_MODEL], format_func=label, key="run_models"
    )
    generator = c2.selectbox(
        "Generator (fills [[gaps]])",
        generators,
        format_func=generator_label(label),
        key="run_generator",
        disabled=from_dataset,
    )
    return list(chosen), generator


def reading_asked(scoring: str) -> tuple[str, str | None]:
    """How answers are read and who reads the unclear ones (None: each decision model its
    own), asked only of a scoring that reads answers."""
    if not scorers.get(scoring).reads_answers:
        return READ_ANSWER, None
    reading = st.radio(
        "How answers are read",
        list(READINGS),
        format_func=READING_LABELS.get,
        horizontal=True,
        key="run_reading",
        help="cogbias reads each answer itself and asks the extraction call only where the "
        "answer can confirm its reply; the Malberg paper asks the extraction call for every "
        "answer and takes its “Option N” unchecked (docs/runs.md, “How answers are read”). "
        "A run that reads the paper's way is a run of its own.",
    )
    # "" is "each decision model reads its own answers": a selectbox whose value is None
    # shows no choice at all ("Choose an option"), which a value put back by `keep` would be.
    extractor = st.selectbox(
        "Reader of unclear answers" if reading == READ_ANSWER else "Extraction model",
        [SELF_READER, *ids],
        format_func=lambda m: label(m) if m else "each decision model itself (as in the paper)",
        key="run_extractor",
        help="An answer that names no single option is given to this model to read; its reading "
        "counts only where the answer itself supports it (docs/runs.md, “How answers are read”)."
        if reading == READ_ANSWER
        else "The model that makes the extraction call for every answer.",
    )
    return reading, extractor or None


# ------------------------------------------------------------------ plan and start
@st.cache_data(show_spinner="Planning…", max_entries=64)
def _plan(fields: dict, db: str, version: object) -> dict:
    """What a run would do; cached because every widget change replans (a plan of 30 biases x
    200 scenarios x 100 instances hashes 600,000 instance keys)."""
    with Store(db) as own:
        plan = paired_plan.plan(RunSpec(**fields), own)
        return {
            "run_id": plan.spec.run_id,  # with its option order chosen (a token-bias dataset's)
            "planned": plan.planned,
            "calls": plan.llm_calls(),
            "cost": plan.estimated_cost(),
            "batch_cost": plan.estimated_cost(batch=True),
            "thinking": plan.thinking_note().lstrip("; "),  # reasoning models: an estimate
        }


def plan_of(spec: RunSpec) -> dict | None:
    """The cached plan of `spec`; None after saying why it cannot be planned."""
    # Library runs depend on the test case files; dataset runs on the database's contents.
    files = [Path(f"{db_path()}{suffix}") for suffix in ("", "-wal")]
    version = (
        library_version()
        if spec.dataset is None
        else tuple(f.stat().st_mtime_ns for f in files if f.exists())
    )
    try:
        return _plan(asdict(spec), str(db_path()), version)
    except (KeyError, ValueError) as exc:
        st.error(f"This run cannot be planned: {friendly(exc)}")
        return None


def offer_start(spec: RunSpec, plan: dict, stale: bool) -> None:
    """The plan's size and cost, what is known of this exact run, and the Start button."""
    calls, cost = plan["calls"], plan["cost"]
    m1, m2, m3 = st.columns(3)
    m1.metric("Pairs to decide", f"{plan['planned']:,}")
    m2.metric("LLM calls (at most)", f"{sum(calls.values()):,}")
    m3.metric("Estimated cost", "unknown" if cost is None else dollars(cost))
    st.caption(
        f"{calls['generate']:,} to fill gaps, {calls['decide']:,} to decide, "
        f"{calls['extract']:,} to extract the chosen option. Answers already in the "
        "database's cache are free. "
        + ("Some model has no known price." if cost is None else "")
        + (f" The cost includes {plan['thinking']}." if plan.get("thinking") else "")
    )
    existing = run_summary(store, plan["run_id"])
    busy = existing is not None and existing.status in ACTIVE
    if busy:
        st.info("This exact run is running now: watch it below.")
    elif existing and existing.status == RunStatus.DONE:
        st.info(
            f"This exact run already finished ({existing.done} pairs). Starting it again "
            "only does work that is missing; change the seed or the models for new results."
        )
    use_batch, allowed = _run_factors.how_to_send(plan.get("batch_cost"))
    start = st.button("Start run", type="primary", key="run_start", disabled=busy)
    if start and not stale and allowed:
        run_id = _launch.launch("run", spec, batch=use_batch, max_cost=_run_factors.max_cost())
        if run_id is not None:
            _mark_started(run_id)
            st.rerun()


def _mark_started(run_id: str) -> None:
    st.session_state["run_active"] = run_id
    st.session_state.pop("run_pick", None)  # show the new run in the list below
    st.session_state["run_started_at"] = time.monotonic()
    st.session_state["run_started_wall"] = now()


# ------------------------------------------------------------------ progress
def _starting(run: Run | None) -> bool:
    """True while a just (re)started worker has not yet taken over its run row: until then
    the row still shows how the previous attempt ended (or does not exist)."""
    if run is None:
        return True
    since = st.session_state.get("run_started_wall")
    if since is None or run.status in ACTIVE:
        return False
    return (run.finished_at or "") < since and time.monotonic() - st.session_state.get(
        "run_started_at", 0
    ) < 120


def _log_tail(run_id: str) -> str:
    log = db_path().parent / f"{run_id}.log"
    return log.read_text(errors="replace")[-1500:] if log.is_file() else ""


@st.fragment(run_every=1.0)
def progress(run_id: str) -> None:
    run = run_summary(store, run_id)
    if _starting(run):
        waited = time.monotonic() - st.session_state.get("run_started_at", time.monotonic())
        st.info(escape_markdown(f"Starting run {run_id}…"))  # an id read back from the database
        if waited > 60:
            st.error("The run has not started after a minute. Its log says:")
            st.code(_log_tail(run_id) or "(empty)", language=None)
        return
    assert run is not None
    st.markdown(f"**{run_label(run)}**")
    _progress.bars(run)
    if run.status not in ACTIVE:
        st.rerun()  # finished: redraw the whole page (past runs, no more polling)
    cancelling = run.status == RunStatus.CANCELLING
    if not cancelling:
        if run.done == 0 and not run.to_generate:
            st.caption("Filling gaps first (the local model may take a while per instance)…")
        cancelling = st.button("Cancel run", key="run_cancel")
        if cancelling:
            store.request_cancel(run_id)
    if cancelling:
        st.warning("cancelling… the run stops within seconds and keeps what is finished.")


def shown(text: str) -> str:
    """A stored error as safe Markdown: redacted (a provider may echo a key) and escaped."""
    return escape_markdown(redact(text))


def progress_section(by_id: dict[str, Run]) -> str | None:
    """The run started here (or, after a reload, one still going): its progress while it
    runs, how it ended once it has. Returns its id."""
    active = st.session_state.get("run_active")
    if active is None:  # after a reload: pick up a run that is still going
        active = next(
            (r.id for r in by_id.values() if r.status in ACTIVE and r.page is ResultsPage.EXPLORE),
            None,
        )
    current = by_id.get(active) if active else None
    if active and (_starting(current) or (current and current.status in ACTIVE)):
        st.subheader("Progress")
        progress(active)
    elif current:
        last_run(active, current)
    return active


def last_run(run_id: str, run: Run) -> None:
    """How the run started here ended, and a way to its results."""
    st.subheader("Last run")
    text = (
        f"{run_label(run)}: {run.done:,} of {run.planned:,} {counted(run)}, "
        f"{run.failed:,} failed · {totals(run)}."
    )
    if run.status == RunStatus.DONE:
        st.success(text)
    else:
        st.warning(text + (f" {shown(run.error)}" if run.error else ""))
    if run.failed and (unread := unread_answers.run_note(store, run)):
        st.info(escape_markdown(unread))  # how many could not be read, why, and the fix
    if run.done and st.button("Open this run in Explore", key="run_last_explore"):
        st.session_state["explore_source"] = f"run:{run_id}"
        st.switch_page("app_pages/explore.py")


# ------------------------------------------------------------------ past runs
def past_runs(by_id: dict[str, Run], active: str | None) -> None:
    """Every run, one picked: open, resume, retry or cancel it, and its provider batches."""
    st.subheader("Runs")
    if not by_id:
        st.info("No runs yet. Choose what to run above and press **Start run**.")
        st.stop()
    pick, gone = pick_run(  # when a run was made beside its name: a laptop shows both
        "Run",
        by_id,
        "run_pick",
        active if active in by_id else next(iter(by_id)),
        ["id", "name", "status", "created_at", "planned", "done", "failed", "cost", "cost_saved"]
        + ["duration_s", "models", "biases"],
        {  # fixed digits, as `cost_text` writes a cost, not a float's own "0.0001"
            "cost": st.column_config.NumberColumn(format="$%.4f"),
            "cost_saved": st.column_config.NumberColumn("saved by the cache", format="$%.4f"),
            "duration_s": st.column_config.NumberColumn("duration (s)", format="%.1f"),
        },
    )
    run_buttons(pick, by_id[pick], gone)
    if by_id[pick].error:
        st.caption(f"Error: {shown(by_id[pick].error)}")
    provider_batches(pick)


def run_buttons(pick: str, picked: Run, gone: bool) -> None:
    """Open, Resume, Retry failed pairs and Cancel for the picked run; no click acts on a
    run deleted elsewhere (`gone`)."""
    b1, b2, b3, b4 = st.columns(4)
    opens = OPEN_IN.get(picked.page)  # the page that shows its kind's results, if any
    if opens is not None and b1.button(opens.label, key=opens.key) and not gone:
        st.session_state[opens.state] = opens.value.format(id=pick, spec=picked.spec)
        st.switch_page(opens.page)
    retry = (
        b3.button(
            "Retry failed pairs",
            key="run_retry",
            disabled=picked.status in ACTIVE or not picked.failed,
            help="Ask again for every failed pair, also those whose answer could not be read.",
        )
        and not gone
    )
    resume = picked.status in RESUMABLE and b2.button("Resume", key="run_resume") and not gone
    if (resume or retry) and _launch.resume(
        "run", pick, retry_failed=retry, max_cost=_run_factors.max_cost()
    ):
        _mark_started(pick)
        st.rerun()
    cancel = picked.status in ACTIVE - {run_record.RunStatus.CANCELLING} and b4.button(
        "Cancel", key="run_cancel_pick"
    )
    if cancel and not gone:
        store.request_cancel(pick)
        st.rerun()


def provider_batches(run_id: str) -> None:
    """The provider batches of a run sent through a Batch API, if any."""
    batches = store.batches(run_id)
    if batches:
        st.markdown("**Provider batches**")
        _tables.table(
            pd.DataFrame(batches)[
                ["id", "model", "round", "status", "total", "completed", "failed", "expected_at"]
            ],  # an expected time not known yet reads "–"
            "run_batches",
            f"{run_id}-batches",
            hide_index=True,
            width="stretch",
        )


def main() -> None:
    spec, stale = what_to_run()
    plan = plan_of(spec) if spec is not None else None
    if spec is not None and plan is not None:
        offer_start(spec, plan, stale)
    st.divider()
    by_id = {r.id: r for r in run_summaries(store)}
    active = progress_section(by_id)
    past_runs(by_id, active)


main()
