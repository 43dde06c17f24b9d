"""Aggregation and significance: from per-pair scores to the bias x model table.

Pure functions over pandas frames; the store supplies rows, the app and CLI present them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cogbias.core.records import DecisionStatus

ALPHA = 0.05


def scores_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows with bias, model, status, score (as `Store.scores` returns them)."""
    frame = pd.DataFrame(list(rows), columns=["bias", "model", "status", "score"])
    frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
    return frame


SCORE_RANGE = (-1.0, 1.0)
CI_METHOD = (
    "Student-t interval of the mean of this cell alone (not adjusted for the other cells, "
    "unlike the BH significance), truncated to the score range [-1, 1]; when every score is "
    "the same, the exact bound on how many could differ"
)


def t_interval(
    scores: np.ndarray, confidence: float = 0.95, bounds: tuple[float, float] = SCORE_RANGE
) -> tuple[float, float]:
    """Two-sided t confidence interval of the mean, truncated to [-1, 1] (NaN below 2 scores).

    Scores lie in [-1, 1], so their mean does too: cutting the interval at the range loses no
    coverage and never shows an impossible bound (with n = 2 the plain t-interval can reach
    ±2). A percentile bootstrap would also stay inside, but with a handful of scores it is
    far too narrow (for n = 2 it is just [min, max]); the truncated t keeps its width honest.
    """
    n = len(scores)
    if n < 2:
        return (float("nan"), float("nan"))
    mean = float(np.mean(scores))
    sem = float(np.std(scores, ddof=1)) / np.sqrt(n)
    if sem == 0 or np.all(scores == scores[0]):  # twenty 0.1s have a rounding-error spread
        return identical_interval(mean, n, confidence, bounds)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sem
    low, high = bounds
    return (max(mean - half, low), min(mean + half, high))


def identical_interval(
    value: float | np.ndarray,
    n: int | np.ndarray,
    confidence: float = 0.95,
    bounds: tuple[float, float] = SCORE_RANGE,
) -> tuple[Any, Any]:
    """The interval of a mean when all `n` scores equal `value`: never zero-width (also
    elementwise, for the Explore summary's arrays of cells).

    The t-interval collapses to a point there, as if 20 identical answers proved the mean
    exactly. What the sample does show: the share of scores that differ from `value` is at most
    1 - (α/2)^(1/n) (the exact Clopper-Pearson bound for 0 of n), and a differing score lies
    within the bounded range, so the mean can move at most that share of the distance to
    either bound.
    """
    share = 1.0 - ((1.0 - confidence) / 2) ** (1.0 / n)
    low, high = bounds
    return (value - share * (value - low), value + share * (high - value))


def one_sample_p(scores: np.ndarray) -> float:
    """p-value of a one-sample t-test against 0.

    Identical scores have no variance, so the t-test is undefined; then the exact two-sided
    sign test applies (all n on one side of 0: p = 2 * 0.5**n), so two identical answers
    are not "significant" while a thousand are.
    """
    if len(scores) < 2:
        return float("nan")
    if np.all(scores == scores[0]):
        return 1.0 if scores[0] == 0 else min(1.0, 2 * 0.5 ** len(scores))
    return float(stats.ttest_1samp(scores, 0.0).pvalue)


def benjamini_hochberg(p_values: Iterable[float]) -> np.ndarray:
    """BH-adjusted p-values (NaNs stay NaN and do not count as tests)."""
    p = np.asarray(list(p_values), dtype=float)
    adjusted = np.full_like(p, np.nan)
    mask = ~np.isnan(p)
    if mask.any():
        adjusted[mask] = stats.false_discovery_control(p[mask], method="bh")
    return adjusted


SUMMARY_COLUMNS = [
    "bias", "model", "mean", "mean_abs", "n", "failures", "failure_rate", "abstained",
    "ci_low", "ci_high", "p_value", "p_adjusted", "significant",
]  # fmt: skip


def with_significance(table: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Add BH-adjusted p-values across the whole table and the significance flag."""
    table["p_adjusted"] = benjamini_hochberg(table["p_value"])
    table["significant"] = table["p_adjusted"] < alpha
    return table


def summarize(scores: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per bias x model: mean, n, failures, failure rate, abstained pairs (counted apart
    from failures: `DecisionStatus.ABSTAINED`), 95% CI, p (t-test vs 0), BH-adjusted p, from one
    row per decision (`cells.heatmap_summary`: the same from SQLite's sums)."""
    records = []
    for (bias, model), group in scores.groupby(["bias", "model"], sort=True):
        status = group["status"]
        ok = group.loc[status == DecisionStatus.OK, "score"].dropna().to_numpy(dtype=float)
        abstained = int((status == DecisionStatus.ABSTAINED).sum())
        failures = int((status != DecisionStatus.OK).sum()) - abstained
        total = len(ok) + failures + abstained
        low, high = t_interval(ok)
        records.append(
            {
                "bias": bias,
                "model": model,
                "mean": float(np.mean(ok)) if len(ok) else float("nan"),
                "mean_abs": float(np.mean(np.abs(ok))) if len(ok) else float("nan"),
                "n": len(ok),
                "failures": failures,
                "failure_rate": failures / total if total else 0.0,
                "abstained": abstained,
                "ci_low": low,
                "ci_high": high,
                "p_value": one_sample_p(ok),
            }
        )
    table = pd.DataFrame.from_records(records, columns=SUMMARY_COLUMNS[:-2])
    return with_significance(table, alpha)


# ---------------------------------------------------------------------------- the paper's views
# Figure 7 (table with averages), Figure 6 (dendrogram of models), Figure 5 (biasedness against
# capability and size). Pure functions of a `summarize` table, so CLI, app and tests agree.

AVERAGE = "Average"
AVERAGE_ABS = "Average Absolute"


def figure7_table(
    summary: pd.DataFrame, models: Sequence[str] | None = None, sort: bool = True
) -> pd.DataFrame:
    """Bias x model mean scores with Average and Average Absolute rows and columns.

    "Average" is the unweighted mean of the cell means; "Average Absolute" the mean of the
    cells' mean *absolute* scores (per-pair |score|), which is why the paper's Random baseline
    averages ~0.0 but ~0.54 in absolute terms. Rows are sorted by Average, as in the figure.
    """
    means = summary.pivot(index="bias", columns="model", values="mean")
    absolute = summary.pivot(index="bias", columns="model", values="mean_abs")
    if models is not None:
        means, absolute = (
            means.reindex(columns=list(models)),
            absolute.reindex(columns=list(models)),
        )
    table = means.copy()
    table[AVERAGE] = means.mean(axis=1)
    table[AVERAGE_ABS] = absolute.mean(axis=1)
    if sort:
        table = table.sort_values(AVERAGE, ascending=False)
    absolute = absolute.reindex(table.index)
    absolute[AVERAGE] = absolute[AVERAGE_ABS] = table[AVERAGE_ABS]
    bias_rows = table.copy()
    table.loc[AVERAGE] = bias_rows.mean(axis=0)
    table.loc[AVERAGE_ABS] = absolute.mean(axis=0)
    table.columns.name = None
    table.index.name = "bias"
    return table


def model_matrix(summary: pd.DataFrame) -> pd.DataFrame:
    """Models x biases of mean scores, keeping only biases every model has a mean for."""
    matrix = summary.pivot(index="model", columns="bias", values="mean")
    return matrix.dropna(axis=1, how="any")


@dataclass(frozen=True)
class Dendrogram:
    """Complete-linkage clustering of models (Euclidean distance between their bias profiles)."""

    labels: list[str]  # models, in the matrix's order
    linkage: np.ndarray  # scipy linkage matrix (n-1 x 4); empty for fewer than 2 models
    order: list[str]  # leaves from top/left to bottom/right
    icoord: list[list[float]] = field(default_factory=list)  # scipy's drawing coordinates
    dcoord: list[list[float]] = field(default_factory=list)


def model_dendrogram(summary: pd.DataFrame) -> Dendrogram:
    """Figure 6: which models are biased alike (complete linkage, Euclidean metric)."""
    from scipy.cluster import hierarchy

    matrix = model_matrix(summary)
    labels = [str(m) for m in matrix.index]
    if len(labels) < 2 or matrix.shape[1] == 0:
        return Dendrogram(labels, np.empty((0, 4)), labels)
    linkage = hierarchy.linkage(matrix.to_numpy(dtype=float), method="complete", metric="euclidean")
    tree = hierarchy.dendrogram(linkage, labels=labels, no_plot=True)
    return Dendrogram(labels, linkage, list(tree["ivl"]), tree["icoord"], tree["dcoord"])


def capability_frame(
    summary: pd.DataFrame,
    models: Sequence[Any] | None = None,
    exclude: Sequence[str] = ("random",),
) -> pd.DataFrame:
    """Figure 5: each model's mean absolute biasedness beside its capability score and size.

    Capability is the registry's `arena_score`, size its `params_b`. As in the paper, a model
    without a score gets the mean of the others' and is marked (`arena_imputed`, "*" in label).
    Models are matched to the registry by id, display name, or the id's last path part.
    """
    if models is None:
        from cogbias.llm.registry import load_models

        models = load_models()
    per_model = (
        summary.groupby("model", sort=True)["mean_abs"].mean().drop(list(exclude), errors="ignore")
    )
    records = []
    for model, mean_abs in per_model.items():
        info = _match_model(str(model), models)
        records.append(
            {
                "model": model,
                "name": info.name if info else str(model),
                "mean_abs": float(mean_abs),
                "arena_score": getattr(info, "arena_score", None),
                "params_b": getattr(info, "params_b", None),
            }
        )
    frame = pd.DataFrame.from_records(
        records, columns=["model", "name", "mean_abs", "arena_score", "params_b"]
    )
    for column in ("arena_score", "params_b"):  # inf or text in a registry: not known
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        frame[column] = values.where(values.abs() < np.inf)
    frame["arena_imputed"] = frame["arena_score"].isna()
    if frame["arena_imputed"].any() and not frame["arena_imputed"].all():
        frame.loc[frame["arena_imputed"], "arena_score"] = frame["arena_score"].mean()
    frame["label"] = frame["name"] + frame["arena_imputed"].map({True: "*", False: ""})
    return frame


def _match_model(model: str, models: Sequence[Any]) -> Any | None:
    def norm(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    for test in (
        lambda m: m.id == model,
        lambda m: m.name == model,
        lambda m: m.id.rsplit("/", 1)[-1] == model,
        lambda m: norm(m.name) == norm(model) or norm(m.id.rsplit("/", 1)[-1]) == norm(model),
    ):
        for info in models:
            if test(info):
                return info
    return None


# ------------------------------------------------------------------ token bias: matched pairs
# Jiang et al. (2024) compare an item P with its perturbation P' on the same model: each pair
# lands in one cell of a 2x2 table of (P correct?, P' correct?). Under the null of a genuine
# reasoner, the discordant pairs split evenly (pi12 = pi21), so n21 ~ Binomial(n*, 1/2) given
# n* = n12 + n21. Small n*: the exact binomial tail; larger n*: z = (n21 - n12) / sqrt(n*)
# (McNemar's statistic, signed). Rows of one hypothesis (models x prompting methods) are
# corrected together with Benjamini-Hochberg, as in the paper.

PERTURBED_BETTER = "perturbed_better"  # H_a: pi12 < pi21 (P' is answered correctly more often)
ORIGINAL_BETTER = "original_better"  # H_a: pi12 > pi21 (the perturbation hurts)
TWO_SIDED = "two_sided"
ALTERNATIVES = (PERTURBED_BETTER, ORIGINAL_BETTER, TWO_SIDED)
# Exact test while n* < 25, normal above: with this threshold Appendix D's Tables 3-8 reproduce
# from their counts to the printed digit (with 10, 102 of 270 adjusted p-values differ).
NORMAL_ABOVE = 24

HYPOTHESIS_COLUMNS = [
    "hypothesis",
    "model",
    "prompting",
    "n",
    "n11",
    "n12",
    "n21",
    "n22",
    "n_star",
    "z",
    "test",
    "p_value",
    "p_adjusted",
    "reject",
    "alternative",
]


@dataclass(frozen=True)
class PairTable:
    """Counts of matched pairs: n11 both correct, n12 only P, n21 only P', n22 neither."""

    n11: int = 0
    n12: int = 0
    n21: int = 0
    n22: int = 0

    @property
    def n(self) -> int:
        return self.n11 + self.n12 + self.n21 + self.n22

    @property
    def n_star(self) -> int:
        """The discordant pairs: the only ones that carry information about pi12 vs pi21."""
        return self.n12 + self.n21


def pair_table(original_correct: Iterable[bool], perturbed_correct: Iterable[bool]) -> PairTable:
    """Tally matched (P correct, P' correct) outcomes into the 2x2 table."""
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for p, q in zip(original_correct, perturbed_correct, strict=True):
        cells[(bool(p), bool(q))] += 1
    return PairTable(
        cells[(True, True)], cells[(True, False)], cells[(False, True)], cells[(False, False)]
    )


def matched_pairs_z(n12: int, n21: int) -> float:
    """z = (n21 - n12) / sqrt(n12 + n21); NaN when there are no discordant pairs."""
    n_star = n12 + n21
    return (n21 - n12) / float(np.sqrt(n_star)) if n_star else float("nan")


def matched_pairs_p(
    n12: int, n21: int, alternative: str = TWO_SIDED, normal_above: int = NORMAL_ABOVE
) -> tuple[float, str]:
    """(p-value, "exact" or "normal") for H0: pi12 = pi21 against `alternative`.

    n* <= `normal_above` uses the exact binomial test of n21 out of n* at 1/2; larger n* the
    normal approximation of z. No discordant pairs give no evidence either way: p = 1.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"unknown alternative {alternative!r}; use one of {', '.join(ALTERNATIVES)}"
        )
    n_star = n12 + n21
    if n_star == 0:
        return 1.0, "exact"
    if n_star <= normal_above:
        scipy_side = {PERTURBED_BETTER: "greater", ORIGINAL_BETTER: "less"}.get(
            alternative, "two-sided"
        )
        return float(stats.binomtest(n21, n_star, 0.5, alternative=scipy_side).pvalue), "exact"
    z = matched_pairs_z(n12, n21)
    if alternative == PERTURBED_BETTER:
        return float(stats.norm.sf(z)), "normal"
    if alternative == ORIGINAL_BETTER:
        return float(stats.norm.cdf(z)), "normal"
    return float(min(1.0, 2 * stats.norm.sf(abs(z)))), "normal"


def hypothesis_table(
    pairs: pd.DataFrame,
    alternatives: Mapping[str, str] | None = None,
    alpha: float = ALPHA,
    normal_above: int = NORMAL_ABOVE,
) -> pd.DataFrame:
    """The paper's result tables: one row per (hypothesis, model, prompting method).

    `pairs` has columns hypothesis, model, prompting, original_correct, perturbed_correct (one
    row per answered pair). `alternatives` maps a hypothesis to its H_a (default two-sided).
    BH runs across the rows of each hypothesis separately; `reject` is p_adjusted < alpha.
    """
    alternatives = alternatives or {}
    records = []
    keys = ["hypothesis", "model", "prompting"]
    for (hypothesis, model, prompting), group in pairs.groupby(keys, sort=True):
        table = pair_table(group["original_correct"], group["perturbed_correct"])
        p, test = matched_pairs_p(
            table.n12, table.n21, alternatives.get(str(hypothesis), TWO_SIDED), normal_above
        )
        records.append(
            {
                "hypothesis": hypothesis,
                "model": model,
                "prompting": prompting,
                "n": table.n,
                "n11": table.n11,
                "n12": table.n12,
                "n21": table.n21,
                "n22": table.n22,
                "n_star": table.n_star,
                "z": matched_pairs_z(table.n12, table.n21),
                "test": test,
                "p_value": p,
            }
        )
    frame = pd.DataFrame.from_records(records, columns=HYPOTHESIS_COLUMNS[:-3])
    frame["p_adjusted"] = np.nan
    for _, index in frame.groupby("hypothesis", sort=False).groups.items():
        frame.loc[index, "p_adjusted"] = benjamini_hochberg(frame.loc[index, "p_value"])
    frame["reject"] = frame["p_adjusted"] < alpha
    frame["alternative"] = [alternatives.get(str(h), TWO_SIDED) for h in frame["hypothesis"]]
    return frame


# ---------------------------------------------------------------------------- comparing models
# Two models answered the same instances: per bias, the paired differences of their scores
# tell whether one is more biased than the other, with far more power than comparing two
# cell means (each instance's own difficulty cancels out).

COMPARE_COLUMNS = [
    "bias",
    "n",
    "mean_a",
    "mean_b",
    "mean_diff",
    "ci_low",
    "ci_high",
    "statistic",
    "p_value",
    "p_adjusted",
    "significant",
]
DIFF_RANGE = (-2.0, 2.0)  # a difference of two scores in [-1, 1]


def paired_frame(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows with bias, instance_id, score_a, score_b (as `Store.paired_scores` returns them)."""
    frame = pd.DataFrame(list(rows), columns=["bias", "instance_id", "score_a", "score_b"])
    for column in ("score_a", "score_b"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def paired_test(diffs: np.ndarray) -> tuple[float, float]:
    """Wilcoxon signed-rank test of paired differences against 0: (statistic, p).

    scipy's default: zero differences are dropped, exact p-values for small samples. With
    no non-zero difference the models agree on every pair (p = 1); below 2 pairs, NaN.
    """
    if len(diffs) < 2:
        return (float("nan"), float("nan"))
    if not np.any(diffs != 0):
        return (0.0, 1.0)
    result = stats.wilcoxon(diffs)
    return (float(result.statistic), float(result.pvalue))


def paired_difference(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Scores `a` and `b` on the same instances (two models, or two levels of a factor,
    `factor_effects`): n, both means, the mean difference a - b, its t-interval (truncated to
    [-2, 2]) and the Wilcoxon signed-rank statistic and p."""
    diffs = a - b
    low, high = t_interval(diffs, bounds=DIFF_RANGE)
    statistic, p = paired_test(diffs)
    means = {"mean_a": a.mean(), "mean_b": b.mean(), "mean_diff": diffs.mean()}
    tested = {"ci_low": low, "ci_high": high, "statistic": statistic, "p_value": p}
    return {"n": len(diffs), **{k: float(v) for k, v in means.items()}, **tested}


SCORES = ("score_a", "score_b")


def compare_models(paired: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per bias: mean score of A and B on shared instances, mean difference A - B with a
    t-interval (truncated to [-2, 2]), Wilcoxon signed-rank p and BH-adjusted p across biases.

    `paired` has bias, score_a and score_b (as `Store.paired_scores` returns them). Sorted by
    the mean difference, largest first.
    """
    records = [
        {"bias": bias, **paired_difference(*(g[c].to_numpy(float) for c in SCORES))}
        for bias, g in paired.groupby("bias", sort=True)
    ]
    table = pd.DataFrame.from_records(records, columns=COMPARE_COLUMNS[:-2])
    table = with_significance(table, alpha)
    return table.sort_values("mean_diff", ascending=False, kind="stable").reset_index(drop=True)


def disagreements(paired: pd.DataFrame, bias: str, top: int = 5) -> pd.DataFrame:
    """The instances of `bias` where the two models' scores differ most (largest |A - B|)."""
    rows = paired[paired["bias"] == bias].assign(diff=lambda f: f["score_a"] - f["score_b"])
    rows = rows[rows["diff"] != 0]
    order = rows["diff"].abs().sort_values(ascending=False, kind="stable").index
    return rows.loc[order].head(top).reset_index(drop=True)
