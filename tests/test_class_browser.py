"""A class in real browsers: the teacher's app and the participant server on one database.

The teacher opens a session on the Class page; three participants, each in their own
browser context (their own cookie), open the join link the page shows and answer; one
tampered form POST is refused and its text never runs as markup. The teacher's count goes
up without a reload; the `random` model answers; Lock answers, then Reveal (after its
confirmation) shows the original humans, the class and the model side by side. The participant server serves nothing but the question: no other
session, no page or file of the teacher's app. Screenshots go to artifacts/screenshots/
to be looked at.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    add_option,
    app_environment,
    free_port,
    go,
    html,
    learn_tab,
    no_exception,
    revisit,
    settle,
    shows,
    shows_at_least,
)

pytestmark = pytest.mark.browser
SHOTS = ROOT / "artifacts" / "screenshots"
HOSTILE = "<img src=x onerror=alert(1)>**bold**"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def env(app_home: Path) -> dict[str, str]:
    return app_environment(app_home)


@pytest.fixture(scope="module")
def participant_url(env: dict[str, str]) -> Iterator[str]:
    """`cogbias class serve` on a free 127.0.0.1 port, as a teacher starts it."""
    port = free_port()
    log = Path(env["COGBIAS_HOME"]) / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cogbias", "class", "serve", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while "Participants join at" not in log.read_text():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text())
                time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


@pytest.fixture(scope="module")
def app_env(env: dict[str, str], participant_url: str) -> dict[str, str]:
    """The app starts once the participant server runs."""
    return env


def _status(url: str, data: bytes | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code


def _answer(browser: Any, join: str, choice: int, name: str = "") -> Any:
    """One participant in a fresh context (their own cookie) answers option `choice`; their
    page, still open (the caller closes its context)."""
    context = browser.new_context(viewport={"width": 420, "height": 800})
    page = context.new_page()
    page.goto(join)
    page.get_by_role("radio").nth(choice).check()
    if name:
        page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.get_by_role("button", name="Send my answer").click()
    page.get_by_text("Your answer is in").wait_for()
    return page


def _tampered(browser: Any, join: str) -> None:
    """A participant rewrites the form's option value to markup before sending: refused,
    and the page shows no markup of theirs (no alert ever opens)."""
    context = browser.new_context()
    try:
        page = context.new_page()
        alerts: list[str] = []
        page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
        page.goto(join)
        page.locator("input[name=answer]").first.evaluate(
            "(e, v) => { e.value = v; e.checked = true; }", HOSTILE
        )
        with page.expect_navigation():
            page.get_by_role("button", name="Send my answer").click()
        shows(page.get_by_text("Please choose one of the answers"))
        assert (
            page.locator("img").count() == 0 and "onerror" not in page.locator("body").inner_html()
        )
        # an extra field, or an oversized one: "not a form this page sent"
        status = page.request.post(join, form={"answer": "a", "name": HOSTILE}).status
        assert status == 400
        assert page.request.post(join, form={"answer": "a" * 100_000}).status in (400, 413)
        assert alerts == []
    finally:
        context.close()


def _count(page: Any) -> str:
    return page.get_by_test_id("stMetricValue").first.inner_text().strip()


def test_a_class_answers_and_the_reveal_shows_humans_class_and_model(
    browser: Any, app_url: str, participant_url: str
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with learn_tab(browser, app_url, height=1500) as page:
        go(page, "Class")
        page.get_by_role("heading", name="Class").first.wait_for()
        settle(page)
        add_option(page, "Questions, in order (several make a lesson under one code)",
                   "Theatre ticket (classics)")  # fmt: skip
        page.get_by_role("button", name="Open session").click()
        heading = page.get_by_role("heading", name=re.compile(r"^Code: "))
        heading.wait_for()
        settle(page)
        no_exception(page)
        code = heading.inner_text().removeprefix("Code: ").strip()
        join = f"{participant_url}/s/{code}"
        link = page.get_by_text(join, exact=True)
        link.wait_for(timeout=30_000)  # the join link, as text (not "start the server")
        shows(link)
        shows(page.get_by_test_id("stImage"))  # its QR code
        assert _count(page) == "0"
        page.screenshot(path=str(SHOTS / "class_teacher_open.png"))

        phones = [_answer(browser, join, 0, "class_participant_question")]
        _tampered(browser, join)
        phones += [_answer(browser, join, 1), _answer(browser, join, 0)]
        # the fragment reruns every second: the count moves with no reload
        page.wait_for_function(
            "() => document.querySelector('[data-testid=stMetricValue]')?.innerText.trim() === '3'",
            timeout=30_000,
        )
        assert _count(page) == "3"

        page.get_by_role("button", name="Ask the models").click()
        page.get_by_text(re.compile(r"answers stored \(0 unreadable")).wait_for()
        settle(page)
        page.get_by_role("button", name="Lock answers").click()  # then Reveal, asking first
        page.get_by_role("button", name="Reveal…").click()
        page.get_by_role("button", name="Yes, reveal").click()
        reveal = page.get_by_role("heading", name="Reveal")
        reveal.wait_for()
        settle(page)
        no_exception(page)
        chart = page.get_by_test_id("stVegaLiteChart").last
        chart.locator("g.mark-symbol.role-mark path").first.wait_for()
        for who in ["humans (original study)", "this class", "model random"]:
            shows_at_least(chart.get_by_text(who))  # the legend names all three
        reveal.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "class_teacher_reveal.png"))

    try:  # a participant now sees the class's result (their page reloads itself)
        phone = phones[0]
        revisit(phone)
        phone.get_by_text("lost a $10 bill").first.wait_for()
        phone.screenshot(path=str(SHOTS / "class_participant_revealed.png"), full_page=True)
        assert "onerror" not in html(phone)
        stranger = browser.new_context()  # someone who did not take part sees no result
        status = stranger.new_page().goto(join).status
        stranger.close()
        assert status == 410
    finally:
        for phone in phones:
            phone.context.close()
    _nothing_else_served(participant_url, app_url, code)


def _nothing_else_served(participant_url: str, app_url: str, code: str) -> None:
    other = "ZZZZZ9" if code != "ZZZZZ9" else "ZZZZZ8"
    for path in [f"/s/{other}", "/_stcore/health", "/Class", "/app.py", "/static/",
                 "/s/", f"/s/{code}/results", "/../app.db", "/%2e%2e/app.db", "/favicon.ico",
                 f"/s/{code.lower()}x"]:  # fmt: skip
        assert _status(participant_url + path) in (404, 410), path
    assert _status(f"{participant_url}/s/{other}", data=b"answer=a") in (400, 404, 410)
    with urllib.request.urlopen(f"{participant_url}/", timeout=10) as response:
        home = response.read().decode()  # asks for a code; lists no session
    assert code not in home and "Theatre" not in home
    try:  # a stranger's view of the closed session: a plain page, its headers
        urllib.request.urlopen(f"{participant_url}/s/{code}", timeout=10)
        raise AssertionError("a closed session was served to someone who did not take part")
    except urllib.error.HTTPError as response:
        body = response.read().decode()
        server = response.headers.get("Server", "")
    for secret in [app_url, "app.db", os.sep + "tmp", "random", "streamlit"]:
        assert secret not in body, secret
    assert "Python" not in server and "aiohttp" not in server.lower()
