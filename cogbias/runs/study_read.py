"""The read side of the study kind (`read_side.ReadSide`): its turns (`study_calls`), their
export with each decision's coded answer, its cells (scored by `studies.study_tables`) and
its settings in words.

Each function takes the run's `Run` record, so nothing here looks a run up again;
`study_results` finds study runs by id for the pages and commands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cogbias.core.export_columns import TURN_COLUMNS
from cogbias.core.records import Turn, TurnStatus
from cogbias.core.run_record import ResultsPage, Run, RunRows
from cogbias.runs.read_side import ExportTable, ReadSide
from cogbias.runs.study_plan import StudySpec, stored_study

if TYPE_CHECKING:
    import pandas as pd

    from cogbias.store import Store
    from cogbias.studies.definitions import Study


def spec_of(run: Run) -> StudySpec:
    """A study run's spec as its kind reads it."""
    return StudySpec.from_stored(run.spec)


def calls(store: Store, run_id: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A run's turns (all their columns, or only `columns`), in the order they were written."""
    import pandas as pd

    if columns is None:
        return pd.DataFrame(store.turns(run_id))
    return pd.DataFrame(store.turn_values(run_id, columns))


def scored_cells(store: Store, run: Run) -> pd.DataFrame:
    """One row per cell of a study run (`study_tables.RESULT_COLUMNS`)."""
    from cogbias.studies import study_tables

    spec = spec_of(run)
    turns = calls(store, run.id, [*study_tables.SCORED, *study_tables.DIMENSIONS])
    return study_tables.results(turns, stored_study(store, spec), run.id, spec.study)


def turn_rows(store: Store, run: Run, model: str | None) -> Iterator[list[dict[str, Any]]]:
    """Batches of a study run's turns as exported (one row per model call, docs/studies.md),
    in conversation and turn order, each with its `coded` answer (`coded_answer`)."""
    try:
        study: Study | None = stored_study(store, spec_of(run))
    except (KeyError, ValueError):  # its study is gone or unreadable: the turns still export
        study = None
    for turns in store.iter_turns(run.id, model):
        yield [turn.export() | {"coded": coded_answer(study, turn)} for turn in turns]


def coded_answer(study: Study | None, turn: Turn) -> float | None:
    """A decision's answer as its test's metric counts it (`questions.code_answer`: a choice
    1 when it is the answer the bias predicts, the thesis' §3.4.1), so that Cohen's d
    recomputed from an export has the run's sign; None for a rewrite, a revision (several
    answers in one) and a turn without a readable answer."""
    from cogbias.studies.questions import code_answer

    test = study.tests.get(turn.test) if study is not None else None
    if test is None or turn.role != "decide" or turn.status != TurnStatus.OK or turn.value is None:
        return None
    try:
        return code_answer(test, json.loads(turn.value))
    except (ValueError, TypeError, IndexError):  # a value this test cannot have been given
        return None


class StudyResults(ReadSide):
    """A study's turns, scored per cell: the Studies page shows them."""

    page = ResultsPage.STUDIES
    tables = (RunRows("study_calls"),)
    exports = (
        ExportTable(
            "turns",
            TURN_COLUMNS,
            turn_rows,
            "one row per model call of the study's conversations, with the answer as the "
            "study's metric counts it (`coded`)",
        ),
    )
    noun = "decision"
    failed_noun = "without a readable answer"

    def cells(self, store: Store, run: Run) -> pd.DataFrame:
        return scored_cells(store, run)

    def settings(self, store: Store, run: Run) -> tuple[str, ...]:
        return settings(run)


def settings(run: Run) -> tuple[str, ...]:
    """A study run's stored spec in words."""
    spec = run.spec

    def listed(key: str, default: str) -> str:
        return ", ".join(str(v) for v in spec.get(key) or []) or default

    temperatures = ", ".join(f"{t:g}" for t in spec.get("temperatures") or []) or "the study's"

    return (
        f"Run {run.id}"
        + (f" ({run.name})" if run.name else "")
        + f": a study run of {spec.get('study')}, status {run.status}",
        f"Tests: {listed('tests', 'all')}",
        f"Temperatures: {temperatures}; prompt variants: {listed('variants', 'all')}",
        f"Mitigations: {listed('mitigations', 'none')}",
        f"Repeats (valid answers wanted per condition): {spec.get('repeats') or 'the study’s'}; "
        f"attempts per answer: {spec.get('max_attempts') or 'the study’s'}; seed "
        f"{spec.get('seed', 0)}",
        "Gaps: none (a study asks its own prompts, no generator)",
        f"Created {run.created_at or '–'}, started {run.started_at or '–'}, finished "
        f"{run.finished_at or '–'}",
    )
