"""The participant's pages and a class report, checked with axe-core in a real browser: no
serious or critical violation on the question, the result, the closed page and the report;
the pages are used with the keyboard alone.

A page that waits for the teacher (the lobby, an answer given, answers locked, a result with
another question to come) reloads itself every few seconds: that is how a phone follows the
lesson without script. axe-core calls any timed reload a critical failure of WCAG 2.2.1
(`meta-refresh`), whose remedy is a way to turn it off: each such page has "Stop updating",
whose page has no reload and no violation, and `meta-refresh` is the only rule they break.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from class_helpers import ROOT, fresh_address, open_on, serving

from cogbias.classroom import lessons, questions, sessions
from cogbias.store import Store
from tests.browser_helpers import CHROMIUM, between_reloads, html, revisit

pytestmark = pytest.mark.browser
SHOTS = ROOT / "artifacts" / "screenshots"
SERIOUS = ("serious", "critical")

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")
axe_playwright = pytest.importorskip("axe_playwright_python.sync_playwright")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = tmp_path_factory.mktemp("a11y") / "class.db"
    Store(db).close()
    with serving(db) as base:
        yield base, db


def violations(page: Any) -> list[tuple[str, str, int]]:
    """(rule, impact, nodes) of every serious or critical axe-core violation on the page."""
    found = between_reloads(page, lambda: axe_playwright.Axe().run(page).response["violations"])
    return [(v["id"], v["impact"], len(v["nodes"])) for v in found if v["impact"] in SERIOUS]


def phone(browser: Any) -> Any:
    """A participant's phone from an address of its own (its own rate limit)."""
    context = browser.new_context(
        viewport={"width": 420, "height": 800},
        extra_http_headers={"X-Forwarded-For": fresh_address()},
    )
    return context.new_page()


def test_question_result_closed_pages_and_report_have_no_serious_violation(
    browser: Any, server: tuple[str, Path], tmp_path: Path
) -> None:
    base, db = server
    code = open_on(db, questions.classic_question("classics", "asian_disease"))
    join = f"{base}/s/{code}"
    you, stranger = phone(browser), phone(browser)
    try:
        you.goto(join)
        assert violations(you) == [], "the question page"
        _answer_with_the_keyboard(you)
        you.get_by_text("Your answer is in").wait_for()
        with Store(db) as store:
            lessons.lock(store, code)
        stranger.goto(join)
        stranger.get_by_text("Answers are closed").wait_for()
        assert violations(stranger) == [], "the closed page"
        with Store(db) as store:
            lessons.reveal(store, code)
        revisit(you, join)
        you.get_by_text("the class's result").wait_for()
        assert 'http-equiv="refresh"' not in html(you)  # the last result: it waits for nothing
        assert violations(you) == [], "the result page"
        SHOTS.mkdir(parents=True, exist_ok=True)
        you.screenshot(path=str(SHOTS / "class_a11y_result.png"), full_page=True)
    finally:
        you.context.close()
        stranger.context.close()
    report = tmp_path / "class.html"
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "report", "--class", code, "-o", str(report),
         "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reader = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    try:
        reader.goto(report.as_uri())
        assert violations(reader) == [], "the class report"
    finally:
        reader.context.close()


def _answer_with_the_keyboard(page: Any) -> None:
    """Tab to the first option, pick it with Space, Tab to Send and press Enter."""
    page.keyboard.press("Tab")
    for _ in range(6):
        if page.evaluate("document.activeElement.type") == "radio":
            break
        page.keyboard.press("Tab")
    page.keyboard.press("Space")
    assert page.evaluate("document.activeElement.checked") is True
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.tagName") == "BUTTON":
            break
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_pages_that_wait_break_only_the_reload_rule_and_can_stop(
    browser: Any, server: tuple[str, Path]
) -> None:
    base, db = server
    with Store(db) as store:
        theatre = questions.classic_question("classics", "theatre_ticket")
        code = lessons.open_lesson(store, [theatre, theatre])  # waits in its lobby
    join = f"{base}/s/{code}"
    you = phone(browser)
    try:
        you.goto(join)
        you.get_by_text("You are in").wait_for()
        assert {rule for rule, _, _ in violations(you)} == {"meta-refresh"}, "the lobby"
        you.get_by_role("link", name="Stop updating").click()
        you.get_by_role("link", name="Check again").wait_for()
        assert violations(you) == [], "the lobby, not updating"
        with Store(db) as store:
            lessons.start(store, code)
        you.get_by_role("link", name="Check again").click()
        you.get_by_role("radio").first.check()
        with you.expect_navigation():
            you.get_by_role("button", name="Send my answer").click()
        you.get_by_text("Your answer is in").wait_for()
        assert {rule for rule, _, _ in violations(you)} == {"meta-refresh"}, "answered"
        with Store(db) as store:
            lessons.reveal(store, code)
        revisit(you, f"{join}?still=1")
        you.get_by_text("the class's result").wait_for()
        assert violations(you) == [], "a result with a next question, not updating"
        assert sessions.answer_of(Store(db), sessions.require_session(Store(db), f"{code}-1"),
                                  "nobody") is None  # fmt: skip
    finally:
        you.context.close()


def test_the_question_s_countdown_hides_send_at_zero_without_script(
    browser: Any, server: tuple[str, Path]
) -> None:
    """The question never reloads; its countdown is CSS from the seconds left when it was
    served: at zero Send goes and the page says answers are locked."""
    base, db = server
    with Store(db) as store:
        code = sessions.open_session(
            store, questions.classic_question("classics", "linda"), seconds=sessions.MIN_SECONDS
        )
    you = phone(browser)
    try:
        you.goto(f"{base}/s/{code}")
        send = you.get_by_role("button", name="Send my answer")
        assert send.is_visible() and you.get_by_text("seconds left to answer").is_visible()
        you.get_by_text("Time is up: answers are locked.").wait_for(timeout=30_000)
        assert send.is_hidden()
        assert violations(you) == [], "the question at zero"
    finally:
        you.context.close()
