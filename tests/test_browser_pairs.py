"""Pairs as the model saw them, statistics on hover, and Compare, in a real browser.

The app starts on a fresh home with the demo results, plus a scripted OpenAI-compatible model
on 127.0.0.1 that always answers with the *text* of the option shown second (and an extractor
that finds that text), so what Learn shows can be checked against what the model was sent.
Each journey saves a screenshot to artifacts/screenshots/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser_helpers import CHROMIUM, ROOT, choose, go, learn_tab, running_app, settle
from tests.fake_llm_server import FakeLLMServer, _last_user_text

pytestmark = pytest.mark.browser
SHOTS = ROOT / "artifacts" / "screenshots"
MODEL_LABEL = "Scripted test model (openai/scripted)"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


def _options(prompt: str) -> dict[int, str]:
    return {int(n): text.strip() for n, text in re.findall(r"Option (\d+): (.+)", prompt)}


def scripted(request: dict[str, Any]) -> str:
    """Fills: schema-shaped words. Decisions: presented option 2's text. Extraction: its number."""
    import json

    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"]["required"]
        words = ["a", "purchasing", "a regional hospital", "choose a new supplier"]
        return json.dumps({k: words[i % len(words)] for i, k in enumerate(keys)})
    prompt = _last_user_text(request)
    options = _options(prompt)
    if prompt.startswith("Below are the answer options"):
        answer = prompt.split("Answer:", 1)[1]
        for number, text in sorted(options.items(), key=lambda kv: -len(kv[1])):
            if re.search(rf"(?<!\w){re.escape(text)}(?!\w)", answer):
                return f"Option {number}"
        return "No option selected"
    return f"Weighing it up, I would go with: {options[2]}."


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from cogbias.llm import settings

    home = tmp_path_factory.mktemp("pairs-home")
    with FakeLLMServer(responder=scripted) as fake:
        settings.add_custom_model(
            "openai/scripted", "Scripted test model", fake.base_url, json_schema=True,
            path=home / "models.toml",
        )  # fmt: skip
        env = {**os.environ, "COGBIAS_HOME": str(home), "COGBIAS_DB": str(home / "app.db"),
               "COGBIAS_DEMO": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
        with running_app(env, home / "streamlit.log") as url:
            yield url


@pytest.fixture
def page(browser: Any, app_url: str) -> Iterator[Any]:
    with learn_tab(browser, app_url) as tab:
        yield tab


def shot(page: Any, name: str, top: Any = None) -> None:
    """A viewport screenshot, scrolled so that `top` (a locator) starts the view. (Streamlit
    scrolls inside its own container, so a full-page shot would show no more.)"""
    settle(page)
    if top is not None:
        top.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def no_exception(page: Any) -> None:
    assert page.get_by_test_id("stException").count() == 0


def test_learn_live_pair_lists_options_as_the_model_saw_them(page: Any) -> None:
    choose(page, "Bias", "Framing Effect")
    choose(page, "Decision model", MODEL_LABEL)
    choose(page, "Generator (fills the blue gaps)", MODEL_LABEL)
    page.get_by_role("button", name="Run this pair").click()
    page.get_by_text("◀ chosen").first.wait_for(timeout=120_000)
    settle(page)
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0
    blocks = page.get_by_test_id("stText").all_inner_texts()
    option_lists = [b for b in blocks if "◀ chosen" in b]
    answers = [b for b in blocks if b.startswith("Weighing it up")]
    assert len(option_lists) == 2 and len(answers) == 2
    for options, answer in zip(option_lists, answers, strict=True):
        chosen = next(line for line in options.splitlines() if "◀ chosen" in line)
        assert chosen.startswith("Option 2: ")  # the scripted model picks the second shown
        text = chosen.removeprefix("Option 2: ").replace("◀ chosen", "").strip()
        assert answer == f"Weighing it up, I would go with: {text}."
    assert page.get_by_text("tiny demonstration model").count() == 1
    assert page.get_by_text("random baseline", exact=False).count() >= 1
    shot(page, "5_learn_live_pair", page.get_by_text("Generator: Scripted test model"))


def test_explore_hover_shows_n_ci_and_significance(page: Any) -> None:
    go(page, "Explore")
    cells = page.get_by_test_id("stVegaLiteChart").first.locator("g.mark-rect path[aria-label]")
    cells.first.wait_for()
    cells.nth(cells.count() // 2 + 1).hover()
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible")
    text = tooltip.inner_text()
    assert "n (scored pairs)" in text and "95% CI of this cell alone (not BH-adjusted)" in text
    assert "significant after BH over all cells" in text
    bounds = [float(x) for x in re.findall(r"([+-]?\d\.\d\d) to ([+-]?\d\.\d\d)", text)[0]]
    assert all(-1 <= b <= 1 for b in bounds)
    no_exception(page)
    shot(page, "6_explore_hover")


def test_a_reversed_pair_says_so_and_lists_options_reversed(page: Any) -> None:
    go(page, "Explore")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    for bias in ("Anchoring", "Framing Effect", "Halo Effect", "Loss Aversion", "Status Quo Bias"):
        choose(page, "Bias", bias)
        choose(page, "Model", "local/smollm2")
        settle(page)
        flipped = page.get_by_test_id("stExpander").filter(has_text="options reversed")
        if flipped.count():
            break
    else:
        pytest.fail("no reversed pair in five biases of the demo results")
    flipped.first.locator("summary").click()
    note = flipped.first.get_by_text("shown to the model in reverse order")
    note.wait_for()
    options = flipped.first.get_by_test_id("stText").all_inner_texts()
    listed = next(b for b in options if b.startswith("Option 1:"))
    assert listed.count("Option ") >= 2
    no_exception(page)
    shot(page, "7_reversed_pair", flipped)


def test_compare_shows_paired_differences_and_disagreements(page: Any) -> None:
    go(page, "Compare")
    page.get_by_text("Where they disagree most").wait_for()
    page.get_by_test_id("stVegaLiteChart").first.locator("path").first.wait_for()
    settle(page)
    no_exception(page)
    assert page.get_by_text("Wilcoxon signed-rank", exact=False).count() >= 1
    choose(page, "Bias", "Escalation of Commitment")
    settle(page)
    shot(page, "8_compare", page.get_by_role("heading", name="Compare two models"))
    shot(page, "8b_compare_disagreements", page.get_by_text("Where they disagree most"))


def test_the_first_model_chip_stays_whole_when_two_are_chosen(browser: Any, app_url: str) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    page.get_by_text("Learn: cognitive biases").wait_for()
    go(page, "Run")
    box = page.get_by_test_id("stMultiSelect").filter(
        has=page.get_by_text("Decision models", exact=True)
    )
    box.wait_for()
    settle(page)
    box.locator("input").click()
    box.locator("input").fill("SmolLM2")
    page.get_by_role("option").first.click()
    page.keyboard.press("Escape")
    settle(page)
    tags = box.get_by_test_id("stMultiSelectTagsContainer")
    label, whole, scrolled = tags.evaluate(
        "e => { const label = e.firstElementChild.firstElementChild.firstElementChild;"
        " return [label.innerText, label.scrollWidth <= label.clientWidth, e.scrollLeft]; }"
    )
    assert label == "Random baseline (random)" and whole, "the first chip is cut off"
    assert scrolled == 0  # nothing scrolled out of sight
    context.close()
