"""A teacher with no API key asks the local model on a classic, in a real browser (issue 41).

The Class page opens the Asian disease question, asks `local/smollm2` the default way (its
option probabilities: one call per condition) and then as sampled answers (n per condition,
each held to an option by its grammar), waits for each class run while its progress shows,
locks and reveals. The reveal's numbers (its Results CSV) give every condition of each way
of asking the n asked, or the page says for that condition how many answers could not be
read and why. The screenshot goes to artifacts/screenshots/ to be looked at.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest

from tests.browser_helpers import CHROMIUM, ROOT, add_option, go, learn_tab, no_exception, settle

pytestmark = [pytest.mark.browser, pytest.mark.local_model]
SHOTS = ROOT / "artifacts" / "screenshots"
SAMPLES = 5  # answers per condition asked as sampled answers
LOCAL_MODEL_TIMEOUT_MS = 900_000  # the server's start and its calls, on 2 shared cores

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")
pytest.importorskip("xllamacpp")


def _ask(page: Any, way: str) -> None:
    """Ask the chosen models `way`, see its progress, and wait until the run has ended."""
    page.get_by_text(way, exact=True).click()
    settle(page)
    page.get_by_role("button", name="Ask the models").click()
    page.get_by_text("Asking the models: ").first.wait_for(timeout=120_000)  # its progress
    page.get_by_text(re.compile(r"answers stored \(\d+ unreadable")).wait_for(
        timeout=LOCAL_MODEL_TIMEOUT_MS
    )
    settle(page)
    no_exception(page)


def _revealed_rows(page: Any) -> list[dict[str, str]]:
    """The reveal's rows, as its Results CSV gives them."""
    with page.expect_download() as download:
        page.get_by_role("button", name="Results CSV").click()
    text = download.value.path().read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def test_the_local_model_answers_a_classic_and_the_reveal_accounts_for_every_answer(
    browser: Any, app_url: str
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with learn_tab(browser, app_url, height=1600) as page:
        go(page, "Class")
        page.get_by_role("heading", name="Class").first.wait_for()
        settle(page)
        add_option(page, "Questions, in order (several make a lesson under one code)",
                   "Asian disease (classics)")  # fmt: skip
        page.get_by_role("button", name="Open session").click()
        page.get_by_role("heading", name=re.compile(r"^Code: ")).wait_for()
        settle(page)
        models = page.get_by_test_id("stMultiSelect").filter(
            has=page.get_by_text("Models", exact=True)
        )
        models.locator("input").click()
        page.keyboard.press("Backspace")  # the random baseline, chosen by default
        page.keyboard.press("Escape")
        settle(page)
        add_option(page, "Models", "SmolLM2 135M Instruct (local) (local/smollm2)")
        _ask(page, "the models' default")
        number = page.get_by_label("Answers per condition (n)")
        number.fill(str(SAMPLES))
        number.press("Enter")
        settle(page)
        _ask(page, "sampled answers (n at a temperature)")
        page.get_by_role("button", name="Lock answers").click()
        page.get_by_role("button", name="Reveal…").click()
        page.get_by_role("button", name="Yes, reveal").click()
        reveal = page.get_by_role("heading", name="Reveal")
        reveal.wait_for()
        settle(page)
        no_exception(page)
        page.get_by_test_id("stVegaLiteChart").last.locator(
            "g.mark-symbol.role-mark path"
        ).first.wait_for()
        reveal.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "class_local_model_reveal.png"), full_page=True)
        rows = _revealed_rows(page)
        notes = page.inner_text("body")
    local = [r for r in rows if "local/smollm2" in r["who"]]
    conditions = {r["condition"] for r in rows if r["who"].startswith("human")} or {
        r["condition"] for r in rows
    }
    assert len(conditions) == 2, rows
    ways = {r["who"] for r in local}
    assert len(ways) == 2, ways  # the default way (probabilities) and sampled answers
    for who in ways:
        asked = 1 if "probabilities" in who else SAMPLES  # one call a condition, or n answers
        for condition in conditions:
            shown = {r["n"] for r in local if r["who"] == who and r["condition"] == condition}
            if shown != {str(asked)}:  # fewer read: the page says how many and why
                said = re.search(
                    rf"{re.escape(condition)}: \d+ answers? could not be read: \S", notes
                )
                assert said, (who, condition, shown, notes)
