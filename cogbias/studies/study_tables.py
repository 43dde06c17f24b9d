"""A study run's figures: its turns scored per cell, the pivots and the effect-size rows.

A *cell* is one test × model × temperature × variant × mitigation. Its answers are the read
decisions of its units (the last attempt of each), scored by the test's metric
(`study_scores`); `value` is the metric's headline figure, the one heatmaps and pivots show:

| metric | value |
|---|---|
| cohens_d | the capped bias detected, in [0, 1] |
| framing_difference, group_attribution_difference | the rate difference (a − b) |
| status_quo_share | the status-quo share minus 1/k |
| primacy | the choice share of the first half of positions minus the second half |
| anchoring_distance | the anchoring distance (with self-help: of the revised decisions) |
| share | one condition: the target answer's share minus chance (1/number of choices) |

Pure pandas over a run's turns and its `Study`; `cogbias.runs.study_results` reads them from
the store (`results(store, run_id)`) and hands them here.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from cogbias.core.records import TurnStatus
from cogbias.studies.definitions import MITIGATIONS, Study, StudyTest
from cogbias.studies.scores import score_conditions, score_options, score_sequence

DIMENSIONS = ("model", "temperature", "variant", "mitigation")
HEADLINE = {
    "cohens_d": "capped",
    "framing_difference": "delta",
    "group_attribution_difference": "delta",
    "status_quo_share": "excess",
    "primacy": "difference",
    "anchoring_distance": "distance",
    "share": "excess",
}
RESULT_COLUMNS = ["run_id", "study", "test", "bias", "metric", *DIMENSIONS, "value", "n"]
RESULT_COLUMNS += ["unreadable", "failed", "change_rate", "degenerate"]
RESULT_COLUMNS += ["a", "b", "neutral_share", "ci_low", "ci_high", "p_value", "note", "details"]
# Each condition's figure beside the headline: a and b are the two conditions' rates or means
# (status quo: the status-quo share and the same item's share in the neutral condition;
# primacy: the first and the second half's choice shares; anchoring: the admission rate).
CONDITION_FIGURES = {
    "cohens_d": ("a", "b"),
    "framing_difference": ("a", "b"),
    "group_attribution_difference": ("a", "b"),
    "status_quo_share": ("share", "neutral_share"),
    "primacy": ("early", "late"),
    "anchoring_distance": ("admit_rate", None),
    "share": ("share", None),
}
# How a headline value reads as "more biased": +1 when a larger value is more biased, -1
# when a smaller one is (the anchoring distance is the decisions' independence from order).
BIAS_DIRECTION = {metric: 1 for metric in HEADLINE} | {"anchoring_distance": -1}


# what scoring reads of each turn (not the texts: a paper-scale run has 10⁵-10⁶ turns)
SCORED = (
    "conversation", "turn", "role", "test", "condition", "slot", "presented", "status_quo_at",
    "value", "status",
)  # fmt: skip


def results(turns: pd.DataFrame, study: Study, run_id: str, name: str) -> pd.DataFrame:
    """One row per cell of the run `run_id` of the study `name` (RESULT_COLUMNS), from its
    turns (the columns SCORED and DIMENSIONS, as `Store.turn_values` gives them)."""
    if turns.empty:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    parsed = [json.loads(v) if isinstance(v, str) else None for v in turns["value"]]
    # ints stay ints
    frame = turns.assign(parsed=pd.Series(parsed, index=turns.index, dtype=object))
    rows = []
    for key, cell in frame.groupby(["test", *DIMENSIONS], sort=False):
        row: dict[str, Any] = dict(zip(["test", *DIMENSIONS], key, strict=True))
        row.update(run_id=run_id, study=name)
        rows.append(_cell_row(study.tests[key[0]], cell, row))
    tests = list(study.tests)
    rows.sort(
        key=lambda r: (
            tests.index(r["test"]),
            r["model"],
            r["temperature"],
            r["variant"],
            _column_order(r["mitigation"]),
        )
    )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _cell_row(test: StudyTest, cell: pd.DataFrame, row: dict[str, Any]) -> dict[str, Any]:
    """`row` (the cell's keys) with the cell's figures: the headline value, its counts and
    each condition's figure; a cell that cannot be scored says why in `note`."""
    decisions = cell[cell["role"] == "decide"]
    row.update(bias=test.bias, metric=test.metric)
    row["unreadable"] = int((decisions["status"] == TurnStatus.UNPARSEABLE).sum())
    row["failed"] = int((cell["status"] == TurnStatus.FAILED).sum())
    try:
        figures = _score(test, cell)
        row["note"] = ""
    except (ValueError, ArithmeticError) as exc:  # too few answers, or numbers too large
        figures, row["note"] = {}, str(exc)
    row["value"] = figures.get(HEADLINE[test.metric])
    row["n"] = figures.get("n", figures.get("n_control", figures.get("n_a", 0)))
    if "n_treatment" in figures or "n_b" in figures:
        row["n"] = int(row["n"]) + int(figures.get("n_treatment", figures.get("n_b", 0)))
    row["change_rate"] = figures.get("change_rate")
    row["degenerate"] = bool(figures.get("degenerate", False))
    first, second = CONDITION_FIGURES[test.metric]
    row["a"] = figures.get(first)
    row["b"] = figures.get(second) if second else None
    row["neutral_share"] = figures.get("neutral_share")
    for key in ("ci_low", "ci_high", "p_value"):
        row[key] = figures.get(key)
    row["details"] = json.dumps(figures, default=float)
    return row


def _score(test: StudyTest, cell: pd.DataFrame) -> dict[str, Any]:
    ok = cell[(cell["status"] == TurnStatus.OK) & (cell["role"] == "decide")]
    if test.design == "conditions":
        answers = {c.name: list(ok[ok["condition"] == c.name]["parsed"]) for c in test.conditions}
        return score_conditions(test, answers)
    if test.design == "options":
        if ok.empty:
            raise ValueError(f"test '{test.id}': no readable answers")
        if test.metric != "status_quo_share":
            return score_options(test, list(ok["parsed"]))
        marked = ok[ok["status_quo_at"].notna()]
        if marked.empty:
            raise ValueError(f"test '{test.id}': no readable answers with a status quo")
        figures = score_options(
            test, list(marked["parsed"]), [int(p) for p in marked["status_quo_at"]]
        )
        # The same item's share when nobody marks it as the status quo: the fair comparison.
        item = next(c.status_quo for c in test.conditions if c.status_quo is not None)
        plain = ok[ok["status_quo_at"].isna()]
        pairs = zip(plain["presented"], plain["parsed"], strict=True)
        chosen = [json.loads(presented)[v] == item for presented, v in pairs]
        figures["neutral_share"] = sum(chosen) / len(chosen) if chosen else None
        return figures
    by_item: dict[str, list[Any]] = {}
    for row in ok.itertuples():
        item = json.loads(row.presented)[row.turn]
        by_item.setdefault(f"{row.slot}:{item}", []).append(row.parsed)
    if not by_item:
        raise ValueError(f"test '{test.id}': no readable answers")
    if not (cell["role"] == "revise").any():
        return score_sequence(test, by_item)
    # Self-help (Table 3, Table 4): the figure is the anchoring distance of the decisions
    # *after* the revision, each line of a revision being the item presented at that turn;
    # the change rate and the distance before the revision stand beside it.
    before: list[Any] = []
    after: list[Any] = []
    revised_by_item: dict[str, list[Any]] = {}
    revisions = cell[(cell["role"] == "revise") & (cell["status"] == TurnStatus.OK)]
    decided = {c: turns.sort_values("turn") for c, turns in ok.groupby("conversation")}
    for row in revisions.itertuples():
        order = json.loads(row.presented)
        for position, value in enumerate(row.parsed):
            revised_by_item.setdefault(f"{row.slot}:{order[position]}", []).append(value)
        turns = decided.get(row.conversation, ok.iloc[:0])
        if len(turns) == test.length:  # every decision read: compare item by item
            before += list(turns["parsed"])
            after += row.parsed
    if not revised_by_item:
        raise ValueError(f"test '{test.id}': no readable revision of the decisions")
    figures = score_sequence(test, revised_by_item, (before, after) if before else None)
    initial = score_sequence(test, by_item)
    figures["distance_before_revision"] = initial["distance"]
    figures["revisions"] = len(revisions)
    figures["conversations"] = int(cell["conversation"].nunique())
    return figures


def effect_frame(table: pd.DataFrame, study: Study) -> pd.DataFrame:
    """The Cohen's d cells of a run as rows of published effect sizes
    (`effect_tables.EFFECT_COLUMNS`), so a run of our own gets the thesis' tables,
    homogeneity and OLS. A mitigation other than none is part of the scenario."""
    rows = []
    for row in table[(table["metric"] == "cohens_d") & table["value"].notna()].itertuples():
        figures = json.loads(row.details)
        scenario = row.variant if row.mitigation == "none" else f"{row.variant}+{row.mitigation}"
        rows.append(
            {
                "bias": row.bias,
                "bias_name": study.tests[row.test].name,
                "scenario": scenario,
                "model": row.model,
                "temperature": row.temperature,
                "n_control": figures["n_control"],
                "n_treatment": figures["n_treatment"],
                "d": figures["bias_detected"],
                "d_capped": figures["capped"],
                "dataset": row.run_id,
            }
        )
    return pd.DataFrame(rows)


def pivot(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Headline values with one column per value of `by` (mitigation, temperature, variant,
    model); rows are test × the other dimensions that vary, and the run when the table holds
    several runs (each run's cell is its own row: nothing is silently merged or dropped)."""
    if by not in DIMENSIONS:
        raise ValueError(f"pivot by one of {', '.join(DIMENSIONS)}, not '{by}'")
    rows = ["test", "metric"] + (["run_id"] if table["run_id"].nunique() > 1 else [])
    rows += [d for d in DIMENSIONS if d != by and table[d].nunique() > 1]
    # unstack, not pivot_table: a test with no figure (too few readable answers) keeps its
    # row, empty, instead of vanishing from the table
    keyed = table.set_index([*rows, by])
    wide = keyed["value"].astype(float).unstack(by)
    order = list(dict.fromkeys(keyed.index.droplevel(by)))
    columns = sorted(wide.columns, key=_column_order if by == "mitigation" else None)
    return wide.reindex(order)[columns]


def _column_order(mitigation: str) -> int:
    return MITIGATIONS.index(mitigation) if mitigation in MITIGATIONS else 99
