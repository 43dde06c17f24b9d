"""The thesis' published effect sizes on the Datasets page, in a real headless Chromium.

The app starts on a database holding only imported Mohr data (no demo results): the small
format fixture, and a thesis-sized crossing written by this module (10 models with long names,
the 4 prompt scenarios, release dates a year apart) so that the heatmap has as many columns
as the thesis' and the per-day release coefficient is as small as the thesis'. The journeys
open the Analysis tab, pivot the heatmap and save screenshots to artifacts/screenshots/.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from cogbias.datasets import import_mohr
from cogbias.store import Store
from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    choose,
    go,
    grid_row,
    learn_tab,
    settle,
    shows,
)
from tests.dataset_helpers import MOHR_DIR

pytestmark = pytest.mark.browser
FIXTURE = MOHR_DIR

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


WIDE = "thesis-ten-models"
MODELS = [
    "claude-3-5-sonnet-20240620", "gpt-4o-mini-2024-07-18", "llama3.1:8b", "gemma2:27b",
    "mistral-nemo:12b", "qwen2.5:32b", "phi3.5:3.8b", "gpt-4o-2024-08-06", "llama3.1:70b",
    "deepseek-v2.5",
]  # fmt: skip
SCENARIOS = ["0_normal", "1_persona", "2_odd_numbers", "3_large_numbers"]
BIASES = ["anchoring", "framing effect", "loss aversion", "sunk cost fallacy"]
SHOTS = ROOT / "artifacts" / "screenshots"


def write_thesis_sized(folder: Path) -> Path:
    """bias_detections.csv and models.csv crossing 4 biases × 4 scenarios × 10 models × 2
    temperatures (320 experiments), effects rising slightly with the release date."""
    rng = random.Random(21)
    released = {m: 30 * i + rng.randrange(20) for i, m in enumerate(MODELS)}  # days
    models = ["model_id,model,local,temperature,system,release_date,last_updated_at,"
              "download_date,size,number_parameters,model_architecture,ollama_id,updated_at"]  # fmt: skip
    for i, model in enumerate(MODELS):
        day = date(2023, 6, 1) + timedelta(days=released[model])
        for temperature in ("0.2", "1"):
            models.append(f"{i},{model},false,{temperature},All,{day},,,,"
                          f"{rng.choice([3.8, 7, 8, 12, 27, 32, 70, 175])},transformer,,")  # fmt: skip
    rows = ["bias,scenario,model,temperature,sample_size_1,sample_size_2,bias_detected,"
            "bias_detected_mod"]  # fmt: skip
    for bias in BIASES:
        for scenario in SCENARIOS:
            for model in MODELS:
                for temperature in ("0.2", "1"):
                    d = 0.3 + 0.0003 * released[model] + rng.uniform(-0.2, 0.3)
                    rows.append(f"{bias},{scenario},{model},{temperature},100,100,"
                                f"{d:.6f},{min(max(d, 0.0), 1.0):.6f}")  # fmt: skip
    (folder / "bias_detections.csv").write_text("\n".join(rows) + "\n")
    (folder / "models.csv").write_text("\n".join(models) + "\n")
    return folder


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One app for the module (its tests only read the imported effect sizes)."""
    home = tmp_path_factory.mktemp("effects-home")
    wide = write_thesis_sized(tmp_path_factory.mktemp("thesis-sized"))
    with Store(home / "app.db") as store:
        import_mohr(store, wide, name=WIDE)  # first: the newest (the small one) is preselected
        import_mohr(store, FIXTURE)
    return home


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
        shows(cells, 2 * 2 + 2)  # bias × temperature, plus homogeneity per bias
        assert shot.stat().st_size > 10_000


def test_mohr_heatmaps_name_every_column_and_keep_legends_inside(
    browser: Any, app_url: str
) -> None:
    """Issue 21, point 9: all 10 model and 4 scenario columns are labelled, both legends lie
    inside the chart's box on the page, and release_days' coefficient shows its digits."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with learn_tab(browser, app_url, height=1200) as page:
        page.set_viewport_size({"width": 1280, "height": 1200})  # a laptop's screen
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        choose(page, "Dataset", WIDE)
        settle(page)
        page.get_by_role("tab", name="Analysis").click()
        settle(page)
        chart = page.get_by_test_id("stVegaLiteChart").first
        chart.locator("svg g.mark-rect path").first.wait_for()
        settle(page)
        heading = page.get_by_role("heading", name="Published effect sizes")
        heading.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "effects_by_model_ten_models.png"))
        labels = set(chart.locator("svg text").all_text_contents())
        assert set(MODELS) <= labels, sorted(set(MODELS) - labels)
        assert {"anchoring", "framing_effect", "loss_aversion", "sunk_cost_fallacy"} <= labels
        frame = chart.bounding_box()
        main = page.get_by_test_id("stMainBlockContainer").bounding_box()
        legends = chart.locator("svg g.role-legend")
        assert legends.count() == 2  # effect and homogeneity
        for i in range(legends.count()):
            box = legends.nth(i).bounding_box()
            assert box["x"] >= frame["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"]
            assert box["x"] + box["width"] <= min(main["x"] + main["width"], 1280)
        assert "σ²_e / σ²_d" in labels and "effect (capped)" in labels

        pivot = page.get_by_test_id("stRadio").filter(has_text="Pivot by")
        pivot.get_by_text("scenario", exact=True).click()
        settle(page)
        chart = page.get_by_test_id("stVegaLiteChart").first
        chart.locator("svg g.mark-rect path").first.wait_for()
        heading.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "effects_by_scenario.png"))
        labels = set(chart.locator("svg text").all_text_contents())
        assert set(SCENARIOS) <= labels, sorted(set(SCENARIOS) - labels)
        assert not set(MODELS) & labels  # the chart really was redrawn by scenario

        tables = page.get_by_test_id("stDataFrame")
        features = tables.filter(has_text="release_days").last
        features.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "effects_feature_regression.png"))
        # the grid draws on a canvas; its cells are also written as an accessible table in it
        # its effect in words first, the formula's own term last (`coefficients.plain_term`)
        row = grid_row(features, "release date (per day later)", 7)
        assert row[6] == "release_days", row
        coefficient, std_error, ci = row[1], row[2], row[5]
        # a fixed "%+.3f" showed this per-day coefficient as "+0.000, SE 0.000"
        for text in (coefficient, std_error, ci):
            assert any(digit in text for digit in "123456789"), row
        assert float(coefficient) != 0
        assert page.get_by_test_id("stException").count() == 0
