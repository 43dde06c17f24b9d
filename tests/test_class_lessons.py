"""A lesson a teacher can give (issue 42): states lobby -> answering -> locked -> revealed with
a countdown kept in the store, several questions under one code each balanced on its own, the
reveal labelling each condition with its own option, your classes pooled beside the original,
and what the command line says of all that. The countdown is tested at given times, never
against the clock."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from cogbias.classroom import lessons, questions, sessions
from cogbias.classroom.questions import Question
from cogbias.cli.main import main
from cogbias.store import Store, now, parse_time
from cogbias.views import classroom as view


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path / "class.db") as opened:
        yield opened


def classic(test: str) -> Question:
    return questions.classic_question("classics", test)


def later(at: str, seconds: float) -> str:
    return (parse_time(at) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def answer_all(store: Store, code: str, picks: dict[str, list[str]], prefix: str = "p") -> None:
    """Participants until each condition of session `code` holds the given answers."""
    session = sessions.require_session(store, code)
    for i in range(400):
        token = f"{prefix}{i}"
        condition = sessions.assign_condition(store, session, token)
        if picks.get(condition):
            assert sessions.submit_answer(store, session, token, picks[condition].pop()) == "saved"
        if not any(picks.values()):
            return
    raise AssertionError(f"conditions left unanswered: {picks}")


def test_a_session_moves_lobby_answering_locked_revealed(store: Store) -> None:
    code = sessions.open_session(store, classic("theatre_ticket"), start=False)
    session = sessions.require_session(store, code)
    assert session.state == sessions.LOBBY and not session.open
    sessions.assign_condition(store, session, "p1")  # joined in the lobby: placed, not answering
    assert sessions.submit_answer(store, session, "p1", "a") == "closed"
    assert lessons.start(store, code).state == sessions.ANSWERING
    with pytest.raises(ValueError, match="not in its lobby"):
        lessons.start(store, code)
    assert sessions.submit_answer(store, session, "p1", "a") == "saved"
    assert lessons.lock(store, code).state == sessions.LOCKED
    assert sessions.submit_answer(store, session, "p2", "a") in ("closed", "unassigned")
    revealed = lessons.reveal(store, code)
    assert revealed.state == sessions.REVEALED and revealed.locked_at is not None


def test_a_countdown_locks_answers_at_zero_with_no_one_writing(store: Store) -> None:
    code = sessions.open_session(store, classic("theatre_ticket"), start=False, seconds=30)
    started = lessons.start(store, code)
    assert started.deadline == later(started.started_at, 30)
    for token in ("early", "late"):
        sessions.assign_condition(store, started, token)
    just_before, at_zero = later(started.deadline, -0.5), started.deadline
    assert sessions.get_session(store, code, just_before).state == sessions.ANSWERING
    assert sessions.get_session(store, code, just_before).seconds_left() == pytest.approx(0.5)
    assert sessions.get_session(store, code, at_zero).state == sessions.LOCKED
    assert sessions.submit_answer(store, started, "early", "a", at=just_before) == "saved"
    assert sessions.submit_answer(store, started, "late", "b", at=at_zero) == "closed"
    assert [a.answer for a in store.class_answers(code)] == ["a"]
    # locking after the countdown ran out keeps the lock at its end
    store.close_class_session(code, at=later(at_zero, 60))
    assert sessions.require_session(store, code).locked_at == at_zero


def test_a_countdown_set_while_answering_runs_from_then(store: Store) -> None:
    code = sessions.open_session(store, classic("linda"))
    assert sessions.require_session(store, code).seconds_left() is None
    timed = lessons.set_timer(store, code, 20)
    assert timed.seconds == 20 and timed.seconds_left() is not None
    assert 0 < timed.seconds_left() <= 20
    assert lessons.set_timer(store, code, 0).deadline is None  # 0: no countdown
    with pytest.raises(ValueError, match="5 to 3600 seconds"):
        lessons.set_timer(store, code, 2)
    lessons.lock(store, code)
    with pytest.raises(ValueError, match="takes no answers"):
        lessons.set_timer(store, code, 30)


def test_a_lesson_is_one_code_with_a_balanced_order_per_question(store: Store) -> None:
    code = lessons.open_lesson(store, [classic("asian_disease"), classic("theatre_ticket")])
    lesson = lessons.get_lesson(store, code)
    assert [q.code for q in lesson.questions] == [f"{code}-1", f"{code}-2"]
    assert lesson.session.state == sessions.LOBBY  # several questions: the room joins first
    assert lesson.place() == "question 1 of 2" and lesson.has_next
    first = lessons.start(store, code)
    tokens = [f"t{i}" for i in range(8)]
    one = [sessions.assign_condition(store, first, t) for t in tokens]
    assert sorted(one).count("lives_lost") == 4  # every block of two holds each once
    alone = sessions.open_session(store, classic("linda"))
    with pytest.raises(ValueError, match="on its own: there is no next question"):
        lessons.next_question(store, alone)
    lessons.delete(store, alone)
    second = lessons.next_question(store, code)
    assert second.code == f"{code}-2" and second.state == sessions.ANSWERING
    assert sessions.require_session(store, f"{code}-1").state == sessions.LOCKED
    two = [sessions.assign_condition(store, second, t) for t in tokens]
    assert sorted(two).count("lost_ticket") == 4  # balanced again, in its own order
    assert lessons.resolve(store, code)[1].code == second.code  # the code means the one on screen
    assert lessons.resolve(store, f"{code}-1")[1].code == f"{code}-1"
    with pytest.raises(ValueError, match="last question"):
        lessons.next_question(store, code)
    with pytest.raises(ValueError, match="delete the lesson"):
        lessons.delete(store, f"{code}-2")
    lessons.delete(store, code)
    assert lessons.get_lesson(store, code) is None and store.class_sessions() == []


def test_the_reveal_labels_each_condition_with_its_own_option(store: Store) -> None:
    """Before: the Asian disease's x-axis and table said "400 people will die" for both
    conditions; the "lives saved" readers had read "200 people will be saved"."""
    from dataclasses import replace

    question = classic("asian_disease")
    code = sessions.open_session(store, question)
    answer_all(store, code, {"lives_lost": ["a", "b", "b"], "lives_saved": ["a", "a", "b"]})
    results = sessions.results(store, code)
    frame = view.reveal_frame(results)
    assert set(frame["option"]) == {"the sure programme"}  # the original's neutral name
    chart = view.reveal_chart(frame, question).to_dict()
    assert "“the sure programme”" in chart["layer"][1]["encoding"]["x"]["title"]
    assert "400 people" not in json.dumps(chart) and "200 people" not in json.dumps(chart)
    # without a neutral name each condition is labelled with its own option text
    own = replace(question, reference=None, reference_conditions={})
    results = replace(results, question=own, humans=[])
    frame = view.reveal_frame(results)
    by_condition = dict(zip(frame["condition"], frame["option"], strict=True))
    lost, saved = own.label("lives_lost"), own.label("lives_saved")
    assert "400 people will die" in by_condition[lost]
    assert "200 people will be saved" in by_condition[saved]
    table = view.reveal_table(frame, own)
    for _, row in table.iterrows():
        assert (row["Condition"] == lost) == ("die" in row["Option"]), dict(row)
    chart = view.reveal_chart(frame, own, projector=True).to_dict()
    rows = {r for r in frame["option"]}
    assert len(rows) == 2 and "named on the left" in chart["layer"][1]["encoding"]["x"]["title"]
    data = next(iter(chart["datasets"].values()))
    assert any("die" in r["row"] and r["row"].startswith(lost.split()[0]) for r in data)


def test_your_classes_are_pooled_beside_this_one_and_leave_it_when_deleted(store: Store) -> None:
    first = sessions.open_session(store, classic("theatre_ticket"))
    answer_all(store, first, {"lost_ticket": ["a", "b"], "lost_bill": ["a"]}, "x")
    other = sessions.open_session(store, classic("linda"))  # another question: never pooled
    answer_all(store, other, {"linda": ["a"]}, "y")
    second = sessions.open_session(store, classic("theatre_ticket"))
    answer_all(store, second, {"lost_ticket": ["a"], "lost_bill": ["b", "b"]}, "z")
    results = sessions.results(store, second, pool=True)
    assert [p.code for p in results.pool_parts] == [first, second]
    assert [p.total for p in results.pool_parts] == [3, 3] and results.pooled_others
    ticket = next(r for r in results.pool if r.condition == "lost_ticket")
    assert ticket.n == 3 and ticket.parts == [2, 1] and ticket.shares[0] == pytest.approx(2 / 3)
    frame = view.reveal_frame(results)
    assert list(dict.fromkeys(frame["who"])) == [view.HUMANS, view.POOLED, view.CLASS]
    assert "2 sessions of this question, 6 answers" in view.pool_note(results)
    data = sessions.results_json(results)
    assert [s["n"] for s in data["pool"]["sessions"]] == [
        {"lost_ticket": 2, "lost_bill": 1},
        {"lost_ticket": 1, "lost_bill": 2},
    ]
    assert all(not any(len(str(v)) == 64 for v in s.values()) for s in data["pool"]["sessions"])
    lessons.delete(store, first)
    results = sessions.results(store, second, pool=True)
    assert [p.code for p in results.pool_parts] == [second] and not results.pooled_others
    assert view.POOLED not in set(view.reveal_frame(results)["who"])


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    status = main(list(words))
    out, err = capsys.readouterr()
    return status, out, err


def test_the_command_runs_a_lesson_and_gives_labels_and_the_pool(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "c.db")
    status, out, err = cli(capsys, "class", "open", "--study", "classics", "--test",
                           "asian_disease", "--test", "theatre_ticket", "--timer", "45",
                           "--db", db)  # fmt: skip
    code = out.strip()
    assert status == 0 and "In the lobby" in err and "Asian disease · Theatre ticket" in err
    status, out, _ = cli(capsys, "class", "start", code, "--db", db)
    assert status == 0 and f"{code}-1 (question 1 of 2 of lesson {code}): answers open" in out
    assert "s on its countdown" in out
    with Store(db) as store:
        answer_all(store, f"{code}-1", {"lives_lost": ["b"], "lives_saved": ["a"]})
    status, out, _ = cli(capsys, "class", "lock", code, "--db", db)
    assert status == 0 and "answers locked" in out
    status, out, _ = cli(capsys, "class", "reveal", code, "--db", db)
    assert status == 0 and "revealed" in out
    status, out, _ = cli(capsys, "class", "results", code, "--format", "json", "--db", db)
    data = json.loads(out)
    assert data["code"] == f"{code}-1"
    options = data["options"]
    assert "400 people will die" in options["lives_lost"][0]
    assert "200 people will be saved" in options["lives_saved"][0]
    assert data["option_labels"]["lives_lost"][0] == "the sure programme"
    assert [r["option_labels"] for r in data["class"]] == [
        ["the sure programme", "the risky programme"]
    ] * 2
    status, out, _ = cli(capsys, "class", "next", code, "--db", db)
    assert status == 0 and f"{code}-2" in out and "answers open" in out
    status, _, err = cli(capsys, "class", "next", code, "--db", db)
    assert status != 0 and "there is no next question" in err and "Traceback" not in err
    status, out, _ = cli(capsys, "class", "list", "--db", db)
    assert f"{code}  answering" in out and "question 2 of 2" in out
    # a second class of the first question: --pool gives the series with its n per session
    status, out, _ = cli(capsys, "class", "open", "--study", "classics", "--test",
                         "asian_disease", "--db", db)  # fmt: skip
    again = out.strip()
    with Store(db) as store:
        answer_all(store, again, {"lives_lost": ["a", "b"], "lives_saved": ["a"]})
    status, out, _ = cli(capsys, "class", "results", again, "--pool", "--format", "json",
                         "--db", db)  # fmt: skip
    pool = json.loads(out)["pool"]
    assert [(s["code"], s["total"]) for s in pool["sessions"]] == [(f"{code}-1", 2), (again, 3)]
    lost = next(r for r in pool["conditions"] if r["condition"] == "lives_lost")
    assert lost["n"] == 3 and lost["parts"] == [1, 2] and lost["who"] == view.POOLED
    status, out, _ = cli(capsys, "class", "results", again, "--pool", "--db", db)
    assert "your classes" in out and f"{code}-1" in out
    status, out, _ = cli(capsys, "class", "results", again, "--pool", "--format", "csv",
                         "--db", db)  # fmt: skip
    lines = out.splitlines()
    assert lines[0].startswith("session,question,condition,option,who")
    assert any(view.POOLED in line and "the sure programme" in line for line in lines)


def test_the_command_says_what_is_wrong_with_a_lesson(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "c.db")
    status, _, err = cli(capsys, "class", "open", "--study", "classics", "--test", "linda",
                         "--timer", "2", "--db", db)  # fmt: skip
    assert status == 2 and "5 to 3600 seconds" in err
    status, out, _ = cli(capsys, "class", "open", "--study", "classics", "--test", "linda",
                         "--db", db)  # fmt: skip
    code = out.strip()
    status, _, err = cli(capsys, "class", "start", code, "--db", db)
    assert status == 2 and "answering, not in its lobby" in err
    status, out, _ = cli(capsys, "class", "timer", code, "30", "--db", db)
    assert status == 0 and "timer set" in out
    status, _, err = cli(capsys, "class", "next", "ZZZZZZ", "--db", db)
    assert status == 2 and "no class session with code 'ZZZZZZ'" in err


def test_a_version_14_file_takes_the_lesson_columns_and_keeps_its_sessions(
    tmp_path: Path,
) -> None:
    from cogbias.store import migrations

    path = tmp_path / "v14.db"
    with Store(path) as store:
        code = sessions.open_session(store, classic("theatre_ticket"))
        store.db.conn.executescript(
            "alter table class_sessions drop column started_at; "
            "alter table class_sessions drop column deadline; "
            "drop table class_lessons; "
            "update meta set value = '14' where key = 'schema_version';"
        )
    with Store(path) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION
        session = sessions.require_session(store, code)
        assert session.state == sessions.ANSWERING  # it took answers before: it still does
        assert session.started_at == session.created_at and store.class_lessons() == []
    with Store(path) as store:  # set back once more: nothing added twice, nothing lost
        store.db.conn.execute("update meta set value = '14' where key = 'schema_version'")
        store.db.conn.commit()
    with Store(path) as store:
        assert sessions.require_session(store, code).state == sessions.ANSWERING
    assert now() > session.created_at


def test_the_confirmation_quotes_the_option_whole_without_a_second_full_stop() -> None:
    """Before: "Your answer is in: A) With programme A, 200 people will be saved.." """
    from cogbias.classroom import pages

    question = classic("asian_disease")
    text = pages.answered("/s/ABCDEF", question, "lives_saved", "a")
    assert "200 people will be saved.</p>" in text and ".." not in text
