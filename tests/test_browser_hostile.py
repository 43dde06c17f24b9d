"""Untrusted text is text, in a real browser (issue 9): no page fetches a URL that a model's
answer, a model name, a scenario, a test case name or a dataset name points at, and a key
echoed by a model appears on no page.

A local HTTP server counts every request it gets; all hostile texts carry a Markdown image
(and an HTML <img>) pointing at it. The database is prepared with hostile names and with
answers written unredacted straight into SQLite (as an older version or another tool might
have left them), and a scripted OpenAI-compatible model echoes both into every answer and
gap fill it writes live on Learn and Preview.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    ROOT,
    app_environment,
    choose,
    go,
    running_app,
    settle,
    shows_at_least,
)
from tests.fake_llm_server import FakeLLMServer, _last_user_text

pytestmark = pytest.mark.browser

SENTINEL = "sentinel-7d2c9e4a1f3b8e6d"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


class _Counter(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        _Counter.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def image_server() -> Iterator[tuple[str, list[str]]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Counter.seen
    server.shutdown()
    server.server_close()


def hostile(base: str, where: str) -> str:
    return f"{where} ![x]({base}/{where}.png) <img src='{base}/{where}-html.png'>"


@pytest.fixture(scope="module")
def app(
    tmp_path_factory: pytest.TempPathFactory, image_server: tuple[str, list[str]]
) -> Iterator[dict[str, str]]:
    base, _ = image_server
    home = tmp_path_factory.mktemp("hostile-home")
    answer = f"I choose Option 1. {hostile(base, 'answer')} and my key is {SENTINEL}"

    def responder(request: dict[str, Any]) -> str:
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            keys = fmt["json_schema"]["schema"]["required"]
            return json.dumps({k: f"{hostile(base, 'fill')} {SENTINEL}" for k in keys})
        if _last_user_text(request).startswith("Below are the answer options"):
            return "Option 1"
        return answer

    with FakeLLMServer(responder=responder) as fake:
        yield from _serve(home, fake, base, answer)


def _serve(home: Any, fake: FakeLLMServer, base: str, answer: str) -> Iterator[dict[str, str]]:
    env = app_environment(home, COGBIAS_TEST_API_KEY=SENTINEL, PYTHONPATH=str(ROOT))
    names = {
        "model": f"Hostile {hostile(base, 'model-name')}",
        "case": f"Hostile {hostile(base, 'case-name')}",
        "dataset": f"data {hostile(base, 'dataset')}",
        "evil_model": f"evil {hostile(base, 'stored-model')}",
    }
    prepare = subprocess.run(
        [sys.executable, "-c", PREPARE, fake.base_url, names["model"], names["case"],
         names["dataset"], names["evil_model"], answer, hostile(base, "scenario")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert prepare.returncode == 0, prepare.stderr
    with running_app(env, home / "streamlit.log") as url:
        yield {"url": url, **names}


# Runs in a child process with the app's environment, so every write goes to its home.
PREPARE = r"""
import json, sqlite3, sys
from cogbias.library import testcases as library
from cogbias.runs import executor, paired_plan
from cogbias.llm import settings
from cogbias.datasets import import_hub
from cogbias.store import Store
from tests.app_helpers import make_results_db
from tests.dataset_helpers import HUB_CSV
from cogbias.views import authoring
import os
base_url, model_name, case_name, dataset, evil_model, answer, scenario = sys.argv[1:]
settings.add_custom_model("openai/hostile", model_name, base_url, json_schema=True)
toml = authoring.BLANK_TEST_CASE.replace('"my_bias"', '"hostile_bias"').replace('"My Bias"', json.dumps(case_name))
toml = toml.replace("Say in two", "See http://evil.example/learn, www.evil.example or me@evil.example. Say in two")
library.save_test_case(library.parse_test_case(toml))
db = os.environ["COGBIAS_DB"]
make_results_db(db, biases=("anchoring", "framing_effect"), models=("random", evil_model), instances=4, name="hostile run")
with Store(db) as store:
    import_hub(store, HUB_CSV, name=dataset)
    executor.execute(paired_plan.plan(paired_plan.RunSpec(["random"], dataset=dataset, per_bias=2), store), store)
    # a study run by the echoing model: conversations and self-help rewrites
    from cogbias.runs import study_plan
    from cogbias.runs import executor, paired_plan
    study = study_plan.load_study("biasbuster", store)
    spec = study_plan.StudySpec("biasbuster", ["openai/hostile"], tests=["framing", "anchoring"],
                                mitigations=["selfhelp"], repeats=1)
    executor.execute(study_plan.plan(study_plan.resolve(spec, study), study), store)
conn = sqlite3.connect(db)
with conn:  # unredacted, as if an older version had stored them
    conn.execute("update decisions set control_answer = ?, treatment_answer = ?", (answer, answer))
    conn.execute("update study_calls set response = ?", (answer,))
    conn.execute("update instances set scenario = ? where dataset is null", (scenario,))
conn.close()
"""


def _clean(page: Any, where: str) -> None:
    settle(page)
    assert page.get_by_test_id("stException").count() == 0, where
    text = page.inner_text("body")
    assert SENTINEL not in text, f"the echoed key is shown on {where}"
    assert SENTINEL not in page.content(), f"the echoed key is in {where}'s HTML"


def test_hostile_text_is_shown_as_text_and_fetches_nothing(
    app: dict[str, str], browser: Any, image_server: tuple[str, list[str]]
) -> None:
    _, seen = image_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app["url"])
    page.get_by_text("Learn: cognitive biases").wait_for()

    # Learn: a hostile test case name, then a live pair with the echoing model
    choose(page, "Bias", f"{app['case']} (yours)")
    # the heading reads as the name, with an invisible word joiner inside "http:" (unlinked)
    page.get_by_role("heading", name=app["case"].split(" ![")[0]).wait_for()
    choose(page, "Bias", "Framing Effect")
    label = f"{app['model']} (openai/hostile)"
    choose(page, "Decision model", label)
    choose(page, "Generator (fills the blue gaps)", label)
    settle(page)  # the model's choice has been drawn
    # an OpenAI-compatible model is offered option probabilities first; its echo is sampled
    page.get_by_text("Sampled answer (read, then scored)").click()
    settle(page)
    page.get_by_role("button", name="Run this pair").click()
    page.get_by_text("◀ chosen").first.wait_for(timeout=120_000)
    shows_at_least(page.get_by_text("my key is ***"))  # shown, with the key redacted
    _clean(page, "Learn")

    # Preview: fill with the hostile generator, decide with it
    go(page, "Preview")
    choose(page, "Test case", "Framing Effect")  # gaps beyond the scenario's own fields
    choose(page, "Generator model", label)
    page.get_by_role("button", name="Fill", exact=True).click()
    page.locator(".ins-llm, .ins-example").first.wait_for(timeout=120_000)
    choose(page, "Decision model", label)
    settle(page)  # the model's choice has been drawn
    page.get_by_text("Sampled answer (read, then scored)").click()
    settle(page)
    page.get_by_role("button", name="Decide").click()
    page.get_by_text("◀ chosen").first.wait_for(timeout=120_000)
    _clean(page, "Preview")

    # Explore: the stored run, a pair of the hostile model opened
    go(page, "Explore")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    choose(page, "Bias", "Anchoring")
    choose(page, "Model", app["evil_model"])
    pair = page.get_by_test_id("stExpander").filter(has_text="Pair 1")
    pair.first.click()
    page.get_by_text("◀ chosen").first.wait_for()
    _clean(page, "Explore")

    go(page, "Compare")
    page.get_by_text("Where they disagree most").wait_for()
    _clean(page, "Compare")

    go(page, "Datasets")
    choose(page, "Dataset", app["dataset"])
    page.get_by_role("tab", name="Browse").click()
    page.get_by_text("Read a pair's answers").wait_for()
    _clean(page, "Datasets")

    # Studies: the echoed answers in a conversation and in a self-help side by side
    go(page, "Studies")
    page.get_by_role("tab", name="Conversations").click()
    page.get_by_test_id("stChatMessage").first.wait_for()
    shows_at_least(page.get_by_text("my key is ***"))
    _clean(page, "Studies conversations")
    page.get_by_role("tab", name="Self-help rewrites").click()
    page.get_by_text("Rewritten by the model").wait_for()
    _clean(page, "Studies self-help")

    for title in ("Templates", "Run", "Models"):
        go(page, title)
        _clean(page, title)

    context.close()
    assert seen == [], f"the browser fetched URLs from untrusted text: {seen}"


def _links(page: Any, base: str) -> list[str]:
    """The live links of the page's main area that an untrusted text made: to the counting
    server, to the description's addresses, to an e-mail address."""
    settle(page)
    hrefs = page.locator("[data-testid=stMain] a").evaluate_all("as => as.map(a => a.href)")
    return [h for h in hrefs if base in h or "evil.example" in h or h.startswith("mailto:")]


def test_bare_addresses_in_untrusted_text_are_not_links(
    app: dict[str, str], browser: Any, image_server: tuple[str, list[str]]
) -> None:
    """GitHub Markdown links a bare `http://…`, `www.…` or `name@host` even when every
    character around it is escaped (issue 29, point 13): a description, a name, a scenario
    shown on Learn and Explore must stay text."""
    base, _ = image_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app["url"])
    page.get_by_text("Learn: cognitive biases").wait_for()
    choose(page, "Bias", f"{app['case']} (yours)")
    page.get_by_text("evil.example/learn", exact=False).first.wait_for()  # the description
    assert _links(page, base) == [], "Learn"

    go(page, "Explore")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    choose(page, "Bias", "Anchoring")
    choose(page, "Model", app["evil_model"])  # its name holds an address, as do the scenarios
    page.get_by_test_id("stExpander").filter(has_text="Pair 1").first.click()
    page.get_by_text("◀ chosen").first.wait_for()
    assert _links(page, base) == [], "Explore"
    context.close()
