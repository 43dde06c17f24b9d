"""Comparing two models on the same instances: paired differences, Wilcoxon, BH across biases.

A toy store with a known paired difference; the statistic is checked against scipy directly.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cogbias.store import Store
from cogbias.studies import analysis


def _toy_store(path: Path) -> tuple[Store, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Bias 'shifted': A scores exactly 0.5 above B on 30 instances (B varies). Bias 'same':
    A and B agree on 20 instances but two. Bias 'noise': unrelated scores. Model C and
    failed decisions are noise the comparison must ignore."""
    rng = random.Random(7)
    grid = [-1.0, -0.5, 0.0, 0.5]
    expected: dict[str, tuple[list[float], list[float]]] = {}
    rows = []

    def add(bias: str, i: int, model: str, score: float | None, status: str = "ok") -> None:
        rows.append((f"d{len(rows)}", "r1", f"{bias}-{i}", bias, model, status, score))

    for i in range(30):
        b = rng.choice(grid)
        add("shifted", i, "B", b)
        add("shifted", i, "A", b + 0.5)
        add("shifted", i, "C", 1.0)
        expected.setdefault("shifted", ([], []))
        expected["shifted"][0].append(b + 0.5)
        expected["shifted"][1].append(b)
    for i in range(20):
        a = rng.choice(grid)
        b = a if i >= 2 else -a - 0.5
        add("same", i, "A", a)
        add("same", i, "B", b)
        expected.setdefault("same", ([], []))
        expected["same"][0].append(a)
        expected["same"][1].append(b)
    for i in range(25):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        add("noise", i, "A", a)
        add("noise", i, "B", b)
        expected.setdefault("noise", ([], []))
        expected["noise"][0].append(a)
        expected["noise"][1].append(b)
    add("noise", 99, "A", 0.9)  # B never answered instance 99: not a pair
    add("noise", 98, "A", None, "failed")
    add("noise", 98, "B", 0.2)
    store = Store(path)
    store.create_run("r1", {"models": ["A", "B", "C"]}, len(rows))
    with store.atomic():
        store.insert_rows(
            "decisions",
            ["id", "run_id", "instance_id", "test_case", "model", "status", "score"],
            rows,
        )
    return store, {k: (np.array(a), np.array(b)) for k, (a, b) in expected.items()}


def test_paired_statistics_match_scipy(tmp_path: Path) -> None:
    store, expected = _toy_store(tmp_path / "c.db")
    with store:
        paired = analysis.paired_frame(store.paired_scores("A", "B"))
    table = analysis.compare_models(paired).set_index("bias")
    assert table["mean_diff"].is_monotonic_decreasing
    assert table.loc["shifted", "n"] == 30 and table.loc["noise", "n"] == 25
    assert table.loc["shifted", "mean_diff"] == pytest.approx(0.5)
    p_values = []
    for bias, (a, b) in expected.items():
        reference = stats.wilcoxon(a - b)
        assert table.loc[bias, "statistic"] == pytest.approx(reference.statistic)
        assert table.loc[bias, "p_value"] == pytest.approx(reference.pvalue)
        assert table.loc[bias, "mean_a"] == pytest.approx(a.mean())
        assert table.loc[bias, "mean_b"] == pytest.approx(b.mean())
        p_values.append((bias, reference.pvalue))
    adjusted = stats.false_discovery_control([p for _, p in p_values], method="bh")
    for (bias, _), p_adj in zip(p_values, adjusted, strict=True):
        assert table.loc[bias, "p_adjusted"] == pytest.approx(p_adj)
    assert table.loc["shifted", "significant"] and not table.loc["same", "significant"]
    low, high = table.loc["shifted", ["ci_low", "ci_high"]]
    # every difference is exactly 0.5: not a zero-width interval (issue 21), but at most
    # 1 - 0.025^(1/30) of the differences could lie elsewhere in [-2, 2]
    share = 1 - 0.025 ** (1 / 30)
    assert (low, high) == pytest.approx((0.5 - share * 2.5, 0.5 + share * 1.5))
    assert -2 <= table["ci_low"].min() and table["ci_high"].max() <= 2


def test_direction_and_the_pairs_that_disagree_most(tmp_path: Path) -> None:
    store, _ = _toy_store(tmp_path / "c.db")
    with store:
        forward = analysis.paired_frame(store.paired_scores("A", "B"))
        backward = analysis.paired_frame(store.paired_scores("B", "A"))
    ab = analysis.compare_models(forward).set_index("bias")
    ba = analysis.compare_models(backward).set_index("bias")
    assert ba.loc["shifted", "mean_diff"] == pytest.approx(-0.5)
    assert ba.loc["shifted", "p_value"] == pytest.approx(ab.loc["shifted", "p_value"])
    top = analysis.disagreements(forward, "same", top=5)
    assert len(top) == 2  # only two instances differ; agreeing pairs are not listed
    assert list(top["instance_id"]) == sorted(top["instance_id"], key=lambda i: -abs(
        forward.set_index("instance_id").loc[i, "score_a"] - forward.set_index("instance_id").loc[i, "score_b"]
    ))  # fmt: skip


def test_degenerate_cases() -> None:
    assert analysis.paired_test(np.array([0.0, 0.0, 0.0])) == (0.0, 1.0)
    assert all(np.isnan(analysis.paired_test(np.array([0.5]))))
    empty = analysis.compare_models(analysis.paired_frame([]))
    assert empty.empty and list(empty.columns) == analysis.COMPARE_COLUMNS


def test_the_numbers_table_reads_a_dash_where_a_bias_has_one_pair() -> None:
    from cogbias.views import pair_tables

    paired = analysis.paired_frame(
        [{"bias": "one", "instance_id": "i1", "score_a": 0.5, "score_b": 0.5}]
        + [
            {"bias": "many", "instance_id": f"i{i}", "score_a": 1 / 3, "score_b": -1 / 3 * (i % 2)}
            for i in range(6)
        ]
    )
    table = pair_tables.compare_numbers(analysis.compare_models(paired), "A", "B", {"one": "One"})
    single = table[table["bias"] == "One"].iloc[0]
    assert single["95% CI (t, cut to [-2, 2])"] == "–" and single["p (Wilcoxon)"] == "–"
    assert single["mean difference A − B"] == "0.000"  # no sign on zero
    flat = table.astype(str).to_csv(index=False)
    assert "None" not in flat and "nan" not in flat and "0.3333" not in flat
    assert "+0.333" in set(table["mean A"])
