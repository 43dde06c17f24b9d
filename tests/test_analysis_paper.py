"""Analysis: CI bounds, t-test, BH correction, Figure 7 averages, Figure 6 linkage, Figure 5 data.

Expectations are worked out by hand in the comments (closed forms for 2 degrees of freedom).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cogbias.llm.registry import ModelInfo
from cogbias.studies import analysis
from cogbias.views import charts


def test_t_interval_matches_the_closed_form_for_two_degrees_of_freedom():
    scores = np.array([0.2, 0.4, 0.6])
    # mean 0.4, sd 0.2, sem 0.2/sqrt(3); for df = 2, t(p) = (2p - 1) / sqrt(2p(1 - p))
    t_crit = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.3027
    half = t_crit * 0.2 / math.sqrt(3)  # 0.49683
    low, high = analysis.t_interval(scores)
    assert low == pytest.approx(0.4 - half, abs=1e-12)
    assert high == pytest.approx(0.4 + half, abs=1e-12)
    assert (low, high) == pytest.approx((-0.09683, 0.89683), abs=1e-5)
    assert all(math.isnan(v) for v in analysis.t_interval(np.array([0.5])))
    # identical scores: no zero-width interval (issue 21); at most 1 - 0.025^(1/n) of the
    # scores may differ, each by at most the distance to the range's bound
    share = 1 - 0.025**0.5
    assert analysis.t_interval(np.array([0.3, 0.3])) == pytest.approx(
        (0.3 - share * 1.3, 0.3 + share * 0.7), abs=1e-12
    )


def test_twenty_identical_answers_leave_an_interval_around_their_score():
    low, high = analysis.t_interval(np.zeros(20))
    assert low == pytest.approx(-(1 - 0.025 ** (1 / 20))) and high == pytest.approx(-low)
    assert 0.15 < high < 0.2  # about ±0.17: twenty answers cannot pin the mean down exactly
    low, high = analysis.t_interval(np.ones(20))
    assert high == 1.0 and 0.6 < low < 1.0
    # 0.1 is not exact in binary: twenty of them have a rounding-error spread, not a real one
    low, high = analysis.t_interval(np.full(20, 0.1))
    assert high - low > 0.3


def test_one_sample_p_matches_the_closed_form():
    # t = 0.4 / (0.2 / sqrt 3) = sqrt 12; two-sided p for df = 2 is 1 - t / sqrt(2 + t^2)
    expected = 1 - math.sqrt(12) / math.sqrt(14)  # 0.07418
    assert analysis.one_sample_p(np.array([0.2, 0.4, 0.6])) == pytest.approx(expected, abs=1e-12)
    assert analysis.one_sample_p(np.zeros(5)) == 1.0
    # no variance: the exact sign test
    assert analysis.one_sample_p(np.full(2, -1.0)) == 0.5
    assert analysis.one_sample_p(np.full(10, 0.5)) == pytest.approx(2 / 1024)


def test_benjamini_hochberg_by_hand_and_against_scipy():
    p = [0.01, 0.04, 0.03, 0.20]
    # ranks 1, 3, 2, 4 of m = 4: p*m/rank = 0.04, 0.0533, 0.06, 0.20; then the running minimum
    # from the largest rank down turns 0.06 into 0.0533
    expected = [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.20]
    assert analysis.benjamini_hochberg(p) == pytest.approx(expected, abs=1e-12)
    assert analysis.benjamini_hochberg(p) == pytest.approx(stats.false_discovery_control(p))
    with_nan = analysis.benjamini_hochberg([0.01, float("nan"), 0.04, 0.03, 0.20])
    assert math.isnan(with_nan[1])
    assert np.delete(with_nan, 1) == pytest.approx(expected, abs=1e-12)


def _summary(cells: dict[tuple[str, str], tuple[float, float]]) -> pd.DataFrame:
    """A summarize()-shaped frame from {(bias, model): (mean, mean_abs)}."""
    return pd.DataFrame(
        [
            {"bias": b, "model": m, "mean": mean, "mean_abs": mean_abs, "significant": mean > 0.5}
            for (b, m), (mean, mean_abs) in cells.items()
        ]
    )


def test_figure7_table_averages_and_absolute_averages():
    summary = _summary(
        {
            ("anchoring", "m1"): (0.6, 0.7),
            ("anchoring", "m2"): (0.2, 0.5),
            ("framing", "m1"): (-0.4, 0.6),
            ("framing", "m2"): (0.0, 0.4),
        }
    )
    table = analysis.figure7_table(summary)
    assert list(table.index) == ["anchoring", "framing", "Average", "Average Absolute"]
    assert list(table.columns) == ["m1", "m2", "Average", "Average Absolute"]
    # per bias: Average = mean over models of means, Average Absolute = of mean_abs
    assert table.loc["anchoring", "Average"] == pytest.approx(0.4)
    assert table.loc["anchoring", "Average Absolute"] == pytest.approx(0.6)
    assert table.loc["framing", "Average"] == pytest.approx(-0.2)
    assert table.loc["framing", "Average Absolute"] == pytest.approx(0.5)
    # per model: over biases
    assert table.loc["Average", "m1"] == pytest.approx(0.1)
    assert table.loc["Average Absolute", "m1"] == pytest.approx(0.65)
    assert table.loc["Average", "m2"] == pytest.approx(0.1)
    assert table.loc["Average Absolute", "m2"] == pytest.approx(0.45)
    assert table.loc["Average", "Average"] == pytest.approx(0.1)
    assert table.loc["Average Absolute", "Average"] == pytest.approx(0.55)
    assert table.loc["Average Absolute", "Average Absolute"] == pytest.approx(0.55)
    # sorted by Average, descending, like the paper's figure
    flipped = analysis.figure7_table(
        _summary({("a", "m"): (-0.5, 0.5), ("b", "m"): (0.5, 0.5)}), models=["m"]
    )
    assert list(flipped.index[:2]) == ["b", "a"]


def test_dendrogram_uses_complete_linkage_and_euclidean_distance():
    # four models on two biases; A-B are 0.1 apart, C-D 0.2, and the farthest pair across the
    # two clusters is A-D: sqrt(1^2 + 1.2^2)
    points = {"A": (0.0, 0.0), "B": (0.1, 0.0), "C": (1.0, 1.0), "D": (1.0, 1.2)}
    summary = _summary(
        {(bias, m): (xy[i], abs(xy[i])) for m, xy in points.items() for i, bias in enumerate("xy")}
    )
    tree = analysis.model_dendrogram(summary)
    assert tree.labels == ["A", "B", "C", "D"]
    assert tree.linkage[:, 2] == pytest.approx([0.1, 0.2, math.sqrt(2.44)])
    assert tree.order == ["A", "B", "C", "D"]
    # on a line 0, 2, 3.5, 6: B-C merge at 1.5, then A at max(2, 3.5) = 3.5, D at max(6, 4, 2.5)
    # = 6 (single linkage would give 1.5, 2, 2.5)
    line = _summary({("x", m): (v, abs(v)) for m, v in {"A": 0, "B": 2, "C": 3.5, "D": 6}.items()})
    heights = analysis.model_dendrogram(line).linkage[:, 2]
    assert heights == pytest.approx([1.5, 3.5, 6.0])
    assert analysis.model_dendrogram(_summary({("x", "solo"): (0.1, 0.1)})).order == ["solo"]


def test_dendrogram_keeps_only_biases_every_model_has():
    summary = _summary({("x", "A"): (0, 0), ("x", "B"): (1, 1), ("y", "A"): (5, 5)})
    assert list(analysis.model_matrix(summary).columns) == ["x"]


def test_capability_frame_matches_the_registry_and_imputes_missing_scores():
    models = [
        ModelInfo("openai/gpt-4o-2024-08-06", "GPT-4o", params_b=200.0, arena_score=1265),
        ModelInfo("openai/gpt-4o-mini-2024-07-18", "GPT-4o mini", params_b=10.0, arena_score=1271),
    ]
    summary = _summary(
        {
            ("x", "openai/gpt-4o-2024-08-06"): (0.1, 0.4),  # by id
            ("y", "openai/gpt-4o-2024-08-06"): (0.1, 0.2),
            ("x", "GPT-4o mini"): (0.1, 0.3),  # by display name
            ("x", "my-model"): (0.1, 0.5),  # unknown
            ("x", "random"): (0.0, 0.6),  # the baseline is left out
        }
    )
    frame = analysis.capability_frame(summary, models).set_index("model")
    assert list(frame.index) == ["GPT-4o mini", "my-model", "openai/gpt-4o-2024-08-06"]
    assert frame.loc["openai/gpt-4o-2024-08-06", "mean_abs"] == pytest.approx(0.3)
    assert frame.loc["GPT-4o mini", "params_b"] == 10.0
    assert frame.loc["my-model", "arena_score"] == pytest.approx((1265 + 1271) / 2)
    assert frame.loc["my-model", "label"] == "my-model*"
    assert not frame.loc["GPT-4o mini", "arena_imputed"]


def test_charts_build_valid_vega_lite():
    summary = analysis.summarize(
        analysis.scores_frame(
            [
                {"bias": b, "model": m, "status": "ok", "score": s}
                for b in ("x", "y")
                for m, s in (("A", 0.5), ("B", -0.2), ("C", 0.9))
                for _ in range(3)
            ]
        )
    )
    specs = [
        charts.heatmap(analysis.figure7_table(summary), summary).to_dict(),
        charts.dendrogram(analysis.model_dendrogram(summary)).to_dict(),
        charts.bubbles(analysis.capability_frame(summary, [])).to_dict(),
    ]
    assert all("$schema" in spec for spec in specs)


def test_t_interval_never_leaves_the_score_range():
    # n = 2, far apart: the plain t-interval is about -5.9 to +6.3 (t = 12.7)
    low, high = analysis.t_interval(np.array([-0.5, 1.0]))
    assert (low, high) == (-1.0, 1.0)
    # near the edge: only the outer side is cut, the inner side is the plain t bound
    scores = np.array([0.9, 1.0, 1.0, 0.8])
    half = stats.t.ppf(0.975, 3) * np.std(scores, ddof=1) / 2
    assert analysis.t_interval(scores) == pytest.approx((scores.mean() - half, 1.0))
