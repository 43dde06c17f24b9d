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
from cogbias.core.records import decision_id
from cogbias.library import testcases as library
from cogbias.llm import LLMClient
from cogbias.runs import batch, decide, paired_plan, pipeline, refusals, scorers
from cogbias.runs.prompting import BASELINE
from cogbias.store import Store
from cogbias.views.probability_bars import scored_by_probabilities, scoring_labels

TOY = "first"


async def _first_option(client, instance, model, ask):
    """A toy scorer: both halves choose the first option as written, nobody is asked."""
    order = list(range(instance.n_options))
    control = decide.HalfResult(answer="(the first option)", choice=0)
    treatment = decide.HalfResult(answer="(the first option)", choice=0)
    return decide.decision_row(instance, model, ask, order, control, treatment)


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
    # the pages' radios: every scorer but a sampled spelling of another (consistency:N is
    # offered as choice with a number of samples)
    assert list(scoring_labels()) == [s.spelling for s in scorers.all_scorers() if not s.samples_of]
    assert "consistency:N" in scorers.names() and "consistency:N" not in scoring_labels()


def test_an_unknown_scoring_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown scoring 'nope' \(choose choice or probab"):
        paired_plan.plan(paired_plan.RunSpec(models=["random"], scoring="nope"))
    with pytest.raises(ValueError, match="unknown scoring"):
        scorers.get("nope")
    assert not scored_by_probabilities({"scoring": "nope"})
    assert scored_by_probabilities({"scoring": "probabilities"})


def test_a_scorer_registered_in_process_is_offered_and_scores_a_run(toy, tmp_path, capsys):
    assert TOY in _offered(["run", "pairs"], capsys)
    assert TOY in scoring_labels()
    db = tmp_path / "toy.db"
    argv = ["run", "pairs", "--models", "random", "--biases", "anchoring", "--scenarios", "2"]
    assert main([*argv, "--scoring", TOY, "--db", str(db)]) == 0
    with Store(db) as store:
        (run,) = store.runs()
        spec = json.loads(run["spec"])
        decisions = [p.decision for p in store.pairs(run_id=run["id"])]
    assert run["status"] == "done" and spec["scoring"] == TOY
    assert len(decisions) == 2
    for d in decisions:
        assert d.status == "ok" and d.control_choice == d.treatment_choice == 0
        assert d.control_answer == "(the first option)" and d.score is not None
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
    assert refusals.reading_refusal("extraction", "choice") is None
    said = refusals.reading_refusal("extraction", "probabilities")
    assert said and "samples none: use --scoring choice" in said


def test_every_scorer_takes_the_run_s_settings_as_one_ask(toy):
    """Every registered scorer is `decide_pair(client, instance, model, ask)`: the run's
    settings for a pair travel as one `decide.PairAsk`, and each decision is made of them
    (its id as `records.decision_id` makes it, so stored runs keep their ids)."""
    case = library.get_test_case("anchoring")
    instance = pipeline.generate_offline(case, library.load_scenarios()[0].text)
    ask = decide.PairAsk(run_id="run-s", temperature=0.7, repeat=2, seed=3)
    client = LLMClient(cache=None)  # the random model asks it only for the profile
    for scorer in (*scorers.all_scorers()[:2], scorers.get("consistency:2"), toy):
        decision = pipeline.run_sync(scorer.decide(client, instance, "random", ask))
        assert decision.id == decision_id("run-s", instance.id, "random", 2, 0.7), scorer.name
        assert (decision.run_id, decision.repeat, decision.temperature) == ("run-s", 2, 0.7)
        assert decision.status == "ok", (scorer.name, decision.error)
