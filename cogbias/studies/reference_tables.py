"""A study run beside the humans: each cell's answers set beside the original experiment's.

For every test of the run that asks an original's question (`studies.references`: a
reference's `[[uses]]`), each cell (model × temperature × variant × mitigation) gets the rows of
`reference_stats.compare`: per condition the model's share (or median) beside the humans',
then the effect. A cell of a variant the original did not ask (the Mohr thesis' odd and large
numbers), or a test whose question differs from the original's (`[[differs]]`), gets one
`note` row saying why no human figure stands beside it. Pure pandas over a run's turns;
`cogbias.runs.study_results.comparison` reads them from the store.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from cogbias.core.records import TurnStatus
from cogbias.studies import reference_stats
from cogbias.studies.definitions import Study
from cogbias.studies.references import Reference, differences_for, references_for
from cogbias.studies.study_tables import DIMENSIONS

KEYS = ["test", *DIMENSIONS]
COLUMNS = ["run_id", "study", *KEYS, "reference", "experiment"]
COLUMNS += [*reference_stats.COLUMNS, "measure", "unit", "citation", "note"]
# what the comparison reads of each turn
READ = ("test", "condition", "role", "status", "value", *DIMENSIONS)


def compared_tests(study: Study, references: dict[str, Reference]) -> list[str]:
    """The study's tests that an original experiment asks (or says why it does not)."""
    return [
        t
        for t in study.tests
        if references_for(references, study.id, t) or differences_for(references, study.id, t)
    ]


def comparison(
    turns: pd.DataFrame, study: Study, references: dict[str, Reference], run_id: str
) -> pd.DataFrame:
    """The cells of the run `run_id` beside the humans (COLUMNS), from its turns (the
    columns READ); empty when no test of the study asks an original's question."""
    tests = compared_tests(study, references)
    if not tests or turns.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = turns[turns["test"].isin(tests)]
    rows: list[dict[str, Any]] = []
    for key, cell in frame.groupby(KEYS, sort=False):
        where = dict(zip(KEYS, key, strict=True)) | {"run_id": run_id, "study": study.id}
        rows += cell_rows(study, references, where, cell)
    order = {t: i for i, t in enumerate(study.tests)}
    rows.sort(key=lambda r: (order[r["test"]], *(str(r[d]) for d in DIMENSIONS)))
    out = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("humans_n", "model_n"):  # counts stay whole numbers beside empty cells
        out[column] = out[column].astype("Int64")
    return out


def cell_rows(
    study: Study, references: dict[str, Reference], where: dict[str, Any], cell: pd.DataFrame
) -> list[dict[str, Any]]:
    """The comparison rows of one cell (its turns in `cell`), labelled with `where`."""
    test = study.tests[where["test"]]
    rows = []
    for reference, difference in differences_for(references, study.id, test.id):
        rows.append(_note(where, reference, difference.note))
    ok = cell[(cell["role"] == "decide") & (cell["status"] == TurnStatus.OK)]
    answers = {
        name: [json.loads(v) for v in group["value"] if isinstance(v, str)]
        for name, group in ok.groupby("condition")
    }
    for reference, use in references_for(references, study.id, test.id):
        if use.variants and where["variant"] not in use.variants:
            note = (
                f"The original asked with its own numbers; the variant '{where['variant']}' "
                "changes them, so no human figure is shown."
            )
            rows.append(_note(where, reference, note))
            continue
        if reference.measure == "share" and test.answer != "letter":
            note = f"The test reads {test.answer} answers; the reference counts letters."
            rows.append(_note(where, reference, note))
            continue
        for row in reference_stats.compare(
            reference, use, answers, test.letters, [c.name for c in test.conditions]
        ):
            rows.append({**where, **_about(reference), **row, "note": use.note})
    return rows


def _about(reference: Reference) -> dict[str, Any]:
    return {
        "reference": reference.id,
        "experiment": reference.experiment,
        "measure": reference.measure,
        "unit": reference.unit,
        "citation": reference.cited,
    }


def _note(where: dict[str, Any], reference: Reference, note: str) -> dict[str, Any]:
    return {**where, **_about(reference), "kind": "note", "note": note}
