"""The Token bias page, driven with Streamlit's AppTest against a real database file."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from cogbias.core.records import decode_filled
from cogbias.datasets import tokenbias_study
from cogbias.runs import executor, paired_plan
from cogbias.store import Store

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "tokenbias.py")


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_empty_database_offers_the_study_then_shows_tables_charts_and_pairs(app_db):
    at = page()
    assert any("No token-bias study" in i.value for i in at.info)
    assert at.expander[0].proto.expanded  # the one thing to do here is in view
    at.button(key="tb_materialise").click().run()
    assert not at.exception, at.exception
    with Store(app_db) as store:  # the baseline runs in a worker process, as every run does
        [run] = store.runs()
        assert store.wait_for(run["id"], timeout=120)["status"] == "done"
    at.run()
    assert not at.exception, at.exception
    frame = at.dataframe[0].value
    assert len(frame) == 6 and set(frame["model"]) == {"random"}
    assert list(frame.columns[:6]) == ["hypothesis", "model", "prompting", "n", "n12", "n21"]
    assert len(at.get("vega_lite_chart")) == 3  # bars, heatmap, the paper's Appendix D
    # P and P' side by side, texts as plain text exactly as stored
    with Store(app_db) as store:
        first = store.pairs(bias=frame["hypothesis"].min(), model="random", dataset="tokenbias")[0]
    p = decode_filled(first.control_half)
    shown = [t.value for t in at.text]
    assert any(p.situation in t for t in shown)


def test_hostile_text_is_shown_as_text_not_markup(app_db):
    with Store(app_db) as store:
        tokenbias_study.materialise(store)
        executor.execute(
            paired_plan.plan(paired_plan.RunSpec(models=["random"], dataset="tokenbias"), store),
            store,
        )
        store.db.execute(
            "update decisions set control_answer = ? where rowid = 1",
            ("<script>alert(1)</script> **bold**",),
        )
        store.db.conn.commit()
        hypothesis = store.query("select test_case from decisions where rowid = 1")[0]["test_case"]
    at = page()
    at.selectbox(key="tb_hyp").set_value(hypothesis).run()
    assert "<script>alert(1)</script> **bold**" in [t.value for t in at.text]
    assert all("<script>" not in m.value for m in at.markdown)
