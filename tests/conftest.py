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
    """Debian's headless Chromium through Playwright, one per browser test module.

    Not one per session: while Playwright's sync API is started it keeps an event loop
    running in this thread, and every later `asyncio.run` here (a run, an import) would fail."""
    from playwright.sync_api import sync_playwright

    from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# --------------------------------------------------------------------------- the app served
# A browser test module gets the app (`streamlit run app.py` on a free 127.0.0.1 port) from
# `app_url`, one server per module, on a home of its own. A module that needs more overrides
# a fixture of the same name: `app_home` to fill the home's database before the app starts,
# `app_env` to change the app's environment (`browser_helpers.app_environment` makes one).


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served app's home (its database is `app.db` in it): empty unless overridden."""
    return tmp_path_factory.mktemp("app-home")


@pytest.fixture(scope="module")
def app_env(app_home: Path) -> dict[str, str]:
    """The served app's environment (override to add variables or the demo results)."""
    from tests.browser_helpers import app_environment

    return app_environment(app_home)


@pytest.fixture(scope="module")
def app_url(app_env: dict[str, str]) -> Iterator[str]:
    """The URL of the app served with `app_env`, one server per module; its log is
    `streamlit.log` in the app's home."""
    from tests.browser_helpers import running_app

    with running_app(app_env, Path(app_env["COGBIAS_HOME"]) / "streamlit.log") as url:
        yield url


@pytest.fixture
def page(browser: Any, app_url: str) -> Iterator[Any]:
    """A fresh browser tab (its own context) on the served app's first page, loaded."""
    from tests.browser_helpers import learn_tab

    with learn_tab(browser, app_url) as tab:
        yield tab


# --------------------------------------------------------------------------- store and model


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    """A store on a fresh database file (`x.db` in the test's folder), closed afterwards."""
    from cogbias.store import Store

    with Store(tmp_path / "x.db") as opened:
        yield opened


@pytest.fixture
def llm_server() -> Iterator[Any]:
    """The scripted OpenAI-compatible model server (tests/fake_llm_server.py) with its default
    answers, on a free 127.0.0.1 port; `llm_server.base_url` is what a run's api_base takes.
    A test that needs other answers starts its own `FakeLLMServer(responder)`."""
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


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


@pytest.fixture
def cogbias_main(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Any]:
    """`cogbias ARGS` run in this process (`cogbias.cli.main.main`, as the console script
    calls it), with `env` added to the environment; a CompletedProcess of its exit status and
    printed output. For a test that runs many commands and reads what they print and store:
    starting Python and cogbias again for each is most of such a test's time. Each command
    keeps at least one test that starts the real `python -m cogbias` process."""
    import subprocess

    from cogbias.cli.main import main

    def run(*args: object, env: dict[str, str] | None = None) -> Any:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        words = [str(a) for a in args]
        capsys.readouterr()
        try:
            status = main(words)
        except SystemExit as stop:  # argparse's refusals exit with 2
            status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        printed = capsys.readouterr()
        return subprocess.CompletedProcess(["cogbias", *words], status, printed.out, printed.err)

    return run


# --------------------------------------------------------------------------- worker balance
# `./scripts/test` hands whole files to two workers, in the order collected. Counting tests
# (xdist's default) put the few long browser files last, and one worker ran them alone at
# the end; so the longest files go first (tests/durations.json: seconds per file from a
# measured run, refreshed by `python tests/durations.py RUN_OUTPUT`), a file never measured
# among the middle ones. Within a file the order is unchanged.
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import json

    try:
        seconds: dict[str, float] = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not seconds:
        return
    middle = sorted(seconds.values())[len(seconds) // 2]
    files = list(dict.fromkeys(item.path.name for item in items))
    rank = {name: -seconds.get(name, middle) for name in files}
    items.sort(key=lambda item: rank[item.path.name])  # stable: a file keeps its order


# The app starts the local model in the background after its first page
# (`local.warm_in_background`); a test process must not hold a model it did not ask for, nor
# have it start beside a test that replaces the server. Tests that want it set it back.
os.environ.setdefault("COGBIAS_LOCAL_WARM", "0")
# Tables printed by the command fit the terminal (`cli.terminal.width`): every test, and every
# command it starts, sees a terminal of 120 columns, whatever the machine running the suite
# has; a test about another width sets its own.
os.environ["COLUMNS"] = "120"


def _letters(request: dict[str, Any]) -> Any:
    """A letter with its top log-probabilities when they are asked for, else the default."""
    import math

    from tests.fake_llm_server import default_responder

    if not request.get("logprobs"):
        return default_responder(request)
    top = [{"token": t, "logprob": math.log(p)} for t, p in (("A", 0.6), ("B", 0.3), ("C", 0.1))]
    content = [{"token": "A", "logprob": top[0]["logprob"], "top_logprobs": top}]
    return {"content": "A", "logprobs": {"content": content}}


@pytest.fixture
def local_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The local model's requests go to a scripted server that answers a letter with its
    log-probabilities (the local model's default scoring) and "Option N" otherwise."""
    from cogbias.llm import local
    from tests.fake_llm_server import FakeLLMServer

    with FakeLLMServer(_letters) as server:
        monkeypatch.setattr(local, "_api_base", None)
        monkeypatch.setenv(local.SHARED_SERVER_ENV, server.base_url)
        yield server
