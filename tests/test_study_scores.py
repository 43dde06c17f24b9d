"""Scoring study tests from parsed answers, end to end through read_answer."""

import pytest

from cogbias.core.answers import permuted_orders
from cogbias.studies.effects import cohens_d
from cogbias.studies.questions import option_list, read_answer
from cogbias.studies.scores import score_conditions, score_options, score_sequence
from cogbias.studies.study_catalog import get_study


def read(test, texts):
    return [read_answer(test, t).value for t in texts]


def test_cohens_d_on_letters_codes_the_target_as_one():
    test = get_study("mohr8").tests["loss_aversion"]  # target b (the gamble)
    control = read(test, ["A"] * 7 + ["B"] * 3)
    treatment = read(test, ["B"] * 8 + ["a"] * 2)
    result = score_conditions(test, {"control": control, "treatment": treatment})
    expected = cohens_d([0] * 7 + [1] * 3, [1] * 8 + [0] * 2)
    assert result["d"] == pytest.approx(expected) and result["d"] > 0
    assert result["capped"] == 1.0 and (result["n_control"], result["n_treatment"]) == (10, 10)


def test_undirected_framing_takes_the_absolute_value():
    test = get_study("mohr8").tests["framing"]  # target a (yes), undirected
    result = score_conditions(
        test,
        {"control": read(test, ["A"] * 2 + ["B"] * 8), "treatment": read(test, ["A"] * 9 + ["B"])},
    )
    assert result["d"] > 0
    swapped = score_conditions(
        test,
        {"control": read(test, ["A"] * 9 + ["B"]), "treatment": read(test, ["A"] * 2 + ["B"] * 8)},
    )
    assert swapped["d"] == pytest.approx(-result["d"])
    assert swapped["bias_detected"] == pytest.approx(result["d"])


def test_numbers_and_missing_answers():
    test = get_study("mohr8").tests["anchoring"]
    result = score_conditions(
        test,
        {"control": read(test, ["20", "25", "30"]), "treatment": read(test, ["40", "45", "50"])},
    )
    assert result["d"] == pytest.approx(20 / 5)
    with pytest.raises(ValueError, match="no valid answers for condition 'treatment'"):
        score_conditions(test, {"control": [1.0], "treatment": []})


def test_framing_rates_from_admit_reject_answers():
    test = get_study("biasbuster").tests["framing"]
    admit = read(test, ["Admit"] * 3 + ["reject"] * 5)
    reject = read(test, ["admit."] * 6 + ["Reject"] * 2)
    result = score_conditions(test, {"admit": admit, "reject": reject})
    assert result["a"] == 3 / 8 and result["b"] == 6 / 8
    assert result["delta"] == pytest.approx(-0.375) and not result["degenerate"]


def test_status_quo_and_primacy_from_letters():
    bb = get_study("biasbuster")
    test = bb.tests["status_quo"]
    condition = test.conditions[0]
    items = ["p", "q", "r", "s"]
    chosen, positions = [], []
    for order in permuted_orders(4):
        _, at = option_list(test, condition, items, order)
        positions.append(at)
        chosen.append(read_answer(test, "a) because").value)  # always the first letter
    result = score_options(test, chosen, positions)
    assert result["share"] == 0.25 and result["excess"] == 0  # position 0 holds the SQ once
    primacy = score_options(bb.tests["primacy"], chosen)
    assert primacy["early"] == 1.0 and primacy["late"] == 0.0
    assert primacy["distribution"] == [1.0, 0, 0, 0]
    with pytest.raises(ValueError, match="status-quo position"):
        score_options(test, chosen)


def test_sequence_distance_and_change_rate():
    test = get_study("biasbuster").tests["anchoring"]
    decisions = {"s1": read(test, ["admit", "admit"]), "s2": read(test, ["reject", "reject"])}
    result = score_sequence(test, decisions, revised=([True, False], [False, False]))
    assert result["distance"] == pytest.approx(0.5)
    assert result["admit_rate"] == 0.5 and result["change_rate"] == 0.5
    assert not result["degenerate"]


def test_study_cells_are_readable_rates_ci_p_value_runs_kept_apart_colour_direction(tmp_path):
    """Issue 19, point 16: per-condition rates, CIs or p-values, the degenerate flag; two runs
    pivot as two rows each (no silent de-duplication); red means more biased everywhere."""
    import json
    import math

    import pandas as pd

    from cogbias.runs import study_results
    from cogbias.runs.study_plan import StudySpec
    from cogbias.store import Store
    from cogbias.studies import study_tables
    from cogbias.views.charts_studies import heatmap_frame
    from tests.study_helpers import study_run

    db = tmp_path / "s.db"
    spec = dict(study="biasbuster", models=["random"], tests=["framing", "anchoring"], repeats=4)
    runs = [study_run(db, StudySpec(**spec, seed=seed)) for seed in (1, 2)]
    with Store(db) as store:
        tables = [study_results.results(store, run) for run in runs]
    table = pd.concat(tables, ignore_index=True)
    framing = tables[0].set_index("test").loc["framing"]
    details = json.loads(framing["details"])
    assert (framing["a"], framing["b"]) == (details["a"], details["b"])
    assert framing["value"] == pytest.approx(framing["a"] - framing["b"])
    assert framing["ci_low"] <= framing["value"] <= framing["ci_high"]
    assert 0 <= framing["p_value"] <= 1 and framing["degenerate"] in (True, False)
    anchoring = tables[0].set_index("test").loc["anchoring"]
    assert 0 <= anchoring["a"] <= 1 and math.isnan(anchoring["b"])  # the admission rate
    wide = study_tables.pivot(table, "mitigation")
    assert "run_id" in wide.index.names and len(wide) == 4  # 2 tests × 2 runs
    frame = heatmap_frame(table, "mitigation")
    assert len(frame) == 4
    cells = frame.set_index("metric")
    assert (
        cells.loc["anchoring_distance", "colour"] == -cells.loc["anchoring_distance", "value"]
    ).all()
    assert (
        cells.loc["framing_difference", "colour"] == cells.loc["framing_difference", "value"]
    ).all()
