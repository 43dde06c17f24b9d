"""Hostile log-probabilities (issue 29, points 4, 5, 7): a local server lists what is no
distribution, a number that overflows, or 100,000 tokens; every half is read right or is
unreadable with its reason, the run always finishes (or stops when cancelled), nothing stored
holds NaN, and what is cached per answer stays small. Ends with a property test of the reader
over random tokens, numbers and structures (`hypothesis`)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from run_helpers import spec

from cogbias.core.probabilities import Distribution, NotADistribution
from cogbias.core.run_record import Run
from cogbias.llm import LLMError, logprobs
from cogbias.runs import decide, executor, paired_plan, probabilities
from cogbias.store import Store
from cogbias.views import probability_bars
from cogbias.views.shown_pairs import ShownHalf

ROOT = Path(__file__).resolve().parent.parent


def _entry(token: Any, logprob: Any) -> dict[str, Any]:
    return {"token": token, "logprob": logprob}


def _position(listed: list[tuple[Any, Any]], top: Any = "listed") -> dict[str, Any]:
    """A server's position: the first listed token sampled, all of them in top_logprobs
    (or `top` as given, to send it malformed)."""
    token, logprob = listed[0]
    alternatives = [_entry(t, lp) for t, lp in listed] if top == "listed" else top
    return {"token": token, "logprob": logprob, "top_logprobs": alternatives}


def _log(p: float) -> float:
    return math.log(p)


def _answer(*positions: dict[str, Any]) -> dict[str, Any]:
    """What a responder returns: the content and OpenAI's `logprobs` beside it."""
    text = "".join(p["token"] for p in positions if isinstance(p.get("token"), str))
    return {"content": text or "A", "logprobs": {"content": list(positions)}}


def _strict(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are no JSON."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} stored in {text[:80]!r}")

    return json.loads(text, parse_constant=refuse)


def _one_pair_run(tmp_path: Path, answer: dict[str, Any]) -> tuple[Run, dict]:
    """A run of one pair of framing_effect whose halves both get `answer`: (run, decision)."""
    server = FakeLLMServer(lambda r: answer if r.get("logprobs") else default_responder(r))
    with server, Store(tmp_path / "one.db") as store:
        asked = paired_plan.RunSpec(
            models=["openai/fake"], biases=["framing_effect"], scenarios=1,
            generator="examples", api_base=server.base_url, scoring="probabilities",
        )  # fmt: skip
        run = executor.execute(paired_plan.plan(asked, store), store, concurrency=2)
        (row,) = store.query("select * from decisions")
    return run, row


# --------------------------------------------------------------------------- point 4

NOT_DISTRIBUTIONS = {
    "top_logprobs empty": (_position([("A", -0.01)], top=[]), "listed 1 token"),
    "top_logprobs null": (_position([("A", -0.01)], top=None), "listed 1 token"),
    "top_logprobs a dict": (_position([("A", -0.01)], top={"A": -0.01}), "are an object"),
    "a logprob above 0": (_position([("A", 0.5), ("B", -1.0)]), "above 0"),
    "masses above 1": (_position([("A", _log(0.7)), ("B", _log(0.6))]), "130.0%, more than"),
    "booleans": (_position([("A", True), ("B", False)]), "is True, not a number"),
    "a string": (_position([("A", "-0.1"), ("B", -1.0)]), "the text '-0.1', not a number"),
    "NaN": (_position([("A", math.nan), ("B", -1.0)]), "nan, not a finite number"),
    "+inf": (_position([("A", math.inf), ("B", -1.0)]), "inf, not a finite number"),
    "a token twice, two values": (
        _position([("A", -0.1), ("B", -2.5), ("A", -3.0)]),
        "'A' is listed twice",
    ),
    "option masses of 1e-304": (
        _position([("Hello", -1e-6), ("A", _log(1e-304)), ("B", _log(1e-304))]),
        "put 0.00% of its probability on the options",
    ),
    "option masses of 5e-324": (
        _position([("Hello", -1e-6), ("A", -744.44), ("B", -744.44)]),
        "put 0.00% of its probability on the options",
    ),
    "a sampled non-option token": (
        _position([("Hello", _log(0.99)), ("A", _log(0.0025))]),
        "put 0.25% of its probability on the options",
    ),
}


@pytest.mark.parametrize("case", NOT_DISTRIBUTIONS, ids=list(NOT_DISTRIBUTIONS))
def test_what_is_no_distribution_makes_the_half_unreadable_with_the_reason(tmp_path, case):
    position, reason = NOT_DISTRIBUTIONS[case]
    run, row = _one_pair_run(tmp_path, _answer(position))
    # before: status ok, a one-hot (or 50/50, or NaN) distribution, "0 failed"
    assert run.status == "done" and run.failed == 1, run
    assert row["status"] == "failed" and row["failure_kind"] == "unparseable"
    assert reason in row["error"] and "no distribution over the options" in row["error"]
    assert row["score"] is None
    assert row["control_distribution"] is None and row["treatment_distribution"] is None


READ_RIGHT = {
    "Cyrillic А": ("\u0410", "B"),
    "full-width Ａ": ("\uff21", "B"),
    "Greek Β": ("A", "\u0392"),
    "a token twice, one value": ("A", "B"),
}


@pytest.mark.parametrize("case", READ_RIGHT, ids=list(READ_RIGHT))
def test_look_alike_labels_and_an_identical_duplicate_are_read_right(tmp_path, case):
    a, b = READ_RIGHT[case]
    listed = [(a, _log(0.6)), (b, _log(0.3)), ("The", _log(0.05))]
    if case == "a token twice, one value":
        listed.append((a, _log(0.6)))
    run, row = _one_pair_run(tmp_path, _answer(_position(listed)))
    assert run.status == "done" and row["status"] == "ok", row["error"]
    order = json.loads(row["control_order"])  # what the model saw as A and B
    for half in ("control", "treatment"):
        stored = _strict(row[f"{half}_distribution"])
        # before: the look-alike read as nothing, the other letter 100%
        assert [stored["p"][order[0]], stored["p"][order[1]]] == pytest.approx([2 / 3, 1 / 3])
        assert stored["outside"] == pytest.approx(0.1)


def test_stored_nan_is_never_shown_as_nan_percent():
    # a row an older version stored: status ok, `NaN` in its distribution
    for stored in ('{"p":[NaN,0.5]}', '{"p":[Infinity,0]}', '{"p":[1.5,-0.5]}', '{"p":[0.2]}'):
        half = ShownHalf(
            "control", "s", "p", (0, 1), ("x", "y"), True, "A", "A", 0, labelled=True,
            distribution=stored,
        )  # fmt: skip
        assert probability_bars.half_bars(half) is None
        assert probability_bars.outside_note(half) is None
    with pytest.raises(ValueError):
        Distribution((math.nan, 1.0))
    assert json.loads(Distribution((0.25, 0.75), 0.5, 0.1).to_json())["p"] == [0.25, 0.75]


# --------------------------------------------------------------------------- point 5


def _overflowing(request: dict) -> object:
    """A normal listing, but a logprob of 1000 for a quarter of the prompts."""
    if not request.get("logprobs"):
        return default_responder(request)
    digest = hashlib.sha256(_last_user_text(request).encode()).digest()
    first = 1000.0 if digest[0] % 4 == 0 else _log(0.6)
    return _answer(_position([("A", first), ("B", _log(0.3)), ("The", _log(0.05))]))


def test_a_logprob_of_1000_fails_its_half_and_the_run_and_its_resumes_finish(tmp_path):
    with FakeLLMServer(_overflowing) as server, Store(tmp_path / "o.db") as store:
        asked = spec(server.base_url, generator="examples", scoring="probabilities")
        plan = paired_plan.plan(asked, store)
        # before: OverflowError in math.exp, the run stopped after one pair, every resume too
        run = executor.execute(plan, store, concurrency=4)
        assert run.status == "done" and run.done == run.planned == 24
        failed = store.query("select error, failure_kind from decisions where status = 'failed'")
        assert 0 < len(failed) == run.failed < 12
        assert all("log-probability 1000, above 0" in r["error"] for r in failed)
        assert {r["failure_kind"] for r in failed} == {"unparseable"}
        again = executor.execute(paired_plan.plan(asked, store), store, retry_failed=True)
        assert again.status == "done" and again.failed == len(failed)


def test_an_exception_while_reading_one_answer_fails_that_pair_not_the_run(tmp_path, monkeypatch):
    # the sibling: whatever a reader raises on an answer no one foresaw fails its half
    real = decide.read_option

    def fragile(text: str, options: list[str]) -> Any:
        if hashlib.sha256(text.encode()).digest()[0] % 3 == 0:
            raise ZeroDivisionError("a reader's bug")
        return real(text, options)

    monkeypatch.setattr(decide, "read_option", fragile)
    with FakeLLMServer() as server, Store(tmp_path / "r.db") as store:
        asked = spec(server.base_url, generator="examples")
        run = executor.execute(paired_plan.plan(asked, store), store, concurrency=4)
        failed = store.query("select error, failure_kind from decisions where status = 'failed'")
    assert run.status == "done" and run.done == 24 and 0 < run.failed == len(failed)
    assert all(
        "could not be read (ZeroDivisionError: a reader's bug)" in r["error"] for r in failed
    )
    assert {r["failure_kind"] for r in failed} == {"unparseable"}


def test_an_exception_while_reading_one_study_answer_fails_that_turn_not_the_run(
    tmp_path, monkeypatch
):
    from cogbias.runs import study_answers, study_plan

    real = study_answers.read_answer

    def fragile(test: Any, text: str, strict: bool = False) -> Any:
        if hashlib.sha256(text.encode()).digest()[0] % 2 == 0:
            raise ZeroDivisionError("a reader's bug")
        return real(test, text, strict)

    monkeypatch.setattr(study_answers, "read_answer", fragile)
    spec = study_plan.StudySpec("biasbuster", ["random"], tests=["framing"], repeats=2)
    with Store(tmp_path / "s.db") as store:
        study = study_plan.load_study(spec.study, store)
        plan = study_plan.plan(study_plan.resolve(spec, study), study)
        run = executor.execute(plan, store)
        failed = store.query("select error from study_calls where status = 'unparseable'")
    assert run.status == "done" and failed, run
    assert all(
        "could not be read (ZeroDivisionError: a reader's bug)" in r["error"] for r in failed
    )


# --------------------------------------------------------------------------- point 7


def test_what_is_kept_of_an_answer_is_bounded_and_holds_the_most_probable():
    # 3,000 positions of 20 alternatives: before, 1.2 MB cached for a one-letter answer
    wide = [
        _position([("A" if i == 0 else f"t{i}", -0.1)] + [(f"x{i}-{k}", -5.0) for k in range(19)])
        for i in range(3000)
    ]
    text = logprobs.encode_answer({"choices": [{"message": {"content": "A"}, "logprobs": {"content": wide}}]}, "m")  # fmt: skip
    assert len(text) < 2_000 and len(_strict(text)["positions"]) == 1
    # 100,000 alternatives at one position, the options listed last (a server needn't sort)
    many = [(f"w{k}", -20.0 - k / 1e5) for k in range(100_000)]
    position = _position([("The", _log(0.5)), *many, ("B", _log(0.2)), ("A", _log(0.1))])
    data = {"choices": [{"message": {"content": "The"}, "logprobs": {"content": [position]}}]}
    text = logprobs.encode_answer(data, "m")
    (kept,) = _strict(text)["positions"]
    assert len(text) < 2_000 and len(kept) == 1 + logprobs.TOP_LOGPROBS
    assert kept[:3] == [["The", _log(0.5)], ["B", _log(0.2)], ["A", _log(0.1)]]
    _, dist, sampled = probabilities.read_half(text, 2)
    assert dist.p == pytest.approx((1 / 3, 2 / 3)) and sampled is None


def _huge(request: dict) -> object:
    """100,000 listed tokens at the label position (one listing, built once)."""
    if not request.get("logprobs"):
        return default_responder(request)
    return HUGE


HUGE = _answer(
    _position([("A", _log(0.6)), ("B", _log(0.3))] + [(f"t{k}", -30.0) for k in range(100_000)])
)


def test_cancel_stops_a_run_reading_huge_listings_and_the_cache_stays_small(tmp_path):
    db = tmp_path / "h.db"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with FakeLLMServer(_huge, latency=0.3) as server:
        args = ["run", "pairs", "--db", db, "--biases", "anchoring,framing_effect,loss_aversion"]
        args += ["--scenarios", "4", "--models", "openai/fake", "--generator", "examples"]
        args += ["--scoring", "probabilities", "--api-base", server.base_url]
        args += ["--concurrency", "2"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "cogbias", *map(str, args)], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # before: one half took minutes on the event loop, and the cancel waited for it
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and worker.poll() is None:
                if db.exists():
                    with Store(db) as store:
                        if store.counts().get("decisions", 0) >= 1:
                            break
                time.sleep(0.1)
            with Store(db) as store:
                (run_id,) = [r["id"] for r in store.query("select id from runs")]
            cancel = subprocess.run(
                [sys.executable, "-m", "cogbias", "cancel", run_id, "--db", str(db)],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert cancel.returncode == 0, cancel.stderr
            asked = time.monotonic()
            worker.communicate(timeout=60)
            print(f"the worker stopped {time.monotonic() - asked:.2f} s after the cancel")
        finally:
            if worker.poll() is None:
                worker.kill()
    with Store(db) as store:
        run = store.run(run_id)
        sizes = [len(r["response"]) for r in store.query("select response from llm_calls")]
        stored = store.query("select status from decisions")
    assert run["status"] == "cancelled" and 0 < run["done"] < run["planned"] == 12
    assert stored and {r["status"] for r in stored} == {"ok"}
    assert sizes and max(sizes) < 2_000  # before: megabytes per one-letter answer


# --------------------------------------------------------------------------- the property

PLAUSIBLE = st.floats(min_value=-5, max_value=-1.8)  # p <= 0.165: six of them stay below 1
NUMBERS = st.one_of(
    PLAUSIBLE,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.sampled_from([400, -400]).map(lambda e: 10 ** abs(e) * (1 if e > 0 else -1)),
    st.sampled_from([-0.0, 0.0, 1000.0, 1e308, -1e308, 5e-324, -744.44, -1e-7, 1e-7]),
    st.booleans(),
    st.text(max_size=4),
    st.none(),
)
LABELISH = st.sampled_from(
    ["A", "B", "C", " A", "**B", "A)", "\uff21", "\u0410", "a", "Hello", " "]
)
TOKENS = st.one_of(LABELISH, st.text(max_size=3), st.none(), st.integers())
JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=3)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=6,
)
# mostly well-formed entries, so that a hostile one is often the only flaw of a listing
VALID = st.fixed_dictionaries({"token": LABELISH, "logprob": PLAUSIBLE})
ENTRIES = st.one_of(
    VALID, VALID, VALID, st.fixed_dictionaries({"token": TOKENS, "logprob": NUMBERS}), JUNK
)
WELL_FORMED = st.fixed_dictionaries(
    {
        "token": st.one_of(LABELISH, LABELISH, TOKENS),
        "logprob": st.one_of(PLAUSIBLE, PLAUSIBLE, NUMBERS),
        "top_logprobs": st.one_of(
            st.lists(ENTRIES, max_size=6),
            st.lists(VALID, min_size=1, max_size=6, unique_by=lambda e: e["token"]),
            st.lists(ENTRIES, max_size=25),
            JUNK,
        ),
    }
)
POSITIONS = st.one_of(WELL_FORMED, WELL_FORMED, JUNK)
CHOICE = st.fixed_dictionaries(
    {
        "message": st.fixed_dictionaries({"content": st.one_of(TOKENS, JUNK)}),
        "logprobs": st.one_of(
            st.fixed_dictionaries({"content": st.lists(POSITIONS, min_size=1, max_size=4)}),
            st.fixed_dictionaries({"content": st.lists(POSITIONS, min_size=1, max_size=4)}),
            st.fixed_dictionaries({"content": JUNK}),
            JUNK,
        ),
    }
)
HOSTILE = st.fixed_dictionaries(
    {"choices": st.one_of(*[st.lists(CHOICE, min_size=1, max_size=1)] * 3, st.lists(CHOICE), JUNK)}
)


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A listing a careful server sends, with one flaw half of the time (anything, anywhere)."""
    tokens = draw(st.lists(LABELISH, min_size=2, max_size=6, unique=True))
    entries: list[Any] = [{"token": t, "logprob": draw(PLAUSIBLE)} for t in tokens]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(entries) - 1))
        entries[i] = draw(
            st.one_of(
                JUNK,
                st.fixed_dictionaries({"token": TOKENS, "logprob": st.just(entries[i]["logprob"])}),
                st.fixed_dictionaries({"token": st.just(entries[i]["token"]), "logprob": NUMBERS}),
            )
        )
    first = entries[0] if isinstance(entries[0], dict) else {}
    position = {
        "token": first.get("token"),
        "logprob": first.get("logprob"),
        "top_logprobs": entries,
    }
    return {"choices": [{"message": {"content": "x"}, "logprobs": {"content": [position]}}]}


ANSWERS = st.one_of(HOSTILE, near_valid())


def _read(data: Any, n_options: int) -> Distribution | str:
    """A server's answer as a half reads it: a distribution, or the reason it is none."""
    try:
        text = logprobs.encode_answer(data, "m")
    except LLMError as exc:
        return str(exc)
    assert len(text) < 100_000  # bounded, whatever was sent
    _strict(text)
    try:
        return probabilities.read_half(text, n_options)[1]
    except NotADistribution as exc:
        return str(exc)


@settings(max_examples=600, deadline=None)
@given(ANSWERS, st.integers(min_value=2, max_value=len(logprobs.LABELS)))
def test_every_answer_reads_as_a_valid_distribution_or_a_reason(data, n_options):
    outcome = _read(data, n_options)
    event("unreadable" if isinstance(outcome, str) else "a distribution")
    if isinstance(outcome, str):
        assert outcome.strip()
        return
    assert len(outcome.p) == n_options
    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in outcome.p)
    assert math.fsum(outcome.p) == pytest.approx(1.0)
    assert 0.0 <= outcome.unlisted <= outcome.outside <= 1.0 - 0.1 + 1e-9
    assert Distribution.from_json(outcome.to_json()) is not None
    _strict(outcome.to_json())


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["A", " B", "C", "Hello", "**A", "\u0412", "The", "I"]),
        st.floats(min_value=1e-6, max_value=1.0),
        min_size=2,
    )
)
def test_a_true_distribution_is_read_as_the_hand_computed_one(weights):
    total = sum(weights.values()) * 1.25  # a fifth of it unlisted
    listed = [(t, math.log(w / total)) for t, w in weights.items()]
    outcome = _read({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [_position(listed)]}}]}, 3)  # fmt: skip
    by_hand = [0.0, 0.0, 0.0]
    for token, w in weights.items():
        option = {"A": 0, " B": 1, "C": 2, "**A": 0, "\u0412": 1}.get(token)
        if option is not None:
            by_hand[option] += w / total
    if sum(by_hand) < 0.1:  # too little on the options to read a distribution
        assert isinstance(outcome, str) and "options" in outcome
        return
    assert isinstance(outcome, Distribution)
    assert list(outcome.p) == pytest.approx([m / sum(by_hand) for m in by_hand])
    assert outcome.unlisted == pytest.approx(0.2)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(POSITIONS, min_size=1, max_size=3))
def test_a_run_always_finishes_whatever_the_server_lists(tmp_path_factory, positions):
    answer = {"content": "A", "logprobs": {"content": positions}}
    run, row = _one_pair_run(tmp_path_factory.mktemp("run"), answer)
    assert run.status == "done" and run.done == 1
    if row["status"] == "ok":
        for half in ("control", "treatment"):
            stored = _strict(row[f"{half}_distribution"])
            assert math.fsum(stored["p"]) == pytest.approx(1.0)
        assert math.isfinite(row["score"])
    else:
        assert row["error"] and row["failure_kind"] in ("unparseable", "invalid")


def test_an_answer_body_past_the_bound_fails_that_call_unread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Point 7's sibling: a server sending a body of any size had it read whole into memory
    and parsed on the run's event loop. Past `direct.MAX_BODY_BYTES` the call fails, named,
    before the body is all read; the next call to the same server works."""
    from cogbias.llm import LLMClient, LLMRequest, direct

    monkeypatch.setattr(direct, "MAX_BODY_BYTES", 200_000)
    answers = iter(["x" * 300_000, "Option 1"])
    with FakeLLMServer(responder=lambda request: next(answers)) as server:
        client = LLMClient(api_base=server.base_url, max_retries=0)
        request = LLMRequest("openai/fake", [("user", "Say OK")], max_tokens=5)
        with pytest.raises(LLMError, match=r"larger than 200,000 bytes; it was not read"):
            client.complete_sync(request)
        assert client.complete_sync(request).text == "Option 1"


def _completion(position: dict[str, Any]) -> dict[str, Any]:
    message = {"content": position["token"]}
    return {"choices": [{"message": message, "logprobs": {"content": [position]}}]}


def test_one_text_listed_twice_with_two_values_adds_up_unless_it_is_a_label() -> None:
    """Two byte pieces a tokenizer shows as one text ("\ufffd") are two tokens: their
    probabilities add up (outside the options). A label with two values stays malformed:
    which of them is the option's?"""
    pieces = [("A", _log(0.5)), ("B", _log(0.3)), ("\ufffd", _log(0.05)), ("\ufffd", _log(0.1))]
    encoded = logprobs.encode_answer(_completion(_position(pieces)), "m")
    masses, listed, at = logprobs.option_masses(logprobs.decode_answer(encoded)[1], 2)
    assert at == 0 and masses == pytest.approx([0.5, 0.3])
    assert listed == pytest.approx(0.95)
    doubled = [("A", _log(0.5)), ("B", _log(0.3)), ("B", _log(0.1))]
    encoded = logprobs.encode_answer(_completion(_position(doubled)), "m")
    with pytest.raises(NotADistribution, match="'B' is listed twice"):
        logprobs.decode_answer(encoded)
