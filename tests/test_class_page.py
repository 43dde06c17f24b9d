"""The Class page (Streamlit AppTest): open a session, see the join link or the command that
starts the participant server, count answers, ask a model, reveal, export, delete."""

from __future__ import annotations

import csv
import io
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.classroom import lessons, sessions
from cogbias.store import Store
from cogbias.views import classroom as view
from tests.test_app_pages import assert_clean, chart_specs, open_page, shown_text, texts


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (stands in for a running server)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def _only_session(path: Path) -> sessions.Session:
    with Store(path) as store:
        listed = sessions.list_sessions(store)
    assert len(listed) == 1
    return listed[0]


def _open_session(app_db: Path) -> tuple[AppTest, sessions.Session]:
    at = open_page("classroom")
    assert "No class sessions yet" in texts(at)
    at.multiselect(key="class_questions").set_value(["classic:classics:theatre_ticket"]).run()
    assert "Would you pay $10 for another ticket" in shown_text(at)  # the preview, as text
    at.button(key="class_open").click().run()
    assert_clean(at)
    return at, _only_session(app_db)


def test_opening_a_session_without_a_server_says_how_to_start_it(app_db: Path) -> None:
    at, session = _open_session(app_db)
    assert session.question.title == "Theatre ticket" and session.open
    assert f"Code: `{session.code}`" in texts(at)
    assert "participant server is not running" in texts(at)
    assert [c.value for c in at.code] == [
        "cogbias class serve --host 0.0.0.0 --port 8765"
    ]  # the exact command
    assert at.metric[0].value == "0"
    counts = at.dataframe[0].value
    assert list(counts["Answers"]) == [0, 0, 0]


def test_the_join_link_and_qr_code_show_once_the_server_runs_and_answers_are_counted(
    app_db: Path, listening: int
) -> None:
    at, session = _open_session(app_db)
    with Store(app_db) as store:
        store.set_class_join_url(f"http://127.0.0.1:{listening}")
        for token, key in [("p1", "a"), ("p2", "b"), ("p3", "a")]:
            sessions.assign_condition(store, session, token)
            assert sessions.submit_answer(store, session, token, key) == "saved"
    at.run()
    assert_clean(at)
    url = f"http://127.0.0.1:{listening}/s/{session.code}"
    assert url in [c.value for c in at.code]
    assert len(at.get("image")) == 1  # the QR code
    assert at.metric[0].value == "3"
    assert at.dataframe[0].value["Answers"].iloc[-1] == 3


def test_a_model_answers_and_the_reveal_shows_humans_class_and_model(app_db: Path) -> None:
    at, session = _open_session(app_db)
    with Store(app_db) as store:
        sessions.assign_condition(store, session, "p1")
        sessions.submit_answer(store, session, "p1", "b")
    at.multiselect(key="class_models").set_value(["random"]).run()
    at.number_input(key="class_n").set_value(8).run()
    assert "Before any call: 16 answers, 16 calls; free" in texts(at)
    at.button(key="class_ask").click().run()  # a class run, in a worker process
    assert_clean(at)
    run_id = at.session_state["class_asking"]
    with Store(app_db) as store:
        run = store.wait_for(run_id, timeout=120)
    assert run is not None and run["status"] == "done", run
    at.run()
    assert "16 answers stored (0 unreadable or failed)" in texts(at)
    assert not chart_specs(at)  # nothing revealed yet
    assert not _has(at, "class_do_reveal")  # Reveal is a step after Lock, never beside it
    at.button(key="class_close").click().run()
    at.button(key="class_do_reveal").click().run()  # inside "Reveal…": it asks first
    assert_clean(at)
    assert sessions.get_session(Store(app_db), session.code).revealed
    (spec,) = chart_specs(at)
    assert spec["layer"][1]["encoding"]["color"]["field"] == "who"
    table = at.dataframe[1].value  # the chart's rows as text
    assert set(table["Who"]) == {view.HUMANS, view.CLASS, "model random"}
    assert set(table["Condition"]) == set(session.question.labels.values())
    assert "Tversky" in texts(at) or "Kahneman" in texts(at)  # the humans' citation


def test_no_model_chosen_is_a_message_and_a_priced_model_needs_its_key_first(
    app_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at, _ = _open_session(app_db)
    at.multiselect(key="class_models").set_value([]).run()
    assert "choose at least one model" in texts(at)
    assert not _has(at, "class_ask")
    at.multiselect(key="class_models").set_value(["openai/gpt-4o-mini-2024-07-18"]).run()
    assert_clean(at)
    assert "OPENAI_API_KEY is not set" in texts(at)
    assert not _has(at, "class_ask")  # no call can start without the key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    at.run()
    # a capable model is sampled by default (the paper's reading), though it lists its most
    # probable tokens: 20 answers a condition
    assert "scored by option probabilities" not in texts(at)
    assert re.search(r"Before any call: 40 answers, 40 calls; at most \$0\.0\d+", texts(at))
    at.radio(key="class_mode").set_value("probabilities").run()
    assert re.search(r"Before any call: 2 answers, 2 calls; at most \$0\.0\d+", texts(at))
    assert _has(at, "class_ask")  # the cost is on the page before the button is pressed


def _has(at: AppTest, key: str) -> bool:
    return any(b.key == key for b in at.button)


def test_export_and_delete_with_confirmation(app_db: Path, downloaded) -> None:
    at, session = _open_session(app_db)
    with Store(app_db) as store:
        for token, key in [("p1", "a"), ("p2", "b")]:
            sessions.assign_condition(store, session, token)
            sessions.submit_answer(store, session, token, key)
        conditions = {a.answer: a.condition for a in store.class_answers(session.code)}
    at.run()
    (download,) = [b for b in at.get("download_button") if "answers" in b.proto.label]
    assert download.proto.label == "Export answers (CSV)"
    rows = list(csv.DictReader(io.StringIO(downloaded(download).decode("utf-8"))))
    assert sorted((r["session"], r["answer"], r["condition"]) for r in rows) == [
        (session.code, "a", conditions["a"]),
        (session.code, "b", conditions["b"]),
    ]  # the answers' rows, not just a header
    at.button(key="class_close").click().run()
    assert not sessions.get_session(Store(app_db), session.code).open
    at.button(key="class_delete").click().run()
    assert_clean(at)
    assert sessions.list_sessions(Store(app_db)) == []
    assert "No class sessions yet" in texts(at)


def test_a_test_case_opens_as_one_filled_instance_with_its_seven_options(app_db: Path) -> None:
    at = open_page("classroom")
    at.multiselect(key="class_questions").set_value(["case:anthropomorphism"]).run()
    assert_clean(at)
    assert "( ) Very high" in shown_text(at)  # the options as a participant reads them
    at.button(key="class_open").click().run()
    assert_clean(at)
    session = _only_session(app_db)
    assert session.question.kind == "scale" and session.question.test_case == "anthropomorphism"
    assert list(at.dataframe[0].value["Condition"]) == ["control", "treatment", "total"]


def test_hostile_question_text_stays_text_everywhere_on_the_page(app_db: Path) -> None:
    """A user's own test case may carry markup in its title, labels, texts and options."""
    from cogbias.runs import executor, kinds
    from cogbias.runs.class_plan import ClassSpec
    from tests.class_helpers import hostile_question

    evil = "<img src=x onerror=alert(1)> **bold** [link](javascript:alert(2))"
    hostile = hostile_question(evil)
    with Store(app_db) as store:
        code = sessions.open_session(store, hostile)
        session = sessions.get_session(store, code)
        sessions.assign_condition(store, session, "p1")
        sessions.submit_answer(store, session, "p1", "a")
        executor.execute(kinds.plan(ClassSpec(code, ("random",), samples=3), store), store)
        sessions.reveal_session(store, code)
    at = open_page("classroom")
    assert_clean(at)
    markdown = [str(e.value) for kind in ("markdown", "caption", "info", "warning", "error")
                for e in getattr(at, kind)]  # fmt: skip
    for value in markdown:  # every Markdown element escaped what it quotes (the state line
        bare = re.sub(r"\\.", "", value)  # quotes the title now): nothing left unescaped
        assert "<img" not in bare and "](javascript" not in bare and "**bold**" not in bare
    table = at.dataframe[1].value
    assert any(evil in str(c) for c in table["Condition"])  # shown verbatim, as text


def test_a_stored_join_link_whose_server_stopped_shows_the_command_again(app_db: Path) -> None:
    at, _ = _open_session(app_db)
    with socket.socket() as gone:  # a port nothing listens on any more
        gone.bind(("127.0.0.1", 0))
        port = gone.getsockname()[1]
    with Store(app_db) as store:
        store.set_class_join_url(f"http://127.0.0.1:{port}")
    at.run()
    assert "participant server is not running" in texts(at)
    assert [c.value for c in at.code] == ["cogbias class serve --host 0.0.0.0 --port 8765"]
    assert not at.get("image")  # no QR code of a link that leads nowhere


def test_the_models_answer_in_a_worker_whose_progress_shows_and_can_be_cancelled(
    app_db: Path,
) -> None:
    """Closing the tab would not stop the run: it is a worker process; the page polls its
    progress as the Run page does, and Cancel stops it keeping what was stored."""
    import time

    from cogbias.llm import settings
    from tests.fake_llm_server import FakeLLMServer

    with FakeLLMServer(lambda _: "A", latency=60) as slow:  # every call hangs until cancelled
        settings.add_custom_model("openai/slowclass", "Slow class model", slow.base_url)
        at, _ = _open_session(app_db)
        at.multiselect(key="class_models").set_value(["openai/slowclass"]).run()
        at.radio(key="class_mode").set_value("sample").run()
        at.number_input(key="class_n").set_value(5).run()
        at.button(key="class_ask").click().run()
        assert_clean(at)
        run_id = at.session_state["class_asking"]
        with Store(app_db) as store:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and (store.run(run_id) or {}).get("status") != (
                "running"
            ):
                time.sleep(0.1)
            at.run()
            assert any("0 of 10 answers" in str(p.proto.text) for p in at.get("progress"))
            at.button(key="class_cancel").click().run()
            assert "cancelling" in texts(at)
            run = store.wait_for(run_id, timeout=60)
        assert run is not None and run["status"] == "cancelled", run
        at.run()
        assert_clean(at)
        assert "Run cancelled: 0 answers stored" in texts(at)
        assert not at.get("progress")  # the page stopped polling


def test_requests_refused_as_too_fast_are_flagged_for_the_teacher(app_db: Path) -> None:
    at, session = _open_session(app_db)
    assert "refused as too fast" not in texts(at)
    with Store(app_db) as store:
        store.add_class_throttled({session.code: 12})  # as the participant server writes it
    at.run()
    assert_clean(at)
    assert "12 requests were refused as too fast from one network address" in texts(at)


def test_a_lesson_steps_start_lock_reveal_after_asking_and_next(app_db: Path) -> None:
    at = open_page("classroom")
    at.multiselect(key="class_questions").set_value(
        ["classic:classics:asian_disease", "classic:classics:theatre_ticket"]
    ).run()
    assert at.checkbox[0].value is True  # several questions: a lobby first
    at.number_input(key="class_seconds").set_value(30).run()
    at.button(key="class_open").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        (lesson,) = lessons.list_lessons(store)
    assert [q.seconds for q in lesson.questions] == [30, 30]
    assert "Question 1 of 2 · Asian disease · in the lobby" in texts(at)
    assert not _has(at, "class_close") and not _has(at, "class_do_reveal")
    at.button(key="class_start").click().run()
    assert "taking answers" in texts(at) and re.search(r"0:[23]\d left", texts(at))
    at.button(key="class_close").click().run()
    assert "answers locked: reveal when you are ready" in texts(at)
    with Store(app_db) as store:
        assert lessons.resolve(store, lesson.code)[1].state == sessions.LOCKED
    at.button(key="class_do_reveal").click().run()  # the button inside "Reveal…"
    assert_clean(at)
    assert not _has(at, "class_do_reveal") and _has(at, "class_next")
    at.button(key="class_next").click().run()
    assert "Question 2 of 2 · Theatre ticket · taking answers" in texts(at)
    with Store(app_db) as store:
        first, second = lessons.get_lesson(store, lesson.code).questions
    assert first.state == sessions.REVEALED and second.state == sessions.ANSWERING


def test_the_models_picker_remembers_the_last_class_run_of_the_session(app_db: Path) -> None:
    """Before: a reload forgot the local model the teacher had asked."""
    from cogbias.runs import executor, kinds
    from cogbias.runs.class_plan import ClassSpec

    at, session = _open_session(app_db)
    assert at.multiselect(key="class_models").value == ["random"]
    with Store(app_db) as store:
        spec = ClassSpec(session.code, ("local/smollm2",), samples=1, scoring="sample")
        executor.create(kinds.plan(spec, store), store)  # stored, not asked
    again = open_page("classroom")  # a reload: a new session of the app
    assert again.multiselect(key="class_models").value == ["local/smollm2"]


def test_the_projector_shows_the_code_then_only_the_chart(app_db: Path) -> None:
    from tests.class_helpers import hostile_question

    evil = "<img src=x onerror=alert(1)> **bold**"
    with Store(app_db) as store:
        code = lessons.open_lesson(store, [hostile_question(evil)], seconds=60)
    at = open_page("projector")
    assert_clean(at)
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert code in html and re.search(r">[01]:[0-5]\d<", html)  # the countdown, running
    assert "<img src=x" not in html and "&lt;img src=x" in html  # the title as text
    assert not at.button and not chart_specs(at)  # nothing to press, no chart yet
    with Store(app_db) as store:
        session = sessions.require_session(store, code)
        sessions.assign_condition(store, session, "p1")
        sessions.submit_answer(store, session, "p1", "a")
        lessons.reveal(store, code)
    at = open_page("projector")
    assert_clean(at)
    (spec,) = chart_specs(at)
    assert spec["layer"][1]["encoding"]["color"]["legend"]["orient"] == "top"
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert code not in html  # after the reveal: no join code, only the chart


def test_the_run_page_opens_a_class_run_on_its_session_in_the_class_page(app_db: Path) -> None:
    """A class run's results are its session's, so the Run page's button (the class kind's
    page, `ResultsPage.CLASS`) opens the Class page on that session, not on the newest one."""
    from cogbias.classroom.questions import classic_question
    from cogbias.runs import executor, kinds
    from cogbias.runs.class_plan import ClassSpec

    with Store(app_db) as store:
        asked = sessions.open_session(store, classic_question("classics", "theatre_ticket"))
        newer = sessions.open_session(store, classic_question("classics", "linda"))
        plan = kinds.plan(ClassSpec(asked, ("random",), samples=2), store)
        run = executor.execute(plan, store)
    assert run.status == "done" and newer != asked
    at = open_page("run")
    at.selectbox(key="run_pick").set_value(run.id).run()
    keys = [b.key for b in at.button]
    assert "run_class" in keys and "run_explore" not in keys and "run_studies" not in keys
    at.button(key="run_class").click().run()
    assert_clean(at)
    assert at.title[0].value == "Class" and at.session_state["class_session"] == asked
    assert at.selectbox(key="class_session").value == asked
