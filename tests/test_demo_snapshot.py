"""The committed demo snapshot teaches the right lesson: the random baseline shows no bias."""

from __future__ import annotations

import json

import pytest

from cogbias.library import testcases as library
from cogbias.store import demo
from cogbias.studies import analysis

SNAPSHOT = demo.read_snapshot(demo.SNAPSHOT) if demo.SNAPSHOT.is_file() else {}
MODELS = ("random", "local/smollm2")


def _summary():
    rows = [
        {"bias": d["test_case"], "model": d["model"], "status": d["status"], "score": d["score"]}
        for d in SNAPSHOT["decisions"]
    ]
    return analysis.summarize(analysis.scores_frame(rows))


@pytest.fixture(scope="module")
def summary():
    assert SNAPSHOT, "run scripts/make-demo to create data/demo/snapshot.json.gz"
    return _summary()


# Both models answer all 30 biases on the first 20 scenarios (`./scripts/make-demo`).
SCENARIOS = {"random": 20, "local/smollm2": 20}


def test_every_bias_has_the_scenarios_of_the_demo_for_both_models():
    assert SNAPSHOT, "run scripts/make-demo to create data/demo/snapshot.json.gz"
    biases = set(library.load_library(include_user=False))
    scenarios: dict[tuple[str, str], set[int]] = {}
    instances = {i["id"]: i for i in SNAPSHOT["instances"]}
    for d in SNAPSHOT["decisions"]:
        scenario = instances[d["instance_id"]]["scenario_id"]
        scenarios.setdefault((d["test_case"], d["model"]), set()).add(scenario)
    for bias in biases:
        for model in MODELS:
            assert len(scenarios.get((bias, model), ())) >= SCENARIOS[model], (bias, model)


def test_no_cell_of_the_random_column_is_significant_after_bh(summary):
    random_rows = summary[summary["model"] == "random"]
    assert len(random_rows) == 30
    assert (random_rows["n"] >= 20).all()
    significant = random_rows[random_rows["significant"]]
    assert significant.empty, significant[["bias", "mean", "p_value", "p_adjusted"]]


def test_the_demo_instances_come_from_the_offline_examples_and_read_cleanly():
    assert SNAPSHOT
    for instance in SNAPSHOT["instances"]:
        assert instance["generator"] == "examples"
        for half in ("control", "treatment"):
            text = json.dumps(json.loads(instance[half]), ensure_ascii=False)
            for leak in ("[[", "]]", "{{", "a/an", "a regional grocery chain"):
                assert leak not in text, (instance["test_case"], half, leak)


def test_the_demo_was_made_from_the_current_library():
    """A changed built-in test case needs `./scripts/make-demo`: the demo shows its design."""
    assert SNAPSHOT
    current = {c.id: c.content_hash for c in library.load_library(include_user=False).values()}
    stale = {
        i["test_case"]
        for i in SNAPSHOT["instances"]
        if current.get(i["test_case"]) != i["test_case_hash"]
    }
    assert not stale, f"the demo shows older versions of {sorted(stale)}: run ./scripts/make-demo"
