"""Shared fixtures. Tests never touch the network beyond 127.0.0.1 and never the user's home."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
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


@pytest.fixture
def downloaded(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], bytes]:
    """What an AppTest page's download button hands the browser: `downloaded(button)` is its
    bytes. AppTest keeps them in an in-memory media store it makes for each run; this keeps
    hold of those stores so a test can read the file the button's URL names."""
    from streamlit.runtime.media_file_storage import MediaFileStorageError
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    from streamlit.testing.v1 import app_test

    stores: list[MemoryMediaFileStorage] = []

    class Kept(MemoryMediaFileStorage):
        def __init__(self, media_endpoint: str) -> None:
            super().__init__(media_endpoint)
            stores.append(self)

    monkeypatch.setattr(app_test, "MemoryMediaFileStorage", Kept)

    def read(button: Any) -> bytes:
        name = button.proto.url.rsplit("/", 1)[-1]
        for store in reversed(stores):  # the latest run's first
            try:
                return bytes(store.get_file(name).content)
            except MediaFileStorageError:
                continue
        raise AssertionError(f"no file behind the download button {button.proto.label!r}")

    return read
