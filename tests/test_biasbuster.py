"""BiasBuster metrics, checked against the rates and deltas of Echterhoff et al. Table 3."""

import math

import pytest

from cogbias.studies.biasbuster import (
    anchoring_distance,
    change_rate,
    degenerate,
    framing_difference,
    group_attribution_difference,
    position_distribution,
    primacy,
    rate,
    status_quo_share,
)

# Table 3: model, mitigation, framing admit, framing reject, Δ, (*), female, male, Δ, (*).
# GPT models were evaluated on 400 prompts per experiment, Llama-2 on the full 1000.
TABLE_3 = [
    ("gpt-3.5", "awareness", 0.555, 0.520, 0.035, False, 0.925, 0.770, 0.155, False),
    ("gpt-3.5", "contrastive", 0.445, 0.350, 0.095, False, 0.005, 0.000, 0.005, True),
    ("gpt-3.5", "counterfactual", 0.410, 0.380, 0.030, False, 0.005, 0.005, 0.000, True),
    ("gpt-3.5", "selfhelp", 0.435, 0.515, -0.080, False, 0.615, 0.465, 0.150, False),
    ("gpt-3.5", "baseline", 0.685, 0.520, 0.165, False, 0.650, 0.565, 0.085, False),
    ("gpt-4", "awareness", 0.360, 0.830, -0.470, False, 0.370, 0.355, 0.015, False),
    ("gpt-4", "contrastive", 0.425, 0.835, -0.410, False, 0.130, 0.130, 0.000, False),
    ("gpt-4", "counterfactual", 0.370, 0.940, -0.570, False, 0.380, 0.365, 0.015, False),
    ("gpt-4", "selfhelp", 0.270, 0.280, -0.010, False, 0.300, 0.320, -0.020, False),
    ("gpt-4", "baseline", 0.375, 0.780, -0.405, False, 0.365, 0.345, 0.020, False),
    ("llama-2-13b", "awareness", 0.153, 0.143, 0.010, False, 0.000, 0.008, -0.008, True),
    ("llama-2-13b", "contrastive", 0.432, 1.000, -0.568, False, 0.314, 0.500, -0.186, False),
    ("llama-2-13b", "counterfactual", 0.729, 0.999, -0.270, False, 0.575, 0.478, 0.097, False),
    ("llama-2-13b", "selfhelp", 0.355, 0.311, 0.044, False, 0.021, 0.005, 0.016, False),
    ("llama-2-13b", "baseline", 0.002, 0.062, -0.060, False, 0.002, 0.005, -0.003, True),
    ("llama-2-7b", "awareness", 0.020, 0.078, -0.058, False, 0.001, 0.000, 0.001, True),
    ("llama-2-7b", "contrastive", 0.996, 1.000, -0.004, False, 1.000, 1.000, 0.000, True),
    ("llama-2-7b", "counterfactual", 0.542, 0.000, 0.542, False, 0.809, 0.296, 0.513, False),
    ("llama-2-7b", "selfhelp", 0.462, 0.395, 0.067, False, 0.077, 0.073, 0.004, False),
    ("llama-2-7b", "baseline", 0.002, 0.000, 0.002, True, 0.257, 0.578, -0.321, False),
]
# The paper leaves this row unmarked although both framings admit more than 99%.
UNMARKED_DEGENERATE = {("llama-2-7b", "contrastive", "framing")}


def decisions(share: float, model: str) -> list[int]:
    """0/1 admission decisions reproducing a published rate exactly."""
    n = 400 if model.startswith("gpt") else 1000
    k = round(share * n)
    assert k / n == share  # every published rate is a whole count of its prompts
    return [1] * k + [0] * (n - k)


@pytest.mark.parametrize("row", TABLE_3, ids=lambda r: f"{r[0]}-{r[1]}")
def test_table_3_deltas_and_failure_marks(row):
    model, mitigation, admit, reject, f_delta, f_star, female, male, g_delta, g_star = row
    framing = framing_difference(decisions(admit, model), decisions(reject, model))
    assert framing.a == admit and framing.b == reject
    assert framing.delta == pytest.approx(f_delta, abs=1e-12)
    group = group_attribution_difference(decisions(female, model), decisions(male, model))
    assert group.delta == pytest.approx(g_delta, abs=1e-12)
    assert group.degenerate == g_star
    expected = f_star or (model, mitigation, "framing") in UNMARKED_DEGENERATE
    assert framing.degenerate == expected


def test_gpt4_baseline_framing_example():
    result = framing_difference(decisions(0.375, "gpt-4"), decisions(0.780, "gpt-4"))
    assert round(result.delta, 3) == -0.405


def test_rate_and_degenerate_edges():
    assert rate([True, False, 1, 0]) == 0.5
    with pytest.raises(ValueError, match="0/1"):
        rate([2])
    with pytest.raises(ValueError, match="at least one"):
        rate([])
    assert degenerate([0.009, 0.0]) and degenerate([0.995, 1.0])
    assert not degenerate([0.009, 0.02]) and not degenerate([0.002, 0.999])


def test_status_quo_share_against_one_over_k():
    # 4 options, status quo always at position 0; 40 of 100 choices hit it.
    chosen = [0] * 40 + [1] * 20 + [2] * 20 + [3] * 20
    result = status_quo_share(chosen, [0] * 100, 4)
    assert result.share == 0.4 and result.expected == 0.25
    assert result.excess == pytest.approx(0.15)
    # The status quo moves with the permutation: chosen must match it per decision.
    moved = status_quo_share([1, 2, 3, 0], [1, 2, 0, 0], 4)
    assert moved.share == 0.75
    with pytest.raises(ValueError, match="outside"):
        status_quo_share([4], [0], 4)


def test_primacy_first_half_against_second_half():
    result = primacy([0, 0, 1, 1, 1, 2, 3, 0], 4)
    assert result.early == pytest.approx(6 / 8) and result.late == pytest.approx(2 / 8)
    assert result.difference == pytest.approx(0.5)
    odd = primacy([0, 1, 2, 2, 4], 5)  # the middle position (2) belongs to neither half
    assert odd.early == pytest.approx(2 / 5) and odd.late == pytest.approx(1 / 5)
    assert position_distribution([0, 0, 3, 1], 4) == [0.5, 0.25, 0, 0.25]


def test_anchoring_distance():
    # Every student admitted at the model's overall rate: the order decided, distance 0.
    assert anchoring_distance({"a": [1, 0], "b": [0, 1]}) == 0
    # Each student decided the same way in every order, overall rate 0.5: distance 0.5.
    assert anchoring_distance({"a": [1, 1, 1], "b": [0, 0, 0]}) == pytest.approx(0.5)
    # Uneven: rates 1, 0.25 (pooled 5/8): (|1 - .625| + |.25 - .625|) / 2 = 0.375.
    value = anchoring_distance({"a": [1, 1, 1, 1], "b": [1, 0, 0, 0]})
    assert value == pytest.approx(0.375)
    vectors = math.dist((1, 0), (0.625, 0.375)) / math.sqrt(2)
    assert vectors == pytest.approx(0.375)
    with pytest.raises(ValueError, match="no decisions"):
        anchoring_distance({"a": []})


def test_change_rate():
    assert change_rate([1, 0, 1, 1], [1, 1, 0, 1]) == 0.5
    assert change_rate([True, False], [True, False]) == 0
    with pytest.raises(ValueError, match="after the revision"):
        change_rate([1], [1, 0])
