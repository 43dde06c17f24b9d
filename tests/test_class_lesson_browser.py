"""A lesson in real browsers (issue 42): the teacher opens two questions under one code with a
30-second countdown; four phones join in the lobby, follow the start by themselves and
answer; the teacher shortens the countdown and it locks answers at zero (a phone that did not
answer is refused and told so, and so is someone joining late); Reveal asks for a
confirmation; the projector view at 1280×720 and
1920×1080 shows the legend, the axis and every condition's own label without scrolling,
read from the chart's SVG; the phones then show the result and follow the next question.

The countdown is the store's (the page, the server and the projector read the same
deadline); the test waits for the lock it causes and never times anything. Screenshots go
to artifacts/screenshots/ to be looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from class_helpers import serving

from cogbias.classroom import lessons, sessions
from cogbias.store import Store
from tests.browser_helpers import CHROMIUM, add_option, html, revisit, running_app, settle

pytestmark = pytest.mark.browser
SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
QUESTIONS = "Questions, in order (several make a lesson under one code)"
FOLLOW = 30_000  # ms a phone may take to follow the lesson (it reloads every few seconds)

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def urls(app_env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(the teacher's app, the participant server) on one database."""
    db = Path(app_env["COGBIAS_DB"])
    Store(db).close()
    with serving(db) as participants, running_app(app_env, db.parent / "streamlit.log") as app:
        yield app, participants


def _phone(browser: Any, join: str) -> Any:
    page = browser.new_context(viewport={"width": 420, "height": 800}).new_page()
    page.set_default_timeout(FOLLOW)
    page.goto(join)
    return page


def _open_lesson(page: Any) -> str:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Class").click()
    page.get_by_role("heading", name="Class").first.wait_for()
    settle(page)
    add_option(page, QUESTIONS, "Asian disease (classics)")
    add_option(page, QUESTIONS, "Theatre ticket (classics)")
    countdown = page.get_by_label("Countdown per question, seconds (0: none)")
    countdown.fill("30")
    countdown.press("Enter")
    settle(page)
    assert page.get_by_role("checkbox", name="Wait in a lobby until I press Start").is_checked()
    page.get_by_role("button", name="Open lesson").click()
    heading = page.get_by_role("heading", name=re.compile(r"^Code: "))
    heading.wait_for()
    settle(page)
    return heading.inner_text().removeprefix("Code: ").strip()


def _state(db: Path, code: str) -> str:
    with Store(db) as store:
        return lessons.resolve(store, code)[1].state


def test_a_two_question_lesson_with_a_countdown_projector_and_confirmed_reveal(
    browser: Any, urls: tuple[str, str], app_env: dict[str, str]
) -> None:
    app, participants = urls
    db = Path(app_env["COGBIAS_DB"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    teacher = browser.new_context(viewport={"width": 1400, "height": 1300}).new_page()
    teacher.set_default_timeout(60_000)
    projector = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
    projector.set_default_timeout(60_000)
    phones: list[Any] = []
    try:
        teacher.goto(app)
        code = _open_lesson(teacher)
        join = f"{participants}/s/{code}"
        phones = [_phone(browser, join) for _ in range(5)]  # the fifth will not answer
        for phone in phones:
            phone.get_by_text("You are in").wait_for()
        assert "Question 1 of 2" in html(phones[0])
        projector.goto(f"{app}/projector?code={code}")
        projector.get_by_text("5 joined").wait_for()
        projector.screenshot(path=str(SHOTS / "class_projector_join.png"))

        teacher.get_by_role("button", name="Start answers").click()
        for i, phone in enumerate(phones[:4]):  # each phone follows the start by itself
            phone.get_by_role("radio").nth(i % 2).check()
            if i == 0:
                phone.screenshot(path=str(SHOTS / "class_lesson_question.png"), full_page=True)
            phone.get_by_role("button", name="Send my answer").click()
            phone.get_by_text("Your answer is in").wait_for()
        with Store(db) as store:
            assert sum(sessions.count_answers(store, f"{code}-1").values()) == 4
        # all four are in: the teacher shortens the countdown to 5 s, and it locks the
        # question at zero with nobody pressing anything (never a race with the answers)
        settle(teacher)
        teacher.get_by_role("button", name="Countdown…").click()
        seconds = teacher.get_by_label("Seconds (0: none)", exact=True)
        seconds.fill("5")
        seconds.press("Enter")
        settle(teacher)
        teacher.get_by_role("button", name="Set the countdown").click()
        projector.get_by_text("Answers are locked").wait_for(timeout=120_000)
        assert _state(db, code) == sessions.LOCKED
        with Store(db) as store:
            session = sessions.require_session(store, f"{code}-1")
        assert session.locked_at == session.deadline and session.closed_at is None
        # the fifth phone still shows the question (it never reloads): its answer is refused
        phones[4].get_by_role("radio").first.check()
        phones[4].get_by_role("button", name="Send my answer").click()
        phones[4].get_by_text("was not counted").wait_for()
        revisit(phones[4], join)
        phones[4].get_by_text("You did not send an answer").wait_for()
        late = _phone(browser, join)
        late.get_by_text("Answers to this question are locked").wait_for()
        late.context.close()

        reveal = teacher.get_by_role("button", name="Reveal…")
        reveal.wait_for()
        settle(teacher)
        reveal.click()
        confirm = teacher.get_by_role("button", name="Yes, reveal")
        confirm.wait_for()
        assert _state(db, code) == sessions.LOCKED  # opening "Reveal…" only asks
        teacher.wait_for_timeout(600)  # the popover fades in: its words, not a ghost, shown
        teacher.screenshot(path=str(SHOTS / "class_teacher_reveal_confirm.png"))
        confirm.click()
        teacher.get_by_role("heading", name="Reveal").wait_for()
        assert _state(db, code) == sessions.REVEALED

        _projected_chart(projector, "class_projector_reveal_1280")
        projector.set_viewport_size({"width": 1920, "height": 1080})
        projector.reload()
        _projected_chart(projector, "class_projector_reveal_1920")

        phones[0].get_by_text("the class's result").wait_for()  # followed by itself
        phones[0].screenshot(path=str(SHOTS / "class_lesson_result.png"), full_page=True)
        settle(teacher)
        teacher.get_by_role("button", name="Next question").click()
        phones[1].get_by_text("Question 2 of 2").wait_for()
        phones[1].get_by_role("radio").first.wait_for()
        assert re.search("Theatre|ticket", html(phones[1]))
        projector.get_by_text("Theatre ticket").first.wait_for()
    finally:
        for page in [teacher, projector, *phones]:
            page.context.close()


def _projected_chart(page: Any, name: str) -> None:
    """The chart on the projector: each condition's own label, the legend and the axis read
    from its SVG, every one of them inside the window (no scrolling)."""
    chart = page.get_by_test_id("stVegaLiteChart").first
    chart.locator("g.mark-symbol.role-mark path").first.wait_for()
    page.wait_for_timeout(500)
    texts = {t.strip() for t in chart.locator("svg text").all_text_contents()}
    for label in ("outcomes framed as lives lost", "outcomes framed as lives saved",
                  "humans (original study)", "this class"):  # fmt: skip
        assert label in texts, (label, texts)
    assert any("share choosing “the sure programme”" in t for t in texts), texts
    assert not any("400 people" in t or "200 people" in t for t in texts), texts
    assert any(t == "100%" for t in texts) and any(t == "0%" for t in texts)  # the axis
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    for text in chart.locator("svg text").all():
        box = text.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, text.text_content()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, text.text_content()
    assert page.evaluate("document.scrollingElement.scrollHeight <= window.innerHeight + 1")
    page.screenshot(path=str(SHOTS / f"{name}.png"))
