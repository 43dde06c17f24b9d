"""The probability scoring where a person looks: Learn's choice and bars, Explore's pair view
and heatmap caption, the Run page's choice (AppTest, pages run through app.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogbias.library import testcases as library
from cogbias.llm import LLMClient
from cogbias.runs import paired_plan, pipeline, probabilities
from cogbias.runs.decide import PairAsk
from cogbias.store import Store
from tests.test_app_pages import assert_clean, open_page, shown_text, texts


def _probability_run(path: Path, bias: str = "framing_effect", instances: int = 3) -> str:
    """A finished `--scoring probabilities` run of the random baseline (uniform halves)."""
    spec = paired_plan.RunSpec(
        models=["random"], biases=[bias], instances=instances, scoring="probabilities"
    )
    case = library.get_test_case(bias)
    scenario = library.load_scenarios()[0]
    client = LLMClient(cache=None)  # the random model asks it only for the profile
    with Store(path) as store:
        store.create_run(spec.run_id, spec.canonical(), instances, name="probabilities")
        store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
        made = [pipeline.generate_offline(case, scenario.text, index=i) for i in range(instances)]
        rows = [
            pipeline.run_sync(
                probabilities.decide_pair(client, inst, "random", PairAsk(run_id=spec.run_id))
            )
            for inst in made
        ]
        with store.atomic():
            store.save_instances([inst.to_row() for inst in made])
            store.save_decisions(rows)
            store.refresh_run_counts(spec.run_id)
            store.update_run(spec.run_id, status="done")
    return spec.run_id


def test_explore_says_a_run_is_probability_scored_and_shows_both_halves_bars(app_db: Path) -> None:
    run_id = _probability_run(app_db)
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run_id}").run()
    assert "scored by option probabilities" in texts(at)
    at.selectbox(key="explore_bias").set_value("framing_effect")
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    n = library.get_test_case("framing_effect").n_options
    bars = at.get("progress")
    assert len(bars) == 3 * 2 * n  # every pair, both halves, every option
    assert all(round(b.proto.value) == round(100 / n) for b in bars)
    assert "Option probabilities" in texts(at)


def test_learn_offers_the_scoring_and_shows_the_random_baselines_uniform_bars(app_db: Path) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("framing_effect")
    at.selectbox(key="learn_model").set_value("random").run()
    assert at.radio(key="learn_scoring").value == "choice"  # what the random baseline gets
    at.radio(key="learn_scoring").set_value("probabilities").run()
    at.button(key="learn_run").click().run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    n = library.get_test_case("framing_effect").n_options
    assert len(at.get("progress")) == 2 * n
    assert "in the control" in shown_text(at) and "expected score" in shown_text(at)


def test_the_run_page_offers_the_scoring_and_plans_no_extraction_with_probabilities(
    app_db: Path,
) -> None:
    at = open_page("run")
    assert at.radio(key="run_scoring").value == "choice"
    at.multiselect(key="run_biases").set_value(["framing_effect"])
    at.multiselect(key="run_models").set_value(["local/smollm2"]).run()
    assert at.radio(key="run_scoring").value == "probabilities"  # what the local model gives
    at.radio(key="run_scoring").set_value("choice").run()
    assert "to extract the chosen option" in texts(at) and " 0 to extract" not in texts(at)
    at.radio(key="run_scoring").set_value("probabilities").run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert " 0 to extract the chosen option" in texts(at)


def test_the_random_baselines_exact_null_is_exactly_zero_and_not_significant(app_db: Path) -> None:
    from cogbias.studies import cells

    run_id = _probability_run(app_db, instances=25)
    with Store(app_db) as store:
        table = cells.heatmap_summary(store, run_id=run_id)
        scores = {p.decision.score for p in store.pairs(run_id=run_id, limit=100)}
    assert scores == {0.0}  # framing_effect's metric is symmetric: its null is 0
    assert not table["significant"].any(), table


ASYMMETRIC = "asymmetric_framing"


def _asymmetric_case() -> None:
    """A user test case (in COGBIAS_HOME) like framing_effect whose reference points differ
    (y1 = 0, y2 = 1), so its exact null under uniform answers is not 0."""
    text = (library.BUILTIN_DIR / "framing_effect.toml").read_text(encoding="utf-8")
    text = text.replace('id = "framing_effect"', f'id = "{ASYMMETRIC}"', 1)
    text = text.replace('name = "Framing Effect"', 'name = "Asymmetric Framing"', 1)
    assert "y2 = 0\n" in text
    text = text.replace("y2 = 0\n", "y2 = 1\n", 1)
    library.user_dir().mkdir(parents=True, exist_ok=True)
    (library.user_dir() / f"{ASYMMETRIC}.toml").write_text(text, encoding="utf-8")


def test_explore_shows_each_cells_exact_null_beside_its_mean(app_db: Path) -> None:
    from cogbias.core.metrics import MetricParams
    from cogbias.studies import cells

    _asymmetric_case()
    run_id = _probability_run(app_db, bias=ASYMMETRIC, instances=4)
    n = library.get_test_case(ASYMMETRIC).n_options
    null = cells.uniform_null(MetricParams(k=-1, y1=0, y2=1), n)  # framing's k
    assert abs(null) > 0.01
    with Store(app_db) as store:
        scores = [p.decision.score for p in store.pairs(run_id=run_id, limit=100)]
    assert scores == [pytest.approx(null)] * 4  # the random baseline scores exactly its null
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run_id}").run()
    assert "null (uniform answers)" in texts(at) and "tested against 0" in texts(at)
    (frame,) = [d.value for d in at.dataframe]
    # the numbers table shows text, as a reader takes it (three decimals, issue 21 point 8)
    assert frame["null (uniform answers)"].tolist() == [f"{null:+.3f}"]
    at.selectbox(key="explore_bias").set_value(ASYMMETRIC)
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    assert f"null (uniform answers) {null:+.3f}" in texts(at)


def test_all_results_say_which_runs_are_probability_scored_and_the_pair_table_what_it_means(
    app_db: Path,
) -> None:
    """ "All results" mixes runs: the demo is probability-scored, and a teacher showing it on
    the default source was not told so (only a picked run's heatmap said it)."""
    from cogbias.runs import executor

    scored = _probability_run(app_db)
    at = open_page("explore")
    assert "This run is scored by option probabilities" in texts(at)  # all results: one run
    at.selectbox(key="explore_bias").set_value("framing_effect")
    at.selectbox(key="explore_model").set_value("random").run()
    assert "the chosen option is the one the model sampled" in texts(at)
    with Store(app_db) as store:
        plain = paired_plan.RunSpec(models=["random"], biases=["anchoring"], instances=2)
        executor.execute(paired_plan.plan(plain, store), store)
    at = open_page("explore")
    assert f"1 of the 2 runs shown are scored by option probabilities ({scored})" in texts(at)
    assert "The others' scores are read from sampled answers" in texts(at)
    at.selectbox(key="explore_bias").set_value("anchoring")
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    assert "the chosen option is the one the model sampled" not in texts(at)
    assert "numbered in the test case's own order" in texts(at)
