"""The thesis' published effect sizes on the Datasets page, in a real headless Chromium.

The app starts on a database holding only the imported Mohr fixture (no demo results); the
journey opens the Analysis tab, pivots the heatmap by temperature and saves a screenshot to
the test's tmp folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cogbias.datasets import import_mohr
from cogbias.store import Store
from tests.browser_helpers import CHROMIUM, go, learn_tab, running_app, settle
from tests.dataset_helpers import MOHR_DIR

pytestmark = pytest.mark.browser
FIXTURE = MOHR_DIR

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One app for the module (its tests only read the imported effect sizes)."""
    home = tmp_path_factory.mktemp("effects-home")
    with Store(home / "app.db") as store:
        import_mohr(store, FIXTURE)
    env = {**os.environ, "COGBIAS_HOME": str(home), "COGBIAS_DB": str(home / "app.db"),
           "COGBIAS_DEMO": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    with running_app(env, home / "streamlit.log") as url:
        yield url


def test_effect_heatmap_pivoted_by_temperature(browser: Any, app_url: str, tmp_path: Path) -> None:
    with learn_tab(browser, app_url, height=1100) as page:
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        page.get_by_role("tab", name="Analysis").click()
        pivot = page.get_by_test_id("stRadio").filter(has_text="Pivot by")
        pivot.get_by_text("temperature", exact=True).click()
        settle(page)
        chart = page.get_by_test_id("stVegaLiteChart").first
        chart.locator("svg g.mark-rect path").first.wait_for()
        settle(page)
        heading = page.get_by_role("heading", name="Published effect sizes")
        heading.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        shot = tmp_path / "effects_by_temperature.png"
        page.screenshot(path=str(shot))

        assert page.get_by_test_id("stException").count() == 0
        assert page.get_by_test_id("stAlertContentError").count() == 0
        labels = chart.locator("svg text").all_text_contents()
        # axis title and the fixture's two temperatures; the biases; the side column
        assert {"temperature", "0.2", "1", "anchoring", "framing_effect"} <= set(labels)
        assert "homogeneity" in labels and "model-a" not in labels
        cells = chart.locator("svg g.mark-rect.role-mark path")  # not the legends' gradients
        assert cells.count() == 2 * 2 + 2  # bias × temperature, plus homogeneity per bias
        assert shot.stat().st_size > 10_000
