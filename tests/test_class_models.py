"""Models answer a class session's question: exactly the question the class saw, sampled or
read as option probabilities, stored per session, summarised like the class's answers, and
shown in one reveal chart beside the humans and the class.

Offline: the `random` baseline, and a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import math

import pytest

from cogbias.classroom import models, sessions
from cogbias.classroom.questions import classic_question
from cogbias.llm import logprobs
from cogbias.store import Store
from cogbias.views import classroom as view
from tests.fake_llm_server import FakeLLMServer, _last_user_text


@pytest.fixture
def theatre(store: Store) -> str:
    return sessions.open_session(store, classic_question("classics", "theatre_ticket"))


def _answer_all(store: Store, code: str, answers: dict[str, list[str]]) -> None:
    """Participants answer: `answers` maps a condition to the keys its people chose."""
    session = sessions.get_session(store, code)
    assert session is not None
    done = {c: 0 for c in answers}
    token = 0
    while any(done[c] < len(a) for c, a in answers.items()):
        token += 1
        condition = sessions.assign_condition(store, session, f"t{token}")
        if done.get(condition, 10**9) >= len(answers.get(condition, [])):
            continue  # this participant leaves without answering
        key = answers[condition][done[condition]]
        assert sessions.submit_answer(store, session, f"t{token}", key) == "saved"
        done[condition] += 1


def test_the_random_model_answers_n_times_per_condition_and_a_rerun_replaces(store, theatre):
    ask = models.ModelAsk(("random",), n=30)
    outcome = models.run_models(store, theatre, ask)
    assert (outcome.stored, outcome.failed, outcome.cost) == (60, 0, 0.0)
    results = models.model_results(store, theatre)
    assert [(r.condition, r.n) for r in results] == [("lost_ticket", 30), ("lost_bill", 30)]
    for r in results:
        assert sum(r.shares) == pytest.approx(1.0)
        assert all(lo <= s <= hi for lo, s, hi in zip(r.low, r.shares, r.high, strict=True))
        assert r.high[0] - r.low[0] > 0.2  # 30 answers: a wide interval, not a point
    models.run_models(store, theatre, ask)  # the same settings again: replaced, not doubled
    assert [r.n for r in models.model_results(store, theatre)] == [30, 30]
    assert len(store.model_answers(theatre)) == 60


def _logprob_responder(request: dict) -> object:
    """A model that prefers A in the lost-ticket condition and B in the other, with its
    probabilities listed; without `logprobs` it answers in words."""
    prompt = _last_user_text(request)
    ticket = "ticket is gone" in prompt
    if not request.get("logprobs"):
        return "I would say A) Yes." if ticket else "**B**"
    listed = {"A": 0.7, "B": 0.2, "Hmm": 0.1} if ticket else {"B": 0.9, "A": 0.05, "x": 0.05}
    top = [{"token": t, "logprob": math.log(p)} for t, p in listed.items()]
    first = top[0]
    content = [{"token": first["token"], "logprob": first["logprob"], "top_logprobs": top}]
    return {"content": first["token"], "logprobs": {"content": content}}


def test_a_served_model_is_asked_the_question_the_class_saw_and_read_both_ways(store, theatre):
    question = sessions.get_session(store, theatre).question
    with FakeLLMServer(responder=_logprob_responder) as fake:
        model = "openai/classmodel"
        sampled = models.ModelAsk((model,), n=4, temperature=1.0, api_base=fake.base_url)
        models.run_models(store, theatre, sampled)
        probs = models.ModelAsk((model,), mode="probabilities", api_base=fake.base_url)
        models.run_models(store, theatre, probs)
        asked = [_last_user_text(r) for r in fake.requests]
    # exactly the classic's own prompt, each condition's, as the class read it (plus options)
    assert set(asked) == {question.prompts[c] for c in question.conditions}
    by = {(r.mode, r.condition): r for r in models.model_results(store, theatre)}
    assert by["sample", "lost_ticket"].shares == (1.0, 0.0)
    assert by["sample", "lost_bill"].shares == (0.0, 1.0)  # "**B**" read as B
    assert by["probabilities", "lost_ticket"].shares == pytest.approx((0.7 / 0.9, 0.2 / 0.9))
    assert by["probabilities", "lost_bill"].shares == pytest.approx((0.05 / 0.95, 0.9 / 0.95))
    assert by["probabilities", "lost_bill"].temperature == 0.0


def test_an_unreadable_answer_is_kept_as_a_failure_with_its_reason(store, theatre):
    def rambling(request: dict) -> str:
        return "Both options have merit; I cannot decide. <script>alert(1)</script>"

    with FakeLLMServer(responder=rambling) as fake:
        ask = models.ModelAsk(("openai/vague",), n=2, api_base=fake.base_url)
        outcome = models.run_models(store, theatre, ask)
    assert (outcome.stored, outcome.failed) == (4, 4)
    assert outcome.problems and outcome.problems[0].startswith("openai/vague: ")
    assert [r.n for r in models.model_results(store, theatre)] == [0, 0]
    assert all("<script>" in a.answer for a in store.model_answers(theatre))  # kept as is


def test_the_cost_is_stated_before_any_call_and_bad_asks_are_refused_by_name(
    store, theatre, monkeypatch
):
    question = sessions.get_session(store, theatre).question
    assert "free" in models.cost_text(question, models.ModelAsk(("random",), n=10))
    assert models.planned_calls(question, models.ModelAsk(("random", "random"), n=10)) == 40
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    priced = models.ModelAsk(("gpt-4o-mini",), n=10)
    cost = models.estimated_cost(question, priced)
    assert cost is not None and 0 < cost < 0.05
    assert "$" in models.cost_text(question, priced)
    with pytest.raises(models.ClassModelError, match="OPENAI_API_KEY"):
        models.run_models(store, theatre, priced)  # refused before any call
    assert store.model_answers(theatre) == []
    for ask, why in [
        (models.ModelAsk(()), "at least one model"),
        (models.ModelAsk(("random",), n=0), "between 1 and"),
        (models.ModelAsk(("random",), n=10, temperature=-1), "0 or more"),
        (models.ModelAsk(("random",), mode="telepathy"), "unknown mode"),
        (models.ModelAsk(("anthropic/claude-3-5-haiku-20241022",), mode="probabilities"),
         "does not give the probabilities"),
    ]:  # fmt: skip
        with pytest.raises(models.ClassModelError, match=why):
            models.check_ask(question, ask)
    with pytest.raises(models.ClassModelError, match="no class session"):
        models.run_models(store, "NOSUCH", models.ModelAsk(("random",)))


def test_the_reveal_puts_humans_class_and_models_on_one_share_scale(store, theatre):
    _answer_all(store, theatre, {"lost_ticket": ["a", "b", "b"], "lost_bill": ["a", "a"]})
    models.run_models(store, theatre, models.ModelAsk(("random",), n=10))
    results = sessions.results(store, theatre)
    frame = view.reveal_frame(results, models.model_results(store, theatre))
    who = list(dict.fromkeys(frame["who"]))
    assert who == [view.HUMANS, view.CLASS, "model random (T 0.7)"]
    ticket = frame[frame["condition"] == results.question.labels["lost_ticket"]]
    row = ticket.set_index("who").loc[view.CLASS]
    assert row["value"] == pytest.approx(1 / 3) and row["n"] == 3
    assert row["low"] < 1 / 3 < row["high"]
    assert ticket.set_index("who").loc[view.HUMANS, "value"] == pytest.approx(0.46)
    assert set(frame["option"]) == {"A) Yes"}  # two options: the one the original reports
    spec = view.reveal_chart(frame, results.question).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["domain"] == [0, 1]
    table = view.reveal_table(frame, results.question)
    assert "33% [" in " ".join(table["Result (95% interval)"])


def test_a_number_question_shows_medians_and_a_deleted_session_takes_its_model_answers(store):
    code = sessions.open_session(store, classic_question("classics", "un_anchor"))
    question = sessions.get_session(store, code).question
    assert question.kind == "number"
    with pytest.raises(models.ClassModelError, match="number question"):
        models.check_ask(question, models.ModelAsk(("random",), mode="probabilities"))
    models.run_models(store, code, models.ModelAsk(("random",), n=12))
    for r in models.model_results(store, code):
        assert r.n == 12 and r.median_low <= r.median <= r.median_high
    frame = view.reveal_frame(sessions.results(store, code), models.model_results(store, code))
    assert view.measure_of(question) == "median" and view.HUMANS in set(frame["who"])
    sessions.delete_session(store, code)
    assert store.model_answers(code) == []


def test_the_join_qr_code_is_drawn_only_for_a_link_a_phone_can_open():
    svg = view.join_qr_svg("http://192.168.1.20:8765/s/ABCDEF")
    assert svg.startswith("<svg") and "<script" not in svg
    for bad in ["javascript:alert(1)", "http://", "http://a b/", "file:///etc/passwd", "x" * 3000]:
        assert view.safe_join_url(bad) is None
        with pytest.raises(ValueError, match="not a join link"):
            view.join_qr_svg(bad)


def test_a_question_without_lettered_options_is_lettered_for_probabilities(store):
    from cogbias.classroom.questions import case_question

    question = case_question("framing_effect")
    prompt = models.prompt_for(question, question.conditions[0], models.PROBABILITIES)
    marks = logprobs.labels(len(question.options[question.conditions[0]]))
    assert prompt.endswith(models.LABEL_HINT)
    assert all(f"\n{m}: " in prompt for m in marks)
    assert (
        models.prompt_for(question, question.conditions[0], models.SAMPLE)
        == (question.prompts[question.conditions[0]])
    )


def test_a_seven_point_test_case_shows_class_and_models_as_mean_positions(store):
    from cogbias.classroom.questions import case_question

    question = case_question("anthropomorphism")
    assert (question.kind, len(question.keys), question.reference) == ("scale", 7, None)
    code = sessions.open_session(store, question)
    first, second = question.conditions
    _answer_all(
        store, code, {first: [question.keys[1], question.keys[3]], second: [question.keys[6]] * 3}
    )
    models.run_models(store, code, models.ModelAsk(("random",), n=40))
    models.run_models(store, code, models.ModelAsk(("random",), mode="probabilities"))
    frame = view.reveal_frame(sessions.results(store, code), models.model_results(store, code))
    assert view.HUMANS not in set(frame["who"])  # no reference: class and models only
    rows = frame.set_index(["condition", "who"])
    mine = rows.loc[(question.labels[first], view.CLASS)]
    assert mine["value"] == pytest.approx(3.0)  # positions 2 and 4
    assert 1 <= mine["low"] < 3.0 < mine["high"] <= 7
    uniform = rows.loc[(question.labels[first], "model random (probabilities)")]
    assert uniform["value"] == pytest.approx(4.0)  # the middle of 1..7
    sampled = rows.loc[(question.labels[second], "model random (T 0.7)")]
    assert 2.5 < sampled["value"] < 5.5 and sampled["n"] == 40
    spec = view.reveal_chart(frame, question).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["domain"] == [1, 7]
    legend = spec["layer"][1]["encoding"]["color"]["scale"]["domain"]
    assert legend == [view.CLASS, "model random (probabilities)", "model random (T 0.7)"]
    assert "mean position" in view.reveal_table(frame, question)["Option"].iloc[0]
