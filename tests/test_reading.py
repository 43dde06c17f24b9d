"""Reading a decision's answer: the deterministic reader, the extraction check, the random
baseline's independent draws, and `--extractor` (issue 20).

The end-to-end checks drive the real pipeline (`decide_pair`) against the fake
OpenAI-compatible server: a scripted decider that answers with the hard cases a reader meets
(an option's text only, "100%", a negation, two options, no option, a number in words,
Markdown, a refusal) and a weak extractor that always says "Option 1".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from scipy.stats import chisquare

from cogbias.core.reading import read_extraction, read_option
from cogbias.core.records import Instance
from cogbias.core.templates import Filled
from cogbias.llm import LLMClient, LLMRequest
from cogbias.llm.random_provider import answer as random_answer
from cogbias.runs import paired_plan, pipeline, probabilities
from cogbias.runs.decide import PairAsk
from cogbias.runs.grammars import option_grammar
from tests.fake_llm_server import FakeLLMServer, _last_user_text

PERCENT = [f"{10 * i}%" for i in range(11)]
RATING = ["Very poor", "Poor", "Somewhat poor", "Neither good nor poor", "Somewhat good", "Good"]
RATING += ["Very good"]


@pytest.fixture(autouse=True)
def _no_real_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- the reader


@pytest.mark.parametrize(
    ("answer", "options", "expected"),
    [
        ("The answer is 100%.", PERCENT, "100%"),
        ("I choose 30%.", PERCENT, "30%"),
        ("Option 1: 0%.", PERCENT, "0%"),
        ("I'd say 30 percent.", PERCENT, "30%"),
        ("Option 10", PERCENT, "90%"),
        ('The performance is rated as "Very good".', RATING, "Very good"),
        ("**Very good**", RATING, "Very good"),
        ("Good.", RATING, "Good"),
        ("Neither good nor poor, so Option 4.", RATING, "Neither good nor poor"),
        ("I choose option three.", RATING, "Somewhat poor"),
        ("The second option.", RATING, "Poor"),
        ("**Option 5**", RATING, "Somewhat good"),
        ("Option 1 is safe, Option 2 is bold. I choose Option 2.", RATING, "Poor"),
        ("I would choose Option 3, not Option 2.", RATING, "Somewhat poor"),
        ("Good is tempting. My final answer is Very good.", RATING, "Very good"),
        ("Answer: Option 5 (Somewhat good). Option 6 was close.", RATING, "Somewhat good"),
        ("Strongly agree", ["Strongly disagree", "Disagree", "Agree", "Strongly agree"], None),
    ],
)
def test_the_reader_reads_what_the_answer_names(
    answer: str, options: list[str], expected: str | None
) -> None:
    reading = read_option(answer, options)
    assert reading.problem is None, reading
    assert options[reading.choice] == (expected or answer)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("…performance based on its", "names no option"),
        ("I cannot make this decision.", "names no option"),
        ("Not Option 2.", "negates Option 2"),
        ("It is good, but not very good.", "negates Option 7"),
        ("Option 2 or Option 3, hard to say.", "names several options (Option 2, Option 3)"),
        ("Options 2 and 3 are both fine.", "names several options (Option 2, Option 3)"),
        ("Somewhat poor or Somewhat good.", "names several options (Option 3, Option 5)"),
        ("Option 12.", "names Option 12, but only 1-7 exist"),
        (
            "I choose Option 2. Actually, I choose Option 3.",
            "names several options (Option 2, Option 3)",
        ),
        ("I choose Option 2 or Option 3.", "names several options (Option 2, Option 3)"),
        ("The answer is Option 4: Very good.", "names several options (Option 4, Option 7)"),
    ],
)
def test_the_reader_refuses_to_guess(answer: str, problem: str) -> None:
    reading = read_option(answer, RATING)
    assert reading.choice is None and reading.problem == f"the answer {problem}"


SIGNED = ["+50%", "+40%", "+30%", "+20%", "+10%", "0%", "-10%", "-20%", "-30%", "-40%", "-50%"]


@pytest.mark.parametrize(
    ("answer", "option"),
    [
        ("The lowest price I would accept is -50%.", "-50%"),
        ("I would raise the funding by +20%.", "+20%"),
        ("I would raise the funding by 20%.", None),  # 20 could be +20 or -20: not guessed
        ("The highest price I would pay is 50 euros.", None),
        ("A cut of \u221230% seems right.", "-30%"),  # the minus sign, not a hyphen
        ("Anything in the 10-20% band works; I pick -10%.", "-10%"),  # "10-20": no sign
        ("0%", "0%"),
    ],
)
def test_a_signed_scale_is_read_by_the_sign(answer: str, option: str | None) -> None:
    """The paper's endowment, escalation and hindsight scales differ by the sign alone; a
    reader that drops it read "-50%" as "+50%"."""
    reading = read_option(answer, SIGNED)
    assert reading.choice == (None if option is None else SIGNED.index(option)), reading


def test_an_extraction_counts_only_where_the_answer_confirms_it() -> None:
    negated_then_chosen = read_option("I would not pick Option 1; Option 3 is better.", RATING)
    assert negated_then_chosen.choice is None and negated_then_chosen.extraction_could_confirm
    assert negated_then_chosen.confirms(2) and not negated_then_chosen.confirms(0)
    two = read_option("Option 1 or Option 3, hard to say.", RATING)
    assert not two.extraction_could_confirm and not two.confirms(0) and not two.confirms(2)
    nothing = read_option("I cannot decide.", RATING)
    assert not nothing.extraction_could_confirm and not nothing.confirms(0)
    paraphrase = read_option(
        "I would put it into bonds.", ["Buy the stocks now", "Put the money into government bonds"]
    )
    assert paraphrase.confirms(1) and not paraphrase.confirms(0)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("Option 1", 0), ("Option 10:", 9), ("**Option 3**", 2), ("No option selected", None)]
    + [("Option 2 or Option 3", None), ("Option 12", None), ("I am not sure.", None)],
)
def test_extraction_replies_are_read_strictly(reply: str, expected: int | None) -> None:
    assert read_extraction(reply, 11) == expected


def test_the_extraction_grammar_admits_no_option_and_multi_digit_numbers() -> None:
    grammar = option_grammar(11)
    assert '"No option selected"' in grammar
    assert '"11" | "10" | "9"' in grammar and "[.:]?" in grammar


# --------------------------------------------------------------------------- hard cases

# name -> (the answer, given the options as presented; the presented option it names or None)
HARD_CASES: dict[str, Any] = {
    "text": (lambda o: f"I would rate it {o[6]}.", lambda o: 6),
    "hundred": (lambda o: "The answer is 100%.", lambda o: o.index("100%")),
    "negated": (lambda o: "Not Option 2.", lambda o: None),
    "negated_then_chosen": (lambda o: "I would not pick Option 1; Option 3 fits.", lambda o: 2),
    "two": (lambda o: "Option 2 or Option 3, it is hard to say.", lambda o: None),
    "two_with_one": (lambda o: "Either Option 1 or Option 4.", lambda o: None),
    "none": (lambda o: "…performance based on its", lambda o: None),
    "words": (lambda o: "I choose option three.", lambda o: 2),
    "markdown": (lambda o: "**Option 4**", lambda o: 3),
    "deliberated": (lambda o: f"{o[0]} is safe, Option 4 bold. I choose Option 4.", lambda o: 3),
    "refusal": (lambda o: "I cannot make this decision for you.", lambda o: None),
}
CASE_RE = re.compile(r"case (\w+)\.")
ASKED: Counter[str] = Counter()


def _presented(prompt: str) -> list[str]:
    return [text.strip() for _, text in re.findall(r"Option (\d+): (.+)", prompt)]


def hard_server(request: dict[str, Any]) -> str:
    """The decider answers its case; the `weak` extractor always says Option 1, the
    `good` one names the option the answer chooses."""
    prompt = _last_user_text(request)
    ASKED[request["model"]] += 1
    if request["model"] == "weak":
        return "Option 1"
    if request["model"] == "good":
        return "Option 3" if "Option 3 fits" in prompt else "No option selected"
    name = CASE_RE.search(prompt).group(1)  # type: ignore[union-attr]
    return HARD_CASES[name][0](_presented(prompt))


def _instance(name: str, options: list[str]) -> Instance:
    half = Filled(f"A test, case {name}.", "What do you choose?", list(options))
    return Instance(
        id=f"hard-{name}",
        test_case="hard",
        test_case_hash="h",
        scenario="s",
        control=half,
        treatment=half,
        metric=_metric(),
    )


def _metric() -> Any:
    from cogbias.core.metrics import MetricParams

    return MetricParams()


@pytest.mark.parametrize("extractor", ["openai/weak", "openai/good"])
def test_hard_cases_are_never_misread_whatever_the_extractor(extractor: str) -> None:
    ASKED.clear()
    options = ["Very poor", "Poor", "Somewhat poor", "Fair", "100%", "Good", "Very good"]
    with FakeLLMServer(responder=hard_server) as server:
        client = LLMClient(concurrency=4, max_retries=0, timeout=10, api_base=server.base_url)
        for name, (_, expected) in HARD_CASES.items():
            for seed in range(2):  # both option orders
                row = pipeline.run_sync(
                    pipeline.decide_pair(
                        client, _instance(name, options), "openai/decider",
                        PairAsk(seed=seed, extractor=extractor),
                    )
                ).to_row()  # fmt: skip
                order = json.loads(row["control_order"])
                presented = [options[j] for j in order]
                want = expected(presented)
                if name == "negated_then_chosen" and extractor == "openai/weak":
                    want = None  # the weak extractor's "Option 1" is the negated one
                for half in ("control", "treatment"):
                    choice = row[f"{half}_choice"]
                    assert (None if choice is None else order.index(choice)) == want, (name, row)
                    assert row[f"{half}_answer"] == HARD_CASES[name][0](presented)
                if want is None:
                    assert row["status"] == "failed" and row["failure_kind"] == "unparseable"
                    assert "no option could be extracted from the answer" in row["error"]
                    assert row["score"] is None
                else:
                    assert row["status"] == "ok" and row["score"] is not None
    # only answers an extraction could settle go to the extractor: one case, once per seed
    # (its two halves are the same question, asked once)
    assert ASKED[extractor.split("/")[1]] == 2


# --------------------------------------------------------------------------- random


def _identical(i: int, n_options: int = 5) -> Instance:
    half = Filled("The same question.", "Which one?", [f"choice {c}" for c in "abcde"[:n_options]])
    return Instance(
        id=f"copy-{i}",
        test_case="copies",
        test_case_hash="h",
        scenario="s",
        control=half,
        treatment=half,
        metric=_metric(),
    )


class RecordingClient(LLMClient):
    """The real client, noting what it was asked (to see the random model goes through it)."""

    def __init__(self) -> None:
        super().__init__(cache=None)
        self.asked: list[LLMRequest] = []

    async def complete(self, req: LLMRequest) -> Any:
        self.asked.append(req)
        return await super().complete(req)


def test_random_draws_independently_for_identical_questions() -> None:
    client = RecordingClient()

    ask = PairAsk(run_id="run-x")

    async def decide_all() -> list[dict[str, Any]]:
        return [
            (await pipeline.decide_pair(client, _identical(i), "random", ask)).to_row()
            for i in range(1000)
        ]

    rows = pipeline.run_sync(decide_all())
    counts = Counter(r["control_choice"] for r in rows)
    assert sorted(counts) == [0, 1, 2, 3, 4]
    assert chisquare([counts[k] for k in range(5)]).pvalue > 0.001
    # the two halves of one pair draw on their own too (they agree about 1 time in 5)
    agree = sum(r["control_choice"] == r["treatment_choice"] for r in rows)
    assert 120 < agree < 280
    # every answer came through the client, each seeded by its decision, not by its text
    assert len(client.asked) == 2000 and all(r.answer_space for r in client.asked)
    assert len({r.answer_space.seed for r in client.asked}) == 2000  # type: ignore[union-attr]
    again = pipeline.run_sync(pipeline.decide_pair(client, _identical(7), "random", ask))
    assert again.control_choice == rows[7]["control_choice"]  # a resumed run draws the same


def test_random_repeats_of_one_pair_draw_independently() -> None:
    client = LLMClient(cache=None)

    async def repeats() -> list[dict[str, Any]]:
        instance = _identical(0, 2)
        return [
            (await pipeline.decide_pair(client, instance, "random", ask)).to_row()
            for ask in (PairAsk(run_id="r", repeat=k) for k in range(400))
        ]

    counts = Counter(r["control_choice"] for r in pipeline.run_sync(repeats()))
    assert chisquare([counts[0], counts[1]]).pvalue > 0.001


def test_the_random_answer_is_the_one_its_space_draws() -> None:
    client = RecordingClient()
    decision = pipeline.run_sync(
        pipeline.decide_pair(client, _identical(3), "random", PairAsk(run_id="r"))
    )
    space = client.asked[0].answer_space
    assert space is not None
    assert decision.control_answer == random_answer(space)


# --------------------------------------------------------------------------- --extractor


def test_the_extractor_is_part_of_the_spec_only_when_given() -> None:
    plain = paired_plan.RunSpec(models=["random"], generator="examples")
    chosen = paired_plan.RunSpec(models=["random"], generator="examples", extractor="openai/x")
    assert "extractor" not in plain.canonical() and chosen.canonical()["extractor"] == "openai/x"
    assert plain.run_id != chosen.run_id
    assert paired_plan.RunSpec.from_stored(chosen.canonical()) == chosen


def test_an_extractor_that_writes_no_text_is_refused_by_name(tmp_path: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "pairs", "--models", "random", "--biases",
         "anchoring", "--extractor", "random", "--db", str(tmp_path / "x.db"), "--dry-run"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--extractor random cannot read answers" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("Very good " * 9_000, 6), ("not " * 20_000 + "Good", None), ("Option 1 or " * 8_000, 0)]
    + [("x" * 100_001, None)],
    ids=["option-texts", "negations", "options", "too-long"],
)
def test_hostile_answers_are_read_in_bounded_time_and_never_guessed(
    answer: str, expected: int | None
) -> None:
    reading = read_option(answer, RATING)
    assert reading.choice == expected  # one option named again and again is that option
    if len(answer) > 100_000:
        assert reading.problem == "the answer has 100,001 characters, more than the 100,000 read"


def test_random_in_probability_mode_is_uniform_and_draws_per_decision() -> None:
    # the distribution (what is scored) is uniform; the letter it also samples, shown beside
    # it, is drawn per decision like the text mode's, never seeded by the question's text
    client = LLMClient(cache=None)
    ask = PairAsk(run_id="run-p")

    async def decide_all() -> list[dict[str, Any]]:
        return [
            (await probabilities.decide_pair(client, _identical(i), "random", ask)).to_row()
            for i in range(1000)
        ]

    rows = pipeline.run_sync(decide_all())
    assert all(json.loads(r["control_distribution"])["p"] == [0.2] * 5 for r in rows)
    counts = Counter(r["control_choice"] for r in rows)
    assert chisquare([counts[k] for k in range(5)]).pvalue > 0.001
