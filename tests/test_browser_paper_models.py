"""The seed papers' own models in a real headless Chromium: the Datasets page browses
BiasBuster's Table 3 on a database with nothing imported (the numbers ship with cogbias: no
download, no key), and the Studies page sets it beside a random-baseline run.

Screenshots go to artifacts/screenshots/ (paper_models_*.png), to be looked at.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.studies import paper_results
from tests.browser_helpers import (
    CHROMIUM,
    SHOTS,
    app_environment,
    choose,
    go,
    grid_row,
    learn_tab,
    no_exception,
    settle,
    shows,
)
from tests.study_helpers import study_run

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")

HEADING = "The paper's models, the paper's wording"


@pytest.fixture(scope="module")
def home(app_home: Path) -> Path:
    """The app's home: a database holding one random-baseline BiasBuster run and no dataset."""
    spec = StudySpec("biasbuster", ["random"], tests=["framing", "group_attribution",
                     "anchoring"], mitigations=["none", "awareness"], repeats=2)  # fmt: skip
    with ThreadPoolExecutor(1) as worker:  # Playwright's sync API may run an event loop here
        worker.submit(study_run, app_home / "app.db", spec).result()
    return app_home


@pytest.fixture(scope="module")
def app_env(home: Path) -> dict[str, str]:
    return app_environment(home)


def test_datasets_page_browses_table_3_offline(browser: Any, app_url: str, home: Path) -> None:
    with learn_tab(browser, app_url, height=1300) as page:
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        page.get_by_role("tab", name="Reference results").click()
        settle(page)
        chart = page.get_by_test_id("stVegaLiteChart").first
        chart.locator("svg g.mark-symbol path").first.wait_for()
        settle(page)
        page.get_by_text("Source: Echterhoff").first.evaluate(
            "e => e.scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(300)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "paper_models_datasets_table3.png"))
        no_exception(page)
        assert page.get_by_test_id("stAlertContentError").count() == 0
        labels = set(chart.locator("svg text").all_text_contents())
        assert {"GPT-3.5-turbo", "GPT-4", "Llama-2-13b", "Llama-2-7b"} <= labels, labels
        assert "framing Δ (admit − reject)" in labels and "failed (*)" in labels
        # 4 models × 5 mitigations × 3 measures, each a dot
        shows(chart.locator("svg g.mark-symbol.role-mark path"), 60)
        grid = page.get_by_test_id("stDataFrame").filter(has_text="framing Δ").first
        grid.scroll_into_view_if_needed()
        row = grid_row(grid, "GPT-4", 9)  # its first row: awareness, digits as printed
        assert row == ["GPT-4", "awareness", "0.360", "0.830", "-0.470", "0.370", "0.355",
                       "0.015", "0.105"]  # fmt: skip
        cells = [t.strip() for t in grid.locator("td[role=gridcell]").all_text_contents()]
        assert "0.005*" in cells  # GPT-3.5-turbo contrastive group Δ: the paper's failure mark
        page.screenshot(path=str(SHOTS / "paper_models_datasets_table3_rows.png"))

        appendix = paper_results.paper_result("tokenbias-appendix-d")
        choose(page, "Reference result", appendix.title)
        choose(page, "Table", "Table 4: Hypothesis 3 (D.3): celebrity names, n = 100")
        settle(page)
        chart = page.get_by_test_id("stVegaLiteChart").first
        chart.locator("svg g.mark-rect path").first.wait_for()
        chart.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "paper_models_datasets_appendix_d.png"))
        labels = chart.locator("svg text").all_text_contents()
        assert "Table 4 · H3" in labels and "mistral-large-latest" in labels
        shows(chart.locator("svg g.mark-rect.role-mark path"), 54)  # 9 models × 6
        no_exception(page)
    with Store(home / "app.db") as store:
        assert store.datasets() == []  # browsing downloaded and imported nothing


def test_studies_page_sets_the_papers_models_beside_a_run(browser: Any, app_url: str) -> None:
    with learn_tab(browser, app_url, height=1300) as page:
        go(page, "Studies")
        heading = page.get_by_role("heading", name=HEADING)
        heading.wait_for()
        settle(page)
        heading.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "paper_models_studies_beside.png"))
        no_exception(page)
        charts = page.get_by_test_id("stVegaLiteChart")
        beside = charts.filter(has=page.locator("svg text", has_text="anchoring d")).first
        labels = set(beside.locator("svg text").all_text_contents())
        assert {"GPT-4", "random · your run"} <= labels, labels
        grid = page.get_by_test_id("stDataFrame").filter(has_text="framing Δ").first
        assert grid_row(grid, "your run", 3) == ["your run", "random", "no mitigation"]  # on top
