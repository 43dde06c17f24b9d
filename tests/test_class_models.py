"""Models answer a class session's question as a run of the class kind: exactly the question
the class saw, sampled or read as option probabilities, stored per run and session,
summarised like the class's answers, and shown in one reveal chart beside the humans and the
class. The run is planned with its cost, leased, listed, cancelled and resumed like every
kind, and asks nothing twice.

Offline: the `random` baseline, and a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import math
import threading
import time

import pytest

from cogbias.classroom import sessions
from cogbias.classroom.questions import case_question, classic_question
from cogbias.core.run_record import ResultsPage, Run
from cogbias.llm import logprobs
from cogbias.llm.profiles import resolve
from cogbias.runs import class_answers, class_plan, executor, kinds, scorers
from cogbias.runs.class_plan import ClassAskError, ClassSpec
from cogbias.runs.summaries import run_summaries, table_row
from cogbias.store import Store
from cogbias.views import classroom as view
from tests.fake_llm_server import FakeLLMServer, _last_user_text


@pytest.fixture
def theatre(store: Store) -> str:
    return sessions.open_session(store, classic_question("classics", "theatre_ticket"))


def ask(store: Store, code: str, *models: str, **how: object) -> Run:
    """Plan and work a class run to its end, as `cogbias class ask` does; the run as stored."""
    plan = kinds.plan(ClassSpec(code, models, **how), store)  # type: ignore[arg-type]
    return executor.execute(plan, store)


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


def test_the_random_model_answers_n_times_per_condition_and_a_rerun_counts_once(store, theatre):
    run = ask(store, theatre, "random", samples=30)
    assert (run.status, run.done, run.failed, run.cost) == ("done", 60, 0, 0.0)
    results = sessions.results(store, theatre).models
    assert [(r.condition, r.n) for r in results] == [("lost_ticket", 30), ("lost_bill", 30)]
    for r in results:
        assert sum(r.counts) == 30 and sum(r.shares) == pytest.approx(1.0)
        assert all(lo <= s <= hi for lo, s, hi in zip(r.low, r.shares, r.high, strict=True))
        assert r.high[0] - r.low[0] > 0.2  # 30 answers: a wide interval, not a point
    again = ask(store, theatre, "random", samples=30)  # the same run: nothing left to ask
    assert again.id == run.id and again.done == 60
    # another run asking the same answers (a second model beside): counted once
    with FakeLLMServer(lambda _: "A") as fake:
        ask(store, theatre, "random", "openai/other", samples=30, scoring="sample",
            api_base=fake.base_url)  # fmt: skip
    by_model = {(r.model, r.condition): r.n for r in sessions.results(store, theatre).models}
    assert by_model[("random", "lost_ticket")] == 30
    assert len(store.model_answers(theatre)) == 60 + 120  # each run keeps its own rows


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
        ask(store, theatre, model, samples=4, temperature=1.0, scoring="sample",
            api_base=fake.base_url)  # fmt: skip
        ask(store, theatre, model, scoring="probabilities", api_base=fake.base_url)
        asked = [_last_user_text(r) for r in fake.requests]
        sent = fake.requests
    # exactly the classic's own prompt, each condition's, as the class read it
    assert set(asked) == {question.prompts[c] for c in question.conditions}
    assert all(r["messages"][0]["content"] == question.system for r in sent)
    assert not any("grammar" in r for r in sent)  # a served OpenAI model takes no grammar
    by = {(r.mode, r.condition): r for r in sessions.results(store, theatre).models}
    assert by["sample", "lost_ticket"].shares == [1.0, 0.0]
    assert by["sample", "lost_bill"].shares == [0.0, 1.0]  # "**B**" read as B
    assert by["probabilities", "lost_ticket"].shares == pytest.approx([0.7 / 0.9, 0.2 / 0.9])
    assert by["probabilities", "lost_bill"].shares == pytest.approx([0.05 / 0.95, 0.9 / 0.95])
    assert by["probabilities", "lost_bill"].temperature == 0.0
    assert by["probabilities", "lost_bill"].n == 1  # one call, no sampling


def test_an_unreadable_answer_is_counted_with_its_reason(store, theatre):
    def rambling(request: dict) -> str:
        return "Both options have merit; I cannot decide. <script>alert(1)</script>"

    with FakeLLMServer(responder=rambling) as fake:
        run = ask(store, theatre, "openai/vague", samples=2, scoring="sample",
                  api_base=fake.base_url)  # fmt: skip
    assert (run.status, run.done, run.failed) == ("done", 4, 4)
    results = sessions.results(store, theatre)
    assert [(r.n, r.n_unreadable) for r in results.models] == [(0, 2), (0, 2)]
    notes = view.unreadable_notes(results)
    assert (
        len(notes) == 2 and "2 answers could not be read: expected one of the letters" in (notes[0])
    )
    data = sessions.results_json(results)["models"][0]
    assert data["n_unreadable"] == data["n_failed"] == 2
    assert data["unreadable"][0]["n"] == 2 and "letters" in data["unreadable"][0]["why"]
    assert all("<script>" in a.answer for a in store.model_answers(theatre))  # kept as is


def test_the_cost_is_stated_before_any_call_and_bad_asks_are_refused_by_name(
    store, theatre, monkeypatch
):
    plan = kinds.plan(ClassSpec(theatre, ("random",), samples=10), store)
    assert "free" in plan.cost_text() and plan.calls() == 20
    assert kinds.plan(ClassSpec(theatre, ("random", "random"), samples=10), store).calls() == 20
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    priced = kinds.plan(ClassSpec(theatre, ("gpt-4o-mini",), samples=10, scoring="sample"), store)
    cost = priced.estimated_cost()
    assert cost is not None and 0 < cost < 0.05 and "$" in priced.describe()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ClassAskError, match="OPENAI_API_KEY"):
        kinds.plan(ClassSpec(theatre, ("gpt-4o-mini",)), store)  # refused before any call
    assert store.model_answers(theatre) == [] and store.runs() == []
    for spec, why in [
        (ClassSpec(theatre, ()), "at least one model"),
        (ClassSpec(theatre, ("random",), samples=0, scoring="sample"), "between 1 and"),
        (ClassSpec(theatre, ("random",), temperature=-1, scoring="sample"), "0 or more"),
        (ClassSpec(theatre, ("random",), scoring="telepathy"), "unknown way"),
        (ClassSpec(theatre, ("anthropic/claude-3-5-haiku-20241022",), scoring="sample",
                   temperature=1.5), "up to 1"),
        (ClassSpec(theatre, ("anthropic/claude-3-5-haiku-20241022",), scoring="probabilities"),
         "does not give the probabilities"),
    ]:  # fmt: skip
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-real")
        with pytest.raises(ClassAskError, match=why):
            kinds.plan(spec, store)
    with pytest.raises(KeyError, match="no class session"):
        kinds.plan(ClassSpec("NOSUCH", ("random",)), store)


def test_the_default_way_of_asking_is_decided_from_the_profiles():
    local, random_, claude = (
        resolve(m) for m in ("local/smollm2", "random", "anthropic/claude-3-5-haiku-20241022")
    )
    assert scorers.default_scoring([local], has_options=True) == scorers.PROBABILITIES
    assert scorers.default_scoring([local, random_], True) == scorers.PROBABILITIES
    assert scorers.default_scoring([local], has_options=False) == scorers.CHOICE  # a number
    assert scorers.default_scoring([local, claude], True) == scorers.CHOICE  # no logprobs
    assert scorers.default_scoring([random_], True) == scorers.CHOICE  # the baseline's spread


def test_the_local_model_is_asked_under_its_grammar_or_for_its_probabilities(store, theatre):
    """The requests the local model gets (built, not sent: the real model is
    `test_local_model_leaves_no_answer_unread`)."""
    question = sessions.get_session(store, theatre).question
    default = kinds.plan(ClassSpec(theatre, ("local/smollm2", "random"), samples=20), store)
    assert default.spec.scoring == "probabilities" and default.spec.samples == 1
    assert any("scored by option probabilities" in n for n in default.notes)
    request = class_answers.request_for(default, default.units[0])
    assert request.top_logprobs == logprobs.TOP_LOGPROBS and request.max_tokens == 1
    assert request.grammar == 'root ::= "A" | "B"'
    sampled = kinds.plan(ClassSpec(theatre, ("local/smollm2",), scoring="sample"), store)
    request = class_answers.request_for(sampled, sampled.units[0])
    assert request.grammar == 'root ::= ("A" | "B")' and request.top_logprobs is None
    assert request.messages[-1][1] == question.prompts[sampled.units[0].condition]
    un = sessions.open_session(store, classic_question("classics", "un_anchor"))
    number = kinds.plan(ClassSpec(un, ("local/smollm2",)), store)  # a number: sampled
    assert number.spec.scoring == "sample"
    assert class_answers.request_for(number, number.units[0]).grammar == (
        'root ::= ([0-9] | [1-9] [0-9] | "100")'
    )
    filled = case_question("framing_effect")
    case = sessions.open_session(store, filled)
    options = kinds.plan(ClassSpec(case, ("local/smollm2",), scoring="sample"), store)
    numbers = " | ".join(f'"{i}"' for i in range(1, len(filled.keys) + 1))
    assert class_answers.request_for(options, options.units[0]).grammar == (
        f'root ::= "Option " ({numbers})'
    )
    random_only = kinds.plan(ClassSpec(theatre, ("random",)), store)
    assert class_answers.request_for(random_only, random_only.units[0]).grammar is None


def test_the_reveal_puts_humans_class_and_models_on_one_share_scale(store, theatre):
    _answer_all(store, theatre, {"lost_ticket": ["a", "b", "b"], "lost_bill": ["a", "a"]})
    ask(store, theatre, "random", samples=10)
    results = sessions.results(store, theatre)
    frame = view.reveal_frame(results)
    who = list(dict.fromkeys(frame["who"]))
    assert who == [view.HUMANS, view.CLASS, "model random"]  # the baseline uses no temperature
    ticket = frame[frame["condition"] == results.question.labels["lost_ticket"]]
    row = ticket.set_index("who").loc[view.CLASS]
    assert row["value"] == pytest.approx(1 / 3) and row["n"] == 3
    assert row["low"] < 1 / 3 < row["high"]
    assert ticket.set_index("who").loc[view.HUMANS, "value"] == pytest.approx(0.46)
    # two options: the one the original reports, by its neutral name (the same in both)
    assert set(frame["option"]) == {"yes, pay $10 for a ticket"}
    spec = view.reveal_chart(frame, results.question).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["domain"] == [0, 1]
    table = view.reveal_table(frame, results.question)
    assert "33% [" in " ".join(table["Result (95% interval)"])


def test_a_number_question_shows_medians_and_a_deleted_session_takes_its_runs(store):
    code = sessions.open_session(store, classic_question("classics", "un_anchor"))
    question = sessions.get_session(store, code).question
    assert question.kind == "number"
    with pytest.raises(ClassAskError, match="number question"):
        kinds.plan(ClassSpec(code, ("random",), scoring="probabilities"), store)
    run = ask(store, code, "random", samples=12)
    for r in sessions.results(store, code).models:
        assert r.n == 12 and r.median_low <= r.median <= r.median_high
        assert 0 <= r.mean_low <= r.mean <= r.mean_high <= 100
    frame = view.reveal_frame(sessions.results(store, code))
    assert view.measure_of(question) == "median" and view.HUMANS in set(frame["who"])
    sessions.delete_session(store, code)
    assert store.model_answers(code) == [] and store.run(run.id) is None


def test_deleting_a_class_run_takes_its_answers_and_says_how_many(store, theatre):
    from cogbias.runs import deletion

    run = ask(store, theatre, "random", samples=3)
    kept = ask(store, theatre, "random", samples=3, temperature=1.0)
    planned = deletion.plan_run(store, run.id)
    assert planned.decisions == 6 and "6 answer(s)" in planned.describe()  # its noun
    deletion.apply(store, planned)
    assert store.run_model_answers(run.id) == []
    assert len(store.run_model_answers(kept.id)) == 6


def test_the_join_qr_code_is_drawn_only_for_a_link_a_phone_can_open():
    svg = view.join_qr_svg("http://192.168.1.20:8765/s/ABCDEF")
    assert svg.startswith("<svg") and "<script" not in svg
    for bad in ["javascript:alert(1)", "http://", "http://a b/", "file:///etc/passwd", "x" * 3000]:
        assert view.safe_join_url(bad) is None
        with pytest.raises(ValueError, match="not a join link"):
            view.join_qr_svg(bad)


def test_a_question_without_lettered_options_is_lettered_for_probabilities(store):
    question = case_question("framing_effect")
    first = question.conditions[0]
    prompt = class_plan.prompt_for(question, first, ClassSpec("X", (), scoring="probabilities"))
    marks = logprobs.labels(len(question.options[first]))
    assert prompt.endswith(class_plan.LABEL_HINT)
    assert all(f"\n{m}: " in prompt for m in marks)
    sampled = ClassSpec("X", (), scoring="sample")
    assert class_plan.prompt_for(question, first, sampled) == question.prompts[first]


def test_a_seven_point_test_case_shows_class_and_models_as_mean_positions(store):
    question = case_question("anthropomorphism")
    assert (question.kind, len(question.keys), question.reference) == ("scale", 7, None)
    code = sessions.open_session(store, question)
    first, second = question.conditions
    _answer_all(
        store, code, {first: [question.keys[1], question.keys[3]], second: [question.keys[6]] * 3}
    )
    ask(store, code, "random", samples=40)
    ask(store, code, "random", scoring="probabilities")
    frame = view.reveal_frame(sessions.results(store, code))
    assert view.HUMANS not in set(frame["who"])  # no reference: class and models only
    rows = frame.set_index(["condition", "who"])
    mine = rows.loc[(question.labels[first], view.CLASS)]
    assert mine["value"] == pytest.approx(3.0)  # positions 2 and 4
    assert 1 <= mine["low"] < 3.0 < mine["high"] <= 7
    uniform = rows.loc[(question.labels[first], "model random (probabilities)")]
    assert uniform["value"] == pytest.approx(4.0)  # the middle of 1..7
    sampled = rows.loc[(question.labels[second], "model random")]
    assert 2.5 < sampled["value"] < 5.5 and sampled["n"] == 40
    spec = view.reveal_chart(frame, question).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["domain"] == [1, 7]
    legend = spec["layer"][1]["encoding"]["color"]["scale"]["domain"]
    assert legend == [view.CLASS, "model random (probabilities)", "model random"]
    assert "mean position" in view.reveal_table(frame, question)["Option"].iloc[0]


def test_a_class_run_is_listed_cancelled_and_resumed_asking_nothing_twice(tmp_path):
    """Against a slow scripted server: a cancel lands mid-run, what was stored stays, and the
    resumed run asks the server only what it had not answered (each answer once)."""
    db = tmp_path / "cancel.db"
    with Store(db) as store:
        code = sessions.open_session(store, classic_question("classics", "theatre_ticket"))
    with FakeLLMServer(lambda _: "B", latency=0.05) as fake:
        spec = ClassSpec(code, ("openai/slow",), samples=40, scoring="sample",
                         api_base=fake.base_url)  # fmt: skip
        with Store(db) as store:
            plan = kinds.plan(spec, store)
            run_id = executor.create(plan, store)
            listed = {r.id: r for r in run_summaries(store)}[run_id]
        row = table_row(listed)
        assert (row["biases"], row["unit"], listed.page) == (
            f"class {code}",
            "answers",
            ResultsPage.CLASS,
        )
        worker = threading.Thread(
            target=lambda: executor.execute(plan, Store(db), concurrency=2), daemon=True
        )
        worker.start()
        with Store(db) as store:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(store.run_model_answers(run_id)) < 10:
                time.sleep(0.02)
            store.request_cancel(run_id)
            worker.join(60)
            stopped = store.run(run_id)
            partial = len(store.run_model_answers(run_id))
            assert stopped["status"] == "cancelled" and 10 <= partial < 80, (stopped, partial)
            answered = fake.calls
            resumed = executor.execute(kinds.replan(store, run_id), store)
            rows = store.run_model_answers(run_id)
    assert resumed.status == "done" and resumed.done == 80
    assert len({(a.condition, a.repeat) for a in rows}) == len(rows) == 80
    # the resume asked the server only for the answers not stored (those in flight at the
    # cancel were asked again: nothing stored, nothing cached)
    assert fake.calls - answered == 80 - partial
    assert fake.calls <= 80 + 2  # at most the two in flight at the cancel asked twice
