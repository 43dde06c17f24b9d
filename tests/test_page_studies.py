"""The Studies page: start a study run, its results pivoted, conversations, self-help pairs.

The runs are real study runs (`executor.execute`): the `random` model answers offline,
and a scripted OpenAI-compatible server on 127.0.0.1 plays a model whose self-help rewrite
differs from the original and whose answers carry Markdown and HTML.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.datasets.mohr_format import import_mohr
from cogbias.llm import settings
from cogbias.runs import executor, study_plan, study_results
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.views import study_views
from tests.app_helpers import make_results_db
from tests.dataset_helpers import MOHR_DIR
from tests.fake_llm_server import FakeLLMServer
from tests.study_helpers import HOSTILE, scripted, study_run
from tests.test_app_pages import assert_clean, chart_specs, open_page, texts


@pytest.fixture
def random_run(app_db: Path) -> str:
    spec = StudySpec(
        "biasbuster",
        ["random"],
        temperatures=[0.2, 1.0],
        mitigations=["none", "awareness", "selfhelp"],
        repeats=2,
    )
    return study_run(app_db, spec)


@pytest.fixture
def scripted_run(app_db: Path) -> str:
    with FakeLLMServer(responder=scripted) as fake:
        spec = StudySpec(
            "biasbuster",
            ["openai/scripted"],
            tests=["framing", "anchoring"],
            mitigations=["selfhelp"],
            repeats=1,
            api_base=fake.base_url,
        )
        return study_run(app_db, spec)


def columns_of(at: AppTest) -> list[list[str]]:
    return [[str(c) for c in frame.value.columns] for frame in at.dataframe]


def pivoted(at: AppTest) -> list[list[str]]:
    """The columns of the pivot table: one per value of the dimension pivoted by (the rows'
    labels before them: test, metric and any other dimension that varies)."""
    labels = {"test", "metric", "temperature", "variant", "mitigation", "model", "run_id"}
    return [[c for c in columns if c not in labels] for columns in columns_of(at)[1:2]]


def test_without_study_runs_the_page_points_at_the_start_form(app_db: Path) -> None:
    at = open_page("studies")
    assert "No study runs yet" in texts(at)
    assert "Start a study run" in texts(at)
    assert at.button(key="study_start")  # the random model is chosen: ready to start


def test_the_plan_is_described_before_starting(app_db: Path) -> None:
    at = open_page("studies")
    at.selectbox(key="study_name").set_value("mohr8")
    at.multiselect(key="study_mitigations").set_value(["none", "awareness"]).run()
    at.number_input(key="study_repeats").set_value(3).run()
    assert_clean(at)
    plan_text = "\n".join(str(t.value) for t in at.text)
    assert "study mohr8:" in plan_text and "× 2 mitigations × 3 repeats" in plan_text
    at.multiselect(key="study_mitigations").set_value(["contrastive"]).run()
    assert_clean(at)
    assert any("cannot be planned" in e.value and "contrastive" in e.value for e in at.error)


def test_models_on_two_endpoints_are_refused_as_on_the_run_page(app_db: Path) -> None:
    # the launch checks the Run page makes (`_launch.refused`): one custom endpoint a run
    settings.add_custom_model("openai/one", "One", "http://127.0.0.1:8/v1")
    settings.add_custom_model("openai/two", "Two", "http://127.0.0.1:9/v1")
    at = open_page("studies")
    at.multiselect(key="study_models").set_value(["openai/one", "openai/two"]).run()
    assert_clean(at)
    (error,) = [e.value for e in at.error]
    assert "different endpoints" in error and "Split them into separate runs" in error
    assert not [b for b in at.button if b.key == "study_start"]
    at.multiselect(key="study_models").set_value(["openai/one"]).run()
    assert not at.error and [b for b in at.button if b.key == "study_start"]


def plan_repeats(at: AppTest) -> int:
    """The repeats the plan on the page names ("… × N repeats; …")."""
    plan_text = "\n".join(str(t.value) for t in at.text)
    (found,) = re.findall(r"× (\d+) repeats;", plan_text)
    return int(found)


def test_the_repeats_box_shows_the_number_the_plan_uses(app_db: Path) -> None:
    """The box starts at the study's repeats (not 0 beside "× 20 repeats"), follows the study
    and the kind of models (the local model alone runs a miniature), and keeps a typed one."""
    at = open_page("studies")
    box = at.number_input(key="study_repeats")
    study = study_plan.load_study("biasbuster")
    assert box.value == study.repeats == plan_repeats(at) == 20
    at.selectbox(key="study_name").set_value("mohr8").run()
    assert_clean(at)
    assert at.number_input(key="study_repeats").value == plan_repeats(at) == 100
    at.multiselect(key="study_models").set_value(["local/smollm2"]).run()
    assert_clean(at)
    assert at.number_input(key="study_repeats").value == plan_repeats(at)
    assert plan_repeats(at) == study_plan.LOCAL_REPEATS
    at.number_input(key="study_repeats").set_value(7).run()
    at.multiselect(key="study_tests:mohr8").set_value(["anchoring"]).run()
    assert at.number_input(key="study_repeats").value == plan_repeats(at) == 7
    at.multiselect(key="study_models").set_value(["random", "local/smollm2"]).run()
    assert at.number_input(key="study_repeats").value == plan_repeats(at) == 100


def test_the_random_baselines_selfhelp_view_says_it_does_not_rewrite(random_run: str) -> None:
    at = open_page("studies")
    (tab,) = [t for t in at.tabs if t.label == "Self-help rewrites"]
    notes = [i.value for i in tab.info]
    assert notes == [study_views.NO_REWRITE_NOTE]
    assert "random baseline does not rewrite" in notes[0] and "original prompt" in notes[0]
    assert not [e for e in tab.expander if e.label == "The model's whole rewrite answer"]


def test_a_model_that_rewrites_gets_no_such_note(scripted_run: str) -> None:
    at = open_page("studies")
    (tab,) = [t for t in at.tabs if t.label == "Self-help rewrites"]
    assert not tab.info
    assert [e for e in tab.expander if e.label == "The model's whole rewrite answer"]


def test_pivot_by_changes_the_columns_of_table_and_heatmap(random_run: str) -> None:
    at = open_page("studies")
    assert at.session_state["study_run"] == random_run
    assert pivoted(at) == [["no mitigation", "awareness", "selfhelp"]]  # "none" in words
    spec = chart_specs(at)[0]  # the run's heatmap (then the paper's models beside it)
    assert "Mitigation" in json.dumps(spec)
    at.radio(key="study_pivot").set_value("temperature").run()
    assert_clean(at)
    assert pivoted(at) == [["0.2", "1"]]
    spec = chart_specs(at)[0]
    assert "Temperature" in json.dumps(spec)


def test_conversation_viewer_shows_the_turns_in_order(random_run: str, app_db: Path) -> None:
    at = open_page("studies")
    at.selectbox(key="study_chat_mitigation").set_value("selfhelp").run()
    assert_clean(at)
    conversation = at.selectbox(key="study_chat_conversation").value
    with Store(app_db) as store:
        turns = study_results.conversations(store, random_run, "anchoring")
    turns = turns[turns["conversation"] == conversation].sort_values("turn")
    assert list(turns["role"]) == ["decide"] * 6 + ["revise"]
    messages = at.get("chat_message")
    assert [m.proto.name for m in messages] == ["user", "assistant"] * 7
    shown = [m.text[0].value for m in messages]
    expected = [t for row in turns.itertuples() for t in (row.prompt, row.response)]
    assert [s[:200] for s in shown] == [e[:200] for e in expected]
    assert "Revise turn" in messages[-2].markdown[0].value
    caption = re.sub(r"\\(.)", r"\1", messages[1].caption[0].value)  # as a reader sees it
    assert re.fullmatch(r"Turn 1, read as: (admit|reject)", caption)
    assert caption.endswith(turns.iloc[0]["response"])


def test_selfhelp_side_by_side_and_hostile_text_shown_literally(scripted_run: str) -> None:
    at = open_page("studies")
    (tab,) = [t for t in at.tabs if t.label == "Self-help rewrites"]
    assert [m.value for m in tab.markdown][:3] == [
        "**Original prompt**",
        "**Rewritten by the model**",
        "**Decision on the rewritten prompt**",
    ]
    plain = [str(t.value) for t in tab.text]
    original = next(t for t in plain if t.startswith("You review applications"))
    rewritten = next(t for t in plain if t.startswith("NEUTRAL REWRITE."))
    assert original.splitlines()[-1] in rewritten  # the rewrite keeps the question
    assert f"admit {HOSTILE}" in plain  # the decision, as text
    assert "read as: admit" in texts(at)
    # Markup in answers never reaches Markdown unescaped (chat turns included).
    for element in [*at.markdown, *at.caption]:
        assert "<script>" not in element.value and "**bold**" not in element.value
    at.selectbox(key="study_chat_mitigation").set_value("selfhelp").run()
    chat_texts = [m.text[0].value for m in at.get("chat_message") if m.proto.name == "assistant"]
    assert f"admit {HOSTILE}" in chat_texts


def test_explore_points_at_studies_and_lists_only_paired_runs(
    random_run: str, app_db: Path
) -> None:
    at = open_page("explore")
    (link,) = at.get("page_link")
    assert "1 study run(s)" in link.proto.label and link.proto.page.endswith("studies")
    assert "no results yet" in texts(at)  # the study run is not offered as paired results
    paired = make_results_db(app_db, instances=4)
    at = open_page("explore")
    options = at.selectbox(key="explore_source").options
    assert len(options) == 2 and paired in options[1] and not any(random_run in o for o in options)
    assert "\\" not in options[1]  # a plain option: no Markdown escapes such as "07\\:56"


def test_start_a_study_run_watch_it_finish_and_read_its_results(app_db: Path) -> None:
    at = open_page("studies")
    at.multiselect(key="study_tests:biasbuster").set_value(["framing", "anchoring"])
    at.multiselect(key="study_mitigations").set_value(["none", "selfhelp"])
    at.number_input(key="study_repeats").set_value(1)
    at.text_input(key="study_run_name").set_value("from the page").run()
    assert_clean(at)
    at.button(key="study_start").click().run()
    assert_clean(at)
    run_id = at.session_state["study_active"]
    with Store(app_db) as store:
        run = store.wait_for(run_id, timeout=90)
        assert run is not None and run["status"] == "done", run
        assert run["name"] == "from the page" and run["done"] == run["planned"] == 16
    at.run()
    assert_clean(at)
    assert at.session_state["study_run"] == run_id
    assert pivoted(at) == [["no mitigation", "selfhelp"]]
    assert len(at.get("chat_message")) == 2 * 6  # a conversation without a revise turn


def test_a_running_study_shows_progress_and_cancels(app_db: Path) -> None:
    # The server hangs on every call until the run is cancelled: cancel must not wait for it.
    with FakeLLMServer(latency=60) as slow:
        settings.add_custom_model("openai/slow", "Slow", slow.base_url, json_schema=True)
        at = open_page("studies")
        at.multiselect(key="study_models").set_value(["openai/slow"])
        at.multiselect(key="study_tests:biasbuster").set_value(["framing"])
        at.number_input(key="study_repeats").set_value(1).run()
        at.button(key="study_start").click().run()
        run_id = at.session_state["study_active"]
        with Store(app_db) as store:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and store.run(run_id)["status"] != "running":
                time.sleep(0.1)
            at.run()
            assert_clean(at)
            assert "0 of 2 units" in [p.proto.text for p in at.get("progress")]
            at.button(key=f"study_cancel:{run_id}").click().run()
            assert "cancelling" in texts(at)
            run = store.wait_for(run_id, timeout=60)
        assert run is not None and run["status"] == "cancelled", run
        at.run()
        assert_clean(at)
        assert not at.get("progress") and at.button(key="study_resume")


def test_an_imported_thesis_dataset_is_a_study_to_start(app_db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mohr"
    shutil.copytree(MOHR_DIR, folder)
    with Store(app_db) as store:
        name = import_mohr(store, folder).dataset
    at = open_page("studies")
    assert name in at.selectbox(key="study_name").options
    at.selectbox(key="study_name").set_value(name).run()
    assert_clean(at)
    assert any(t.value.startswith(f"study {name}:") for t in at.text)
    at.number_input(key="study_repeats").set_value(1).run()
    at.button(key="study_start").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        run = store.wait_for(at.session_state["study_active"], timeout=90)
    assert run is not None and run["status"] == "done" and run["done"] == run["planned"], run
    at.run()
    assert_clean(at)
    assert at.dataframe and "No answers" not in texts(at)


def test_the_run_page_opens_a_study_run_in_studies(random_run: str, app_db: Path) -> None:
    paired = make_results_db(app_db, instances=2)
    at = open_page("run")
    at.selectbox(key="run_pick").set_value(random_run).run()
    assert "run_explore" not in [b.key for b in at.button]
    at.button(key="run_studies").click().run()
    assert_clean(at)
    assert at.session_state["study_run"] == random_run and at.title[0].value == "Studies"
    at = open_page("run")
    at.selectbox(key="run_pick").set_value(paired).run()
    at.button(key="run_explore").click().run()
    assert at.session_state["explore_source"] == f"run:{paired}"


def test_a_broken_study_file_is_named_and_the_results_stay(random_run: str) -> None:
    folder = Path(os.environ["COGBIAS_HOME"]) / "studies"
    folder.mkdir(parents=True)
    (folder / "broken.toml").write_text('id = "broken"\nname = [unclosed\n')
    at = open_page("studies")
    assert any("have problems and were left out" in w.value for w in at.warning)
    assert "broken.toml:2:9" in at.code[0].value  # named, as text; the other studies stay
    assert at.session_state["study_run"] == random_run
    assert pivoted(at) == [["no mitigation", "awareness", "selfhelp"]]


def test_the_runs_table_lists_when_each_run_was_made_to_the_minute(random_run: str) -> None:
    at = open_page("studies")
    (runs,) = [d.value for d in at.dataframe if "study" in d.value.columns]
    assert list(runs.columns)[:5] == ["id", "name", "study", "status", "created_at"]
    (made,) = runs.loc[runs["id"] == random_run, "created_at"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", made), made  # not the stored ISO text


def test_the_turns_download_is_the_export_of_the_run(random_run: str, app_db: Path) -> None:
    from app_pages._common import db_version
    from app_pages._study_views import _turns_csv

    at = open_page("studies")
    turns_button = next(b for b in at.get("download_button") if b.key == "study_download_turns")
    assert turns_button.proto.label == "Download every turn (CSV)"
    assert turns_button.proto.url  # the file itself, not a request for it
    keys = {b.key for b in at.get("download_button")}
    assert {f"study_figures:{fmt}" for fmt in ("csv", "jsonl", "parquet")} <= keys
    turns = _turns_csv(str(app_db), db_version(str(app_db)), random_run)
    rows = list(csv.DictReader(io.StringIO(turns.decode())))
    with Store(app_db) as store:
        stored = study_results.calls(store, random_run)
    assert len(rows) == len(stored)
    assert {(r["conversation"], int(r["turn"])) for r in rows} == set(
        zip(stored["conversation"], stored["turn"], strict=True)
    )


def test_a_run_whose_worker_never_began_shows_its_log_and_resumes(app_db: Path) -> None:
    with Store(app_db) as store:
        study = study_plan.load_study("biasbuster", store)
        spec = StudySpec("biasbuster", ["random"], tests=["framing"], repeats=1)
        run_id = executor.create(study_plan.plan(study_plan.resolve(spec, study), study), store)
        store.update_run(run_id, pid=2**22 + 12345)  # no such process
    (app_db.parent / f"{run_id}.log").write_text("ImportError: something went wrong\n")
    at = open_page("studies")
    assert not at.get("progress")  # nothing pretends to be working on it
    assert any("stopped before it began" in w.value for w in at.warning)
    assert "ImportError: something went wrong" in at.code[0].value
    at.button(key="study_resume").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and store.run(run_id)["status"] == "planned":
            time.sleep(0.1)
        run = store.wait_for(run_id, timeout=90)
    assert run is not None and run["status"] == "done" and run["done"] == 2, run
