"""The Datasets page imports both paper formats from a path, in a real headless Chromium.

The app starts on an empty database; the journey imports the token-bias JSON files (a
folder) and the Mohr thesis folder through the Import tab, and checks that each dataset's
Browse view shows it: the token-bias items as test cases with their text, the thesis' effect
sizes as published rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import CHROMIUM, choose, go, learn_tab, running_app, settle
from tests.dataset_helpers import MOHR_DIR, TOKENBIAS_DIR

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("import-home")
    env = {**os.environ, "COGBIAS_HOME": str(home), "COGBIAS_DB": str(home / "app.db"),
           "COGBIAS_DEMO": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    with running_app(env, home / "streamlit.log") as url:
        yield url


def _import(page: Any, fmt: str, path: Path) -> None:
    page.get_by_role("tab", name="Import", exact=True).click()
    page.get_by_text("A path on this machine", exact=True).click()
    settle(page)
    choose(page, "Format", next(o for o in _formats() if o.startswith(f"{fmt}: ")))
    settle(page)
    label = "Path (a file, or for a folder format the folder)"
    field = page.get_by_label(label)
    field.fill(str(path))
    field.press("Enter")
    settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    settle(page)


def _formats() -> list[str]:
    from cogbias.datasets.formats import FORMATS

    return [f"{f.name}: {f.help}" for f in FORMATS]


def test_both_paper_formats_import_from_a_path_and_show_their_views(
    browser: Any, app_url: str, tmp_path: Path
) -> None:
    with learn_tab(browser, app_url, height=1200) as page:
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        _import(page, "peek2024", TOKENBIAS_DIR)
        page.get_by_text("imported 'peek2024' (peek2024)").wait_for()
        page.get_by_role("tab", name="Browse", exact=True).click()
        settle(page)
        page.get_by_text("Read a test case").wait_for()
        page.get_by_text("All oak trees are plants.", exact=False).first.wait_for()
        assert page.get_by_test_id("stProgress").count() == 0  # no bar left behind
        assert page.get_by_test_id("stException").count() == 0
    with learn_tab(browser, app_url, height=1200) as page:  # a new visit to the page
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        _import(page, "mohr2025", MOHR_DIR)
        page.get_by_text("prompts: 4 from biases.csv", exact=False).wait_for()
        page.get_by_role("tab", name="Browse", exact=True).click()
        settle(page)
        page.get_by_text("One row per bias × prompt scenario × model × temperature").wait_for()
        page.screenshot(path=str(tmp_path / "datasets_import.png"))
        assert page.get_by_test_id("stException").count() == 0
        assert page.get_by_test_id("stProgress").count() == 0
