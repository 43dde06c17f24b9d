"""A study run's results read from the store: its runs, its turns, its figures, the humans
beside them, and its conversations.

The statistics are the statistics layer's (`cogbias.studies.study_tables` scores the cells
and pivots them, `cogbias.studies.reference_tables` sets them beside the humans); this module
only finds a study run as a `Run` record, reads what they need of it from the store and hands
it over.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cogbias.core.run_record import Run
from cogbias.runs import kinds
from cogbias.runs.study_plan import StudySpec, stored_study
from cogbias.store import Store
from cogbias.studies import reference_tables, study_tables
from cogbias.studies.definitions import Study
from cogbias.studies.references import Reference, load_references


def study_runs(store: Store, study: str | None = None) -> list[Run]:
    """Stored study runs (newest first), optionally of one study."""
    runs = [run for run in kinds.records(store) if _is_study(run)]
    return [run for run in runs if study is None or spec_of(run).study == study]


def spec_of(run: Run) -> StudySpec:
    """A study run's spec as its kind reads it."""
    return StudySpec.from_stored(run.spec)


def calls(store: Store, run_id: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A run's turns (all their columns, or only `columns`), in the order they were written."""
    if columns is None:
        return pd.DataFrame(store.turns(run_id))
    return pd.DataFrame(store.turn_values(run_id, columns))


def results(store: Store, run_id: str) -> pd.DataFrame:
    """One row per cell of the run (`study_tables.RESULT_COLUMNS`)."""
    run = study_run(store, run_id)
    spec = spec_of(run)
    turns = calls(store, run_id, [*study_tables.SCORED, *study_tables.DIMENSIONS])
    return study_tables.results(turns, stored_study(store, spec), run_id, spec.study)


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


def _is_study(run: Run) -> bool:
    """Whether a stored run is a study run (its kind, resolved once, says)."""
    return run.kind is not None and run.kind.name == "study"


def study_run(store: Store, run_id: str) -> Run:
    """A stored study run; KeyError saying what the run is when it is another kind."""
    run = kinds.stored(store, run_id)
    if not _is_study(run):
        raise KeyError(
            f"run {run_id} is {kinds.described(run)}, not a study run: its results are "
            f"`cogbias results run {run_id}`"
        )
    return run


def study_of_run(store: Store, run_id: str) -> Study:
    """The study a run was planned from, as the store keeps it."""
    return stored_study(store, spec_of(study_run(store, run_id)))
