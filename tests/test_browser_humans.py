"""The Studies page in a real browser: a `classics` run on `random`, beside the humans.

The database holds one finished run of the built-in classics study by the random baseline;
the page must show, under "Beside the humans", the original experiments' shares beside the
model's in one chart (humans and the model side by side, with intervals) and in a table with
the cited figures. The screenshot goes to artifacts/screenshots/ to be looked at.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cogbias.runs.study_plan import StudySpec
from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    go,
    learn_tab,
    no_exception,
    settle,
    shows,
    shows_at_least,
)
from tests.study_helpers import study_run

pytestmark = pytest.mark.browser
SHOTS = ROOT / "artifacts" / "screenshots"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("humans-home")
    spec = StudySpec("classics", ["random"], repeats=30)
    with ThreadPoolExecutor(1) as worker:  # Playwright's sync API may run an event loop here
        worker.submit(study_run, home / "app.db", spec).result()
    return home


def test_studies_page_shows_humans_beside_the_model(browser: Any, app_url: str) -> None:
    with learn_tab(browser, app_url, height=1400) as page:
        go(page, "Studies")
        heading = page.get_by_role("heading", name="Beside the humans")
        heading.wait_for()
        settle(page)
        no_exception(page)
        charts = page.get_by_test_id("stVegaLiteChart")
        chart = charts.nth(charts.count() - 1)  # the heatmap first, then the humans' chart
        chart.locator("g.mark-symbol.role-mark path").first.wait_for()
        shows_at_least(chart.get_by_text("humans (original study)"))  # the legend names both
        shows_at_least(chart.get_by_text("model: random"))
        # two points per share condition: 2 each for the four two-condition experiments with
        # shares, 1 each for the ski trip and Linda → 10 conditions, 20 points
        shows(chart.locator("g.mark-symbol.role-mark path"), 20)
        grid = page.get_by_test_id("stDataFrame").last
        grid.locator("td[role=gridcell]").first.wait_for(state="attached")
        cells = [t.strip() for t in grid.locator("td[role=gridcell]").all_text_contents()]
        assert "72% [64%, 79%], n = 152" in cells  # Asian disease, lives saved
        assert "22% [16%, 29%], n = 155" in cells  # lives lost (the grid mirrors the rows shown)
        assert any(c.endswith("n = 30") for c in cells)  # the model's answers per condition
        page.get_by_text("Sources of the human results").click()
        shows_at_least(page.get_by_text("Science, 211(4481), 453-458. p. 453"))
        SHOTS.mkdir(parents=True, exist_ok=True)
        heading.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "studies_beside_the_humans.png"))
        assert (SHOTS / "studies_beside_the_humans.png").stat().st_size > 10_000
