"""What the Studies page shows, shaped from a real study run of the random model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cogbias.runs import study_results
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.views import charts_studies, study_views
from tests.study_helpers import study_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("views") / "study.db"
    spec = StudySpec(
        "biasbuster",
        ["random"],
        tests=["framing", "anchoring"],
        temperatures=[1.0, 0.2],
        mitigations=["selfhelp", "none"],
        repeats=1,
    )
    return db, study_run(db, spec)


def test_heatmap_rows_carry_the_other_varying_dimension(run: tuple[Path, str]) -> None:
    db, run_id = run
    with Store(db) as store:
        table = study_results.results(store, run_id)
    frame = charts_studies.heatmap_frame(table, "mitigation")
    assert list(dict.fromkeys(frame["row"])) == [
        "framing · 0.2",
        "framing · 1",
        "anchoring · 0.2",
        "anchoring · 1",
    ]  # in the study's test order, then as `results` orders the cells
    assert charts_studies.column_order(table, "mitigation") == ["no mitigation", "selfhelp"]
    assert charts_studies.column_order(table, "temperature") == ["0.2", "1"]
    by_temperature = charts_studies.heatmap_frame(table, "temperature")
    assert set(by_temperature["row"]) == {
        "framing · no mitigation",
        "framing · selfhelp",
        "anchoring · no mitigation",
        "anchoring · selfhelp",
    }
    cell = by_temperature.set_index(["row", "column"]).loc[("framing · no mitigation", "0.2")]
    expected = table.query("test == 'framing' and mitigation == 'none' and temperature == 0.2")
    assert cell["value"] == pytest.approx(float(expected["value"].iloc[0]))


def test_chat_alternates_prompt_and_answer_in_turn_order(run: tuple[Path, str]) -> None:
    db, run_id = run
    with Store(db) as store:
        turns = study_results.conversations(store, run_id, "anchoring")
        study = study_results.study_of_run(store, run_id)
    index = study_views.conversation_index(turns)
    assert len(index) == 2 * 2 * 6  # temperatures × mitigations × orders
    revising = index[index["mitigation"] == "selfhelp"].iloc[0]
    messages = study_views.chat(turns, revising["conversation"], study)
    assert [m.speaker for m in messages] == ["user", "assistant"] * 7
    assert [m.turn for m in messages] == [t for t in range(7) for _ in range(2)]
    assert [m.revise for m in messages[-2:]] == [True, True] and not messages[0].revise
    rows = turns[turns["conversation"] == revising["conversation"]].sort_values("turn")
    assert [m.text for m in messages[1::2]] == list(rows["response"])
    assert all(m.note in ("read as: admit", "read as: reject") for m in messages[1:12:2])
