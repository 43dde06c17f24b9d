import itertools
import random

import pytest

from cogbias.core.metrics import (
    MetricParams,
    bias_score,
    hub_score,
    mean,
    mean_abs,
    option_order,
    score_pair,
    should_reverse,
    simplified_score,
    to_original,
)


def test_metric_stays_in_range_everywhere():
    for n in (7, 11):
        for a1, a2, y, k in itertools.product(range(n), range(n), range(n), (1, -1)):
            assert -1 <= bias_score(a1, a2, k, y, y) <= 1


def test_equal_answers_score_zero():
    for a, y in itertools.product(range(11), range(11)):
        assert bias_score(a, a, 1, y, y) == 0


def test_sign_conventions_of_k():
    assert bias_score(6, 0, k=1) == 1
    assert bias_score(6, 0, k=-1) == -1
    assert bias_score(0, 6, k=-1) == 1


def test_y_offsets_measure_distance_to_a_reference():
    # anchor at option 8: a treatment answer closer to it than the control is positive
    assert bias_score(2, 7, k=1, y1=8, y2=8) == pytest.approx((6 - 1) / 6)
    assert bias_score(7, 2, k=1, y1=8, y2=8) == pytest.approx(-(6 - 1) / 6)


def test_option_flips_map_answers_onto_the_same_axis():
    params = MetricParams(k=1, flip_treatment=True)
    # treatment listed its options in reverse: its option 6 means the same as control's 0
    assert score_pair(0, 6, params, 7) == 0
    assert score_pair(6, 6, params, 7) == 1
    assert score_pair(6, 6, MetricParams(k=1, flip_control=True), 7) == -1


def test_paper_figure_4_examples():
    # sigma_1 = {1..7}, y1 = y2 = 0: the simplified form (2) equals (1)
    for a1, a2 in itertools.product(range(1, 8), repeat=2):
        for k in (1, -1):
            assert simplified_score(a1, a2, k) == pytest.approx(bias_score(a1, a2, k, 0, 0))
    assert simplified_score(7, 1, 1) == pytest.approx(6 / 7)
    assert simplified_score(1, 7, 1) == pytest.approx(-6 / 7)
    assert simplified_score(4, 4, 1) == 0
    assert simplified_score(7, 1, -1) == pytest.approx(-6 / 7)


def test_hub_formula_agrees_with_equation_1():
    for a1, a2, x in itertools.product(range(11), range(11), (0, 3)):
        assert hub_score(a1, a2, 1, x, x) == pytest.approx(bias_score(a1, a2, 1, x, x), abs=1e-6)


def test_option_reversal_is_seeded_half_the_time_and_maps_back():
    flips = [should_reverse(f"instance-{i}", 0) for i in range(4000)]
    assert 0.45 < sum(flips) / len(flips) < 0.55
    assert flips == [should_reverse(f"instance-{i}", 0) for i in range(4000)]
    order = option_order(7, True)
    assert order == [6, 5, 4, 3, 2, 1, 0]
    assert to_original(0, order) == 6 and to_original(6, order) == 0


def test_reversal_applied_to_both_halves_leaves_scores_unchanged():
    """A model that picks the same option (by its text) whichever order the options are shown
    in scores the same on a reversed pair as on one shown as written: the presented positions
    differ, and mapping them back to the original order makes the scores agree."""
    rng = random.Random(1)
    params = MetricParams(k=-1, y1=2, y2=2)
    labels = [f"option text {i}" for i in range(7)]
    mapping_mattered = 0
    for _ in range(200):
        wanted = rng.choice(labels), rng.choice(labels)  # the control's and the treatment's
        scores, raw = [], []
        for reverse in (False, True):
            order = option_order(7, reverse)
            shown = [labels[i] for i in order]
            picked = [shown.index(text) for text in wanted]  # the positions the model answers
            raw.append(score_pair(*picked, params, 7))
            scores.append(score_pair(*(to_original(p, order) for p in picked), params, 7))
        assert scores[0] == scores[1]
        mapping_mattered += raw[0] != raw[1]
    assert mapping_mattered > 50  # unmapped, the reversed positions would score otherwise


def test_aggregation():
    assert mean([0.5, -0.5, 1.0]) == pytest.approx(1 / 3)
    assert mean_abs([0.5, -0.5, 1.0]) == pytest.approx(2 / 3)


def test_the_reversal_coin_is_the_same_in_every_process():
    """A resumed run is another process: Python's salted `hash` would flip other coins there.
    Two processes with different PYTHONHASHSEED must choose what this one chooses."""
    import json
    import os
    import subprocess
    import sys

    keys = [(f"instance-{i}", seed) for i in range(64) for seed in (0, 7)]
    code = (
        "import json, sys\n"
        "from cogbias.core.metrics import should_reverse\n"
        "print(json.dumps([should_reverse(*k) for k in json.loads(sys.stdin.read())]))\n"
    )
    here = [should_reverse(*key) for key in keys]
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(keys), capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )  # fmt: skip
        assert json.loads(done.stdout) == here, hash_seed
