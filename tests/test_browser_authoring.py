"""The author's pages in a real browser (issue 21, points 3-5): Preview and Templates.

One app on a fresh home (no demo results: these pages need none), plus a scripted
OpenAI-compatible generator on 127.0.0.1 that writes plausible fills, except for the gap that
asks for "the exact opposite" of a metric, where it copies the instruction's own words, as
the local model was seen to do. Each journey saves a screenshot to artifacts/screenshots/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    app_environment,
    choose,
    editor_marked_lines,
    editor_text,
    go,
    learn_tab,
    no_exception,
    replace_editor_text,
    settle,
    shot,
    shown_choice,
    shows,
    shows_at_least,
    toml_editor,
    visit,
)

pytestmark = pytest.mark.browser
MODEL = "openai/scripted"
MODEL_LABEL = f"Scripted generator ({MODEL})"
COPIED = "also measured in percent, so that both add up to 100%"  # the instruction's words
HEAD_TEACHER = "A head teacher at a secondary school deciding on next year's timetable"
OPERATIONS = "An operations manager at a family-owned bakery deciding on a new oven"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


def scripted(request: dict[str, Any]) -> str:
    """Fills: a real phrase per gap, but the opposite-of-a-metric gap gets its instruction's
    last words back. Decisions: Option 1."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"]["required"]
        return json.dumps(
            {k: f"the one {COPIED}" if "exact opposite" in k else "weekly team rota" for k in keys}
        )
    return "Option 1"


@pytest.fixture(scope="module")
def app_env(app_home: Path) -> Iterator[dict[str, str]]:
    """The scripted generator, registered in the app's home, answers while the app runs."""
    from cogbias.llm import settings
    from tests.fake_llm_server import FakeLLMServer

    with FakeLLMServer(responder=scripted) as fake:
        settings.add_custom_model(
            MODEL, "Scripted generator", fake.base_url, json_schema=True,
            path=app_home / "models.toml",
        )  # fmt: skip
        yield app_environment(app_home)


@pytest.fixture
def page(browser: Any, app_url: str) -> Iterator[Any]:
    with learn_tab(browser, app_url, height=1200) as tab:
        yield tab


def fill_preview(page: Any, case: str | None, generator: str, typed: str = "") -> None:
    """Fill on Preview: `case` opens the page and picks it (None: stay on it, keep the case)."""
    if case is not None:
        go(page, "Preview")
        choose(page, "Test case", case)
    box = page.get_by_role("textbox", name="…or type your own scenario")
    box.fill(typed)
    box.press("Enter")
    choose(page, "Generator model", generator)
    settle(page)
    page.get_by_role("button", name="Fill", exact=True).click()
    page.get_by_text("[[gaps]] from").wait_for(timeout=120_000)
    settle(page)


def test_a_fill_copying_its_instruction_is_replaced_by_a_marked_example_fill(page: Any) -> None:
    from cogbias.library import testcases as library

    fill_preview(page, "Framing Effect", MODEL_LABEL)
    no_exception(page)
    situations = " ".join(page.get_by_text("You work as", exact=False).all_inner_texts())
    assert COPIED not in situations  # the copied words are not in the pair
    assert "weekly team rota" in situations  # the model's acceptable fills are used
    said = page.get_by_text("Example fill for [[name the exact opposite of").inner_text()
    assert f"the model's fill 'the one {COPIED}' was rejected" in said
    assert "(it copies the instruction's words 'also measured in percent so')" in said
    legend = page.get_by_text("[[gaps]] from").first.inner_text()
    assert legend == (
        f"[[gaps]] from the scenario, example fills (offline) and the generator model {MODEL}"
    )
    examples = library.get_test_case("framing_effect").examples
    opposite = next(fills for key, fills in examples.items() if "exact opposite" in key)
    marked = page.locator(".ins-example")
    shows(marked)  # the one rejected fill, in the treatment
    assert marked.inner_text() in opposite
    title = marked.get_attribute("title") or ""
    assert title.startswith("example fill (the model's fill 'the one also measured")
    assert "was rejected (it copies the instruction's words" in title
    shows_at_least(page.locator(".ins-llm"), 2)  # the model's own fills stay marked as its
    marked.hover()  # the browser's tooltip is not in a screenshot; the mark is
    shot(page, "21_3_preview_rejected_fill", page.get_by_text("Scenario:", exact=False))


def test_preview_uses_a_typed_scenario_with_articles_that_agree(page: Any) -> None:
    fill_preview(page, "Anchoring", "Example fills (offline, instant)", HEAD_TEACHER)
    no_exception(page)
    assert page.get_by_text("keep their defaults").count() == 0  # the scenario was read
    control = page.get_by_text("You work as", exact=False).first.inner_text()
    assert "a head teacher" in control and "at a secondary school" in control
    legend = page.get_by_text("[[gaps]] from").first.inner_text()
    assert legend.startswith("[[gaps]] from the scenario and example fills (offline)")
    assert "generator" not in legend  # offline: no model is named
    shot(page, "21_4a_preview_typed_scenario", page.get_by_text("Scenario:", exact=False))

    fill_preview(page, None, MODEL_LABEL, OPERATIONS)
    no_exception(page)
    body = page.inner_text("body")
    assert "You work as an operations manager at a family-owned bakery" in body
    assert not re.search(r"\ba operations\b", body)
    legend = page.get_by_text("[[gaps]] from").first.inner_text()
    assert legend.startswith(f"[[gaps]] from the scenario and the generator model {MODEL}")
    shot(page, "21_4b_preview_generator_named", page.get_by_text("Scenario:", exact=False))


def edit(page: Any, text: str) -> None:
    """Replace the draft, as a paste does; the editor sends it when the typing stops."""
    replace_editor_text(page, text)
    settle(page)  # waits half a second first: the editor sends 0.2 s after the typing stops


def test_templates_preview_an_unsaved_draft_and_say_what_is_wrong(page: Any) -> None:
    from cogbias.library import testcases as library
    from cogbias.views import authoring

    go(page, "Templates")
    page.get_by_text("Valid: My Bias").wait_for()
    panel = page.get_by_role("tabpanel", name="Filled (unsaved draft)")
    panel.get_by_text("[[gaps]] from nobody yet").wait_for()  # drawn after the editor
    settle(page)
    skeleton = panel.inner_text()  # the blank skeleton has no [examples]: it says so
    assert "No example fills for [[describe one decision you face in your role]] yet" in skeleton
    assert "[[gaps]] from nobody yet" in skeleton
    shot(page, "21_5_templates_skeleton_preview", page.get_by_role("tab", name="Gaps"))
    page.get_by_text("Start from…").click()
    choose(page, "A copy of", "Framing Effect")
    page.get_by_role("button", name="Load copy").click()
    page.get_by_text("Valid: Framing Effect").wait_for()
    text = editor_text(page)
    edited = text.replace("It is time to assess", "This morning you review")
    assert edited.count("This morning you review") == 2
    edit(page, edited)
    page.get_by_role("tab", name="Filled (unsaved draft)").click()
    panel.get_by_text("This morning you review", exact=False).first.wait_for()
    shown = panel.inner_text()
    assert shown.count("This morning you review") == 2  # control and treatment, as edited
    assert "[[" not in shown.split("(hover an insertion to see its gap)")[1]  # all filled
    fills = [f for key, f in library.get_test_case("framing_effect").examples.items()]
    assert any(f in shown for group in fills for f in group)
    assert "not saved" in shown
    shows(page.get_by_text("No test cases of your own yet"))  # nothing saved
    no_exception(page)
    shot(page, "21_5a_templates_draft_preview", page.get_by_role("tab", name="Gaps"))

    unclosed = authoring.BLANK_TEST_CASE.replace(
        'prompt = "Do you agree that this is a good decision?"\n',
        'prompt = "Do you agree that this is a good decision?\n',
        1,
    )
    line = unclosed[: unclosed.index("prompt = ")].count("\n") + 1
    edit(page, unclosed)
    message = f"a text is not closed on line {line}: add its closing quote"
    page.get_by_text(message).first.wait_for()
    assert "Illegal character" not in page.inner_text("body")
    shows(panel.get_by_text("No preview until the draft loads"))
    assert message not in panel.inner_text()  # said once, under the editor, not again here
    assert editor_marked_lines(page) == [line]
    no_exception(page)
    shot(page, "21_5b_templates_unclosed_quote", page.get_by_test_id("stAlert"))

    derived = authoring.BLANK_TEST_CASE.replace(
        "[control]", '[values.half]\ntype = "derived"\nexpr = "amount // bonus"\n\n[control]', 1
    )
    edit(page, derived)
    page.get_by_text("uses 'bonus', which is not a value defined before it").first.wait_for()
    errors = " ".join(page.get_by_test_id("stAlertContentError").all_inner_texts())
    assert "(known: amount)" in errors
    assert "variant" not in errors  # this file defines no variants
    no_exception(page)
    shot(page, "21_5c_templates_derived_value", page.get_by_test_id("stAlert"))


def test_an_unsaved_draft_and_the_preview_choices_outlive_a_visit_to_another_page(
    page: Any,
) -> None:
    """Streamlit forgets a widget a page switch did not draw: an author who looked at Preview
    came back to the blank skeleton, the draft typed so far gone without a word."""
    visit(page, "Templates", page.get_by_text("Valid: My Bias"))
    # the draft's preview is drawn after the editor: an edit typed before it is overwritten
    page.get_by_role("tabpanel", name="Filled (unsaved draft)").get_by_text(
        "[[gaps]] from nobody yet"
    ).wait_for()
    settle(page)
    draft = editor_text(page).replace('name = "My Bias"', 'name = "Half-written draft"')
    edit(page, draft)
    page.get_by_text("Valid: Half-written draft").wait_for()
    go(page, "Preview")
    choose(page, "Test case", "Framing Effect")
    box = page.get_by_role("textbox", name="…or type your own scenario")
    box.fill(HEAD_TEACHER)
    box.press("Enter")
    settle(page)
    visit(page, "Templates", page.get_by_text("Valid: Half-written draft"))
    assert editor_text(page) == draft
    shot(page, "templates_draft_kept_after_a_page_switch", page.get_by_text("Valid:"))
    visit(page, "Preview", page.get_by_role("heading", name="Preview: fill a test case"))
    assert box.input_value() == HEAD_TEACHER
    assert shown_choice(page.get_by_test_id("stSelectbox").filter(
        has=page.get_by_text("Test case", exact=True))) == "Framing Effect"  # fmt: skip
    no_exception(page)


# --------------------------------------------------------------------- checked as typed (#43)

NEW_GAP = "name a time of day"


def _cursor(page: Any, line: int, column: int) -> None:
    """Put the editor's cursor at `line` (1-based), `column` (0-based), as a click there does."""
    toml_editor(page).locator(".ace_editor").evaluate(
        f"e => {{ e.env.editor.focus(); e.env.editor.gotoLine({line}, {column}, false); }}"
    )


def _open_templates(page: Any, copy_of: str | None = None) -> None:
    visit(page, "Templates", page.get_by_text("Valid: "))
    toml_editor(page).locator(".ace_content").wait_for()
    if copy_of is not None:
        page.get_by_text("Start from…").click()
        choose(page, "A copy of", copy_of)
        page.get_by_role("button", name="Load copy").click()
        page.get_by_text(f"Valid: {copy_of}").wait_for()
    settle(page)


def _listed(page: Any) -> list[str]:
    """The problems listed under the editor, one per item."""
    return page.get_by_test_id("stAlertContentError").locator("li").all_inner_texts()


def test_templates_check_what_is_typed_and_mark_its_line_without_leaving_the_editor(
    page: Any, app_url: str
) -> None:
    from playwright.sync_api import expect

    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    _open_templates(page)
    text = editor_text(page)
    line = text[: text.index('kind = "likert7"')].count("\n") + 1
    _cursor(page, line, len('kind = "likert7'))
    page.keyboard.press("Backspace")
    page.keyboard.type("9")  # typed, not pasted; nothing leaves the editor
    message = page.get_by_text("unknown scale kind 'likert9'")
    message.first.wait_for(timeout=2_000)
    marked = toml_editor(page).locator(".ace_gutter-cell.ace_error")
    expect(marked).to_have_text([str(line)], timeout=2_000)
    expect(toml_editor(page).locator(".ace_error-marker")).to_have_count(1, timeout=2_000)
    expect(toml_editor(page).locator("textarea.ace_text-input")).to_be_focused()
    shot(page, "43_4a_templates_error_while_typing")
    page.keyboard.press("Backspace")
    page.keyboard.type("7")
    page.get_by_text("Valid: My Bias").wait_for(timeout=2_000)
    expect(marked).to_have_count(0, timeout=2_000)
    expect(message).to_have_count(0)
    assert editor_text(page) == text
    assert any("streamlit_ace" in url for url in fetched)  # the editor came from the app...
    assert all(url.startswith(app_url) for url in fetched), fetched  # ...and nothing else
    no_exception(page)


def test_an_example_list_one_fill_short_is_one_message_at_that_list(page: Any) -> None:
    _open_templates(page, "Framing Effect")
    lines = editor_text(page).split("\n")
    start = lines.index("[examples]") + 1  # the first list: its key, then a fill per line
    end = lines.index("]", start)
    assert end - start == 4, lines[start:end]  # three fills
    edit(page, "\n".join(lines[: end - 1] + lines[end:]))  # its last fill gone
    page.get_by_text("example fill(s); write at least 3").wait_for()
    listed = _listed(page)
    assert len(listed) == 1, listed  # not also "the other gaps have ..." on lists that are fine
    assert listed[0].startswith(f"Line {start + 1}, column")  # the list's own key
    assert "has 2 example fill(s); write at least 3" in listed[0]
    assert editor_marked_lines(page) == [start + 1]
    shot(page, "43_4b_templates_short_example_list", page.get_by_test_id("stAlert"))
    no_exception(page)


def test_a_gap_without_example_fills_is_listed_with_the_other_problems(page: Any) -> None:
    _open_templates(page, "Framing Effect")
    text = editor_text(page).replace(
        "It is time to assess", f"It is [[{NEW_GAP}]] and time to assess"
    )
    text = text.replace('id = "framing_effect"', 'id = "Framing"', 1)
    gap_line = text[: text.index(NEW_GAP)].count("\n") + 1
    edit(page, text)
    page.get_by_text("must be snake_case").wait_for()
    listed = _listed(page)
    assert len(listed) == 2, listed  # both at once, not the second after the first is fixed
    assert listed[0].startswith("Line 1, column")
    assert listed[1].startswith(f"Line {gap_line}, column")
    assert f"no example fills for the gap '{NEW_GAP}'" in listed[1]
    assert "with that text as its key" in listed[1]
    assert "{" not in " ".join(listed)  # words, not a Python dict of values
    assert editor_marked_lines(page) == [1, gap_line]
    shot(page, "43_4c_templates_missing_example_key", page.get_by_test_id("stAlert"))
    no_exception(page)
