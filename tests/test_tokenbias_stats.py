"""Matched-pairs statistics of the token-bias study (Jiang et al. 2024, Section 2 and Tables 2-8)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pandas as pd
import pytest

from cogbias.core import metrics
from cogbias.studies import analysis
from cogbias.studies.analysis import ORIGINAL_BETTER, PERTURBED_BETTER, TWO_SIDED
from cogbias.studies.tokenbias_hypotheses import ALTERNATIVES, load_hypotheses


@pytest.mark.parametrize(
    ("n12", "n21", "z"),
    [
        (8, 388, 19.095718),  # rows of the paper's tables, z as printed (6 decimals)
        (10, 579, 23.445237),
        (19, 218, 12.926439),  # Table 2, gpt-3.5-turbo zs-cot
        (160, 54, -7.246011),  # Table 3, gpt-3.5-turbo os-cot: the perturbation hurts
        (2, 2, 0.0),
    ],
)
def test_z_reproduces_the_papers_tables(n12, n21, z):
    assert analysis.matched_pairs_z(n12, n21) == pytest.approx(z, abs=5e-7)


def test_exact_binomial_for_zero_of_six_discordant_pairs_is_one_in_64():
    # all 6 discordant pairs favour P': P(X >= 6 | n=6, 1/2) = 1/64, one-sided
    p, test = analysis.matched_pairs_p(0, 6, PERTURBED_BETTER)
    assert (p, test) == (pytest.approx(1 / 64, abs=1e-15), "exact")
    # 0 of 6 pairs favour P' against "the perturbation hurts": P(X <= 0) = 1/64 as well
    assert analysis.matched_pairs_p(6, 0, ORIGINAL_BETTER)[0] == pytest.approx(1 / 64)
    assert analysis.matched_pairs_p(6, 0, TWO_SIDED)[0] == pytest.approx(2 / 64)
    # the wrong direction is no evidence at all
    assert analysis.matched_pairs_p(6, 0, PERTURBED_BETTER)[0] == pytest.approx(1.0)


def test_normal_approximation_above_the_threshold_and_the_threshold_is_configurable():
    # n* = 26 > 24 (the default since Tables 3-8 reproduce with it): one-sided normal tail
    p, test = analysis.matched_pairs_p(1, 25, PERTURBED_BETTER)
    assert test == "normal"
    assert p == pytest.approx(0.5 * math.erfc(24 / math.sqrt(26) / math.sqrt(2)), rel=1e-12)
    # with the threshold raised, the same counts get the exact tail: 27 / 2**26
    p, test = analysis.matched_pairs_p(1, 25, PERTURBED_BETTER, normal_above=26)
    assert (p, test) == (pytest.approx(27 / 2**26, rel=1e-12), "exact")
    # and n* = 24 is still exact by default: the paper's "exact test while n* < 25"
    assert analysis.matched_pairs_p(1, 23, PERTURBED_BETTER)[1] == "exact"
    assert analysis.matched_pairs_p(0, 0, TWO_SIDED) == (1.0, "exact")
    with pytest.raises(ValueError, match="unknown alternative"):
        analysis.matched_pairs_p(1, 2, "bigger")


APPENDIX_D = Path(__file__).parent / "fixtures" / "tokenbias-tables" / "appendix_d.tsv"
# Appendix D's table -> the hypothesis (data/tokenbias_hypotheses.toml) whose direction it tests
TABLE_HYPOTHESIS = {2: "H1", 3: "H2", 4: "H3", 5: "H4", 6: "H5", 7: "H5b", 8: "H6"}


def test_default_settings_reproduce_appendix_d_tables_2_to_8_from_their_counts_but_one_row():
    """Every BH-adjusted p-value to the printed 6 decimals and every reject decision, but one.

    The directions come from the hypothesis table the importer uses, so a wrong direction
    there fails here too. With the old default (exact only up to n* = 10) 102 rows differ.
    The one row: Table 2's gpt-4o fs has a single discordant pair (n12 = 0, n21 = 1). The paper
    prints 0.158655 there, the normal tail of z = 1; the rule with which all 323 other rows
    reproduce (exact while n* <= 24: Table 4's gpt-4-turbo os, n12 = 0 and n21 = 6, reproduces
    from the exact 1/64 only) gives the exact tail P(X >= 1 | 1, 1/2) = 0.5. Both keep H0, and as
    the table's largest p-value it moves no other row's adjusted value.
    """
    hypotheses = load_hypotheses()
    table = pd.read_csv(APPENDIX_D, sep="\t")
    assert sorted(table["table"].unique()) == list(TABLE_HYPOTHESIS)
    differing, flipped = [], []
    for number, rows in table.groupby("table"):
        alternative = hypotheses[TABLE_HYPOTHESIS[number]].alternative
        p = [
            analysis.matched_pairs_p(a, b, alternative)[0]
            for a, b in zip(rows.n12, rows.n21, strict=True)
        ]
        adjusted = analysis.benjamini_hochberg(p)
        for row, value in zip(rows.itertuples(), adjusted, strict=True):
            if abs(round(float(value), 6) - row.p_adjusted) > 1.5e-6:
                differing.append((number, row.model, row.prompting, value, row.p_adjusted))
            if bool(value < analysis.ALPHA) != bool(row.reject):
                flipped.append((number, row.model, row.prompting))
    assert len(table) == 54 + 270
    assert flipped == []
    assert [row[:3] for row in differing] == [(2, "gpt-4o", "fs")]
    ours, printed = differing[0][3:]
    assert (ours, printed) == (pytest.approx(0.5), 0.158655)
    assert round(analysis.matched_pairs_p(0, 1, PERTURBED_BETTER, normal_above=0)[0], 6) == printed
    # the threshold matters: the old default of 10 does not reproduce the tables
    old = analysis.matched_pairs_p(5, 15, TWO_SIDED, normal_above=10)[0]
    assert old != pytest.approx(analysis.matched_pairs_p(5, 15, TWO_SIDED)[0], rel=1e-3)


def test_hypothesis_table_speaks_the_analysis_alternatives():
    assert set(ALTERNATIVES) == set(analysis.ALTERNATIVES)
    hypotheses = load_hypotheses()
    assert {"H1", "H2", "H3", "H4", "H5", "H6"} <= set(hypotheses)
    assert hypotheses["H5"].file_pairs == [("sets_original_random", "sets_original_framing_gold")]
    assert [p for _, p in hypotheses["math_random"].file_pairs] == ["math_original_random"]
    assert "n12 < n21" in hypotheses["H3"].direction


def test_pair_table_counts_each_cell():
    original = [True, True, False, False, True, False]
    perturbed = [True, False, True, False, False, True]
    table = analysis.pair_table(original, perturbed)
    assert (table.n11, table.n12, table.n21, table.n22) == (1, 2, 2, 1)
    assert (table.n, table.n_star) == (6, 4)


def _pairs(hypothesis: str, model: str, prompting: str, cells: tuple[int, int, int, int]):
    n11, n12, n21, n22 = cells
    outcomes = [(1, 1)] * n11 + [(1, 0)] * n12 + [(0, 1)] * n21 + [(0, 0)] * n22
    return [
        {
            "hypothesis": hypothesis,
            "model": model,
            "prompting": prompting,
            "original_correct": bool(p),
            "perturbed_correct": bool(q),
        }
        for p, q in outcomes
    ]


def test_hypothesis_table_corrects_within_each_hypothesis_only():
    rows = (
        _pairs("h1", "m1", "baseline", (10, 1, 5, 4))  # n* = 6: exact, 7/64 one-sided
        + _pairs("h1", "m2", "baseline", (3, 0, 6, 1))  # n* = 6: exact, 1/64
        + _pairs("h2", "m1", "baseline", (0, 8, 388, 0))  # normal, z = 19.095718
    )
    table = analysis.hypothesis_table(
        pd.DataFrame(rows), {"h1": PERTURBED_BETTER, "h2": PERTURBED_BETTER}
    )
    assert list(table.columns) == analysis.HYPOTHESIS_COLUMNS
    h1 = table[table["hypothesis"] == "h1"].set_index("model")
    assert h1.loc["m1", ["n11", "n12", "n21", "n22", "n_star"]].tolist() == [10, 1, 5, 4, 6]
    assert h1["p_value"].tolist() == pytest.approx([7 / 64, 1 / 64])
    # BH over the two h1 rows: 1/64 * 2/1 and 7/64 * 2/2
    assert h1["p_adjusted"].tolist() == pytest.approx([7 / 64, 2 / 64])
    assert h1["reject"].tolist() == [False, True]
    h2 = table[table["hypothesis"] == "h2"].iloc[0]
    assert h2["z"] == pytest.approx(19.095718, abs=5e-7)
    assert h2["test"] == "normal" and h2["p_adjusted"] == h2["p_value"] and h2["reject"]


def _null_study(rng: random.Random, rows: int, pairs: int, alternative: str) -> list[bool]:
    """One study on the random model: P and P' answered independently, 2 options, 1 correct."""
    p_values = []
    for _ in range(rows):
        n12 = n21 = 0
        for _ in range(pairs):
            original = metrics.random_choice(2, rng) == 0
            perturbed = metrics.random_choice(2, rng) == 0
            n12 += original and not perturbed
            n21 += perturbed and not original
        p_values.append(analysis.matched_pairs_p(n12, n21, alternative)[0])
    return list(analysis.benjamini_hochberg(p_values) < analysis.ALPHA)


@pytest.mark.parametrize("alternative", [PERTURBED_BETTER, TWO_SIDED])
def test_random_model_rejects_at_most_alpha_over_simulated_null_studies(alternative, capsys):
    rng = random.Random(13)
    studies, rows, pairs = 600, 6, 30  # 6 rows: e.g. 1 model x 6 prompting methods
    outcomes = [_null_study(rng, rows, pairs, alternative) for _ in range(studies)]
    row_rate = sum(map(sum, outcomes)) / (studies * rows)
    # every null is true, so the false discovery rate is the share of studies with any rejection
    fdr = sum(any(o) for o in outcomes) / studies
    with capsys.disabled():
        print(
            f"\nrandom model, {alternative}: rejection rate {row_rate:.4f} of {studies * rows} "
            f"rows, FDR {fdr:.4f} of {studies} studies (alpha {analysis.ALPHA})"
        )
    assert row_rate <= analysis.ALPHA
    # the FDR is estimated from `studies` draws: allow three standard errors above alpha
    se = math.sqrt(analysis.ALPHA * (1 - analysis.ALPHA) / studies)
    assert fdr <= analysis.ALPHA + 3 * se


def test_a_real_token_bias_is_rejected_almost_always():
    """The guard above must be able to fail: a model that answers P' far better is caught."""
    rng = random.Random(7)
    rejected = 0
    for _ in range(200):
        p_values = []
        for _ in range(6):
            n12 = n21 = 0
            for _ in range(30):
                original, perturbed = rng.random() < 0.4, rng.random() < 0.9
                n12 += original and not perturbed
                n21 += perturbed and not original
            p_values.append(analysis.matched_pairs_p(n12, n21, PERTURBED_BETTER)[0])
        rejected += int((analysis.benjamini_hochberg(p_values) < analysis.ALPHA).sum())
    assert rejected / (200 * 6) > 0.95
