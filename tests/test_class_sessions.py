"""Class sessions in the library and the store: the question a class answers, balanced
conditions, one answer per participant, closing, results beside the humans, export, delete."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from cogbias.classroom import questions, sessions
from cogbias.classroom.answer_reading import read_answer
from cogbias.classroom.questions import Question
from cogbias.core.errors import UserError
from cogbias.store import Store


def valid(question: Question, text: str) -> str | None:
    """The answer as the session would store it (None: refused)."""
    return read_answer(question, text).stored


def theatre() -> Question:
    return questions.classic_question("classics", "theatre_ticket")


def test_a_classic_is_asked_as_the_study_asks_it_with_its_reference() -> None:
    question = theatre()
    assert question.conditions == ("lost_ticket", "lost_bill")
    assert question.keys == ("a", "b")
    assert question.options["lost_ticket"] == ("A) Yes", "B) No")
    # participants read the stem; the options are their buttons, not lines of text
    assert "A) Yes" not in question.texts["lost_ticket"]
    assert question.texts["lost_ticket"].startswith("You have decided to see a play")
    # a model gets the whole question with the study's answer hint and system message
    assert "A) Yes" in question.prompts["lost_ticket"]
    assert "Answer with the letter" in question.prompts["lost_ticket"]
    assert question.system.startswith("You take part in a short survey")
    assert question.reference == "theatre_ticket"
    assert question.labels["lost_bill"] == "lost a $10 bill"
    assert Question.from_json(question.to_json()) == question


def test_the_asian_disease_options_differ_by_condition_but_share_their_keys() -> None:
    question = questions.classic_question("classics", "asian_disease")
    lost, saved = (question.options[c] for c in question.conditions)
    assert "die" in lost[0] and "saved" in saved[0]
    assert question.keys == ("a", "b")


def test_a_number_classic_takes_a_number_within_its_bounds() -> None:
    question = questions.classic_question("classics", "un_anchor")
    assert question.kind == "number" and (question.low, question.high) == (0, 100)
    assert question.number_label == "Percentage:"
    assert "__" not in question.texts["low_anchor"]
    assert valid(question, " 45 ") == "45"
    assert valid(question, "12,5") == "12.5"
    for wrong in ("101", "-1", "nan", "inf", "forty", "", "1" * 50):
        assert valid(question, wrong) is None, wrong


def test_numbers_are_read_as_people_type_them_and_stored_plainly() -> None:
    """Before: "25%" was refused for a percentage, "40,5" taken without saying how it was
    read, and "1,000" stored as 1."""
    question = questions.classic_question("classics", "un_anchor")
    typed = {"25%": "25", "25 %": "25", "40,5": "40.5", "40.50": "40.5", "$7.5": "7.5",
             "0,5": "0.5", "12.0": "12", "+3": "3"}  # fmt: skip
    for text, stored in typed.items():
        assert valid(question, text) == stored, text
    ambiguous = read_answer(question, "1,000")
    assert ambiguous.stored is None and "1000 or 1.000" in ambiguous.problem
    assert "from 0 to 100" in read_answer(question, "250").problem
    wide = replace(question, high=1e6)
    assert valid(wide, "1,000.5") == "1000.5" and valid(wide, "1 000") == "1000"
    assert valid(wide, "1.000,5") == "1000.5" and valid(wide, "1,000,000") == "1000000"


def test_a_test_case_is_one_instance_filled_offline() -> None:
    question = questions.case_question("anchoring")
    assert question.source == "testcase" and question.conditions == ("control", "treatment")
    assert question.kind == "scale" and len(question.keys) == 11
    assert question.options["control"][0] == "0%"
    assert "Option 1: 0%" in question.prompts["control"]
    assert "30%" in question.texts["treatment"]
    assert question.instance_id and question.reference is None


def test_unknown_or_unaskable_sources_say_so() -> None:
    with pytest.raises(KeyError, match="no test 'nope'"):
        questions.classic_question("classics", "nope")
    askable = {(study, test) for study, test, _ in questions.classic_choices()}
    assert ("classics", "linda") in askable
    unaskable = next(
        (s, t)
        for s in ("biasbuster", "mohr8")
        for t in questions.get_study(s).tests
        if (s, t) not in askable
    )
    with pytest.raises(UserError, match="cannot answer it"):
        questions.classic_question(*unaskable)


def test_codes_are_short_unambiguous_and_typed_in_any_case(store: Store) -> None:
    codes = {sessions.open_session(store, theatre()) for _ in range(20)}
    assert len(codes) == 20
    for code in codes:
        assert len(code) == 6 and not set(code) & set("01IO")
    code = next(iter(codes))
    assert sessions.get_session(store, f" {code.lower()[:3]} {code.lower()[3:]}").code == code
    assert sessions.get_session(store, "ZZZZZZ") is None
    assert len(sessions.list_sessions(store)) == 20


def test_conditions_are_balanced_and_kept_per_participant(store: Store) -> None:
    session = sessions.get_session(store, sessions.open_session(store, theatre()))
    assigned = [sessions.assign_condition(store, session, f"token-{i}") for i in range(41)]
    counts = {c: assigned.count(c) for c in session.question.conditions}
    assert sorted(counts.values()) == [20, 21]
    # a reload (the same token) keeps the same condition
    again = [sessions.assign_condition(store, session, f"token-{i}") for i in range(41)]
    assert again == assigned
    # ties are drawn, not always the first condition
    firsts = set()
    for _ in range(12):
        other = sessions.get_session(store, sessions.open_session(store, theatre()))
        firsts.add(sessions.assign_condition(store, other, "first"))
    assert firsts == set(session.question.conditions)


def test_one_answer_per_participant_and_only_while_open(store: Store) -> None:
    session = sessions.get_session(store, sessions.open_session(store, theatre()))
    assert sessions.submit_answer(store, session, "nobody", "a") == "unassigned"
    sessions.assign_condition(store, session, "p1")
    assert sessions.submit_answer(store, session, "p1", "<b>c</b>") == "invalid"
    assert sessions.submit_answer(store, session, "p1", "a") == "saved"
    assert sessions.submit_answer(store, session, "p1", "b") == "already"
    assert sessions.answer_of(store, session, "p1") == "a"
    sessions.assign_condition(store, session, "p2")
    sessions.close_session(store, session.code)
    assert sessions.submit_answer(store, session, "p2", "b") == "closed"
    assert sum(sessions.count_answers(store, session.code).values()) == 1


def test_tokens_are_stored_hashed_per_session(store: Store) -> None:
    session = sessions.get_session(store, sessions.open_session(store, theatre()))
    sessions.assign_condition(store, session, "secret-token")
    sessions.submit_answer(store, session, "secret-token", "a")
    dump = "\n".join(map(str, store.query("select * from class_answers")))
    assert "secret-token" not in dump
    assert sessions.token_hash("AAAAAA", "t") != sessions.token_hash("BBBBBB", "t")


def answer_all(store: Store, code: str, answers: dict[str, list[str]]) -> None:
    """Participants until each condition has the given answers (assignment is balanced)."""
    session = sessions.get_session(store, code)
    left = {c: list(a) for c, a in answers.items()}
    for i in range(10 * sum(map(len, answers.values()))):
        if not any(left.values()):
            return
        condition = sessions.assign_condition(store, session, f"p{i}")
        if left.get(condition):
            assert sessions.submit_answer(store, session, f"p{i}", left[condition].pop()) == "saved"
    raise AssertionError("could not place every answer")


def test_results_give_shares_with_wilson_intervals_and_the_humans(store: Store) -> None:
    code = sessions.open_session(store, theatre())
    answer_all(store, code, {"lost_ticket": ["a", "b", "b", "b"], "lost_bill": ["a", "a"]})
    assert sessions.count_answers(store, code) == {"lost_ticket": 4, "lost_bill": 2}
    result = sessions.results(store, code)
    ticket, bill = result.conditions
    assert (ticket.n, ticket.counts, ticket.shares) == (4, [1, 3], [0.25, 0.75])
    assert ticket.low[0] == pytest.approx(0.0456, abs=1e-3)  # Wilson, 1 of 4
    assert ticket.high[0] == pytest.approx(0.6994, abs=1e-3)
    assert bill.shares == [1.0, 0.0] and bill.high[0] == 1.0 and bill.low[0] < 1.0
    humans = {h.condition: h for h in result.humans}
    assert humans["lost_bill"].shares == [0.88, 0.12] and humans["lost_bill"].n == 183
    assert "Tversky" in result.citation
    data = sessions.results_json(result)
    assert data["class"][0]["counts"] == [1, 3]
    assert data["humans"][1]["n"] == 183


def test_a_condition_nobody_answered_is_null_in_json(store: Store) -> None:
    code = sessions.open_session(store, theatre())
    data = sessions.results_json(sessions.results(store, code))
    assert data["class"][0]["n"] == 0 and data["class"][0]["shares"] == [None, None]


def test_a_scale_reports_the_mean_position_with_a_t_interval(store: Store) -> None:
    code = sessions.open_session(store, questions.case_question("anchoring"))
    answer_all(store, code, {"control": ["5", "6", "7"], "treatment": ["4", "4"]})
    control, treatment = sessions.results(store, code).conditions
    assert control.mean == pytest.approx(6.0)
    assert control.mean_low == pytest.approx(6 - 4.303 / 3**0.5, abs=1e-2)  # t, 2 df
    assert control.mean_high == pytest.approx(6 + 4.303 / 3**0.5, abs=1e-2)
    assert treatment.mean == 4.0 and treatment.counts[3] == 2


def test_a_number_reports_mean_and_median_beside_the_humans_median(store: Store) -> None:
    code = sessions.open_session(store, questions.classic_question("classics", "un_anchor"))
    answer_all(store, code, {"low_anchor": ["10", "20", "30"], "high_anchor": ["40", "50"]})
    result = sessions.results(store, code)
    low = result.conditions[0]
    assert (low.mean, low.median) == (20.0, 20.0)
    humans = {h.condition: h for h in result.humans}
    assert humans["low_anchor"].median == 25 and humans["high_anchor"].median == 45


def test_reveal_closes_and_delete_removes_everything(store: Store) -> None:
    code = sessions.open_session(store, theatre())
    other = sessions.open_session(store, theatre())
    answer_all(store, code, {"lost_ticket": ["a"], "lost_bill": ["b"]})
    answer_all(store, other, {"lost_ticket": ["b"]})
    sessions.reveal_session(store, code)
    revealed = sessions.get_session(store, code)
    assert revealed.revealed and not revealed.open
    sessions.delete_session(store, code)
    assert sessions.get_session(store, code) is None
    for table in ("class_answers", "class_assignments", "class_sessions"):
        rows = store.query(f"select * from {table}")
        assert rows and all(code not in map(str, row.values()) for row in rows), table
    with pytest.raises(KeyError, match="no class session"):
        sessions.delete_session(store, code)


def test_export_writes_one_safe_row_per_answer(store: Store, tmp_path: Path) -> None:
    code = sessions.open_session(store, theatre())
    answer_all(store, code, {"lost_ticket": ["a", "b"], "lost_bill": ["a"]})
    path = sessions.export_csv(store, code, tmp_path / "answers.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == 3 and {r["session"] for r in rows} == {code}
    assert {r["option"] for r in rows} == {"A) Yes", "B) No"}
    with pytest.raises(Exception, match="exists"):
        sessions.export_csv(store, code, path)


def test_the_question_is_frozen_when_the_session_opens(store: Store) -> None:
    question = theatre()
    changed = Question.from_json(
        question.to_json().replace("You have decided to see a play", "Changed words")
    )
    code = sessions.open_session(store, changed)
    assert sessions.get_session(store, code).question.texts["lost_ticket"].startswith("Changed")


def test_every_number_question_is_bounded_so_1e308_is_refused() -> None:
    """mohr8's endowment test states no maximum: a class gets one from its question."""
    numbers = [
        questions.classic_question(study, test)
        for study, test, _ in questions.classic_choices()
        if questions.get_study(study).tests[test].answer == "number"
    ]
    assert any(q.test == "endowment" for q in numbers)
    for question in numbers:
        assert question.low is not None and question.high is not None, question.test
        assert -1e6 <= question.low < question.high <= 1e6, question.test
        for wrong in ("1e308", "-1e308", "1e40", "inf", "nan"):
            assert valid(question, wrong) is None, (question.test, wrong)
    endowment = next(q for q in numbers if q.test == "endowment")
    assert endowment.high == questions.PLAUSIBLE_FACTOR * 4  # the mug's $4, times 25
    # a session stored before its question had bounds still refuses what is not a number
    unbounded = Question.from_json(endowment.to_json().replace('"high": 100.0', '"high": null'))
    assert unbounded.high is None and valid(unbounded, "1e308") is None
    assert valid(unbounded, "250") == "250"


def test_the_balanced_order_is_blocks_of_each_condition_shuffled_by_the_seed() -> None:
    conditions = ("a", "b", "c")
    order = [sessions.balanced_condition(conditions, 7, place) for place in range(300)]
    assert all(sorted(order[i : i + 3]) == ["a", "b", "c"] for i in range(0, 300, 3))
    assert order == [sessions.balanced_condition(conditions, 7, p) for p in range(300)]
    assert order != [sessions.balanced_condition(conditions, 8, p) for p in range(300)]
    assert len({tuple(order[i : i + 3]) for i in range(0, 300, 3)}) == 6  # every shuffle


def test_a_new_participant_takes_the_next_place_unless_refused(store: Store) -> None:
    session = sessions.get_session(store, sessions.open_session(store, theatre()))
    first = sessions.assign_condition(store, session, "p1")
    with pytest.raises(sessions.Throttled):
        sessions.assign_condition(store, session, "p2", admit=lambda: False)
    assert sessions.assign_condition(store, session, "p1", admit=lambda: False) == first
    assert sessions.condition_of(store, session, "p2") is None  # refused: not placed
    second = sessions.assign_condition(store, session, "p2", admit=lambda: True)
    assert {first, second} == set(session.question.conditions)  # places 0 and 1: one block


def test_unanswered_participants_are_bounded(store: Store) -> None:
    session = sessions.get_session(store, sessions.open_session(store, theatre()))
    for i in range(10):
        sessions.assign_condition(store, session, f"p{i}")
    for i in (0, 1, 9):
        assert sessions.submit_answer(store, session, f"p{i}", "a") == "saved"
    assert store.prune_class_pending(session.code, keep=2) == 5  # p2..p6 forgotten
    kept = [f"p{i}" for i in range(10) if sessions.condition_of(store, session, f"p{i}")]
    assert kept == ["p0", "p1", "p7", "p8", "p9"]
    assert sum(sessions.count_answers(store, session.code).values()) == 3
    seed = store.query("select seed from class_sessions")[0]["seed"]
    conditions = session.question.conditions
    # a forgotten participant who comes back takes the next place, not their old one
    assert sessions.assign_condition(store, session, "p2") == sessions.balanced_condition(
        conditions, seed, 10
    )


def test_a_version_12_file_gives_its_sessions_a_sequence(tmp_path: Path) -> None:
    from cogbias.store import migrations

    path = tmp_path / "v12.db"
    with Store(path) as store:
        code = sessions.open_session(store, theatre())
        session = sessions.get_session(store, code)
        for token in ("p1", "p2", "p3"):
            sessions.assign_condition(store, session, token)
        store.db.conn.executescript(
            "alter table class_sessions drop column seed; "
            "alter table class_sessions drop column slots; "
            "alter table class_sessions drop column throttled; "
            "update meta set value = '12' where key = 'schema_version';"
        )
    with Store(path) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION
        [row] = store.query("select seed, slots, throttled from class_sessions")
        assert row["seed"] is not None and row["slots"] == 3 and row["throttled"] == 0
        assert sessions.condition_of(store, session, "p1") is not None
