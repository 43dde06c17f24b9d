"""Starting `streamlit run app.py` on 127.0.0.1 for a browser test, and driving its widgets."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts" / "screenshots"  # test output, looked at by people (ignored by git)
CHROMIUM = Path("/usr/bin/chromium")
T = TypeVar("T")
WAIT_MS = 30_000  # how long an element may take to come, under load
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def app_environment(home: Path, demo: bool = False, **extra: str) -> dict[str, str]:
    """The environment of an app served for a test: its home and database in `home`, the demo
    results only with `demo`, no network for litellm's price list, and `extra` variables."""
    return {
        **os.environ,
        "COGBIAS_HOME": str(home),
        "COGBIAS_DB": str(home / "app.db"),
        "COGBIAS_DEMO": "1" if demo else "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        **extra,
    }


@contextmanager
def running_app(env: Mapping[str, str], log_path: Path) -> Iterator[str]:
    """The app served on a free port with `env`; yields its URL, stops it afterwards."""
    port = free_port()
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=ROOT, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        try:
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(log_path.read_text()) from None
                    time.sleep(0.05)  # bench/pages.py times the server's start with this
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


SETTLED = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app !== null
        && app.getAttribute("data-test-script-state") === "notRunning"
        && document.querySelector('[data-testid="stStatusWidget"]') === null
        && document.querySelector('[data-stale="true"]') === null;
}"""


def settle(page: Any) -> None:
    """Wait until Streamlit has finished running the script: the app says it is not running
    and no element of the run before is left. (The status widget alone was not enough: under
    load it may not be up yet half a second after a click, and the last run's elements stay
    beside the new run's until it ends.)"""
    page.wait_for_timeout(500)
    page.wait_for_function(SETTLED, timeout=120_000)


def between_reloads(page: Any, read: Callable[[], T]) -> T:
    """`read()` of a page that reloads itself (a participant's page does, every few seconds):
    a read that a navigation interrupts ("the page is navigating", "execution context was
    destroyed ... navigation", a reload or visit aborted by the page's own reload) is made
    again once the page has loaded."""
    for _ in range(20):
        page.wait_for_load_state()
        try:
            return read()
        except Exception as exc:  # playwright's Error; only a navigation is waited out
            if not any(sign in str(exc) for sign in ("navigat", "ERR_ABORTED", "detached")):
                raise
            page.wait_for_timeout(100)
    raise AssertionError(f"{page.url} kept navigating: it could not be read")


def html(page: Any) -> str:
    """The page's HTML, read between reloads."""
    return between_reloads(page, page.content)


def revisit(page: Any, url: str | None = None) -> None:
    """Go to `url` (or reload) from a page that may be reloading itself at that moment."""
    between_reloads(page, page.reload if url is None else lambda: page.goto(url))


def shot(page: Any, name: str, top: Any = None) -> None:
    """A viewport screenshot in SHOTS, scrolled so that `top` (a locator) starts the view.
    (Streamlit scrolls inside its own container, so a full-page shot would show no more.)"""
    settle(page)
    if top is not None:
        top.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def shows(locator: Any, count: int = 1, timeout: int = WAIT_MS) -> None:
    """The page comes to hold exactly `count` of `locator` (waited for: Streamlit sends a
    run's elements one by one, so one element on screen does not mean its neighbours are;
    a QR code came after its join link under load)."""
    from playwright.sync_api import expect

    expect(locator).to_have_count(count, timeout=timeout)


def shows_at_least(locator: Any, count: int = 1) -> None:
    """The page comes to hold at least `count` of `locator`, shown or not (waited for)."""
    locator.nth(count - 1).wait_for(state="attached", timeout=WAIT_MS)


def no_exception(page: Any) -> None:
    """No Streamlit exception box on the page (a traceback never reaches a user)."""
    assert page.get_by_test_id("stException").count() == 0


def choose(page: Any, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label` (typing filters long lists)."""
    settle(page)
    box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text(label, exact=True))
    box.locator("input").click()
    box.locator("input").fill(option[:20])
    page.get_by_role("option", name=option, exact=True).first.click()


def add_option(page: Any, label: str, option: str) -> Any:
    """Add `option` to the multiselect labelled `label`; the multiselect, to read it later."""
    box = page.get_by_test_id("stMultiSelect").filter(has=page.get_by_text(label, exact=True))
    box.locator("input").click()
    box.locator("input").fill(option[:8])
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")
    settle(page)
    return box


def shown_choice(selectbox: Any) -> str:
    """The option a selectbox shows: its search input's value, or its text before a search."""
    box = selectbox.first
    return box.locator("input").input_value() or box.text_content()


def grid_row(grid: Any, first: str, width: int) -> list[str]:
    """The first `width` cells of the row of `grid` (a data frame's locator) whose first cell
    is `first`. The grid draws on a canvas and mirrors its cells in a hidden accessible table,
    which a loaded machine fills in a while after the grid appears: wait, then read."""
    exactly = re.compile(rf"^\s*{re.escape(first)}\s*$")
    row = grid.locator("tr").filter(has=grid.page.locator("td[role=gridcell]", has_text=exactly))
    cells = row.first.locator("td[role=gridcell]")
    try:
        cells.nth(width - 1).wait_for(state="attached", timeout=30_000)
    except Exception as error:  # say what the grid held instead
        shown = [t.strip() for t in grid.locator("td[role=gridcell]").all_text_contents()]
        raise AssertionError(f"no row of {width} cells starting {first!r} in {shown}") from error
    texts = [t.strip() for t in cells.all_text_contents()]
    assert texts[0] == first, texts
    return texts[:width]


def go(page: Any, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()


def visit(page: Any, title: str, ready: Any) -> None:
    """Open a page from the menu; back once `ready` (a locator on it) is there and the
    page's script has finished."""
    go(page, title)
    ready.wait_for()
    settle(page)


@contextmanager
def learn_tab(browser: Any, url: str, height: int = 1000) -> Iterator[Any]:
    """A fresh browser context on the app's first page (Learn), loaded."""
    context = browser.new_context(viewport={"width": 1400, "height": height})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    tab.goto(url)
    tab.get_by_text("Learn: cognitive biases").wait_for()
    try:
        yield tab
    finally:
        context.close()


EDITOR_FRAME = 'iframe[title="streamlit_ace.streamlit_ace"]'  # the Templates page's editor


def toml_editor(page: Any) -> Any:
    """The Templates page's TOML editor (Ace, in the component's own frame). A page that
    replaced the draft draws a new editor; until its run ends the old one is still there."""
    shows(page.locator(EDITOR_FRAME), timeout=60_000)
    return page.frame_locator(EDITOR_FRAME)


def editor_text(page: Any) -> str:
    """The text in the Templates editor, as Ace holds it."""
    return str(toml_editor(page).locator(".ace_editor").evaluate("e => e.env.editor.getValue()"))


def replace_editor_text(page: Any, text: str) -> None:
    """Select all in the Templates editor and put `text` in its place, as a paste does; the
    editor sends it to the page once the typing stops."""
    toml_editor(page).locator(".ace_content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)


def editor_marked_lines(page: Any) -> list[int]:
    """The line numbers the Templates editor marks as holding a problem: its margin marks, as
    the editor holds them (it draws only the lines in view; a test looks at those itself)."""
    rows = (
        toml_editor(page)
        .locator(".ace_editor")
        .evaluate("e => e.env.editor.getSession().getAnnotations().map(a => a.row)")
    )
    return sorted({int(row) + 1 for row in rows})
