"""Scorers are a registry (`cogbias.runs.scorers`): what `--scoring` offers, what the pages'
radios offer, what batches take and what a run asks are read from it, so a scorer
registered in-process is offered by the command and scores a run end to end through the
same functions the command uses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from cogbias.cli.main import main
from cogbias.core.metrics import HALF_REVERSED
from cogbias.core.reading import READ_ANSWER
from cogbias.runs import batch, decide, paired_plan, scorers
from cogbias.runs.prompting import BASELINE
from cogbias.store import Store
from cogbias.views.probability_bars import probability_scored, scoring_labels

TOY = "first"


async def _first_option(
    client,
    instance,
    model,
    run_id="",
    temperature=0.0,
    repeat=0,
    seed=0,
    prompting=BASELINE,
    extractor=None,
    option_order=HALF_REVERSED,
    reading=READ_ANSWER,
):
    """A toy scorer: both halves choose the first option as written, nobody is asked."""
    order = list(range(instance.n_options))
    control = decide.HalfResult(answer="(the first option)", choice=0)
    treatment = decide.HalfResult(answer="(the first option)", choice=0)
    return decide.decision_row(
        instance, model, run_id, temperature, repeat, order, control, treatment, prompting
    )


def _baseline_only(models, api_base, prompting, option_counts):
    if prompting != BASELINE:
        return f"--scoring {TOY} asks nobody, so the prompting method '{prompting}' is moot"
    return None


@pytest.fixture
def toy() -> Iterator[scorers.Scorer]:
    scorer = scorers.register(
        scorers.Scorer(
            name=TOY,
            needs=scorers.SAMPLED_TEXT,
            label="Always the first option (a toy)",
            help="always the first option (a toy)",
            decide_pair=_first_option,
            refusal=_baseline_only,
        )
    )
    yield scorer
    scorers.unregister(TOY)


def _offered(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, ...]:
    """The `--scoring` choices that `cogbias ARGV --help` shows."""
    with pytest.raises(SystemExit) as shown:
        main([*argv, "--help"])
    assert shown.value.code == 0
    found = re.search(r"--scoring \{([^}]*)\}", capsys.readouterr().out)
    assert found, "no --scoring choices in the help"
    return tuple(found.group(1).split(","))


def test_the_command_offers_the_registry_s_scorers(capsys):
    assert scorers.names()[0] == scorers.DEFAULT == "choice"  # stored values are unchanged
    assert set(scorers.names()) >= {"choice", "probabilities"}
    for argv in (["run", "pairs"], ["run", "dataset"], ["pair"]):
        assert _offered(argv, capsys) == scorers.names()
    assert list(scoring_labels()) == list(scorers.names())  # the pages' radios


def test_an_unknown_scoring_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown scoring 'nope' \(choose choice or probab"):
        paired_plan.plan(paired_plan.RunSpec(models=["random"], scoring="nope"))
    with pytest.raises(ValueError, match="unknown scoring"):
        scorers.get("nope")
    assert not probability_scored({"spec": json.dumps({"scoring": "nope"})})
    assert probability_scored({"spec": json.dumps({"scoring": "probabilities"})})


def test_a_scorer_registered_in_process_is_offered_and_scores_a_run(toy, tmp_path, capsys):
    assert TOY in _offered(["run", "pairs"], capsys)
    assert TOY in scoring_labels()
    db = tmp_path / "toy.db"
    argv = ["run", "pairs", "--models", "random", "--biases", "anchoring", "--scenarios", "2"]
    assert main([*argv, "--scoring", TOY, "--db", str(db)]) == 0
    with Store(db) as store:
        (run,) = store.runs()
        spec = json.loads(run["spec"])
        decisions = store.pairs(run_id=run["id"])
    assert run["status"] == "done" and spec["scoring"] == TOY
    assert len(decisions) == 2
    for row in decisions:
        assert row["status"] == "ok" and row["control_choice"] == row["treatment_choice"] == 0
        assert row["control_answer"] == "(the first option)" and row["score"] is not None
    # the default scorer is left out of the stored spec, so runs made before keep their ids
    assert "scoring" not in paired_plan.RunSpec(models=["random"]).canonical()


def test_a_scorer_s_refusal_reaches_the_command_by_name(toy, tmp_path, capsys):
    argv = ["run", "pairs", "--models", "random", "--biases", "anchoring"]
    code = main([*argv, "--scoring", TOY, "--prompting", "zs_cot", "--db", str(tmp_path / "r.db")])
    assert code != 0
    assert f"--scoring {TOY} asks nobody" in capsys.readouterr().err


def test_batches_take_only_batchable_scorers_by_name(toy, tmp_path):
    with Store(tmp_path / "b.db") as store:
        for name in (TOY, "probabilities"):
            planned = paired_plan.plan(
                paired_plan.RunSpec(models=["random"], biases=["anchoring"], scoring=name), store
            )
            with pytest.raises(
                ValueError, match=f"batches take --scoring choice or consistency:N only, not {name}"
            ):
                batch.pending_requests(planned, store)


def test_reading_by_extraction_needs_a_scorer_that_reads_answers():
    assert paired_plan.reading_refusal("extraction", "choice") is None
    said = paired_plan.reading_refusal("extraction", "probabilities")
    assert said and "samples none: use --scoring choice" in said
