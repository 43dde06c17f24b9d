"""Helpers shared by the pages: where the database is, cached reads, friendly errors.

Pages stay thin: they call `cogbias` and show what comes back. Anything that can fail
(a model, a file, the database) goes through `friendly` so the page says what went wrong
and what to do, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

from cogbias.core.redact import redact
from cogbias.core.run_record import ResultsPage, Run
from cogbias.core.safetext import shown
from cogbias.library import testcases as library
from cogbias.library.testcases import LibraryError, TestCase
from cogbias.llm import registry
from cogbias.llm.registry import ModelInfo
from cogbias.store import SchemaError, Store, default_path
from cogbias.views import safe_text
from cogbias.views.numbers import minute

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


LOCAL_MODEL = "local/smollm2"
RANDOM_MODEL = "random"


def db_path() -> Path:
    """The database the CLI uses too (`cogbias.store.default_path`)."""
    return default_path()


def get_store() -> Store:
    """This session's connection (a Store is used by one thread at a time; each browser
    session runs its script in its own thread, so it gets its own connection)."""
    path = db_path()
    held = st.session_state.get("_store")
    if held is None or held[0] != path:
        st.session_state["_store"] = (path, Store(path))
    return st.session_state["_store"][1]


def open_store_or_stop() -> Store:
    try:
        return get_store()
    except SchemaError as exc:
        st.error(f"The database cannot be opened: {friendly(exc)}")
    except Exception as exc:  # sqlite3 errors: not a database, no permission, disk full
        st.error(
            f"The database {safe_text.escape_markdown(db_path())} cannot be opened "
            f"({friendly(exc)}). Point COGBIAS_DB at "
            "another file, or move this one away to start afresh."
        )
    st.stop()
    raise AssertionError("unreachable")


def friendly(exc: BaseException) -> str:
    """A one-line message for a user, safe to put in Markdown: redacted (a provider may echo
    a key) and escaped (it may quote a model's or a file's text)."""
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    elif isinstance(exc, LibraryError):
        text = "; ".join(
            # a file's problems name the file; text typed in the page is "<...>"
            ("" if p.file.startswith("<") else f"{p.file}: ")
            + f"line {p.line}, column {p.col}: {p.message}"
            for p in exc.problems
        )
    else:
        text = str(exc).strip() or type(exc).__name__
    # a provider's own words stay in the logs and stored rows; a page says what we understood
    text = text.split(" Provider said:")[0]
    return safe_text.escape_markdown(redact(text))


def attempt(what: str, func: Callable[[], T], hint: str = "") -> T | None:
    """Run `func`; on failure show what failed and what to do, and return None.

    Every part is shown as text: `what` and `hint` are escaped like the error itself, so a
    caller may name a model, file or dataset in them."""
    from cogbias.llm.errors import MissingKeyError

    try:
        return func()
    except Exception as exc:
        parts = [f"{safe_text.escape_markdown(what)} failed: {friendly(exc)}"]
        if hint and not isinstance(exc, MissingKeyError):  # that one says what to set
            parts.append(safe_text.escape_markdown(hint))
        st.error("\n\n".join(parts))
        return None


def refuse_missing_keys(model_ids: Iterable[str], infos: list[ModelInfo]) -> bool:
    """Say, before anything starts, which chosen model lacks its key and what to set (one
    sentence per model); True when any does. A run would only fail on its first call."""
    from cogbias.library.examples import EXAMPLES_GENERATOR
    from cogbias.llm.keys import missing_key, missing_key_message

    refused = False
    for mid in dict.fromkeys(m for m in model_ids if m != EXAMPLES_GENERATOR):  # no model
        variable = missing_key(mid, api_base_of(mid, infos))
        if variable:
            st.error(safe_text.escape_markdown(missing_key_message(mid, variable)))
            refused = True
    return refused


def db_version(path: str) -> tuple[float, ...]:
    """Changes whenever the database is written (main file or WAL), at the cost of two stats."""
    out: list[float] = []
    for suffix in ("", "-wal"):
        try:
            info = os.stat(path + suffix)
            out += [info.st_mtime_ns, info.st_size]
        except FileNotFoundError:
            out += [0, 0]
    return tuple(out)


def library_version() -> tuple[tuple[str, float], ...]:
    folder = library.user_dir()
    files = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    return tuple((p.name, p.stat().st_mtime) for p in files)


@st.cache_data(show_spinner=False, max_entries=8)
def _load_library(version: tuple[tuple[str, float], ...], home: str) -> library.LibraryReport:
    return library.load_library_report()


def test_cases() -> dict[str, TestCase]:
    """Built-in and user test cases; reloaded when a user file changes.

    A broken user file must not take the whole app down: the valid files are used and the
    problems of the others are shown (as plain text: they quote the files).
    """
    report = _load_library(library_version(), str(library.user_dir()))
    if report.problems:
        files = report.broken_files()
        st.warning(
            f"{len(files)} test case file(s) have problems and were skipped. "
            "Fix or remove them (Templates page)."
        )
        st.code("\n".join(str(p) for p in report.problems[:20]), language=None)
    return report.cases


def case_label(cases: dict[str, TestCase]) -> Callable[[str], str]:
    return lambda cid: shown(cases[cid].name, 120) + ("" if cases[cid].is_builtin else " (yours)")


@st.cache_data(show_spinner=False)
def scenarios() -> list[library.Scenario]:
    return library.load_scenarios()


def models() -> list[ModelInfo]:
    """The registry plus the user's own models (`COGBIAS_HOME/models.toml`)."""
    try:
        return registry.load_models()
    except Exception as exc:
        st.warning(f"Your models.toml could not be read ({friendly(exc)}); showing built-ins.")
        return registry.load_models(registry.BUILTIN_MODELS)


def model_names(infos: list[ModelInfo]) -> Callable[[str], str]:
    """Picker labels: name and id, and the key variable a model still needs, so nobody picks a
    model that can only fail."""
    from cogbias.llm.keys import missing_key

    names = {m.id: m.name for m in infos}
    needs = {m.id: missing_key(m.id, m.api_base) for m in infos}

    def label(mid: str) -> str:
        text = f"{names[mid]} ({mid})" if mid in names and names[mid] != mid else mid
        if not needs.get(mid):
            return text
        # the need before the id: a narrow picker cuts the end of a label, never the need
        name = names.get(mid, mid)
        return f"{name} — needs {needs[mid]}" + (f" ({mid})" if name != mid else "")

    return label


def generator_label(label: Callable[[str], str]) -> Callable[[str], str]:
    """Model labels, with the offline example fills named for what they are."""
    from cogbias.library.examples import EXAMPLES_GENERATOR

    return lambda g: "Example fills (offline, instant)" if g == EXAMPLES_GENERATOR else label(g)


def api_base_of(model: str, infos: list[ModelInfo]) -> str | None:
    for info in infos:
        if info.id == model:
            return info.api_base
    return None


def runs_table(
    runs: Iterable[Run], columns: list[str], extra: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """`columns` of `runs` (`summaries.run_summaries`) as every page lists them, with a
    page's `extra` columns by run id: created to the minute, models with a space after each
    comma (the CLI keeps "a,b", which `--models` takes back)."""
    # Imported here: every page imports this module, and pandas (~0.3 s) would otherwise
    # delay the first page (Learn), which shows no table.
    import pandas as pd

    from cogbias.runs.summaries import table_row

    rows = []
    for run in runs:
        row = {**table_row(run), **(extra or {}).get(run.id, {})}
        row.update(created_at=minute(run.created_at), models=row["models"].replace(",", ", "))
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def run_label(run: Run) -> str:
    """Safe in Markdown: a run's name is the user's text."""
    name = f"{run.name} · " if run.name else ""
    return safe_text.escape_markdown(f"{name}{run.id} · {run.status} · {minute(run.created_at)}")


def run_option(run: Run, study: str = "") -> str:
    """A run as a select box option: plain text (options are not Markdown, so only what no
    page shows raw is escaped, `safetext.shown`) and no status (an open select box would not
    redraw a label that changes)."""
    parts = (run.name, study, run.id, minute(run.created_at))
    return " · ".join(shown(p, 120) for p in parts if p)


def pick_run(
    label: str,
    runs: dict[str, Run],
    key: str,
    default: str,
    columns: list[str],
    column_config: dict[str, Any] | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[str, bool]:
    """`columns` of `runs` (with a page's `extra` columns by id, a study run's "study") as a
    table, and the id picked below it in the select box `key`, with whether the run picked
    before was deleted elsewhere since the page was drawn (said above the box by
    `chosen_gone`; the page then acts on no click of this run)."""
    from app_pages import _tables

    _tables.table(
        runs_table(runs.values(), columns, extra),
        f"{key}_table",
        "runs",
        hide_index=True,
        width="stretch",
        column_config={
            "created_at": st.column_config.TextColumn("created"),
            **(column_config or {}),
        },
    )
    gone = chosen_gone(key, runs, "Run", default)
    study = {run_id: str(row.get("study", "")) for run_id, row in (extra or {}).items()}
    pick = st.selectbox(
        label, list(runs), format_func=lambda r: run_option(runs[r], study.get(r, "")), key=key
    )
    return pick, gone


def share_local_server() -> None:
    """Let worker processes reuse this process's local model server, if one is running:
    two llama.cpp servers competing for two cores are each many times slower than one."""
    from cogbias.llm import local

    if local.local_server_started():
        os.environ[local.SHARED_SERVER_ENV] = local.ensure_local_server()


def load_secrets_into_env() -> None:
    """API keys may live in .streamlit/secrets.toml; litellm and worker processes read the
    environment, so copy top-level string secrets there (never overriding, never shown)."""
    try:
        items = dict(st.secrets)
    except Exception:  # no secrets file: nothing to do
        return
    for name, value in items.items():
        if isinstance(value, str) and name.isupper():
            os.environ.setdefault(name, value)


@dataclass(frozen=True)
class OpenIn:
    """The Run page's button to a run's results: its label and key, the page it opens and the
    session value (`value`, with the run's `{id}` or a field of its `{spec}`) that page reads
    to show the run."""

    label: str
    key: str
    page: str
    state: str
    value: str


# the page each results page is (a run of a kind shown on none has no such button)
OPEN_IN = {
    ResultsPage.EXPLORE: OpenIn(
        "Open in Explore", "run_explore", "app_pages/explore.py", "explore_source", "run:{id}"
    ),
    ResultsPage.STUDIES: OpenIn(
        "Open in Studies", "run_studies", "app_pages/studies.py", "study_run", "{id}"
    ),
    ResultsPage.CLASS: OpenIn(  # the class run's session, beside the class and the humans
        "Open in Class", "run_class", "app_pages/classroom.py", "class_session", "{spec[session]}"
    ),
}


def result_sources(
    runs: Sequence[Run], datasets: Iterable[Mapping[str, Any]]
) -> tuple[list[str], Callable[[str], str]]:
    """What paired results can be shown: "all", each paired run ("run:ID") and each dataset
    ("dataset:NAME"), with a label function for a selectbox; of `runs` (`kinds.records`) and
    `datasets` (`Store.datasets`) as the page read them, once per rerun."""
    paired = {r.id: r for r in runs if r.kind and r.kind.page is ResultsPage.EXPLORE}
    from cogbias.datasets.formats import results_page

    names = [d["name"] for d in datasets if results_page(d["kind"]) == "explore"]
    sources = ["all"] + [f"run:{r}" for r in paired] + [f"dataset:{d}" for d in names]

    def label(source: str) -> str:
        if source == "all":
            return "All results in this database"
        kind, _, name = source.partition(":")
        # options are plain text: a Markdown-escaped label would show its backslashes
        return f"Run {run_option(paired[name])}" if kind == "run" else f"Dataset {name}"

    return sources, label


def other_pages_datasets(datasets: Iterable[Mapping[str, Any]]) -> list[str]:
    """Datasets (`Store.datasets`) whose results another page shows, each with where."""
    from cogbias.datasets.formats import results_page

    pages = {"datasets": "the Datasets page (effect sizes)", "tokenbias": "the Token bias page"}
    return [
        f"{d['name']} is on {pages[page]}"
        for d in datasets
        if (page := results_page(d["kind"])) in pages
    ]


def studies_link(runs: Sequence[Run]) -> None:
    """Point at the Studies page when `runs` (`kinds.records`) hold study runs: their results
    are pivoted there (by mitigation, temperature, prompt variant or model), not in the
    paired heatmaps."""
    count = sum(bool(r.kind and r.kind.page is ResultsPage.STUDIES) for r in runs)
    if count:
        st.page_link(
            "app_pages/studies.py",
            label=f"{count} study run(s): results by mitigation, temperature and prompt variant, "
            "conversations and self-help rewrites are on the Studies page",
            icon=":material/lab_profile:",
        )


def source_filter(source: str) -> tuple[str | None, str | None]:
    """(run_id, dataset) for a source from `result_sources`."""
    kind, _, name = source.partition(":")
    return (name if kind == "run" else None, name if kind == "dataset" else None)


def keep(*keys: str, allowed: Collection[object] | None = None) -> None:
    """Carry widgets' values over a visit to another page; call it before the widgets.

    Streamlit forgets the state of every widget that a page switch did not draw, so a return
    to Datasets opened its first tab and Explore its first view. A copy under a key no widget
    owns survives and is put back here, if it is still one of `allowed` (each of its values,
    for a multiselect). The restored value wins over the widget's default, as it should; the
    config's `disableWidgetStateDuplicationWarning` keeps Streamlit from logging that it does.
    """
    state = st.session_state
    for key in keys:
        copy = f"_kept:{key}"
        if key in state:
            state[copy] = state[key]
        elif copy in state:
            value = state[copy]
            chosen = value if isinstance(value, list) else [value]  # a multiselect's: a list
            if allowed is None or all(v in allowed for v in chosen):
                state[key] = value


def chosen_gone(
    key: str, options: Collection[Any], noun: str | Callable[[Any], str], fallback: Any = None
) -> bool:
    """True when what the picker `key` last showed is no longer one of `options`: another tab
    (or the command line) deleted it between the page's last run and the click that runs it
    now. The page must then do nothing with that click: every action button of this run is
    ignored, and the reader is told which item went (`noun` names its kind, "Run", or is a
    function naming a value: "run:X" → "Run X").

    Without this, a click meant for run X acted on whatever the picker fell back to (Resume
    started a run nobody chose). The picker moves to `fallback` (no value: its default), and
    a multiselect keeps its other values. An item this page removed itself (its own Delete or
    Remove, `removed_here`) is not reported."""
    state = st.session_state
    seen = state.get(key)
    if seen is None:
        if fallback is not None:
            state[key] = fallback
        return False
    several = isinstance(seen, list)
    gone = [v for v in (seen if several else [seen]) if v not in options]
    if not gone:
        return False
    quiet = state.pop(f"_removed:{key}", None)
    name = noun if callable(noun) else lambda value: f"{noun} {value}"
    for value in gone:
        if value != quiet:
            said = f"{name(value)} no longer exists (deleted elsewhere); nothing was done."
            st.warning(safe_text.escape_markdown(said))
    if several:
        state[key] = [v for v in seen if v in options]
    elif fallback is not None:
        state[key] = fallback
    else:
        del state[key]
    return any(value != quiet for value in gone)


def removed_here(key: str, value: Any) -> None:
    """Record that this page itself removed `value`, the choice of picker `key`, so that the
    next run's `chosen_gone` does not call it deleted elsewhere."""
    st.session_state[f"_removed:{key}"] = value


def scoring_choice(key: str, default: str | None = None) -> dict[str, Any]:
    """The scoring controls of Learn, Preview and Run: the scorers' radio, the answers asked
    of each half and their reducer, as the run's `scoring`, `samples` and `reducer` in their
    one spelling (`scorers.spelled`). With a `default` (the chosen model's) the radio shows
    it until the reader picks one, and then keeps the pick."""
    from cogbias.runs import sampling, scorers
    from cogbias.views.probability_bars import scoring_labels

    labels = scoring_labels()
    picked_key = f"{key}_picked"  # no widget's key: it outlives a visit to another page
    if default is not None:
        want = st.session_state.get(picked_key, default)
        if want in labels:
            st.session_state[key] = want

    def _picked() -> None:
        st.session_state[picked_key] = st.session_state[key]

    picked = st.radio(
        "Scoring",
        list(labels),
        format_func=labels.get,
        horizontal=True,
        key=key,
        help="Option probabilities: each half's probability of every option, read from the "
        "model's token log-probabilities (it is asked for an option's letter); the score is "
        "the exact expected score. Models with log-probabilities only, e.g. the local model. "
        "Samples per half above 1: each half asked N times at a temperature above 0, and "
        "the reducer makes the N answers into the half's answer (docs/runs.md).",
        on_change=_picked if default is not None else None,
    )
    scorer = scorers.get(picked)
    samples = 1
    if scorer.ask_half is not None:
        samples = int(
            st.number_input("Samples per half", 1, sampling.MAX_SAMPLES, 1, key=f"{key}_samples")
        )
    if samples == 1:
        return dict(zip(("scoring", "samples", "reducer"), scorers.spelled(picked), strict=True))
    fitting = {r.name: r for r in scorers.reducers_for(scorer)}
    if st.session_state.get(f"_{key}_reducer_of") != picked:  # another scorer's: its own
        st.session_state.pop(f"{key}_reducer", None)
        st.session_state[f"_{key}_reducer_of"] = picked
    reducer = st.selectbox(
        "Reducer",
        list(fitting),
        index=list(fitting).index(scorer.reducer),
        format_func=lambda name: fitting[name].label or name,
        key=f"{key}_reducer",
        help="How a half's samples become its answer: "
        + "; ".join(f"{r.name}: {r.help}" for r in fitting.values()),
    )
    spelled = scorers.spelled(picked, samples, reducer)
    return dict(zip(("scoring", "samples", "reducer"), spelled, strict=True))
