"""Studies: start a run of a built-in or imported study, watch it, and read its results.

A study run crosses a study's tests with models × temperatures × prompt variants ×
mitigations × repeats (`cogbias.runs.study_plan`); it runs in its own process like any run
(`cogbias resume RUN`), so this page only plans, starts and reads the database.
"""

from dataclasses import replace

import streamlit as st

from app_pages import _launch, _pair, _paper_models, _report, _study_views
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    chosen_gone,
    db_path,
    friendly,
    keep,
    model_names,
    models,
    open_store_or_stop,
    pick_run,
    run_label,
)
from cogbias.core import run_record
from cogbias.core.limits import name_problem
from cogbias.core.redact import redact
from cogbias.core.run_record import Run, RunStatus
from cogbias.runs import study_plan, study_results, summaries
from cogbias.runs.study_plan import MITIGATION_ORDER, StudyPlan, StudySpec
from cogbias.store import pid_alive
from cogbias.studies.definitions import MAX_REPEATS, Study
from cogbias.views import study_views
from cogbias.views.safe_text import escape_markdown

RESUMABLE = run_record.RESUMABLE
st.title("Studies")
st.caption(
    "Whole studies from the literature (BiasBuster's admissions tests, Mohr's eight classic "
    "problems, the classic experiments shown beside their human results, or an imported thesis "
    "dataset), crossed with models, temperatures, prompt variants and mitigations. The random "
    "baseline needs no key and finishes in seconds."
)
store = open_store_or_stop()
infos = models()
label = model_names(infos)

# ------------------------------------------------------------------ start a study run
st.subheader("Start a study run")


def repeats_box(study: Study, chosen: list[str]) -> str:
    """The Repeats box's key, holding the number the run will use: the study's default for
    the chosen models (`study_plan.default_repeats`) until the reader types another, and the
    new default again when the study or the kind of models changes (the box and the plan
    never disagree)."""
    default = attempt("Counting the repeats", lambda: study_plan.default_repeats(study, chosen))
    default = default or study.repeats
    if st.session_state.get("study_repeats_default") != (study.id, default) or (
        "study_repeats" not in st.session_state
    ):
        st.session_state["study_repeats_default"] = (study.id, default)
        st.session_state["study_repeats"] = default
    return "study_repeats"


def study_choices() -> list[str]:
    """The studies that can be run; the files left out are named with their problems (as
    text: they quote the files), and a broken file leaves out itself alone."""
    loaded = attempt("Loading the studies", lambda: study_views.study_choices(store))
    choices, problems = loaded or ([], [])
    if problems:
        files = sorted({p.file for p in problems})
        st.warning(
            f"{len(files)} study file(s) have problems and were left out; the other studies "
            "can be run. Fix or remove them:"
        )
        more = [f"… and {len(problems) - 20} more"] if len(problems) > 20 else []
        st.code("\n".join([*(str(p) for p in problems[:20]), *more]), language=None)
    return choices


def start_form() -> None:
    """Plan a study run from the choices, show the plan, start it in the background."""
    choices = study_choices()
    if not choices:
        st.info("No study can be loaded; fix or remove the broken study files named above.")
        return
    stale = kept_choices(choices)
    c1, c2 = st.columns(2)
    name = c1.selectbox("Study", choices, key="study_name")
    study = attempt(f"Loading the study {name}", lambda: study_plan.load_study(name, store))
    chosen = c2.multiselect(
        "Models",
        [m.id for m in infos],
        default=[RANDOM_MODEL],
        format_func=label,
        key="study_models",
    )
    if study is None:
        return
    _pair.long_prose(f"{study.name}. {study.description}".strip(), caption=True)
    _study_views.human_results(study.id)
    asked, run_name = conditions(study, name, chosen)
    planned = plan_of(asked, study, run_name)
    if planned is not None:
        offer_start(*planned, run_name, stale)


def kept_choices(choices: list[str]) -> bool:
    """Keep the form's choices across a visit to another page; True when a study or model
    chosen before was deleted elsewhere since this page was drawn (named; Start does nothing)."""
    ids = [m.id for m in infos]
    keep("study_name", allowed=choices)
    keep("study_models", allowed=ids)
    keep("study_mitigations", allowed=MITIGATION_ORDER)
    keep("study_run_name", "study_repeats")  # before repeats_box sets a new plan's default
    return any(
        [chosen_gone("study_name", choices, "Study"), chosen_gone("study_models", ids, "Model")]
    )


def conditions(study: Study, name: str, chosen: list[str]) -> tuple[StudySpec, str]:
    """The study run asked for by the form's widgets (their keys carry the study's name, so
    each study keeps its own tests, temperatures and variants), and the run's name."""
    variants = list(study.variants) or ["default"]
    keep(f"study_tests:{name}", allowed=study.tests)
    keep(f"study_temperatures:{name}", allowed=study.temperatures)
    keep(f"study_variants:{name}", allowed=variants)
    c1, c2 = st.columns(2)
    tests = c1.multiselect(
        "Tests",
        list(study.tests),
        default=list(study.tests),
        format_func=lambda t: f"{study.tests[t].name} ({t})",
        key=f"study_tests:{name}",
    )
    mitigations = c2.multiselect(
        "Mitigations", list(MITIGATION_ORDER), default=["none"], key="study_mitigations"
    )
    c1, c2, c3, c4 = st.columns([2, 2, 1, 2])
    temperatures = c1.multiselect(
        "Temperatures",
        list(study.temperatures),
        default=list(study.temperatures),
        key=f"study_temperatures:{name}",
    )
    chosen_variants = c2.multiselect(
        "Prompt variants", variants, default=variants, key=f"study_variants:{name}"
    )
    repeats = c3.number_input(
        "Repeats",
        1,
        MAX_REPEATS,
        key=repeats_box(study, chosen),
        help=f"Valid answers wanted per condition. The study asks {study.repeats:,}; a run "
        f"on the local model alone starts at {study_plan.LOCAL_REPEATS} (a miniature).",
    )
    run_name = c4.text_input("Name (optional)", key="study_run_name").strip()
    asked = StudySpec(
        name,
        list(chosen),
        tests=list(tests),
        temperatures=[float(t) for t in temperatures],
        variants=list(chosen_variants),
        mitigations=list(mitigations) or ["none"],
        repeats=int(repeats),
    )
    return asked, run_name


def plan_of(asked: StudySpec, study: Study, run_name: str) -> tuple[StudySpec, StudyPlan] | None:
    """The run resolved with the study's defaults and its plan; None after saying what is
    missing or wrong (a choice left empty, a bad name, the shared launch checks, a plan the
    study refuses)."""
    missing = [
        what
        for what, picked in (
            ("a model", asked.models),
            ("a test", asked.tests),
            ("a temperature", asked.temperatures),
            ("a prompt variant", asked.variants),
        )
        if not picked
    ]
    label_problem = name_problem(run_name) if run_name else None
    bases = _launch.endpoints(asked.models, infos)
    if missing:
        st.info(f"Choose at least {', '.join(missing)}.")
    elif label_problem:
        st.error(f"The name {escape_markdown(label_problem)}.")
    elif not _launch.refused(asked.models, infos, bases):  # refused: said above the plan
        try:
            resolved = study_plan.resolve(replace(asked, api_base=next(iter(bases), None)), study)
            return resolved, study_plan.plan(resolved, study)
        except (KeyError, ValueError) as exc:  # StudyPlanError is a ValueError
            st.error(f"This study run cannot be planned: {friendly(exc)}")
    return None


def offer_start(resolved: StudySpec, the_plan: StudyPlan, run_name: str, stale: bool) -> None:
    """The plan's size and the Start button; a click starts the run in the background,
    unless a choice went stale (deleted elsewhere) since the page was drawn."""
    m1, m2 = st.columns(2)
    m1.metric("Units", f"{the_plan.planned:,}")
    m2.metric("Model calls (at least)", f"{the_plan.calls():,}")
    st.text(the_plan.describe())
    existing = summaries.run_summary(store, resolved.run_id)
    busy = existing is not None and existing.status in run_record.WORKING
    if busy:
        st.info("This exact study run is running now: watch it below.")
    elif existing is not None and existing.status == RunStatus.DONE:
        st.info(
            "This exact study run already finished. Starting it again only asks what is "
            "missing; change the repeats or the models for new results."
        )
    start = st.button("Start study run", type="primary", key="study_start", disabled=busy)
    if start and not stale:
        run_id = _launch.launch("study run", the_plan, run_name)
        if run_id is not None:
            st.session_state["study_active"] = run_id
            st.session_state["study_run"] = run_id
            st.rerun()


start_form()

# ------------------------------------------------------------------ progress
runs = {r.id: r for r in summaries.run_summaries(store) if study_results.is_study(r)}
studies = {run_id: {"study": study_results.spec_of(r).study} for run_id, r in runs.items()}


def working(run: Run) -> bool:
    """A worker is on it: the run says so (`run_summaries` calls a running run whose worker
    died interrupted), or a worker process started for it has not claimed it yet."""
    if run.status in run_record.WORKING:
        return True
    starting = run.status == RunStatus.PLANNED or run.id == st.session_state.get("study_active")
    return starting and pid_alive(run.pid)


@st.fragment(run_every=1.0)
def progress(run_id: str) -> None:
    run = summaries.run_summary(store, run_id)
    if run is None or not working(run):
        st.rerun()  # finished (or gone): redraw the whole page
        return
    planned = max(run.planned or 0, 1)
    st.markdown(f"**{run_label(run)}**")
    st.progress(min(run.done / planned, 1.0), text=f"{run.done:,} of {run.planned:,} units")
    st.caption(
        escape_markdown(
            f"{run.failed:,} failed · {run.tokens or 0:,} tokens · {summaries.cost_text(run)}"
        )
    )
    if run.status == RunStatus.CANCELLING:
        st.warning("cancelling… the run stops within seconds and keeps what is finished.")
    elif st.button("Cancel", key=f"study_cancel:{run_id}"):
        store.request_cancel(run_id)
        st.warning("cancelling… the run stops within seconds and keeps what is finished.")


going = [r for r in runs.values() if working(r)]
if going:
    st.subheader("Running now")
    for run in going:
        progress(run.id)

# ------------------------------------------------------------------ results
st.divider()
st.subheader("Results of a study run")
if not runs:
    st.info(
        "No study runs yet. Pick a study and models under **Start a study run** above and "
        "press **Start study run** (the random baseline needs no key)."
    )
    st.stop()
# A run deleted elsewhere since the last run of this page: said, and no click acts on it.
pick, gone = pick_run(
    "Study run",
    runs,
    "study_run",
    next(iter(runs)),
    ["id", "name", "study", "status", "created_at", "planned", "done", "failed", "cost", "models"],
    extra=studies,
)
picked = runs[pick]
stalled = picked.status == RunStatus.PLANNED and not working(picked)  # its worker never began
if stalled:
    log = db_path().parent / f"{pick}.log"
    st.warning("This run's worker stopped before it began. The end of its log:")
    st.code(
        redact(log.read_text(errors="replace")[-1500:]) if log.is_file() else "(no log)",
        language=None,
    )
b1, b2, _ = st.columns([1, 1, 4])
resume = (picked.status in RESUMABLE or stalled) and b1.button("Resume", key="study_resume")
if resume and not gone and _launch.resume("study run", pick):
    st.session_state["study_active"] = pick
    st.rerun()
if working(picked) and b2.button("Cancel", key="study_cancel_pick") and not gone:
    store.request_cancel(pick)
    st.rerun()
if picked.error:
    st.caption(f"Error: {escape_markdown(redact(picked.error))}")
study_of_run = attempt(
    "Reading the study of this run", lambda: study_results.study_of_run(store, pick)
)
if study_of_run is None:
    st.stop()
table_tab, chat_tab, selfhelp_tab = st.tabs(["Results", "Conversations", "Self-help rewrites"])
with table_tab:
    _study_views.results(pick)
    _paper_models.beside_study_run(
        pick, studies[pick]["study"]
    )  # the paper's own models, if printed
    _report.offer("run", "study_report", run_id=pick)
with chat_tab:
    _study_views.conversation_viewer(store, pick, study_of_run)
with selfhelp_tab:
    _study_views.selfhelp_viewer(store, pick, study_of_run)
