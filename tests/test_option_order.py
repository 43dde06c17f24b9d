"""How a run orders each pair's options: token-bias items as written unless told otherwise.

Issue 28: the token-bias paper asked its released items as written, so a token-bias dataset's
runs show the options as the items write them; reversing them in a seeded half of the pairs
(what every run did before) is a choice, `--option-order half_reversed`. Library and other
dataset runs keep the reversal and their ids; a run stored before the choice existed was
planned half reversed and is resumed so: no run mixes orders.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cogbias.cli.main import main
from cogbias.core import metrics
from cogbias.datasets import import_peek
from cogbias.runs import kinds, paired_plan
from cogbias.store import Store
from cogbias.studies import tokenbias
from tests.dataset_helpers import TOKENBIAS_DIR


def _decisions(store: Store, run_id: str) -> list[dict]:
    return store.query(
        "select instance_id, reversed, control_order from decisions where run_id = ?", (run_id,)
    )


def _run_ids(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [w for w in capsys.readouterr().out.split() if w.startswith("run-")]


def test_a_token_bias_dataset_is_asked_as_written_by_default_under_a_new_id(tmp_path: Path):
    with Store(tmp_path / "r.db") as store:
        import_peek(store, [TOKENBIAS_DIR])
        unplanned = paired_plan.RunSpec(models=["random"], dataset="peek2024")
        planned = paired_plan.plan(unplanned, store)
        assert planned.spec.option_order == metrics.AS_WRITTEN
        assert planned.spec.canonical()["option_order"] == metrics.AS_WRITTEN
        assert "(options as written)" in planned.describe()
        # the id the run is stored under is not the one earlier runs of these arguments had:
        # those reversed half their pairs, and keep that id
        reversing = paired_plan.RunSpec(
            models=["random"], dataset="peek2024", option_order=metrics.HALF_REVERSED
        )
        assert planned.spec.run_id != unplanned.run_id == reversing.run_id
        assert "option_order" not in reversing.canonical()


def test_other_runs_keep_the_reversal_and_their_pinned_ids():
    # the first golden spec of tests/test_golden_ids.py, planned: the same id
    library = paired_plan.RunSpec(
        models=["random", "local/smollm2"],
        biases=["anchoring", "framing_effect"],
        scenarios=3,
        instances=2,
        generator="examples",
    )
    planned = paired_plan.plan(library)
    assert planned.spec.option_order == metrics.HALF_REVERSED
    assert planned.spec.run_id == "run-066ddf665a36"
    assert "(options reversed in a seeded half of the pairs)" in planned.describe()
    # asking a library run as written is a new run
    written = paired_plan.plan(
        paired_plan.RunSpec(**{**library.__dict__, "option_order": metrics.AS_WRITTEN})
    )
    assert written.spec.run_id != planned.spec.run_id
    # the token-bias study reversed by choice is the run an earlier cogbias stored as its default
    study = paired_plan.RunSpec(
        models=["random"], dataset="tokenbias", generator="examples", option_order="half_reversed"
    )
    assert study.run_id == "run-cb6c807ce0e3"


def test_runs_show_the_order_they_chose_and_a_resumed_reversed_run_keeps_its_own(
    tmp_path: Path, capsys
):
    db = str(tmp_path / "r.db")
    assert main(["import", "peek2024", str(TOKENBIAS_DIR), "--db", db]) == 0
    with Store(db) as store:
        ids = [r["id"] for r in store.query("select id from instances")]
    # a seed whose coin flips reverse some of the fixture's three pairs and not others
    seed = next(s for s in range(64) if len({metrics.should_reverse(i, s) for i in ids}) == 2)
    base = ["run", "dataset", "peek2024", "--models", "random", "--repeats", "8", "--db", db]
    base += ["--seed", str(seed)]
    assert main([*base, "--plan-only"]) == 0
    assert main([*base, "--option-order", "half_reversed", "--plan-only"]) == 0
    written, reversing = _run_ids(capsys)
    assert written != reversing
    with Store(db) as store:
        # stored as an earlier cogbias stored every run: no option order in its spec
        assert "option_order" not in json.loads(store.run(reversing)["spec"])
        assert json.loads(store.run(written)["spec"])["option_order"] == "as_written"
        replanned = kinds.replan(store, reversing)
        assert (replanned.option_order, replanned.spec.run_id) == ("half_reversed", reversing)
    for run_id in (written, reversing):
        assert main(["resume", run_id, "--db", db]) == 0
    with Store(db) as store:
        shown_as_written = _decisions(store, written)
        shown_half_reversed = _decisions(store, reversing)
    assert len(shown_as_written) == len(shown_half_reversed) == 3 * 8
    assert all(row["reversed"] == 0 for row in shown_as_written)
    for row in shown_half_reversed:  # the seeded half: the same pairs on every resume
        assert row["reversed"] == metrics.should_reverse(row["instance_id"], seed)
    assert {row["reversed"] for row in shown_half_reversed} == {0, 1}


def test_an_unknown_option_order_is_refused_by_name(tmp_path: Path, capsys):
    db = str(tmp_path / "r.db")
    args = ["run", "pairs", "--models", "random", "--option-order", "sideways", "--db", db]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert "--option-order: invalid choice: 'sideways'" in capsys.readouterr().err
    spec = paired_plan.RunSpec(models=["random"], option_order="sideways")
    with pytest.raises(ValueError, match="unknown option order 'sideways': use as_written or"):
        paired_plan.plan(spec)


def test_prompting_runs_pair_an_items_answers_only_when_they_saw_the_same_order():
    """H2 and H6 pair two runs' answers to one item: a run that reversed the options and one
    that did not saw different texts, so those answers do not pair."""
    rows = [
        ("i1", "one_shot", False, True),
        ("i1", "one_shot@Bob", False, False),
        ("i2", "one_shot", False, True),
        ("i2", "one_shot@Bob", True, False),  # shown reversed in the second run only
    ]
    frame = pd.DataFrame(
        [
            {
                "hypothesis": "H1",
                "model": "m",
                "prompting": method,
                "original_correct": correct,
                "perturbed_correct": correct,
                "instance_id": item,
                "repeat": 0,
                "reversed": reverse,
            }
            for item, method, reverse, correct in rows
        ]
    )
    spec = {"H2": {"sources": ["H1"], "methods": [["one_shot", "one_shot@Bob"]]}}
    pairs = tokenbias.prompting_pairs(frame, spec)
    assert len(pairs) == 1  # i1 only
    assert (bool(pairs["original_correct"].iloc[0]), bool(pairs["perturbed_correct"].iloc[0])) == (
        True,
        False,
    )
