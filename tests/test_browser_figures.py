"""Saving a figure from Explore in a real headless Chromium: nothing is drawn until asked, and
the downloaded SVG names every model whole. The screenshot goes to artifacts/screenshots/."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.app_helpers import make_results_db
from tests.browser_helpers import CHROMIUM, SHOTS, go, learn_tab, settle

pytestmark = pytest.mark.browser
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")

MODELS = ("openrouter/meta-llama/llama-3.1-405b-instruct", "openai/gpt-4o-2024-08-06", "random")


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Its results built before the browser starts: the pipeline's event loop cannot run
    inside Playwright's."""
    home = tmp_path_factory.mktemp("figures")
    make_results_db(home / "app.db", models=MODELS, instances=4)
    return home


def test_explore_saves_its_heatmap_as_svg_and_png(
    app_url: str, browser: Any, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with learn_tab(browser, app_url) as page:
        go(page, "Explore")
        page.get_by_role("heading", name="Explore results").wait_for()
        settle(page)
        expander = page.get_by_text("Save figure (SVG, PNG)")
        expander.click()
        settle(page)
        assert page.get_by_role("button", name="Download SVG").count() == 0  # not before asked
        page.get_by_role("button", name="Prepare the figure").click()
        settle(page)
        page.get_by_role("button", name="Download PNG").wait_for()
        expander.evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "explore_save_figure.png"))
        with page.expect_download() as download:
            page.get_by_role("button", name="Download SVG").click()
        saved = tmp_path / "explore.svg"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "explore-heatmap.svg"
        assert page.get_by_test_id("stException").count() == 0
    texts = [
        "".join(t.itertext()) for t in ET.parse(saved).iter("{http://www.w3.org/2000/svg}text")
    ]
    assert set(MODELS) <= set(texts)
