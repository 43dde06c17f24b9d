"""A study run's results read from the store: its runs, its turns, its figures, the humans
beside them, and its conversations.

The statistics are the statistics layer's (`cogbias.studies.study_tables` scores the cells
and pivots them, `cogbias.studies.reference_tables` sets them beside the humans); this module
only finds a study run as a `Run` record, reads what they need of it from the store and hands
it over. What every reader asks of a study run (its cells, its export, its settings) is the
kind's read side, `study_read`.
"""

from __future__ import annotations

import pandas as pd

from cogbias.core.run_record import Run
from cogbias.runs import kinds
from cogbias.runs.study_plan import stored_study
from cogbias.runs.study_read import StudyResults, calls, scored_cells, spec_of
from cogbias.store import Store
from cogbias.studies import reference_tables
from cogbias.studies.definitions import Study
from cogbias.studies.references import Reference, load_references

__all__ = ["calls", "spec_of"]  # what the pages read of a study run, beside what is here


def study_runs(store: Store, study: str | None = None) -> list[Run]:
    """Stored study runs (newest first), optionally of one study."""
    runs = [run for run in kinds.records(store) if is_study(run)]
    return [run for run in runs if study is None or spec_of(run).study == study]


def results(store: Store, run_id: str) -> pd.DataFrame:
    """One row per cell of the run (`study_tables.RESULT_COLUMNS`)."""
    return scored_cells(store, study_run(store, run_id))


def comparison(
    store: Store, run_id: str, references: dict[str, Reference] | None = None
) -> pd.DataFrame:
    """The run's cells beside the humans (`reference_tables.COLUMNS`); empty when no test of
    the run's study asks an original's question."""
    study = study_of_run(store, run_id)
    references = load_references() if references is None else references
    if not reference_tables.compared_tests(study, references):  # its turns are not read
        return pd.DataFrame(columns=reference_tables.COLUMNS)
    turns = calls(store, run_id, reference_tables.READ)
    return reference_tables.comparison(turns, study, references, run_id)


def conversations(store: Store, run_id: str, test: str | None = None) -> pd.DataFrame:
    """The turns of a run's sequential conversations (or one test's), in order."""
    frame = pd.DataFrame(store.conversation_turns(run_id, test))
    if frame.empty:
        return frame
    # a conversation has several decisions (a self-help rewrite + decision is not one)
    decisions = (frame["role"] == "decide").groupby(frame["conversation"]).transform("sum")
    return frame[decisions > 1].reset_index(drop=True)


def selfhelp_pairs(store: Store, run_id: str) -> pd.DataFrame:
    """Self-help units side by side: the original prompt, the model's rewrite, and the
    decision on the rewrite."""
    return pd.DataFrame(store.selfhelp_turns(run_id))


def is_study(run: Run) -> bool:
    """Whether a stored run is a study run: its kind (resolved once) reads as one."""
    return isinstance(run.kind, StudyResults)


def study_run(store: Store, run_id: str) -> Run:
    """A stored study run; KeyError saying what the run is when it is another kind."""
    run = kinds.stored(store, run_id)
    if not is_study(run):
        raise KeyError(
            f"run {run_id} is {kinds.described(run)}, not a study run: its results are "
            f"`cogbias results run {run_id}`"
        )
    return run


def study_of_run(store: Store, run_id: str) -> Study:
    """The study a run was planned from, as the store keeps it."""
    return stored_study(store, spec_of(study_run(store, run_id)))
