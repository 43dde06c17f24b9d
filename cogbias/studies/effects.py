"""Effect sizes for between-subject studies (Mohr 2025): Cohen's d and its meta-analytic kin.

The thesis asks each of two prompts (control and treatment) n times, codes every answer as a
number (choice answers as 0/1, "1" for the option the bias predicts) and measures the bias as
Cohen's d with a pooled standard deviation. Effects are then capped to [0, 1] for reading,
averaged with inverse-variance weights, and checked for homogeneity (Hunter & Schmidt's ratio
of sampling-error variance to observed variance). Pure functions, no I/O.

One correction to the printed formulas, made on purpose: the thesis' Eq. 6 writes the
sampling variance with a "harmonic mean" ñ but defines ñ as n1·n2/(n1+n2), which is half the
harmonic mean. Read with the real harmonic mean (2·n1·n2/(n1+n2)), Eq. 6 is exactly Morris &
DeShon's (2002) variance of d for independent groups, which is what `sampling_variance`
computes; read literally it would double the variance. Eq. 9 also drops a square: the observed
variance is the weighted mean of *squared* deviations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Hedges' J in the sampling variance: "exact" is the Γ form; "thesis" its approximation
# 1 - 3/(4ν - 1), which the thesis used (its Table 8 digits come out with it).
HEDGES = ("exact", "thesis")
HOMOGENEITY_THRESHOLD = 0.75  # Hunter & Schmidt: a ratio at or above this reads as homogeneous


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample variance (n - 1 in the denominator; 0 for a single value)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def pooled_sd(sd_control: float, n_control: int, sd_treatment: float, n_treatment: int) -> float:
    """sqrt(((n1-1)·sd1² + (n2-1)·sd2²) / (n1+n2-2)), the SD both groups share."""
    df = n_control + n_treatment - 2
    if n_control < 1 or n_treatment < 1 or df < 1:
        raise ValueError(
            f"Cohen's d needs at least one answer per group and three in all, "
            f"got {n_control} and {n_treatment}"
        )
    return math.sqrt(((n_control - 1) * sd_control**2 + (n_treatment - 1) * sd_treatment**2) / df)


def cohens_d_from_stats(
    mean_control: float,
    sd_control: float,
    n_control: int,
    mean_treatment: float,
    sd_treatment: float,
    n_treatment: int,
) -> float:
    """(mean_treatment - mean_control) / pooled SD; positive when the treatment moves answers
    the way the bias predicts.

    When both groups answer with no spread at all the pooled SD is 0: equal means give 0 (the
    thesis' many exact zeros), different means give ±inf — the groups are perfectly separated,
    which `cap` turns into 1 (or 0), and which aggregation refuses rather than averaging.
    """
    sd = pooled_sd(sd_control, n_control, sd_treatment, n_treatment)
    diff = mean_treatment - mean_control
    if sd == 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / sd


def cohens_d(control: Sequence[float], treatment: Sequence[float]) -> float:
    """Cohen's d of two independent groups of numeric answers (choice answers coded 0/1)."""
    if not control or not treatment:
        raise ValueError("Cohen's d needs answers in both groups")
    m1, v1 = _mean_var(control)
    m2, v2 = _mean_var(treatment)
    return cohens_d_from_stats(m1, math.sqrt(v1), len(control), m2, math.sqrt(v2), len(treatment))


def bias_detected(d: float, undirected: bool = False) -> float:
    """The thesis' Eq. 2: d, or |d| for a bias that shows in either direction (framing)."""
    return abs(d) if undirected else d


def cap(value: float, low: float = 0.0, high: float = 1.0) -> float:
    """Eq. 3: min(high, max(low, value)); NaN stays NaN (no effect could be computed)."""
    if math.isnan(value):
        return value
    return min(high, max(low, value))


def hedges_j(df: int, exact: bool = True) -> float:
    """Hedges' small-sample factor J(ν) = Γ(ν/2) / (sqrt(ν/2) Γ((ν-1)/2)) ≈ 1 - 3/(4ν-1)."""
    if df < 2:
        raise ValueError(f"J(ν) needs ν ≥ 2 degrees of freedom, got {df}")
    if not exact:
        return 1 - 3 / (4 * df - 1)
    return math.exp(math.lgamma(df / 2) - math.lgamma((df - 1) / 2)) / math.sqrt(df / 2)


def sampling_variance(
    n_control: int, n_treatment: int, delta: float, hedges: str = "exact"
) -> float:
    """Approximate sampling variance of d for independent groups (Morris & DeShon 2002).

    ν/(ν-2) · (1/ñ) · (1 + ñ·δ²) - δ²/J(ν)², with ν = n1+n2-2 and ñ = n1·n2/(n1+n2); δ is the
    population effect, estimated by the unweighted mean of the effects being combined.
    `hedges` picks J: "exact" (Γ form) or "thesis" (1 - 3/(4ν - 1)).
    """
    if hedges not in HEDGES:
        raise ValueError(f"hedges must be one of {', '.join(HEDGES)}, not {hedges!r}")
    df = n_control + n_treatment - 2
    if n_control < 1 or n_treatment < 1 or df < 3:
        raise ValueError(
            f"the sampling variance of d needs groups with more than 4 answers in all, "
            f"got {n_control} and {n_treatment}"
        )
    n_tilde = n_control * n_treatment / (n_control + n_treatment)
    j = hedges_j(df, exact=hedges == "exact")
    return df / (df - 2) / n_tilde * (1 + n_tilde * delta**2) - delta**2 / j**2


def _check_effects(effects: Sequence[float], sizes: Sequence[tuple[int, int]]) -> None:
    if not effects:
        raise ValueError("no effect sizes to combine")
    if len(effects) != len(sizes):
        raise ValueError(f"{len(effects)} effect sizes but {len(sizes)} pairs of group sizes")
    bad = [e for e in effects if not math.isfinite(e)]
    if bad:
        raise ValueError(
            f"cannot combine non-finite effect sizes ({bad[0]}): cap them first, or drop "
            "experiments whose groups answered without any spread"
        )


def inverse_variance_weights(
    effects: Sequence[float], sizes: Sequence[tuple[int, int]], hedges: str = "exact"
) -> list[float]:
    """w_i = 1 / σ²_e_i for each effect, sizes[i] = (n_control, n_treatment).

    δ is the unweighted mean of the effects, so with equal group sizes all weights are equal
    and the weighted mean is the plain mean (the thesis' Eq. 10).
    """
    _check_effects(effects, sizes)
    delta = math.fsum(effects) / len(effects)
    return [1 / sampling_variance(n1, n2, delta, hedges) for n1, n2 in sizes]


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    """Σ w·x / Σ w."""
    if len(values) != len(weights) or not values:
        raise ValueError("weighted_mean needs as many weights as values, and at least one")
    total = math.fsum(weights)
    if total <= 0:
        raise ValueError("weights must sum to a positive number")
    return math.fsum(w * v for w, v in zip(weights, values, strict=True)) / total


@dataclass(frozen=True)
class Aggregate:
    """Effects of one cell (e.g. bias × model) combined.

    `mean` is the inverse-variance weighted mean d̄; `sampling_error_var` σ²_e = k / Σ w;
    `observed_var` σ²_d = Σ w (d - d̄)² / Σ w; `homogeneity` σ²_e / σ²_d clipped to [0, 1]
    (1 when the effects do not vary at all, NaN for a single effect).
    """

    k: int
    mean: float
    sampling_error_var: float
    observed_var: float
    homogeneity: float

    @property
    def homogeneous(self) -> bool:
        return self.homogeneity >= HOMOGENEITY_THRESHOLD


def aggregate(
    effects: Sequence[float], sizes: Sequence[tuple[int, int]], hedges: str = "exact"
) -> Aggregate:
    """Combine effect sizes the thesis' way (Eqs. 7-9), with its homogeneity ratio (Eq. 4);
    `hedges` is the J of the sampling variance (`HEDGES`)."""
    weights = inverse_variance_weights(effects, sizes, hedges)
    mean = weighted_mean(effects, weights)
    total = math.fsum(weights)
    sampling_error = len(effects) / total
    observed = math.fsum(w * (e - mean) ** 2 for w, e in zip(weights, effects, strict=True)) / total
    return Aggregate(
        k=len(effects),
        mean=mean,
        sampling_error_var=sampling_error,
        observed_var=observed,
        homogeneity=homogeneity_ratio(sampling_error, observed, len(effects)),
    )


def homogeneity_ratio(sampling_error_var: float, observed_var: float, k: int = 2) -> float:
    """σ²_e / σ²_d clipped to [0, 1]: 1 = all variation is sampling error (homogeneous)."""
    if k < 2:
        return math.nan
    if observed_var <= 1e-15 * max(1.0, sampling_error_var):
        return 1.0
    return cap(sampling_error_var / observed_var)
