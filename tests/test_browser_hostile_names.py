"""Issue 45, point 1, in a real headless Chromium: Save figure and Make report on a run whose
test case and model names carry BEL, a right-to-left override and 20,000 characters once
killed the whole Streamlit server within seconds (vl-convert aborted the process). Now both
are drawn, the downloads hold the names escaped, and the server lives on."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import CHROMIUM, go, learn_tab, no_exception, running_app, settle
from tests.hostile_names import hostile_run_db

pytestmark = pytest.mark.browser
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")

RAW = ("\x07", "\u202e")


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Built before the browser starts: the pipeline's event loop cannot run inside
    Playwright's."""
    db = tmp_path_factory.mktemp("hostile") / "app.db"
    return db, hostile_run_db(db)


def alive(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as answer:
        return bool(answer.status == 200)


def downloaded(page: Any, button: str, to: Path) -> str:
    with page.expect_download() as download:
        page.get_by_role("button", name=button).click()
    download.value.save_as(to)
    return to.read_text(encoding="utf-8")


def test_the_app_survives_save_figure_and_make_report_on_hostile_names(
    hostile_db: tuple[Path, str], browser: Any, tmp_path: Path
) -> None:
    db, run_id = hostile_db
    env = {**os.environ, "COGBIAS_DB": str(db), "COGBIAS_DEMO": "0"}
    with running_app(env, tmp_path / "app.log") as url, learn_tab(browser, url) as page:
        go(page, "Explore")
        page.get_by_role("heading", name="Explore results").wait_for()
        settle(page)
        picker = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Results"))
        picker.locator("input").click()
        picker.locator("input").fill(run_id)
        page.get_by_role("option").filter(has_text=run_id).first.click()
        settle(page)
        page.get_by_text("Save figure (SVG, PNG)").click()
        settle(page)
        page.get_by_role("button", name="Prepare the figure").click()
        settle(page)
        page.get_by_role("button", name="Download PNG").wait_for()
        svg = downloaded(page, "Download SVG", tmp_path / "figure.svg")
        page.get_by_role("button", name="Make report").click()
        settle(page)
        page.get_by_role("button", name="Download the report (HTML)").wait_for()
        report = downloaded(page, "Download the report (HTML)", tmp_path / "report.html")
        no_exception(page)
        assert alive(url)  # the server that drew them lives on
    for text in (svg, report):
        assert not any(raw in text for raw in RAW)
        assert "m\\x07\\u202eodel" in text
