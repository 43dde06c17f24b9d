"""The seed papers' own models on the app's pages, driven with Streamlit's AppTest: browsed on
Datasets with nothing imported, and beside a real study run (Studies) and a real token-bias
run (Token bias), both answered offline by the random baseline."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from cogbias.datasets import tokenbias_study
from cogbias.runs import executor, paired_plan
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from tests.study_helpers import study_run

PAGES = Path(__file__).resolve().parent.parent / "app_pages"
HEADING = "The paper's models, the paper's wording"


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / name), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def frame_with(at: AppTest, column: str):
    frames = [f.value for f in at.dataframe if column in f.value.columns]
    assert len(frames) == 1, [list(f.value.columns) for f in at.dataframe]
    return frames[0]


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_datasets_page_browses_table_3_and_appendix_d_with_nothing_imported(app_db: Path) -> None:
    at = page("datasets.py")
    assert "Reference results" in [t.label for t in at.tabs]
    assert at.selectbox(key="pm_result").value == "biasbuster-table3"
    table = frame_with(at, "framing Δ").set_index(["model", "mitigation"])
    assert len(table) == 20
    assert table.loc[("GPT-4", "no mitigation"), "framing Δ"] == "-0.405"  # baseline in words
    assert table.loc[("GPT-3.5-turbo", "contrastive"), "group Δ"] == "0.005*"
    assert "Source: Echterhoff, J., Liu, Y., Alessa, A., McAuley, J., & He, Z. (2024)" in (
        captions(at).replace("\\", "")
    )
    assert "Table 3, Section 5.1" in captions(at)
    assert len(at.get("vega_lite_chart")) == 1
    with Store(app_db) as store:
        assert store.datasets() == []  # browsing imported nothing

    at.selectbox(key="pm_result").set_value("tokenbias-appendix-d").run()
    at.selectbox(key="pm_table").set_value("8").run()
    assert not at.exception, at.exception
    rows = frame_with(at, "table")
    assert len(rows) == 36 and set(rows["table"]) == {8}
    assert "A Peek into Token Bias" in captions(at)


def test_a_biasbuster_run_shows_the_papers_models_beside_its_own(app_db: Path) -> None:
    spec = StudySpec(
        "biasbuster", ["random"], tests=["framing", "anchoring"], mitigations=["none"], repeats=2
    )
    study_run(app_db, spec)
    at = page("studies.py")
    assert HEADING in [s.value for s in at.subheader]
    beside = frame_with(at, "source")
    assert set(beside["source"]) == {"the paper", "your run"}
    ours = beside[beside["source"] == "your run"]
    assert list(ours["model"]) == ["random"] and list(ours["mitigation"]) == ["no mitigation"]
    assert ours["framing Δ"].iloc[0] != "–" and ours["group Δ"].iloc[0] == "–"  # not asked
    assert "same design in its own words" in captions(at)


def test_a_token_bias_run_shows_appendix_d_for_its_hypotheses(app_db: Path) -> None:
    with Store(app_db) as store:
        tokenbias_study.materialise(store)
        spec = paired_plan.RunSpec(models=["random"], dataset="tokenbias")
        executor.execute(paired_plan.plan(spec, store), store)
    at = page("tokenbias.py")
    assert HEADING in [s.value for s in at.subheader]
    rows = frame_with(at, "table")
    # the built-in study's tb_h1 … tb_h6: Tables 2-6 and 8 (H5b is the import's alone)
    assert sorted(set(rows["table"])) == [2, 3, 4, 5, 6, 8]
    assert len(at.get("vega_lite_chart")) == 3
