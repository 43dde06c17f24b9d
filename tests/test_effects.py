"""Effect sizes of the Mohr thesis: Cohen's d, capping, inverse-variance weights, homogeneity."""

import math
import statistics

import pytest

from cogbias.studies.effects import (
    aggregate,
    bias_detected,
    cap,
    cohens_d,
    cohens_d_from_stats,
    hedges_j,
    homogeneity_ratio,
    inverse_variance_weights,
    pooled_sd,
    sampling_variance,
    weighted_mean,
)


def ones(k: int, n: int) -> list[int]:
    return [1] * k + [0] * (n - k)


def test_cohens_d_on_binary_answers_from_biasbuster_table_3():
    # GPT-4, baseline framing: admitted 150 of 400 under "admit?" and 312 of 400 under
    # "reject?" (0.375 and 0.780; the paper evaluates GPT on 400 prompts per experiment).
    # Choice answers are coded 0/1 as in the thesis; the pooled SD is computed here by hand.
    control, treatment = ones(150, 400), ones(312, 400)
    sd1, sd2 = statistics.stdev(control), statistics.stdev(treatment)
    pooled = math.sqrt((399 * sd1**2 + 399 * sd2**2) / 798)
    expected = (0.780 - 0.375) / pooled
    assert cohens_d(control, treatment) == pytest.approx(expected, rel=1e-12)
    # Closed form for proportions: s_i^2 = n p (1 - p) / (n - 1).
    closed = 0.405 / math.sqrt((400 * 0.375 * 0.625 + 400 * 0.78 * 0.22) / 798)
    assert cohens_d(control, treatment) == pytest.approx(closed, rel=1e-12)
    assert cohens_d(control, treatment) == pytest.approx(0.8978, abs=1e-4)
    # Swapping the groups flips the sign; the framing variant takes |d|.
    assert cohens_d(treatment, control) == pytest.approx(-expected)
    assert bias_detected(cohens_d(treatment, control), undirected=True) == pytest.approx(expected)
    assert bias_detected(-0.3) == -0.3


def test_cohens_d_from_summary_statistics_matches_raw_answers():
    control = [10.0, 12.0, 15.0, 9.0, 11.0]
    treatment = [20.0, 25.0, 18.0, 30.0]
    d = cohens_d(control, treatment)
    by_stats = cohens_d_from_stats(
        statistics.mean(control),
        statistics.stdev(control),
        5,
        statistics.mean(treatment),
        statistics.stdev(treatment),
        4,
    )
    assert d == pytest.approx(by_stats)
    assert pooled_sd(3.0, 10, 3.0, 30) == pytest.approx(3.0)


def test_no_spread_gives_zero_or_infinity_and_bad_sizes_are_refused():
    assert cohens_d([5, 5, 5], [5, 5]) == 0.0
    assert cohens_d([0, 0, 0], [1, 1]) == math.inf
    assert cohens_d([1, 1, 1], [0, 0]) == -math.inf
    assert cap(math.inf) == 1.0 and cap(-math.inf) == 0.0
    with pytest.raises(ValueError, match="both groups"):
        cohens_d([], [1, 2])
    with pytest.raises(ValueError, match="three in all"):
        cohens_d([1], [2])


def test_cap_clips_to_unit_interval():
    assert [cap(v) for v in (-0.3, 0.0, 0.4, 1.0, 1.25)] == [0.0, 0.0, 0.4, 1.0, 1.0]
    assert math.isnan(cap(math.nan))


def test_hedges_j_exact_and_approximation_agree():
    for df in (10, 50, 198):
        assert hedges_j(df) == pytest.approx(hedges_j(df, exact=False), abs=5e-4)
    assert hedges_j(198, exact=False) == pytest.approx(1 - 3 / 791)


def test_sampling_variance_is_the_thesis_eq6_read_with_the_harmonic_mean():
    # Eq. 6 as printed: ν/(ν-2) · 2/ñ · (1 + ñ/2 δ²) - δ²/J(ν)², ñ the harmonic mean of the
    # group sizes. The thesis' groups have n = 100 each (N = 200).
    for n1, n2, delta in [(100, 100, 0.0), (100, 100, 0.8), (40, 160, 0.3)]:
        nu = n1 + n2 - 2
        harmonic = 2 * n1 * n2 / (n1 + n2)
        printed = nu / (nu - 2) * 2 / harmonic * (1 + harmonic / 2 * delta**2) - delta**2 / (
            hedges_j(nu) ** 2
        )
        assert sampling_variance(n1, n2, delta) == pytest.approx(printed, rel=1e-12)
    # The textbook large-sample approximation (n1+n2)/(n1 n2) + d²/(2(n1+n2)) is close.
    assert sampling_variance(100, 100, 0.5) == pytest.approx(0.02 + 0.25 / 400, rel=0.02)


def test_inverse_variance_weights_with_the_thesis_sample_sizes():
    # Thesis: every experiment has 100 + 100 answers, so all weights are equal and the
    # weighted mean is the plain mean (its Eq. 10).
    effects = [0.0, 0.331378, 1.253704, -0.255127]
    weights = inverse_variance_weights(effects, [(100, 100)] * 4)
    delta = statistics.mean(effects)
    expected = 1 / (198 / 196 / 50 * (1 + 50 * delta**2) - delta**2 / hedges_j(198) ** 2)
    assert weights == pytest.approx([expected] * 4)
    assert weighted_mean(effects, weights) == pytest.approx(statistics.mean(effects))
    # At δ = 0: w = 1 / (198/196 · 1/50) = 49.4949...
    assert inverse_variance_weights([0.0, 0.0], [(100, 100)] * 2)[0] == pytest.approx(
        196 * 50 / 198
    )


def test_unequal_sizes_weigh_larger_experiments_more():
    effects = [0.2, 0.8]
    weights = inverse_variance_weights(effects, [(20, 20), (200, 200)])
    assert weights[1] > 5 * weights[0]
    mean = weighted_mean(effects, weights)
    assert 0.5 < mean < 0.8
    assert mean == pytest.approx((0.2 * weights[0] + 0.8 * weights[1]) / sum(weights))


def test_aggregate_and_homogeneity():
    sizes = [(100, 100)] * 4
    same = aggregate([0.4, 0.4, 0.4, 0.4], sizes)
    assert same.mean == pytest.approx(0.4) and same.homogeneity == 1.0 and same.homogeneous
    spread = aggregate([0.0, 1.0, 0.0, 1.0], sizes)
    weights = inverse_variance_weights([0.0, 1.0, 0.0, 1.0], sizes)
    assert spread.sampling_error_var == pytest.approx(4 / sum(weights))
    assert spread.observed_var == pytest.approx(0.25)
    assert spread.homogeneity == pytest.approx(spread.sampling_error_var / 0.25)
    assert not spread.homogeneous
    # Small differences within sampling error read as homogeneous.
    close = aggregate([0.30, 0.32, 0.29, 0.31], sizes)
    assert close.homogeneity == 1.0
    assert math.isnan(aggregate([0.5], [(100, 100)]).homogeneity)
    assert homogeneity_ratio(0.02, 0.04) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-finite"):
        aggregate([math.inf, 0.1], [(100, 100)] * 2)
    with pytest.raises(ValueError, match="pairs of group sizes"):
        aggregate([0.1, 0.2], [(100, 100)])
