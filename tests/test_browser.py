"""The main journeys in a real headless Chromium against `streamlit run app.py` on 127.0.0.1.

One app server for the module, started like `./scripts/app` on a fresh machine (empty
home, the demo snapshot loaded on first start). Every journey saves a screenshot to
artifacts/screenshots/. Debian's chromium is used directly: `playwright install` downloads
browsers, which these machines cannot do.
"""

from __future__ import annotations

import csv
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    add_option,
    app_environment,
    choose,
    editor_marked_lines,
    go,
    no_exception,
    replace_editor_text,
    settle,
    shows,
    shows_at_least,
)

pytestmark = pytest.mark.browser

SHOTS = ROOT / "artifacts" / "screenshots"
LOCAL_MODEL_TIMEOUT_MS = 240_000  # the local model fills gaps in tens of seconds on 2 cores
KEYED_VARIABLE = "OPENAI_API_KEY"  # a built-in model with a key; the need before its id
KEYED_OPTION = f"GPT-4o mini — needs {KEYED_VARIABLE} (openai/gpt-4o-mini-2024-07-18)"
PROVIDER_TEXT = ("litellm", "InternalServerError", "Provider said", "Missing credentials")

if not CHROMIUM.exists():
    pytest.skip(
        "Debian's chromium is not installed (/usr/bin/chromium); "
        "install it with `apt-get install -y chromium`",
        allow_module_level=True,
    )
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def app_env(app_home: Path) -> dict[str, str]:
    env = app_environment(app_home, demo=True)
    env.pop(KEYED_VARIABLE, None)  # a fresh machine: the keyed models must say what they need
    return env


def shot(page: object, name: str) -> None:
    """A full-page shot taken at once: some show a run while it runs, which the shared
    `browser_helpers.shot` would first wait out."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_explore_heatmap_and_paired_responses(page: object) -> None:
    go(page, "Explore")
    chart = page.get_by_test_id("stVegaLiteChart")  # type: ignore[attr-defined]
    cells = chart.locator("g.mark-rect path[aria-label]")
    cells.first.wait_for()
    shows_at_least(cells, 30)  # the demo results: 30 biases x its models
    cell = cells.nth(cells.count() // 2)  # mid-chart: away from the chart's hover toolbar
    label = cell.get_attribute("aria-label") or ""
    cell.click()
    heading = page.get_by_text("Paired responses")  # type: ignore[attr-defined]
    heading.wait_for()
    pairs = page.get_by_test_id("stExpander").filter(has_text="Pair 1")  # type: ignore[attr-defined]
    pairs.first.wait_for()
    count = page.get_by_text(" pair(s) · page 1 of")  # type: ignore[attr-defined]
    count.wait_for()
    download = page.get_by_test_id("stDownloadButton").filter(has_text="as CSV")  # type: ignore[attr-defined]
    with page.expect_download() as saved:  # type: ignore[attr-defined]
        download.click()
    with open(saved.value.path(), encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert f"{len(rows):,} pair(s)" in count.inner_text()  # the cell's pairs, every one
    pairs.first.click()
    # the options as the model saw them: the demo is probability-scored, so lettered A, B, …
    listed = page.get_by_test_id("stText").filter(has_text=re.compile(r"^A: .*\nB: ", re.M))  # type: ignore[attr-defined]
    listed.first.wait_for()
    no_exception(page)
    assert "bias" in label
    shot(page, "1_explore_cell")


def test_templates_error_fix_save(page: object) -> None:
    from cogbias.views import authoring

    go(page, "Templates")
    page.get_by_text("Valid: My Bias").wait_for()  # type: ignore[attr-defined]
    broken = authoring.BLANK_TEST_CASE.replace('kind = "likert7"', 'kind = "likert9"')
    line = broken[: broken.index('kind = "likert9"')].count("\n") + 1
    replace_editor_text(page, broken)
    # listed under the editor, and marked at its line in the editor
    page.get_by_text(f"Line {line}, column").first.wait_for()  # type: ignore[attr-defined]
    page.get_by_text("unknown scale kind 'likert9'").first.wait_for()  # type: ignore[attr-defined]
    assert editor_marked_lines(page) == [line]
    shot(page, "2a_templates_error")
    fixed = authoring.BLANK_TEST_CASE.replace('"my_bias"', '"browser_bias"').replace(
        '"My Bias"', '"Browser Bias"'
    )
    replace_editor_text(page, fixed)
    page.get_by_text("Valid: Browser Bias").wait_for()  # type: ignore[attr-defined]
    page.get_by_role("button", name="Save to my library").click()  # type: ignore[attr-defined]
    page.get_by_text("Saved 'browser_bias'").wait_for()  # type: ignore[attr-defined]
    page.get_by_text("Browser Bias", exact=True).wait_for()  # type: ignore[attr-defined]
    shot(page, "2b_templates_saved")
    go(page, "Learn")
    choose(page, "Bias", "Browser Bias (yours)")
    page.get_by_role("heading", name="Browser Bias").wait_for()  # type: ignore[attr-defined]
    no_exception(page)


@pytest.mark.local_model  # starts the real local model: one of its few smoke tests
def test_preview_fills_with_the_local_model(page: object) -> None:
    go(page, "Preview")
    choose(page, "Test case", "Framing Effect")
    choose(page, "Generator model", "SmolLM2 135M Instruct (local) (local/smollm2)")
    page.get_by_role("button", name="Fill", exact=True).click()  # type: ignore[attr-defined]
    # the page opened on the offline example fills; this caption says the model's fill is shown
    made_by = page.get_by_text("generator: local/smollm2")  # type: ignore[attr-defined]
    made_by.wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)
    # the local model's fills, or an example fill where the checker rejected one of them
    # (drawn after the caption: waited for, not counted at once)
    page.locator(".ins-llm, .ins-example").first.wait_for()  # type: ignore[attr-defined]
    settle(page)
    shows(made_by)
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0  # type: ignore[attr-defined]
    shot(page, "3_preview_local_model")


def test_run_progress_completes_and_explore_shows_it(page: object, app_home: Path) -> None:
    """A run started from the page shows its progress moving, completes, opens in Explore.

    The generator is a scripted server (page and runner logic; the real local model has its
    own smoke tests) that holds its answers until the page has shown the run's first state,
    so the move to the last is seen whatever the machine's load.
    """
    from fake_llm_server import FakeLLMServer

    from cogbias.llm import settings

    with FakeLLMServer() as slow:
        settings.add_custom_model(
            "openai/progressfake", "Progress fake", slow.base_url, json_schema=True,
            path=app_home / "models.toml",
        )  # fmt: skip
        _run_two_pairs_and_explore(page, slow)


def _run_two_pairs_and_explore(page: object, slow: Any) -> None:
    go(page, "Run")
    add_option(page, "Test cases", "Framing Effect")
    instances = page.get_by_role("spinbutton", name="Instances each")  # type: ignore[attr-defined]
    instances.fill("2")
    instances.press("Enter")
    # the held scripted model writes the gaps, so that progress has something to show
    choose(page, "Generator (fills [[gaps]])", "Progress fake (openai/progressfake)")
    page.get_by_text("LLM calls (at most)").wait_for()  # type: ignore[attr-defined]
    page.get_by_test_id("stMetricValue").first.filter(has_text="2").wait_for()  # type: ignore[attr-defined]
    slow.held = True  # no answer until the page has shown where the run starts
    page.get_by_role("button", name="Start run").click()  # type: ignore[attr-defined]
    page.get_by_text("Progress").wait_for()  # type: ignore[attr-defined]
    progress = page.get_by_test_id("stProgress")  # type: ignore[attr-defined]
    progress.filter(has_text="0 of 2 pairs").first.wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)
    shot(page, "4a_run_progress")
    first = " | ".join(progress.all_inner_texts())
    slow.held = False
    done = page.get_by_text("2 of 2 pairs, 0 failed")  # type: ignore[attr-defined]
    done.wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)  # drawn by the polling fragment: no reload
    assert "0 of 2 pairs" in first and done.count() == 1, first
    shot(page, "4b_run_done")
    page.get_by_role("button", name="Open this run in Explore").click()  # type: ignore[attr-defined]
    cells = page.get_by_test_id("stVegaLiteChart").locator("g.mark-rect path[aria-label]")  # type: ignore[attr-defined]
    cells.first.wait_for()
    labels = [cells.nth(i).get_attribute("aria-label") or "" for i in range(cells.count())]
    assert any("Framing Effect" in x for x in labels)  # rows show display names
    assert all("Framing Effect" in x for x in labels if "bias:" in x)
    no_exception(page)
    shot(page, "4c_explore_run")


def test_run_cancel_while_hanging_then_resume_adds_up(page: object, app_home: Path) -> None:
    """Start a run, cancel it while the provider hangs, resume it: counts and durations hold."""
    from fake_llm_server import FakeLLMServer
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from cogbias.llm import settings
    from cogbias.store import Store

    db = app_home / "app.db"
    with FakeLLMServer(latency=0.3) as slow:
        settings.add_custom_model(
            "openai/slowfake", "Slow fake", slow.base_url, json_schema=True,
            path=app_home / "models.toml",
        )  # fmt: skip
        go(page, "Run")
        add_option(page, "Test cases", "Framing Effect")
        instances = page.get_by_role("spinbutton", name="Instances each")  # type: ignore[attr-defined]
        instances.fill("4")
        instances.press("Enter")
        add_option(page, "Decision models", "Slow fake (openai/slowfake)")
        # the offline fills, and a provider that hangs from the start: the random baseline's
        # pairs finish, the slow model's hang (answers read without an extraction round
        # would otherwise all be in before a cancel could land)
        choose(page, "Generator (fills [[gaps]])", "Example fills (offline, instant)")
        page.get_by_test_id("stMetricValue").first.filter(has_text="8").wait_for()  # type: ignore[attr-defined]
        slow.latency = 600
        page.get_by_role("button", name="Start run").click()  # type: ignore[attr-defined]
        page.get_by_text("Progress").wait_for()  # type: ignore[attr-defined]
        deadline = time.monotonic() + 120
        done = 0
        while done < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            with Store(db) as store:
                done = store.query("select count(*) as n from decisions where run_id = "
                                   "(select id from runs order by created_at desc limit 1)")[0]["n"]  # fmt: skip
        said = page.get_by_text("cancelling…").or_(page.get_by_text("Last run"))  # type: ignore[attr-defined]
        for _ in range(3):  # a click can land while the progress fragment redraws; click again
            page.get_by_role("button", name="Cancel run").click()  # type: ignore[attr-defined]
            try:
                said.first.wait_for(timeout=10_000)
                break
            except PlaywrightTimeout:
                continue
        shot(page, "5a_run_cancelling")
        page.get_by_text("Last run").wait_for(timeout=30_000)  # type: ignore[attr-defined]
        with Store(db) as store:
            [run] = [r for r in store.runs() if r["status"] == "cancelled"]
            stored = store.query(
                "select count(*) as n from decisions where run_id = ?", (run["id"],)
            )
        assert 0 < run["done"] == stored[0]["n"] < 8
        page.get_by_text(f"{run['done']} of 8 pairs").first.wait_for()  # type: ignore[attr-defined]
        shot(page, "5b_run_cancelled")
        first = run["duration_s"]
        slow.latency = 0.05
        page.get_by_role("button", name="Resume").click()  # type: ignore[attr-defined]
        page.get_by_text("8 of 8 pairs, 0 failed").wait_for(timeout=120_000)  # type: ignore[attr-defined]
        with Store(db) as store:
            run = store.run(run["id"])
        assert run["status"] == "done" and run["duration_s"] > first
        shown = round(run["duration_s"], 1)  # the runs table rounds to 0.1 s, then the page to 1 s
        page.get_by_text(f"· {shown:.0f} s").first.wait_for()  # type: ignore[attr-defined]
        no_exception(page)
        shot(page, "5c_run_resumed")


@pytest.mark.local_model  # starts the real local model: one of its few smoke tests
def test_teacher_journey_learn_with_the_defaults_reads_as_plain_english(page: object) -> None:
    """No key, the defaults: Learn fills Anchoring with the offline example fills and asks
    the local model, scored by its option probabilities (its default, issue 41); the pair on
    screen carries no template syntax or instructions."""
    from cogbias.library import testcases as library
    from cogbias.runs import pipeline

    case = library.get_test_case("anchoring")
    instructions = {g.instruction for t in (case.control, case.treatment) for g in t.llm_gaps()}
    choose(page, "Bias", "Anchoring")
    page.get_by_role("button", name="Run this pair").click()  # type: ignore[attr-defined]
    # both halves are answered and drawn (the second may appear a moment after the first)
    page.get_by_text("◀ sampled").nth(1).wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)  # type: ignore[attr-defined]
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0  # type: ignore[attr-defined]
    assert "Scored by option probabilities" in page.inner_text("body")  # type: ignore[attr-defined]
    innermost = (
        '[data-testid="stVerticalBlock"]:has-text("◀ sampled")'
        ':not(:has([data-testid="stVerticalBlock"]:has-text("◀ sampled")))'
    )
    halves = page.locator(innermost).all_inner_texts()  # type: ignore[attr-defined]
    assert len(halves) == 2, halves
    example = pipeline.GEN_EXAMPLE.split('"organization": "')[1].split('"')[0]
    for text in halves:
        for leak in ("[[", "]]", "{{", "}}", "a/an", example, *instructions):
            assert leak not in text, (leak, text)
    shot(page, "0_teacher_learn_defaults")


def test_learn_shows_both_halves_probability_bars_for_the_local_model(page: object) -> None:
    """Scoring by option probabilities on Learn: the local model's live pair shows a bar per
    option in each half, and the sentence comparing the halves."""
    from cogbias.library import testcases as library

    n = library.get_test_case("framing_effect").n_options
    choose(page, "Bias", "Framing Effect")
    page.get_by_text("Option probabilities (expected score)").click()  # type: ignore[attr-defined]
    page.get_by_role("button", name="Run this pair").click()  # type: ignore[attr-defined]
    bars = page.get_by_test_id("stProgress")  # type: ignore[attr-defined]
    bars.nth(2 * n - 1).wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0  # type: ignore[attr-defined]
    shows(bars, 2 * n)
    shows(page.get_by_text("Option probabilities", exact=True))  # type: ignore[attr-defined]
    texts = bars.all_inner_texts()
    assert all("%" in text for text in texts), texts
    # the options as the model saw them (lettered), its letter never read as words
    body = page.inner_text("body")  # type: ignore[attr-defined]
    assert body.count("◀ sampled") == 2 and "◀ chosen" not in body
    assert "cannot be read on its own" not in body
    assert "Scored by option probabilities" in body
    shot(page, "4_learn_probability_bars")


def test_learn_first_shows_a_filled_pair_and_the_template_one_click_away(page: object) -> None:
    """Issue 21, 1: before anything runs, Learn shows the pair filled from the offline example
    fills (no raw [[gap]] in it); the template with its gaps is behind one expander."""
    situations = page.locator('[data-testid="stMarkdown"]:has-text("Situation:")')  # type: ignore[attr-defined]
    situations.first.wait_for()
    shown = [situations.nth(i) for i in range(situations.count()) if situations.nth(i).is_visible()]
    assert len(shown) == 2  # control and treatment, filled
    for half in shown:
        text = half.inner_text()
        assert "[[" not in text and "]]" not in text and "{{" not in text, text
        shows_at_least(half.locator(".ins-example"))  # the example fills, marked as such
    page.get_by_text("An example pair, filled offline").wait_for()  # type: ignore[attr-defined]
    shot(page, "21_1a_learn_filled_pair")
    expander = page.get_by_test_id("stExpander").filter(has_text="The template behind it")  # type: ignore[attr-defined]
    shows(expander)
    expander.get_by_text("The template behind it").click()
    raw = expander.locator('[data-testid="stMarkdown"]:has-text("Situation:")')
    raw.nth(1).wait_for()
    assert all("[[" in raw.nth(i).inner_text() for i in range(2))  # the gaps, unfilled
    no_exception(page)
    expander.scroll_into_view_if_needed()
    shot(page, "21_1b_learn_template_expanded")


def _options_of(page: object, box: object, typed: str, name: str = "") -> list[str]:
    """The options a picker offers for `typed` (a screenshot `name` of the open list), then
    the picker closed again."""
    box.locator("input").click()  # type: ignore[attr-defined]
    box.locator("input").fill(typed)  # type: ignore[attr-defined]
    page.get_by_role("option").first.wait_for()  # type: ignore[attr-defined]
    options = page.get_by_role("option").all_inner_texts()  # type: ignore[attr-defined]
    if name:
        shot(page, name)
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    return options


def _picker(page: object, kind: str, label: str) -> object:
    return page.get_by_test_id(kind).filter(has=page.get_by_text(label, exact=True))  # type: ignore[attr-defined]


def _refused_in_one_sentence(page: object) -> str:
    """The one error on the page: names the key variable and the secrets entry, no provider
    text anywhere on the page."""
    error = page.get_by_test_id("stAlertContentError")  # type: ignore[attr-defined]
    error.first.wait_for()
    shows(error)
    text = error.inner_text()
    assert f"needs an API key and {KEYED_VARIABLE} is not set" in text, text
    assert ".streamlit/secrets.toml" in text, text
    assert "What to do" not in text, text  # one sentence: no advice on servers after it
    body = page.locator("body").inner_text()  # type: ignore[attr-defined]
    assert not [p for p in PROVIDER_TEXT if p.lower() in body.lower()], body
    no_exception(page)
    return text


def test_a_keyed_model_is_marked_in_every_picker_and_refused_at_once(page: object) -> None:
    """Issue 21, 2: with OPENAI_API_KEY unset, GPT-4o mini says what it needs in the pickers of
    Learn, Preview and Run; choosing it and running is refused with one sentence naming the
    variable and the secrets entry, never the provider's raw text."""
    secrets = [ROOT / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"]
    if any(f.is_file() and KEYED_VARIABLE in f.read_text() for f in secrets):
        pytest.skip(f"a secrets file here sets {KEYED_VARIABLE}, so no model lacks its key")
    for label in ("Decision model", "Generator (fills the blue gaps)"):
        assert KEYED_OPTION in _options_of(page, _picker(page, "stSelectbox", label), "GPT-4o mini")
    assert "needs" not in " ".join(
        _options_of(page, _picker(page, "stSelectbox", "Decision model"), "random")
    )
    choose(page, "Decision model", KEYED_OPTION)
    page.get_by_role("button", name="Run this pair").click()  # type: ignore[attr-defined]
    _refused_in_one_sentence(page)
    shot(page, "21_2a_learn_keyed_model_refused")

    go(page, "Preview")
    page.get_by_role("button", name="Fill", exact=True).click()  # type: ignore[attr-defined]
    page.get_by_text("All insertions").wait_for()  # the Decide section shows after a fill  # type: ignore[attr-defined]
    for label in ("Generator model", "Decision model"):
        assert KEYED_OPTION in _options_of(page, _picker(page, "stSelectbox", label), "GPT-4o mini")
    choose(page, "Decision model", KEYED_OPTION)
    page.get_by_role("button", name="Decide").click()  # type: ignore[attr-defined]
    _refused_in_one_sentence(page)
    shot(page, "21_2b_preview_keyed_model_refused")

    go(page, "Run")
    generator = _picker(page, "stSelectbox", "Generator (fills [[gaps]])")
    assert KEYED_OPTION in _options_of(page, generator, "GPT-4o mini")
    models = _picker(page, "stMultiSelect", "Decision models")
    assert KEYED_OPTION in _options_of(page, models, "GPT-4o", "21_2c_run_keyed_model_marked")
    cases = _picker(page, "stMultiSelect", "Test cases")
    cases.locator("input").click()
    cases.locator("input").fill("Framing")
    page.get_by_role("option", name="Framing Effect", exact=True).click()  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    models.locator("input").click()
    models.locator("input").fill("GPT-4o mini")
    page.get_by_role("option", name=KEYED_OPTION, exact=True).click()  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    page.get_by_role("heading", name="Run a batch").click()  # type: ignore[attr-defined]
    settle(page)
    # refused before anything starts: the sentence, and no Start button to press
    _refused_in_one_sentence(page)
    assert page.get_by_role("button", name="Start run").count() == 0  # type: ignore[attr-defined]
    page.get_by_test_id("stAlertContentError").first.scroll_into_view_if_needed()  # type: ignore[attr-defined]
    shot(page, "21_2d_run_keyed_model_refused")


def test_learn_suggests_option_probabilities_exactly_when_a_sampled_answer_is_unreadable(
    page: object,
) -> None:
    """Sampled answers, chosen explicitly (the local model's default is its probabilities):
    an answer that names two options ("Option 4: Very good") is never guessed at, and the
    pair then says how many answers could not be read, why, and how else this model can be
    read; a scored pair does not. (Held to "Option N" by its grammar, SmolLM2's answers are
    read now.)"""
    choose(page, "Bias", "Framing Effect")
    settle(page)  # the bias's page has been drawn
    page.get_by_text("Sampled answer (read, then scored)").click()  # type: ignore[attr-defined]
    settle(page)
    page.get_by_role("button", name="Run this pair").click()  # type: ignore[attr-defined]
    verdict = page.get_by_text("could not be read", exact=False).or_(  # type: ignore[attr-defined]
        page.get_by_text("Score ", exact=False).filter(has_text="on a scale from -1 to 1")  # type: ignore[attr-defined]
    )
    verdict.first.wait_for(timeout=LOCAL_MODEL_TIMEOUT_MS)
    settle(page)
    body = page.inner_text("body")  # type: ignore[attr-defined]
    unscored = "could not be read" in body
    assert ("choose Scoring “Option probabilities”" in body) == unscored
    assert not (unscored and "Error: control:" in body)  # said once, in the warning
    no_exception(page)
    shot(page, "4b_learn_unreadable_pair_suggests_probabilities")
