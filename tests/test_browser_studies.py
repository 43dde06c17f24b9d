"""The Studies page in a real browser: a conversation as chat bubbles, self-help side by side.

The database holds one finished BiasBuster run (framing and anchoring, without mitigation and
with self-help) by a scripted model on 127.0.0.1: its rewrites start "NEUTRAL REWRITE." and
its decisions carry Markdown and an HTML script tag, which must show as typed. Each journey
saves a screenshot to the test's tmp dir.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cogbias.runs import study_plan
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.views import study_views
from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    app_environment,
    choose,
    go,
    learn_tab,
    no_exception,
    running_app,
    settle,
)
from tests.fake_llm_server import FakeLLMServer
from tests.study_helpers import HOSTILE, scripted, study_run

pytestmark = pytest.mark.browser
SHOTS = ROOT / "artifacts" / "screenshots"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def home(app_home: Path) -> Path:
    return app_home


@pytest.fixture(scope="module")
def random_option(home: Path) -> str:
    """The Study run option of a `random` self-help run, stored before the scripted run (so
    the scripted run, the newest, stays the page's first choice)."""
    db = home / "app.db"
    spec = StudySpec("biasbuster", ["random"], tests=["framing"], mitigations=["selfhelp"],
                     repeats=1)  # fmt: skip
    with ThreadPoolExecutor(1) as worker:  # see app_env
        run_id = worker.submit(study_run, db, spec).result()
    with Store(db) as store:
        run = store.run(run_id)
    when = run["created_at"][:16].replace("T", " ")
    return f"biasbuster · {run_id} · {when}"


@pytest.fixture(scope="module")
def app_env(home: Path, random_option: str) -> dict[str, str]:
    db = home / "app.db"
    with FakeLLMServer(responder=scripted) as fake:
        spec = StudySpec(
            "biasbuster",
            ["openai/scripted"],
            tests=["framing", "anchoring"],
            mitigations=["none", "selfhelp"],
            repeats=1,
            api_base=fake.base_url,
        )
        # In a thread of its own: Playwright's sync API may already run an event loop here.
        with ThreadPoolExecutor(1) as worker:
            worker.submit(study_run, db, spec).result()
    return app_environment(home)


@pytest.fixture
def page(browser: Any, app_url: str) -> Iterator[Any]:
    with learn_tab(browser, app_url) as tab:
        go(tab, "Studies")
        tab.get_by_role("tab", name="Conversations").wait_for()
        settle(tab)
        yield tab


def shot(page: Any, path: Path, top: Any) -> None:
    """A viewport screenshot with `top` at the top (Streamlit scrolls its own container)."""
    settle(page)
    top.first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000


def test_conversation_viewer_shows_the_turns_as_chat(page: Any, tmp_path: Path) -> None:
    page.get_by_role("tab", name="Conversations").click()
    choose(page, "Mitigation", "selfhelp")
    settle(page)
    bubbles = page.get_by_test_id("stChatMessage")
    bubbles.nth(2 * 7 - 1).wait_for()  # a loaded machine may still be drawing the last ones
    assert bubbles.count() == 2 * 7  # six decisions and the revise turn, each asked and answered
    texts = bubbles.all_inner_texts()
    assert "You review applications" in texts[0]
    assert all(f"admit {HOSTILE}" in t for t in texts[1:12:2])  # the answers, as typed
    assert "Revise turn" in texts[12] and "one line per applicant" in texts[12]
    assert "read as: admit, admit, admit, admit, admit, admit" in texts[13]
    assert page.locator("script:text('alert(1)')").count() == 0
    assert page.get_by_test_id("stChatMessage").locator("strong", has_text="bold").count() == 0
    no_exception(page)
    assert page.get_by_text("the items in the order shown:").is_visible()
    shot(page, tmp_path / "studies_conversation.png", page.get_by_role("tablist"))
    shot(page, tmp_path / "studies_conversation_revise.png", bubbles.nth(11))


def test_selfhelp_rewrites_side_by_side(page: Any, tmp_path: Path) -> None:
    page.get_by_role("tab", name="Self-help rewrites").click()
    settle(page)
    panel = page.get_by_role("tabpanel", name="Self-help rewrites")
    for heading in ("Original prompt", "Rewritten by the model", "Decision on the rewritten"):
        assert panel.get_by_text(heading).is_visible()
    original = panel.get_by_text("You review applications").first
    rewritten = panel.get_by_text("NEUTRAL REWRITE.").first
    assert original.is_visible() and rewritten.is_visible()
    left, right = original.bounding_box(), rewritten.bounding_box()
    assert left["x"] + left["width"] <= right["x"]  # side by side, original on the left
    assert panel.get_by_text(f"admit {HOSTILE}").is_visible()
    assert not panel.get_by_text("does not rewrite").count()  # this model does rewrite
    no_exception(page)
    shot(page, tmp_path / "studies_selfhelp.png", page.get_by_role("tablist"))


def test_results_heatmap_pivots_by_mitigation(page: Any, tmp_path: Path) -> None:
    chart = page.get_by_test_id("stVegaLiteChart").first
    chart.locator("g.mark-rect path").first.wait_for()
    cells = chart.locator("g.mark-rect path[aria-label]")
    assert cells.count() == 4  # framing and anchoring × none and selfhelp
    assert chart.get_by_text("selfhelp").count() and chart.get_by_text("Mitigation").count()
    no_exception(page)
    shot(page, tmp_path / "studies_results.png", page.get_by_role("tablist"))
    turns = page.get_by_role("button", name="Download every turn (CSV)")
    turns.wait_for()
    with page.expect_download() as download:
        turns.click()
    saved = tmp_path / "turns.csv"
    download.value.save_as(saved)
    rows = list(csv.DictReader(saved.open(encoding="utf-8")))
    assert len(rows) == 2 + 2 * 2 + 6 * 6 + 6 * 7  # framing: none, selfhelp; anchoring: both
    assert {r["role"] for r in rows} == {"rewrite", "decide", "revise"}


def test_a_first_visit_to_a_page_address_gets_the_app_menu_and_never_helper_modules(
    browser: Any, tmp_path: Path
) -> None:
    """The pages live in app_pages/, not pages/: Streamlit would list a `pages/` folder, helper
    modules included, until app.py had run once, and run a page named in the URL without it."""
    with running_app(app_environment(tmp_path), tmp_path / "streamlit.log") as url:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        tab = context.new_page()
        tab.set_default_timeout(60_000)
        tab.goto(f"{url}/studies")  # the server's very first page request
        seen = []
        for _ in range(40):  # what the menu shows while the app starts
            nav = tab.get_by_test_id("stSidebarNav")
            seen.append(nav.inner_text() if nav.count() else "")
            tab.wait_for_timeout(50)
        settle(tab)
        menu = tab.get_by_test_id("stSidebarNav").inner_text()
        assert "Learn and author" in menu and "Studies" in menu
        assert not any(name in text for text in seen for name in ("common", "study views"))
        assert tab.locator("h1", has_text="Studies").is_visible()
        context.close()


def test_the_repeats_box_shows_the_repeats_the_plan_uses(page: Any) -> None:
    """Issue 21, 11: the box holds the number the plan multiplies by (it showed 0 beside
    "× 20 repeats"), also after picking another study."""
    from playwright.sync_api import expect

    box = page.get_by_role("spinbutton", name="Repeats")
    for study in ("biasbuster", "mohr8"):
        if study != "biasbuster":
            choose(page, "Study", study)
            settle(page)
        plan = page.get_by_test_id("stText").filter(has_text=f"study {study}:")
        plan.wait_for()
        (repeats,) = re.findall(r"× (\d+) repeats;", plan.inner_text())
        assert repeats == str(study_plan.load_study(study).repeats)
        # the box as drawn (a number input can show its minimum for a moment while the
        # page's first run reaches the browser; it must settle on the plan's count)
        expect(box).to_have_value(repeats, timeout=15_000)
    no_exception(page)
    shot(page, SHOTS / "21_11a_studies_repeats_box.png", page.locator("h1", has_text="Studies"))


def test_the_random_baselines_selfhelp_view_says_it_does_not_rewrite(
    page: Any, random_option: str
) -> None:
    """Issue 21, 11: the random baseline's "rewrite" is the original prompt; the view says so."""
    choose(page, "Study run", random_option)
    settle(page)
    page.get_by_role("tab", name="Self-help rewrites").click()
    panel = page.get_by_role("tabpanel", name="Self-help rewrites")
    note = panel.get_by_test_id("stAlertContentInfo").filter(has_text="does not rewrite")
    note.wait_for()
    assert note.inner_text().strip() == study_views.NO_REWRITE_NOTE
    unit = panel.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Unit", exact=True))
    shown = unit.locator("input").input_value() or unit.text_content()
    assert " · random · " in shown, shown  # the unit of this run
    heading = panel.get_by_text("Rewritten by the model")
    assert heading.bounding_box()["y"] < note.bounding_box()["y"]  # under its heading
    assert not panel.get_by_text("The model's whole rewrite answer").count()  # there is none
    no_exception(page)
    shot(page, SHOTS / "21_11b_studies_random_selfhelp.png", page.get_by_role("tablist"))
