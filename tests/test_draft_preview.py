"""The Templates page's preview of an unsaved draft (`views.authoring.preview_draft`): filled
offline with the draft's own example fills, its text escaped, its missing fills explained."""

from __future__ import annotations

import dataclasses

import pytest

from cogbias.library import testcases as library
from cogbias.runs import pipeline
from cogbias.views import authoring, highlight

SCENARIO = "A head teacher at a secondary school deciding on next year's budget"


def test_an_edited_draft_is_filled_with_its_example_fills_without_saving() -> None:
    text = library.to_toml(library.get_test_case("framing_effect"))
    edited = text.replace("It is time to assess", "This morning you review", 2)
    assert edited != text
    case = library.parse_test_case(edited, file="editor")
    draft = authoring.preview_draft(case, SCENARIO)
    fills = case.examples
    for half in ("control", "treatment"):
        situation = draft.halves[half]["situation"]
        assert "This morning you review" in situation
        assert "[[" not in situation and "&#91;&#91;" not in situation  # every gap filled
        assert ">a secondary school</span>" in situation  # the scenario's organisation
        assert any(f in situation for fill in fills.values() for f in fill)
    assert draft.note == ""
    assert "example fills (offline)" in draft.legend and "generator model" not in draft.legend
    assert not (library.user_dir() / f"{case.id}.toml").exists()  # nothing was saved


def test_a_draft_without_example_fills_keeps_its_gaps_and_says_why() -> None:
    case = library.parse_test_case(authoring.BLANK_TEST_CASE, file="editor")
    draft = authoring.preview_draft(case, SCENARIO, seed=1)
    control = draft.halves["control"]["situation"]
    assert "ins-value" not in control and "gap-llm" in control  # gaps shown as written
    assert "ins-value" in draft.halves["treatment"]["situation"]  # {{amount}} filled
    assert draft.note.startswith(
        "No example fills for [[describe one decision you face in your role]] yet"
    )
    assert "nobody yet" in draft.legend


def test_a_drafts_text_is_escaped_never_markup() -> None:
    hostile = "![x](http://127.0.0.1:9/p.png) <img src='http://127.0.0.1:9/q.png'>"
    text = authoring.BLANK_TEST_CASE.replace("You must decide whether to", hostile)
    case = library.parse_test_case(text, file="editor")
    draft = authoring.preview_draft(case, SCENARIO)
    shown = draft.halves["control"]["situation"] + draft.halves["treatment"]["situation"]
    assert "<img" not in shown and "](" not in shown and "&lt;img" in shown


def test_a_rejected_model_fill_is_named_in_a_sentence_with_any_key_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COGBIAS_TEST_API_KEY", "sentinel-0123456789abcdef")
    case = library.get_test_case("framing_effect")
    instance = pipeline.generate_offline(case, SCENARIO)
    note = "the model's fill 'so that both add up sentinel-0123456789abcdef' was rejected (x)"
    rejected = {"gap": "name the opposite", "source": "example", "text": "late", "note": note}
    instance = dataclasses.replace(instance, insertions=[*instance.insertions, rejected])
    (sentence,) = highlight.rejected_fills(instance)
    assert sentence.startswith("Example fill for [[name the opposite]]: the model's fill 'so")
    assert "sentinel-0123456789abcdef" not in sentence and "***" in sentence
    assert highlight.rejected_fills(pipeline.generate_offline(case, SCENARIO)) == []
