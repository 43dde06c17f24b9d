"""Shared fixtures. Tests never touch the network beyond 127.0.0.1 and never the user's home."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/fake_llm_server.py
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """User test cases and models go to a temporary COGBIAS_HOME, never ~/.cogbias."""
    home = tmp_path_factory.mktemp("cogbias-home")
    monkeypatch.setenv("COGBIAS_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium through Playwright, one per browser test module."""
    from playwright.sync_api import sync_playwright

    from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty database the app's pages open (`COGBIAS_DB`, no demo snapshot)."""
    path = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DB", str(path))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    return path


# The app starts the local model in the background after its first page
# (`local.warm_in_background`); a test process must not hold a model it did not ask for, nor
# have it start beside a test that replaces the server. Tests that want it set it back.
os.environ.setdefault("COGBIAS_LOCAL_WARM", "0")
