"""Explore's data and chart. The one test that holds the two paths of the statistics layer
equal, the SQL sufficient statistics (`studies.cells`) and the per-decision
`analysis.summarize`, is `test_sql_summary_equals_the_per_decision_summary`."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cogbias.runs import kinds
from cogbias.store import SCHEMA_VERSION, PairFilter, Store
from cogbias.studies import analysis, cells
from cogbias.views import charts_explore, explore
from tests.app_helpers import make_results_db

COLUMNS = analysis.SUMMARY_COLUMNS


def _fill(store: Store, rows: list[tuple[str, str, str | None, float | None]]) -> None:
    store.create_run("r1", {"models": []}, len(rows))
    with store.atomic():
        store.insert_rows(
            "decisions",
            ["id", "run_id", "instance_id", "test_case", "model", "status", "score"],
            [(f"d{i}", "r1", f"i{i}", b, m, s, x) for i, (b, m, s, x) in enumerate(rows)],
        )


def _random_rows(seed: int = 1) -> list[tuple[str, str, str | None, float | None]]:
    rng = random.Random(seed)
    rows: list[tuple[str, str, str | None, float | None]] = []
    for bias in ("anchoring", "framing_effect", "halo_effect"):
        for model in ("m1", "m2", "random"):
            for _ in range(rng.randint(0, 40)):
                status = rng.choice(["ok"] * 8 + ["failed", None])
                score = rng.choice([-1.0, -0.5, 0.0, 1 / 3, 0.5, 1.0]) if status == "ok" else None
                rows.append((bias, model, status, score))
    # edge cases: one score, identical non-zero scores, identical zeros, only failures,
    # an 'ok' row without a score (not counted, as in analysis.summarize)
    rows += [("single", "m1", "ok", 0.5)]
    rows += [("constant", "m1", "ok", 0.5)] * 5 + [("zeros", "m1", "ok", 0.0)] * 4
    rows += [("failing", "m1", "failed", None)] * 3 + [
        ("nulls", "m1", "ok", None),
        ("nulls", "m1", "ok", 1.0),
    ]
    return rows


def test_sql_summary_equals_the_per_decision_summary(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        _fill(store, _random_rows())
        fast = cells.heatmap_summary(store)
        slow = analysis.summarize(analysis.scores_frame(store.scores()))
        by_run = cells.heatmap_summary(store, run_id="r1")
    slow = slow.sort_values(["bias", "model"]).reset_index(drop=True)
    assert list(fast.columns) == COLUMNS == list(slow.columns)
    assert fast[["bias", "model", "n", "failures"]].equals(slow[["bias", "model", "n", "failures"]])
    for column in (
        "mean",
        "mean_abs",
        "failure_rate",
        "ci_low",
        "ci_high",
        "p_value",
        "p_adjusted",
    ):
        np.testing.assert_allclose(
            fast[column], slow[column], rtol=1e-9, atol=1e-12, err_msg=column
        )
    assert fast["significant"].tolist() == slow["significant"].tolist()
    pd.testing.assert_frame_equal(fast, by_run)


def test_each_cells_null_is_the_same_whether_its_test_case_has_one_metric_or_several(
    tmp_path: Path,
) -> None:
    """A test case whose instances share one metric takes the fast path (no decision read);
    one whose instances differ is counted instance by instance; both equal the mean null over
    each cell's decided instances."""
    db = tmp_path / "n.db"
    run_id = make_results_db(db, biases=("anchoring", "framing_effect"), instances=4)
    lopsided = {"flip_control": False, "flip_treatment": False, "k": 1.0, "y1": 0.0}
    with Store(db) as store:
        # framing: every instance one asymmetric metric; anchoring: one instance of four
        # asymmetric, so its null is a quarter of that instance's
        store.db.execute(
            "update instances set metric = ? where test_case = 'framing_effect'",
            (json.dumps({**lopsided, "y2": 3.0}),),
        )
        first = store.pairs("anchoring", limit=1)[0].decision.instance_id
        store.db.execute(
            "update instances set metric = ? where id = ?",
            (json.dumps({**lopsided, "y2": 5.0}), first),
        )
        summary = cells.cognitive_bias_summary(store, run_id=run_id)
        fast = cells.with_uniform_null(store, summary, run_id=run_id)
        every = cells.uniform_nulls(store.instance_metrics(run_id=run_id))
        uniform = {r["test_case"] for r in store.uniform_metrics()}
    assert uniform == {"framing_effect"}  # anchoring's instances differ: the counted path
    expected = summary.merge(every, on=["bias", "model"], how="left")
    np.testing.assert_allclose(fast["null"], expected["null"], rtol=1e-12)
    nulls = dict(zip(fast["bias"], fast["null"], strict=False))
    assert nulls["framing_effect"] != 0 and nulls["anchoring"] != 0
    assert nulls["anchoring"] != nulls["framing_effect"]


def test_empty_store_gives_an_empty_summary(tmp_path: Path) -> None:
    with Store(tmp_path / "e.db") as store:
        table = cells.heatmap_summary(store)
    assert table.empty and list(table.columns) == COLUMNS
    assert explore.row_order(table) == []


def test_store_migrates_to_covering_indexes(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db") as store:
        assert store.schema_version == SCHEMA_VERSION >= 2
        plan = store.query(
            "explain query plan select test_case, model, status, count(score) "
            "from decisions where run_id = ? group by test_case, model, status",
            ("r",),
        )
    assert "COVERING INDEX" in " ".join(str(r["detail"]) for r in plan)


def test_pair_count_matches_pairs(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    run_id = make_results_db(db, instances=7)
    with Store(db) as store:
        for search in (None, "Energy", "no such text"):
            rows = store.pairs("anchoring", "random", run_id, None, search, 1000)
            which = PairFilter("anchoring", "random", run_id, None, search)
            assert store.pair_count(which) == len(rows)
        assert store.pair_count() == 3 * 7 * 2


def _summary() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "bias": ["a", "a", "b", "b"],
            "model": ["m1", "m2", "m1", "m2"],
            "mean": [0.8, -0.2, np.nan, 0.1],
            "mean_abs": [0.8, 0.4, np.nan, 0.3],
            "n": [10, 10, 0, 5],
            "failures": [0, 2, 4, 0],
            "failure_rate": [0.0, 2 / 12, 1.0, 0.0],
            "ci_low": [0.7, -0.5, np.nan, -0.2],
            "ci_high": [0.9, 0.1, np.nan, 0.4],
            "p_value": [0.001, 0.2, np.nan, 0.5],
            "p_adjusted": [0.003, 0.3, np.nan, 0.5],
            "significant": [True, False, False, False],
        }
    )


def test_row_order_by_average_and_name() -> None:
    table = _summary()
    assert explore.row_order(table, "average") == ["a", "b"]
    assert explore.row_order(table, "average_asc") == ["b", "a"]
    assert explore.row_order(table, "name") == ["a", "b"]


@pytest.mark.parametrize("view", list(charts_explore.VIEWS))
def test_heatmap_chart_layers_labels_and_selection(view: str) -> None:
    chart = charts_explore.explore_heatmap(_summary(), view, ["b", "a"], ["m1", "m2"])
    spec = chart.to_dict()
    data = next(iter(spec["datasets"].values()))
    labels = {(r["bias"], r["model"]): r["label"] for r in data}
    if view == "mean":
        assert labels[("a", "m1")] == "+0.80*" and labels[("b", "m1")] == "–"
        assert labels[("b", "m2")] == "+0.10  (n=5)"  # a small cell says how small
        tips = {r["bias"] + r["model"]: (r["ci"], r["verdict"]) for r in data}
        assert tips["am1"] == ("+0.70 to +0.90", "yes (BH-adjusted p < 0.05)")
        assert tips["bm1"][1] == "not tested (n < 2)"
        (scale,) = [
            layer["encoding"]["color"]["scale"]
            for layer in spec["layer"]
            if "scale" in layer.get("encoding", {}).get("color", {})
        ]
        assert scale["domain"] == [-1, 1] and scale["domainMid"] == 0
    elif view == "failure_rate":
        assert labels[("b", "m1")] == "100%"
        (scale,) = [
            layer["encoding"]["color"]["scale"]
            for layer in spec["layer"]
            if "scale" in layer.get("encoding", {}).get("color", {})
        ]
        assert scale["domain"][0] == 0 and scale["range"][0] == "#ffffff"  # 0% is white
    else:
        assert labels[("a", "m2")] == "10"
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["b", "a"]
    assert spec["params"][0]["name"] == charts_explore.SELECTION
    assert json.dumps(spec).count('"param": "cell"') == 2  # the selected cell's outline


def test_a_cell_without_any_pair_is_drawn_grey_not_left_out() -> None:
    """A model that never ran a bias still gets its cell: grey (the caption says so), "–",
    and a tooltip that says it has no pairs, in every view."""
    summary = _summary()
    summary = summary[~((summary["bias"] == "a") & (summary["model"] == "m2"))]
    for view in charts_explore.VIEWS:
        spec = charts_explore.explore_heatmap(summary, view, ["b", "a"], ["m1", "m2"]).to_dict()
        data = next(iter(spec["datasets"].values()))
        cells = {(r["bias"], r["model"]): r for r in data}
        assert len(cells) == 4
        empty = cells[("a", "m2")]
        assert not empty["has_value"] and empty["label"] == "–" and empty["n"] == 0
        assert empty["failure_text"] == "no pairs" and empty["mean_text"] == "–"
        (grey,) = [layer for layer in spec["layer"] if layer["mark"].get("color")]
        assert grey["mark"]["color"] == charts_explore.MISSING_COLOR
        assert grey["transform"] == [{"filter": "!datum.has_value"}]
        assert "None" not in json.dumps(data) and "NaN" not in json.dumps(data)


def test_the_numbers_table_has_dashes_not_none_and_fixed_digits() -> None:
    summary = _summary().assign(null=[0.0, float("nan"), -1e-17, 1 / 3][: len(_summary())])
    table = explore.numbers_table(summary, {"a": "Anchor A"})
    assert "Anchor A" in set(table["bias"])
    flat = table.astype(str).to_csv(index=False)
    assert "None" not in flat and "nan" not in flat and "-0.000" not in flat
    assert not any(re.search(r"\d\.\d{4}", v) for v in table["mean score"])
    one = table[(table["bias"] == "b") & (table["model"] == "m1")].iloc[0]
    assert one[explore.CI_COLUMN] == "–" and one["p (BH-adjusted)"] == "–"


def test_selected_cell_reads_streamlit_selection_events() -> None:
    event = {"selection": {"cell": [{"bias": "a", "model": "m2"}]}}
    assert charts_explore.selected_cell(event) == ("a", "m2")
    assert charts_explore.selected_cell({"selection": {"cell": {}}}) is None
    assert charts_explore.selected_cell(
        {"selection": {"cell": {"bias": ["a"], "model": ["m"]}}}
    ) == ("a", "m")
    assert charts_explore.selected_cell(None) is None


def test_unknown_view_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown view"):
        charts_explore.heatmap_frame(_summary(), "median")


def test_sql_summary_intervals_stay_within_the_score_range(tmp_path: Path) -> None:
    rows = [("two", "random", "ok", 0.75), ("two", "random", "ok", -0.5)]
    rows += [("edge", "m", "ok", 1.0)] * 3 + [("edge", "m", "ok", 0.6)]
    with Store(tmp_path / "b.db") as store:
        _fill(store, rows)
        table = cells.heatmap_summary(store).set_index("bias")
    assert (table.loc["two", "ci_low"], table.loc["two", "ci_high"]) == (-1.0, 1.0)
    assert table.loc["edge", "ci_high"] == 1.0 and -1 < table.loc["edge", "ci_low"] < 0.9
    assert table[["ci_low", "ci_high"]].abs().max().max() <= 1.0


def test_the_uniform_null_of_an_asymmetric_metric_by_hand() -> None:
    """k = 1, y1 = 0, y2 = 1 over 3 options: d1 = a1 and d2 = |a2 - 1|, so the nine equally
    likely pairs (a1, a2) score: a1 = 0: -1, 0, -1; a1 = 1: 0, 1, 0; a1 = 2: 1/2, 1, 1/2.
    Their sum is 1, so the exact null is 1/9, not 0."""
    from cogbias.core.metrics import MetricParams

    assert cells.uniform_null(MetricParams(k=1, y1=0, y2=1), 3) == pytest.approx(1 / 9)
    assert cells.uniform_null(MetricParams(k=-1, y1=0, y2=1), 3) == pytest.approx(-1 / 9)
    assert cells.uniform_null(MetricParams(k=1, y1=4, y2=4), 11) == 0.0  # symmetric


def test_the_null_column_is_the_mean_over_each_cells_instances(tmp_path: Path) -> None:
    asym = json.dumps({"k": 1, "y1": 0, "y2": 1, "flip_control": False, "flip_treatment": False})
    sym = json.dumps({"k": 1, "y1": 0, "y2": 0, "flip_control": False, "flip_treatment": False})
    wrong = json.dumps({"k": 1, "y1": 0, "y2": 9})  # outside its 3 options: not read
    instances = [
        ("a1", asym, 3),
        ("a2", sym, 3),
        ("a3", asym, 3),
        ("p1", None, 3),
        ("w1", wrong, 3),
    ]
    decisions = [  # (instance, bias, model, status, score)
        ("a1", "asym", "m1", "ok", 0.5), ("a1", "asym", "m1", "ok", 0.5),  # two repeats: once
        ("a2", "asym", "m1", "failed", None),
        ("a3", "asym", "m2", "ok", 1.0),
        ("p1", "published", "m1", "ok", 0.0),
        ("w1", "broken", "m1", "ok", 0.0),
    ]  # fmt: skip
    with Store(tmp_path / "n.db") as store:
        store.create_run("r1", {"models": []}, len(decisions))
        with store.atomic():
            store.insert_rows("instances", ["id", "metric", "n_options"], instances)
            store.insert_rows(
                "decisions",
                ["id", "run_id", "instance_id", "test_case", "model", "status", "score"],
                [(f"d{i}", "r1", *row) for i, row in enumerate(decisions)],
            )
        table = cells.with_uniform_null(store, cells.heatmap_summary(store), run_id="r1")
    nulls = {(r.bias, r.model): r.null for r in table.itertuples()}
    assert nulls[("asym", "m1")] == pytest.approx((1 / 9 + 0) / 2)  # a1 and a2, each once
    assert nulls[("asym", "m2")] == pytest.approx(1 / 9)
    assert np.isnan(nulls[("published", "m1")])  # no metric parameters: unknown, not 0
    assert np.isnan(nulls[("broken", "m1")])
    assert len(table) == 4 and table["mean"].notna().any()


def test_runs_behind_a_heatmap_skip_other_pages_and_unreadable_specs(tmp_path) -> None:
    """The runs a heatmap names as probability-scored: those of the chosen source, never a
    token-bias run (the Token bias page reads it), and a run whose stored spec is not JSON is
    passed over, not a traceback."""
    from cogbias.datasets import tokenbias_study

    with Store(tmp_path / "x.db") as store:
        tokenbias_study.materialise(store)
        store.create_run("r-prob", {"models": ["random"], "scoring": "probabilities"}, 1)
        store.create_run("r-broken", {"models": ["random"]}, 1)
        store.db.execute("update runs set spec = 'not json' where id = 'r-broken'")
        store.create_run("r-data", {"models": ["random"], "dataset": "mine"}, 1)
        store.create_run("r-tokens", {"models": ["random"], "dataset": "tokenbias"}, 1)
        runs, datasets = kinds.records(store), store.datasets()
        assert {r.id for r in explore.runs_behind(runs, datasets)} == {"r-prob", "r-data"}
        assert [r.id for r in explore.runs_behind(runs, datasets, dataset="mine")] == ["r-data"]
        picked = explore.runs_behind(runs, datasets, run_id="r-prob")
        assert [r.id for r in picked] == ["r-prob"]
