"""A study test's figure from its parsed answers: the bridge from answers to the metrics.

A run collects, per test (× model × temperature × variant × mitigation), the values that
`study_questions.read_answer` read. These functions apply the test's metric to them and return
a flat dict of named figures, ready to be stored as one result row:

- conditions tests → Cohen's d (`d`, `bias_detected`, `capped`, group sizes) or a rate
  difference (`a`, `b`, `delta`, `degenerate`);
- options tests → status-quo share against 1/k or primacy (first vs second half);
- sequence tests → the anchoring distance, and the self-help change rate when the model was
  allowed to revise its decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cogbias.studies import biasbuster
from cogbias.studies.definitions import StudyTest
from cogbias.studies.effects import bias_detected, cap, cohens_d
from cogbias.studies.questions import code_answer


def score_conditions(test: StudyTest, answers: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The metric of a two-condition test from each condition's parsed answer values."""
    if test.design != "conditions":
        raise ValueError(f"test '{test.id}' has design '{test.design}', not conditions")
    names = [c.name for c in test.conditions]
    missing = [n for n in names if not answers.get(n)]
    if missing:
        raise ValueError(f"test '{test.id}': no valid answers for condition '{missing[0]}'")
    first, second = ([code_answer(test, v) for v in answers[n]] for n in names)
    if test.metric == "cohens_d":
        d = cohens_d(first, second)
        detected = bias_detected(d, test.undirected)
        return {
            "d": d,
            "bias_detected": detected,
            "capped": cap(detected),
            "n_control": len(first),
            "n_treatment": len(second),
        }
    if test.metric == "framing_difference":
        result = biasbuster.framing_difference(first, second)
    elif test.metric == "group_attribution_difference":
        result = biasbuster.group_attribution_difference(first, second)
    else:
        raise ValueError(f"metric '{test.metric}' does not score a conditions test")
    return {
        "a": result.a,
        "b": result.b,
        "delta": result.delta,
        "degenerate": result.degenerate,
        "n_a": len(first),
        "n_b": len(second),
    }


def score_options(
    test: StudyTest, chosen: Sequence[int], status_quo: Sequence[int | None] | None = None
) -> dict[str, Any]:
    """Status-quo share or primacy from the presented positions chosen (0-based).

    `status_quo[i]` is where the status-quo item was shown in decision i (from
    `study_questions.option_list`); primacy ignores it.
    """
    if test.metric == "status_quo_share":
        if status_quo is None or any(p is None for p in status_quo):
            raise ValueError("status_quo_share needs the status-quo position of every decision")
        share = biasbuster.status_quo_share(chosen, [int(p) for p in status_quo], test.k)
        return {
            "share": share.share,
            "expected": share.expected,
            "excess": share.excess,
            "n": share.n,
        }
    if test.metric == "primacy":
        result = biasbuster.primacy(chosen, test.k)
        return {
            "early": result.early,
            "late": result.late,
            "difference": result.difference,
            "distribution": biasbuster.position_distribution(chosen, test.k),
            "n": result.n,
        }
    raise ValueError(f"metric '{test.metric}' does not score an options test")


def score_sequence(
    test: StudyTest,
    decisions_by_item: Mapping[str, Sequence[Any]],
    revised: tuple[Sequence[Any], Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """Anchoring distance over each item's decisions across orders; with `revised` =
    (decisions before, decisions after the self-help revision) also the change rate."""
    if test.metric != "anchoring_distance":
        raise ValueError(f"metric '{test.metric}' does not score a sequence test")
    coded = {
        item: [int(code_answer(test, v)) for v in values]
        for item, values in decisions_by_item.items()
    }
    pooled = [v for values in coded.values() for v in values]
    out: dict[str, Any] = {
        "distance": biasbuster.anchoring_distance(coded),
        "admit_rate": biasbuster.rate(pooled),
        "degenerate": biasbuster.degenerate([biasbuster.rate(pooled)]),
        "n": len(pooled),
    }
    if revised is not None:
        before = [int(code_answer(test, v)) for v in revised[0]]
        after = [int(code_answer(test, v)) for v in revised[1]]
        out["change_rate"] = biasbuster.change_rate(before, after)
    return out
