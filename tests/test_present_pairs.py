"""Pairs as the model saw them: presented order, raw answer, extraction and scored choice.

The end-to-end checks drive the real pipeline (`decide_pair`) through litellm against the fake
OpenAI-compatible server, with a scripted model that answers with the *text* of a chosen
presented option and an extractor that finds that text: what the page shows must then agree
with itself, whether the options were reversed or not.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from cogbias.core.records import Decision
from cogbias.core.redact import redactor
from cogbias.core.templates import Filled
from cogbias.library import testcases as library
from cogbias.llm import LLMClient
from cogbias.runs import pipeline
from cogbias.views import highlight, safe_text, shown_pairs
from tests.fake_llm_server import FakeLLMServer, _last_user_text
from tests.run_helpers import decision_of

MODEL = "openai/scripted"
PRESENTED_PICK = 2  # the scripted model always picks the option shown second


@pytest.fixture(autouse=True)
def _no_real_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def _options(prompt: str) -> dict[int, str]:
    return {int(n): text.strip() for n, text in re.findall(r"Option (\d+): (.+)", prompt)}


def scripted(request: dict[str, Any]) -> str:
    """Decision: the text of presented option 2. Extraction: the number whose text it is."""
    prompt = _last_user_text(request)
    options = _options(prompt)
    if prompt.startswith("Below are the answer options"):
        answer = prompt.split("Answer:", 1)[1]
        for number, text in sorted(options.items(), key=lambda kv: -len(kv[1])):
            if re.search(rf"(?<!\w){re.escape(text)}(?!\w)", answer):
                return f"Option {number}"
        return "No option selected"
    return f"After thinking it over, my answer is {options[PRESENTED_PICK]}."


def _decide(instance: pipeline.Instance, seed: int, base_url: str) -> Decision:
    client = LLMClient(concurrency=2, max_retries=0, timeout=10, api_base=base_url)
    return pipeline.run_sync(
        pipeline.decide_pair(client, instance, MODEL, pipeline.PairAsk(seed=seed))
    )


def test_shown_options_raw_answer_and_choice_agree_reversed_or_not() -> None:
    case = library.get_test_case("framing_effect")
    instance = pipeline.generate_offline(case, "A hospital buyer choosing a supplier.", seed=2)
    seen: dict[bool, shown_pairs.ShownPair] = {}
    with FakeLLMServer(responder=scripted) as server:
        for seed in range(12):  # the option order is a seeded coin flip per (instance, seed)
            row = _decide(instance, seed, server.base_url)
            pair = shown_pairs.shown_pair(instance.control, instance.treatment, row)
            assert pair is not None and row.status == "ok", row
            seen.setdefault(bool(row.reversed), pair)
            for half in pair.halves:
                prompt_sent = half.decision_text()
                shown_second = half.options[PRESENTED_PICK - 1]
                assert f"Option {PRESENTED_PICK}: {shown_second}" in prompt_sent
                assert half.answer.endswith(f"my answer is {shown_second}.")
                assert half.extraction == f"Option {PRESENTED_PICK}"
                assert half.presented_choice == PRESENTED_PICK - 1
                assert half.canonical_options[half.choice] == shown_second  # what is scored
                assert half.option_lines()[PRESENTED_PICK - 1].endswith("◀ chosen")
                assert f"“{shown_second}”" in half.choice_sentence()
                assert half.answer_disagreement() is None
    assert set(seen) == {True, False}, "twelve seeds should give both orders"
    reversed_pair, plain_pair = seen[True], seen[False]
    n = instance.n_options
    assert reversed_pair.control.options == tuple(reversed(instance.control.options))
    assert reversed_pair.control.choice == n - PRESENTED_PICK  # second from the end
    assert "shown to the model as Option 2, which is option 6" in (
        reversed_pair.control.choice_sentence()
    )
    assert "reverse order" in (reversed_pair.order_note() or "")
    assert plain_pair.control.options == instance.control.options
    assert plain_pair.control.choice == PRESENTED_PICK - 1
    assert plain_pair.order_note() is None
    explained = shown_pairs.explain_score(instance, _decision_of(reversed_pair, score=0.0))
    assert "shown as Option 2; option 6 in the test case" in explained


def _decision_of(pair: shown_pairs.ShownPair, **fields: Any) -> Decision:
    for half in pair.halves:
        fields[f"{half.name}_order"] = list(half.order)
        fields[f"{half.name}_choice"] = half.choice
    return decision_of(status="ok", **fields)


PERCENT = tuple(f"{p}%" for p in range(0, 101, 10))


def _half(
    answer: str, extraction: str, choice: int | None, order: Any = None
) -> shown_pairs.ShownHalf:
    filled = Filled("A situation.", "How likely?", PERCENT)
    decision = decision_of(
        control_answer=answer, control_extraction=extraction, control_choice=choice,
        control_order=order,
    )  # fmt: skip
    return shown_pairs.shown_half(filled, decision, "control", redactor())


def test_a_misread_extraction_is_pointed_out_not_hidden() -> None:
    # Learn once reported "The answer is 100%." as option 10 '90%': the tiny extractor read
    # "100" as "Option 10". The page now says so next to the scored choice.
    half = _half("The answer is 100%.", "Option 10", 9, list(range(11)))
    note = half.answer_disagreement()
    assert note is not None and "“100%” (Option 11 as shown)" in note and "Option 10" in note
    assert "“90%”" in half.choice_sentence()
    # consistent answers, and text inside a longer option, raise nothing
    assert (
        _half("The answer is 100%.", "Option 11", 10, list(range(11))).answer_disagreement() is None
    )
    assert (
        _half(
            "I pick Option 1: 100%", "Option 1", 10, list(range(10, -1, -1))
        ).answer_disagreement()
        is None
    )
    # an answer naming two options cannot support any one stored reading (the run's reader,
    # core.reading, leaves it unread; older runs stored the extraction, and the page says so)
    note = _half("Between 10% and 20%.", "Option 2", 1, list(range(11))).answer_disagreement()
    assert note is not None and "several options (Option 2, Option 3)" in note


def test_orders_that_are_missing_or_not_permutations_are_unknown() -> None:
    assert shown_pairs.parse_order("[2, 1, 0]", 3) == [2, 1, 0]
    for bad in (None, "", "[0, 1]", "[0, 0, 1]", "not json", '{"a": 1}', "[true, 0, 2]"):
        assert shown_pairs.parse_order(bad, 3) is None, bad
    half = _half("100%", "Option 11", 10, None)
    assert not half.order_known and not half.reversed and half.options == PERCENT
    assert "was not recorded" in half.choice_sentence()
    pair = shown_pairs.ShownPair(half, half, None, "ok", "")
    assert "not recorded" in (pair.order_note() or "")


def test_each_half_keeps_its_own_order() -> None:
    # published datasets may shuffle the halves differently
    filled = Filled("S.", "P?", ("a", "b", "c"))
    row = decision_of(control_order="[0, 1, 2]", treatment_order="[2, 1, 0]", status="ok")
    pair = shown_pairs.shown_pair(filled, filled, row)
    assert pair is not None
    assert pair.control.options == ("a", "b", "c") and pair.treatment.options == ("c", "b", "a")
    assert "treatment's options were shown to the model in reverse" in (pair.order_note() or "")


def test_shown_texts_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sentinel-value-4f1e9a"
    monkeypatch.setenv("SOME_PROVIDER_KEY", secret)
    filled = Filled("S.", "P?", ("a", "b"))
    row = decision_of(control_answer=f"my key is {secret}", error=f"bad {secret}", status="failed")
    pair = shown_pairs.shown_pair(filled, filled, row)
    assert pair is not None and secret not in pair.control.answer and secret not in pair.error
    assert secret not in shown_pairs.explain_score(_instance(), row)


def _instance() -> pipeline.Instance:
    return pipeline.generate_offline(library.get_test_case("anchoring"), "A scenario.")


def test_markdown_is_escaped_into_plain_characters() -> None:
    hostile = "![x](http://127.0.0.1:9/p.png) <img src=x> **bold** :red[red] $x$ `c`\nnext"
    out = safe_text.escape_markdown(hostile)
    assert "\n" not in out
    unescaped = re.sub(r"\\.", "", out)  # what remains after removing escaped characters
    assert not set("[]<>*:$`") & set(unescaped)  # no link, image, HTML, emphasis, math
    shown = re.sub(r"\\(.)", r"\1", out).replace(safe_text.WORD_JOINER, "")  # unlinked
    assert shown == hostile.replace("\n", " ")
    assert safe_text.escape_paragraphs("one *a*\n\ntwo").split("\n\n") == [r"one \*a\*", "two"]
    assert safe_text.escape_markdown("1. # not a list") == r"1\. # not a list"
    assert safe_text.escape_markdown("# x") == r"\# x"


def test_long_texts_are_cut_for_the_first_view() -> None:
    assert safe_text.preview_text("short") == ("short", False)
    start, cut = safe_text.preview_text("x" * 5000, 600)
    assert cut and len(start) < 610


def test_filled_html_shows_markdown_in_a_fill_as_characters(monkeypatch) -> None:
    import html as html_module

    monkeypatch.setenv("GEN_PROVIDER_KEY", "sentinel-in-a-fill-123")
    case = library.get_test_case("framing_effect")
    instance = pipeline.generate_offline(case, "A scenario.")
    fill = "![x](http://127.0.0.1:9/p.png) <img src=x> it's sentinel-in-a-fill-123"
    instance.insertions = [
        {"gap": g.resolve(instance.values), "source": "llm", "text": fill}
        for g in case.control.llm_gaps()
    ]
    out = highlight.filled_html(case, instance, "control")["situation"]
    assert "![" not in out and "](" not in out and "<img" not in out
    assert "sentinel-in-a-fill-123" not in out
    text = html_module.unescape(re.sub(r"<[^>]+>", "", out))
    assert "![x](http://127.0.0.1:9/p.png) <img src=x> it's ***" in text.replace("\u2060", "")


def test_an_answer_that_contradicts_itself_is_pointed_out() -> None:
    # the case: options reversed, "Option 7" is "Very poor", the answer quotes option 1
    filled = Filled("S.", "P?", ("Very poor", "Poor", "Neutral", "Good", "Very good"))
    row = decision_of(
        control_answer="The answer is Option 5: Very good.",
        control_extraction="Option 5",
        control_choice=0,
        control_order="[4, 3, 2, 1, 0]",
    )
    half = shown_pairs.shown_half(filled, row, "control", redactor())
    assert half.options[0] == "Very good" and half.presented_choice == 4
    note = half.answer_disagreement()
    assert note is not None
    assert "names several options (Option 1, Option 5)" in note
    assert "the stored reading is Option 5" in note
    consistent = replace(row, control_answer="The answer is Option 5: Very poor.")
    assert (
        shown_pairs.shown_half(filled, consistent, "control", redactor()).answer_disagreement()
        is None
    )


def test_a_probability_pair_shows_letters_its_sampled_answer_and_an_expected_score() -> None:
    """A probability-scored half was asked for a letter (A, B, C… as presented): the page
    lists the options lettered as the model saw them, calls the stored choice the sampled
    answer, never reads the letter as words ("the answer names no option", as it did), and
    explains the score as the expectation it is."""
    from cogbias.core.probabilities import Distribution
    from cogbias.runs.probabilities import render_labelled

    instance = _instance()
    n = instance.n_options
    uniform = Distribution(tuple([1 / n] * n), 0.0, 0.0).to_json()
    reversed_order = list(range(n - 1, -1, -1))
    row = decision_of(
        status="ok", score=0.04,
        control_order=list(range(n)), control_choice=0, control_answer="A",
        control_extraction="A", control_distribution=uniform,
        treatment_order=reversed_order, treatment_choice=n - 1, treatment_answer="A",
        treatment_extraction="A", treatment_distribution=uniform,
    )  # fmt: skip
    pair = shown_pairs.shown_pair(instance.control, instance.treatment, row)
    assert pair is not None
    control, treatment = pair.halves
    assert control.option_lines()[0] == f"A: {control.options[0]}   ◀ sampled"
    assert treatment.option_lines()[0].startswith(f"A: {instance.control.options[n - 1]}")
    assert all(not line.startswith("Option") for line in control.option_lines())
    assert control.decision_text() == render_labelled(instance.control, range(n))
    assert control.answer_disagreement() is None and treatment.answer_disagreement() is None
    assert control.choice_sentence().startswith("Sampled “")
    assert "shown to the model as A, which is option" in treatment.choice_sentence()
    explained = shown_pairs.explain_score(instance, row)
    assert explained.startswith("Scored by option probabilities")
    assert "expected score over both halves' option probabilities" in explained
    # the same pair read without distributions is a sampled-answer pair, as before
    plain = replace(row, control_distribution=None, treatment_distribution=None)
    plain_pair = shown_pairs.shown_pair(instance.control, instance.treatment, plain)
    assert plain_pair is not None and plain_pair.control.option_lines()[0].startswith("Option 1:")
    assert not shown_pairs.explain_score(instance, plain).startswith("Scored by option")
