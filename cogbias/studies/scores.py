"""A study test's figure from its parsed answers: the bridge from answers to the metrics.

A run collects, per test (× model × temperature × variant × mitigation), the values that
`study_questions.read_answer` read. These functions apply the test's metric to them and return
a flat dict of named figures, ready to be stored as one result row:

- conditions tests → Cohen's d (`d`, `bias_detected`, `capped`, group sizes) or a rate
  difference (`a`, `b`, `delta`, `degenerate`); one condition: the target's share (`share`,
  `excess` over chance);
- options tests → status-quo share against 1/k or primacy (first vs second half);
- sequence tests → the anchoring distance, and the self-help change rate when the model was
  allowed to revise its decisions.
"""

from __future__ import annotations

import math
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
    if test.metric == "share":
        return score_share(test, answers)
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
            "a": sum(first) / len(first),  # the groups' means (choices: the share coded 1)
            "b": sum(second) / len(second),
            **d_interval(d, len(first), len(second)),  # of d; the p-value tests d = 0
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
        **rate_difference_interval(result.a, len(first), result.b, len(second)),
    }


def score_share(test: StudyTest, answers: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """A one-condition test (the Linda problem, the ski trip): the share of the target answer,
    its excess over the share a blind guess gives (1/number of choices), with the Wald CI of
    the excess and the z-test of the share against chance."""
    condition = test.conditions[0].name
    coded = [code_answer(test, v) for v in answers.get(condition, [])]
    if not coded:
        raise ValueError(f"test '{test.id}': no valid answers for condition '{condition}'")
    chance = 1 / len(test.letters) if test.answer == "letter" else 0.5
    share = sum(coded) / len(coded)
    return {
        "share": share,
        "expected": chance,
        "excess": share - chance,
        "n": len(coded),
        **share_interval(share, chance, len(coded)),
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
            **share_interval(share.share, share.expected, share.n),
        }
    if test.metric == "primacy":
        result = biasbuster.primacy(chosen, test.k)
        decided = round((result.early + result.late) * result.n)  # choices in either half
        early_share = result.early / (result.early + result.late) if decided else 0.5
        test_of_halves = share_interval(early_share, 0.5, decided) if decided else {}
        return {
            "early": result.early,
            "late": result.late,
            "difference": result.difference,
            "distribution": biasbuster.position_distribution(chosen, test.k),
            "n": result.n,
            # early vs late among the choices in either half, against 1/2
            "p_value": test_of_halves.get("p_value"),
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


Z95 = 1.959963984540054  # two-sided 95 %


def _p_two_sided(z: float) -> float | None:
    """The two-sided normal p-value of a z statistic (None when it cannot be formed)."""
    if not math.isfinite(z):
        return None if math.isnan(z) else 0.0
    return math.erfc(abs(z) / math.sqrt(2))


def d_interval(d: float, n1: int, n2: int) -> dict[str, float | None]:
    """95 % CI and p-value of Cohen's d (large-sample variance (n1+n2)/(n1·n2) + d²/(2(n1+n2)),
    Hedges & Olkin 1985); none for an infinite d (groups without spread)."""
    if not math.isfinite(d) or n1 < 2 or n2 < 2:
        return {"ci_low": None, "ci_high": None, "p_value": None}
    se = math.sqrt((n1 + n2) / (n1 * n2) + d * d / (2 * (n1 + n2)))
    return {"ci_low": d - Z95 * se, "ci_high": d + Z95 * se, "p_value": _p_two_sided(d / se)}


def rate_difference_interval(a: float, na: int, b: float, nb: int) -> dict[str, float | None]:
    """95 % Wald CI of a − b and the pooled two-proportion z-test's p-value."""
    se = math.sqrt(a * (1 - a) / na + b * (1 - b) / nb)
    pooled = (a * na + b * nb) / (na + nb)
    se0 = math.sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb))
    p = _p_two_sided((a - b) / se0) if se0 > 0 else (1.0 if a == b else 0.0)
    return {"ci_low": a - b - Z95 * se, "ci_high": a - b + Z95 * se, "p_value": p}


def share_interval(share: float, expected: float, n: int) -> dict[str, float | None]:
    """95 % Wald CI of share − expected and the z-test of share against `expected`."""
    se = math.sqrt(share * (1 - share) / n)
    z = (share - expected) / math.sqrt(expected * (1 - expected) / n)
    return {
        "ci_low": share - expected - Z95 * se,
        "ci_high": share - expected + Z95 * se,
        "p_value": _p_two_sided(z),
    }
