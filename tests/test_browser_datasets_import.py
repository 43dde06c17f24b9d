"""The Datasets page imports both paper formats from a path, in a real headless Chromium.

The app starts on an empty database; the journey imports the token-bias JSON files (a
folder) and the Mohr thesis folder through the Import tab, and checks that each dataset's
Browse view shows it: the token-bias items as test cases with their text, the thesis' effect
sizes as published rows. A second journey checks that the tabs keep their place across an
import, a run's start and a visit to another page, that a started run says so with its
progress on the Run tab, and that the Imported table counts what each kind of dataset holds. Screenshots go to
artifacts/screenshots/.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    app_environment,
    choose,
    go,
    grid_row,
    learn_tab,
    settle,
    shown_choice,
    shows_at_least,
    visit,
)
from tests.dataset_helpers import FIXTURES, HUB_CSV, MOHR_DIR, TOKENBIAS_DIR

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def app_env(app_home: Path) -> dict[str, str]:
    # the app reads only from importable folders
    return app_environment(app_home, COGBIAS_IMPORT_DIRS=str(FIXTURES))


def _import(page: Any, fmt: str, path: Path, click: bool = True) -> None:
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
    if click:
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


SHOTS = ROOT / "artifacts" / "screenshots"


def _selected_tab(page: Any) -> str:
    return page.locator('[role="tab"][aria-selected="true"]').first.inner_text().strip()


def test_tabs_keep_their_place_a_started_run_says_so_and_each_kind_shows_its_counts(
    browser: Any, app_url: str
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with learn_tab(browser, app_url, height=1200) as page:
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        _import(page, "mohr2025", MOHR_DIR)  # a no-op when the first journey imported it
        _import(page, "malberg2024-hub", HUB_CSV)
        page.get_by_text("imported 'malberg2024-hub' (malberg2024-hub)").wait_for()
        assert _selected_tab(page) == "Import"  # the import did not move the user

        # the first click after the import stays where it landed
        page.get_by_role("tab", name="Analysis", exact=True).click()
        settle(page)
        page.get_by_text("No decisions on this dataset yet").wait_for()
        page.wait_for_timeout(2500)  # a late rerun must not move the tab either
        settle(page)
        assert _selected_tab(page) == "Analysis"
        page.screenshot(path=str(SHOTS / "datasets_analysis_after_import.png"))

        # a run started on the Run tab says so, with its id, and shows its progress there
        page.get_by_role("tab", name="Run", exact=True).click()
        settle(page)
        page.get_by_role("button", name="Start the run").click()
        settle(page)
        started = page.get_by_text("started in the background", exact=False).first
        started.wait_for()
        named = re.search(r"Run (run-\w+) started in the background", started.inner_text())
        assert named, started.inner_text()
        assert _selected_tab(page) == "Run"
        ended = page.get_by_text(f"{named[1]} · done", exact=False).first
        ended.wait_for(timeout=120_000)  # its progress, then how it ended, on this tab
        assert "12 of 12 pairs, 0 failed" in ended.inner_text()
        settle(page)
        page.wait_for_timeout(2500)  # the run's end redraws the page: still on Run
        settle(page)
        assert _selected_tab(page) == "Run"
        shows_at_least(page.get_by_text("started in the background", exact=False))
        page.screenshot(path=str(SHOTS / "datasets_run_started.png"), full_page=True)

        # the Imported table counts what each dataset holds
        page.get_by_role("tab", name="Imported", exact=True).click()
        settle(page)
        imported = page.get_by_test_id("stDataFrame").first
        assert grid_row(imported, "mohr2025", 3)[2].startswith("16 effect sizes")
        assert grid_row(imported, "malberg2024-hub", 3)[2] == "12 test cases"
        page.screenshot(path=str(SHOTS / "datasets_imported_counts.png"), full_page=True)

        # a visit to another page keeps the dataset and the tab (Streamlit forgot both)
        choose(page, "Dataset", "mohr2025")
        settle(page)
        page.get_by_role("tab", name="Analysis", exact=True).click()
        settle(page)
        visit(page, "Explore", page.get_by_role("heading", name="Explore results"))
        visit(page, "Datasets", page.get_by_role("heading", name="Datasets", exact=True))
        assert _selected_tab(page) == "Analysis"
        picker = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Dataset"))
        assert shown_choice(picker) == "mohr2025"
        page.screenshot(path=str(SHOTS / "datasets_kept_after_a_page_switch.png"))
        assert page.get_by_test_id("stException").count() == 0


def test_a_path_outside_is_refused_unread_and_a_zipped_folder_uploads(
    browser: Any, app_url: str, tmp_path: Path
) -> None:
    """Issue 29, point 2: the page names the importable folders; a file outside them is
    refused with its path and the reason, and none of its lines reaches the page; the Mohr
    folder, zipped, imports through the real upload widget."""
    outside = tmp_path / "private.csv"
    outside.write_text("bias,SECRETCOLUMN,treatment\nanchoring,x,y\n")
    archive = tmp_path / "thesis.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(MOHR_DIR.iterdir()):
            out.write(path, f"04_Datasets/{path.name}")
    with learn_tab(browser, app_url, height=1200) as page:
        go(page, "Datasets")
        page.get_by_role("heading", name="Datasets", exact=True).wait_for()
        settle(page)
        _import(page, "generic", outside, click=False)
        page.get_by_text("The app reads only inside these folders", exact=False).wait_for()
        page.get_by_text(f"{outside}: is not inside a folder", exact=False).wait_for()
        body = page.locator("body").inner_text()
        assert "SECRETCOLUMN" not in body and str(FIXTURES) in body
        assert page.get_by_role("button", name="Import", exact=True).is_disabled()
        page.screenshot(path=str(SHOTS / "datasets_path_refused.png"))

        page.get_by_text("Upload a file", exact=True).click()
        settle(page)
        choose(page, "Format", next(o for o in _formats() if o.startswith("mohr2025: ")))
        settle(page)
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(archive))
        settle(page)
        field = page.get_by_label("Dataset name")
        field.fill("mohr-zip")
        field.press("Enter")
        settle(page)
        page.get_by_role("button", name="Import", exact=True).click()
        settle(page)
        page.get_by_text("16 effect sizes of 2 model(s)", exact=False).wait_for()
        page.screenshot(path=str(SHOTS / "datasets_zip_upload.png"))
        assert page.get_by_test_id("stException").count() == 0
