"""The app in two tabs, with broken study files and with long or link-shaped texts (issue 29,
points 11, 12 and 13), through AppTest.

Tab A is an `AppTest` session; "tab B" is the library doing what another tab (or the
command line) would do between tab A's last run and its next click: delete a run, a dataset,
a study file or a model. A click that arrives after its item was deleted must act on nothing
(never on whatever the picker fell back to) and say which item went.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cogbias.cli.main import main
from cogbias.datasets import import_hub
from cogbias.library import testcases as library
from cogbias.llm import registry, settings
from cogbias.runs import deletion, executor, study_plan
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.studies.definitions import STUDY_DIR
from cogbias.views import authoring, safe_text
from tests.app_helpers import make_results_db
from tests.dataset_helpers import HUB_CSV
from tests.test_app_pages import assert_clean, open_page, texts


def gone_message(what: str) -> str:
    return f"{what} no longer exists (deleted elsewhere); nothing was done."


def two_paired_runs(app_db: Path, **fields: object) -> tuple[str, str]:
    """Runs X and Y of the random baseline, both with `fields` (their status, say)."""
    x = make_results_db(app_db, biases=("anchoring",), instances=2, name="X")
    y = make_results_db(app_db, biases=("framing_effect",), instances=2, name="Y")
    with Store(app_db) as store:
        for run_id in (x, y):
            store.update_run(run_id, **fields)
    return x, y


def delete_run(app_db: Path, run_id: str) -> None:
    """What tab B's Delete (or `cogbias delete run`) does."""
    with Store(app_db) as store:
        deletion.apply(store, deletion.plan_run(store, run_id))


def untouched(app_db: Path, run_id: str, status: str) -> None:
    """No worker was started for the run and its status is what it was."""
    with Store(app_db) as store:
        run = store.run(run_id)
    assert run is not None and run["status"] == status and run["pid"] in (None, os.getpid())
    assert not (app_db.parent / f"{run_id}.log").exists(), "a worker was started for it"


# --------------------------------------------------------------------------- point 11


def test_resume_of_a_run_deleted_in_another_tab_resumes_no_other_run(app_db: Path) -> None:
    x, y = two_paired_runs(app_db, status="cancelled")
    at = open_page("run")
    at.selectbox(key="run_pick").set_value(x).run()
    assert at.button(key="run_resume")  # tab A offers to resume X
    delete_run(app_db, x)  # tab B
    at.button(key="run_resume").click().run()
    assert_clean(at)
    assert gone_message(f"Run {x}") in texts(at)
    untouched(app_db, y, "cancelled")  # Y, which nobody chose, was not resumed
    assert at.session_state["run_pick"] == y  # shown now: the next click is about Y
    at.run()
    assert "no longer exists" not in texts(at)  # said once


def test_cancel_of_a_run_deleted_in_another_tab_cancels_no_other_run(app_db: Path) -> None:
    x, y = two_paired_runs(app_db, status="running", pid=os.getpid(), finished_at=None)
    at = open_page("run")
    at.selectbox(key="run_pick").set_value(x).run()
    assert at.button(key="run_cancel_pick")
    with Store(app_db) as store:  # X ends, then tab B deletes it
        store.update_run(x, status="cancelled", pid=None)
    delete_run(app_db, x)
    at.button(key="run_cancel_pick").click().run()
    assert_clean(at)
    assert gone_message(f"Run {x}") in texts(at)
    untouched(app_db, y, "running")


def test_resume_of_a_study_run_deleted_in_another_tab_resumes_no_other(app_db: Path) -> None:
    with Store(app_db) as store:
        study = study_plan.load_study("biasbuster", store)
        ids = []
        for test in ("framing", "anchoring"):
            spec = StudySpec("biasbuster", ["random"], tests=[test], repeats=1)
            plan = study_plan.plan(study_plan.resolve(spec, study), study)
            ids.append(executor.create(plan, store))
            store.update_run(ids[-1], status="cancelled")
    x, y = ids
    at = open_page("studies")
    at.selectbox(key="study_run").set_value(x).run()
    assert at.button(key="study_resume")
    delete_run(app_db, x)
    at.button(key="study_resume").click().run()
    assert_clean(at)
    assert gone_message(f"Run {x}") in texts(at)
    untouched(app_db, y, "cancelled")


def test_a_run_on_a_dataset_deleted_in_another_tab_is_not_started_on_another(app_db: Path) -> None:
    with Store(app_db) as store:
        import_hub(store, HUB_CSV, name="first")
        import_hub(store, HUB_CSV, name="second")
    at = open_page("datasets")
    at.selectbox(key="ds_current").set_value("second").run()
    assert at.button(key="ds_start")
    with Store(app_db) as store:  # tab B
        deletion.apply(store, deletion.plan_dataset(store, "second"))
    at.button(key="ds_start").click().run()
    assert_clean(at)
    assert gone_message("Dataset second") in texts(at)
    with Store(app_db) as store:
        assert store.runs() == []  # nothing was started on "first"


def test_remove_of_a_model_removed_in_another_tab_removes_no_other(app_db: Path) -> None:
    for name in ("a", "b", "c"):
        settings.add_custom_model(f"openai/{name}", name.upper(), "http://127.0.0.1:9/v1")
    at = open_page("settings")
    at.selectbox(key="settings_remove").set_value("openai/a").run()
    settings.remove_custom_model("openai/a")  # tab B
    at.button(key="settings_remove_btn").click().run()
    assert_clean(at)
    assert gone_message("Model openai/a") in texts(at)
    mine = {m.id for m in registry.load_models(settings.user_models_path())}
    assert mine == {"openai/b", "openai/c"}
    # the picker now shows b: removing it here is not reported as "deleted elsewhere"
    assert at.selectbox(key="settings_remove").value == "openai/b"
    at.button(key="settings_remove_btn").click().run()
    assert "no longer exists" not in texts(at)
    assert {m.id for m in registry.load_models(settings.user_models_path())} == {"openai/c"}


def test_a_pair_of_a_test_case_deleted_in_another_tab_is_not_run(app_db: Path) -> None:
    save_case("gone_bias", "Gone bias", "Short.")
    at = open_page("learn")
    at.selectbox(key="learn_model").set_value("random")
    at.selectbox(key="learn_bias").set_value("gone_bias").run()
    (library.user_dir() / "gone_bias.toml").unlink()  # tab B
    at.button(key="learn_run").click().run()
    assert_clean(at)
    assert gone_message("Test case gone_bias") in texts(at)
    assert "learn_result" not in at.session_state  # no pair of another bias was run


# --------------------------------------------------------------------------- point 12


def broken_study_file() -> Path:
    folder = Path(os.environ["COGBIAS_HOME"]) / "studies"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "broken.toml"
    path.write_text('id = "broken"\nname = [unclosed\n')
    return path


def test_a_broken_study_file_leaves_the_other_studies_runnable(app_db: Path) -> None:
    path = broken_study_file()
    at = open_page("studies")
    assert_clean(at)
    built_in = sorted(p.stem for p in STUDY_DIR.glob("*.toml"))  # every study but the broken
    assert at.selectbox(key="study_name").options == built_in and "mohr8" in built_in
    assert "No study can be loaded" not in texts(at)
    assert any("1 study file(s) have problems" in w.value for w in at.warning)
    assert f"{path}:2:9: this is not valid TOML" in at.code[0].value  # named, as text
    assert any(m.label == "Units" for m in at.metric)  # biasbuster's plan is shown


def test_the_command_line_runs_the_other_studies_beside_a_broken_file(
    app_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = broken_study_file()
    assert main(["run", "study", "mohr8", "--models", "random", "--dry-run"]) == 0
    assert "study mohr8: " in capsys.readouterr().err
    assert main(["run", "study", "broken", "--models", "random", "--dry-run"]) == 1
    assert f"{path}:2:9: this is not valid TOML" in capsys.readouterr().err


# --------------------------------------------------------------------------- point 13


def test_escaped_text_keeps_no_bare_link_trigger() -> None:
    text = "see http://a.example, HTTPS://b.example, www.c.example and d@e.example"
    out = safe_text.escape_markdown(text)
    visible = re.sub(r"\\(.)", r"\1", out)
    assert visible.replace(safe_text.WORD_JOINER, "") == text  # reads the same
    assert not re.search(r"(?i)https?:|www\.|\w@", visible)  # nothing GFM links
    html = safe_text.html_text(text)
    assert not re.search(r"(?i)https?&#58;|www\.|\w@", html)


def save_case(case_id: str, name: str, description: str) -> None:
    toml = (
        authoring.BLANK_TEST_CASE.replace('"my_bias"', json.dumps(case_id))
        .replace('"My Bias"', json.dumps(name))
        .replace(
            '"""Say in two to four sentences what the bias is and how this test elicits it."""',
            json.dumps(description),
        )
    )
    library.save_test_case(library.parse_test_case(toml))


def test_a_one_megabyte_description_is_refused_where_it_is_written(app_db: Path) -> None:
    description = "Long words. " * 90_000  # ~1 MB: Learn once took ~100 s to lay it out
    toml = authoring.BLANK_TEST_CASE.replace(
        '"""Say in two to four sentences what the bias is and how this test elicits it."""',
        json.dumps(description),
    )
    with pytest.raises(library.LibraryError) as refused:
        library.parse_test_case(toml, "big.toml")
    (problem,) = refused.value.problems
    assert (problem.file, problem.line) == ("big.toml", 3)
    assert "'description' has 1,080,000 characters; at most 20,000" in problem.message


def test_a_long_description_shows_its_start_and_the_rest_collapsed(app_db: Path) -> None:
    description = ("Long words. " * 1_650).strip()  # 19,799 characters, inside the bound
    save_case("big_bias", "Big bias", description)
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("big_bias").run()
    assert_clean(at)
    (start,) = [m.value for m in at.markdown if m.value.startswith("Long words. Long words.")]
    assert len(start) < 2_000  # the start is laid out as prose, the rest is not
    (whole,) = [e for e in at.expander if e.label == f"All {len(description):,} characters"]
    assert whole.text[0].value == description
