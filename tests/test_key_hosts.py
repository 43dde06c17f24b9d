"""A key goes only where it belongs (issue 29, point 3).

The probe: with OPENAI_API_KEY set, `Authorization: Bearer <OPENAI_API_KEY>` reached every
`--api-base` and registry endpoint, plain http included (the lean client sent it on purpose,
litellm read it from the environment on its own, the Batch API client likewise). Now a
provider's key goes only to the provider's own hosts, an endpoint of the user's gets only the
key named for it (its registry entry's `api_key_env`, or `--api-key-env`), and no key crosses
a network over plain http. A local server records every Authorization header it receives.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cogbias.llm import FatalLLMError, LLMClient, LLMRequest, keys, resolve, settings
from cogbias.llm.errors import MissingKeyError
from tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
OPENAI_SECRET = "sk-test-OPENAI-never-sent-0123456789"
OWN_SECRET = "own-server-key-abcdef0123456789"
OWN = "MY_SERVER_KEY"
PLACEHOLDER = f"Bearer {keys.PLACEHOLDER_KEY}"
MODEL = "openai/fake"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's OpenAI key and their own server's key are both in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    monkeypatch.setenv(OWN, OWN_SECRET)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "COGBIAS_LLM_TRANSPORT"):
        monkeypatch.delenv(name, raising=False)


def ask(client: LLMClient, model: str = MODEL) -> str:
    request = LLMRequest(model, [("user", "Say OK")], max_tokens=5)
    return client.complete_sync(request).text


def sent(server: FakeLLMServer) -> set[str]:
    assert server.authorizations, "the server received nothing"
    return set(server.authorizations)


def cogbias(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


# -- an endpoint given on the command line -------------------------------------------------


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_an_api_base_is_sent_no_openai_key(transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both transports: the lean client used to send OPENAI_API_KEY on purpose; litellm
    read it from the environment when it was set."""
    if transport == "litellm":
        monkeypatch.setenv("COGBIAS_LLM_TRANSPORT", "litellm")
    with FakeLLMServer() as server:
        assert ask(LLMClient(api_base=server.base_url, max_retries=0))
    assert sent(server) == {PLACEHOLDER}


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_api_key_env_sends_that_variable_to_the_api_base(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if transport == "litellm":
        monkeypatch.setenv("COGBIAS_LLM_TRANSPORT", "litellm")
    with FakeLLMServer(api_key=OWN_SECRET) as server:
        assert ask(LLMClient(api_base=server.base_url, api_key_env=OWN, max_retries=0))
    assert sent(server) == {f"Bearer {OWN_SECRET}"}


def test_openai_base_url_from_the_environment_gets_no_openai_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OPENAI_BASE_URL is an endpoint too: litellm would send OPENAI_API_KEY there itself."""
    with FakeLLMServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert ask(LLMClient(max_retries=0))
    assert sent(server) == {PLACEHOLDER}


def test_the_cli_sends_the_named_key_and_never_openai_s(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with FakeLLMServer() as server:
        plain = cogbias("pair", "anchoring", "--models", "openai/x", "--api-base",
                        server.base_url, "--db", db)  # fmt: skip
        assert plain.returncode == 0, plain.stderr
        assert sent(server) == {PLACEHOLDER}
        server.authorizations.clear()
        named = cogbias("pair", "anchoring", "--models", "openai/y", "--api-base",
                        server.base_url, "--api-key-env", OWN, "--db", db)  # fmt: skip
        assert named.returncode == 0, named.stderr
        assert sent(server) == {f"Bearer {OWN_SECRET}"}


def test_a_run_and_its_resume_send_the_named_key(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with FakeLLMServer(api_key=OWN_SECRET) as server:
        planned = cogbias("run", "pairs", "--biases", "anchoring", "--models", MODEL,
                          "--api-base", server.base_url, "--db", db, "--plan-only")  # fmt: skip
        assert planned.returncode == 0, planned.stderr
        run_id = planned.stdout.strip()
        refused = cogbias("resume", run_id, "--db", db, "--max-retries", 0)
        assert refused.returncode == 1 and "--api-key-env" in refused.stderr  # says what to do
        assert sent(server) == {PLACEHOLDER}
        server.authorizations.clear()
        done = cogbias("resume", run_id, "--db", db, "--api-key-env", OWN)
        assert done.returncode == 0, done.stderr
        assert sent(server) == {f"Bearer {OWN_SECRET}"}


def test_the_batch_api_gets_the_same_keys(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with FakeLLMServer(batch_delay=0.1) as server:
        args = ["run", "pairs", "--biases", "anchoring", "--models", MODEL, "--api-base",
                server.base_url, "--db", db, "--batch", "--poll-seconds", 0.1]  # fmt: skip
        done = cogbias(*args, "--seed", 1)
        assert done.returncode == 0, done.stderr
        assert server.batch_requests > 0 and sent(server) == {PLACEHOLDER}
        server.authorizations.clear()
        done = cogbias(*args, "--seed", 2, "--api-key-env", OWN)
        assert done.returncode == 0, done.stderr
        assert sent(server) == {f"Bearer {OWN_SECRET}"}


def test_openai_s_own_batch_host_gets_openai_s_key() -> None:
    from cogbias.runs import batch_provider

    assert batch_provider._client(MODEL, None, None).api_key == OPENAI_SECRET
    assert str(batch_provider._client(MODEL, None, None).base_url).startswith(
        "https://api.openai.com/"
    )
    elsewhere = batch_provider._client(MODEL, "http://127.0.0.1:9/v1", None)
    assert elsewhere.api_key == keys.PLACEHOLDER_KEY


# -- an endpoint of the registry -----------------------------------------------------------


def test_a_registry_entry_gets_its_own_key_only(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLLMServer() as server:
        settings.add_custom_model("openai/keyed", "Keyed", server.base_url, api_key_env=OWN)
        settings.add_custom_model("openai/plain", "Plain", server.base_url)
        assert ask(LLMClient(max_retries=0), "openai/keyed")  # the CLI: the entry's endpoint
        assert ask(LLMClient(api_base=server.base_url), "openai/keyed")  # the app passes it
        assert sent(server) == {f"Bearer {OWN_SECRET}"}
        server.authorizations.clear()
        assert ask(LLMClient(max_retries=0), "openai/plain")
        assert sent(server) == {PLACEHOLDER}
        server.authorizations.clear()
        assert ask(LLMClient(api_base=server.base_url + "/", max_retries=0), "openai/keyed")
        assert sent(server) == {f"Bearer {OWN_SECRET}"}  # the same endpoint, spelt with a /
    with FakeLLMServer() as other:  # another endpoint is not the entry's: no key of its
        assert ask(LLMClient(api_base=other.base_url, max_retries=0), "openai/keyed")
    assert sent(other) == {PLACEHOLDER}


def test_a_registry_entry_s_key_through_the_cli(tmp_path: Path) -> None:
    with FakeLLMServer(api_key=OWN_SECRET) as server:
        settings.add_custom_model("openai/keyed", "Keyed", server.base_url, api_key_env=OWN)
        done = cogbias("pair", "anchoring", "--models", "openai/keyed", "--db", tmp_path / "x.db")
        assert done.returncode == 0, done.stderr
    assert sent(server) == {f"Bearer {OWN_SECRET}"}


def test_a_named_key_that_is_not_set_is_refused_before_any_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(OWN)
    with FakeLLMServer() as server:
        settings.add_custom_model("openai/keyed", "Keyed", server.base_url, api_key_env=OWN)
        assert keys.missing_key("openai/keyed", server.base_url) == OWN  # the app's pickers
        with pytest.raises(MissingKeyError, match=f"{OWN} is not set"):
            ask(LLMClient(max_retries=0), "openai/keyed")
        assert server.authorizations == []


# -- which host is whose, and plain http ---------------------------------------------------


def test_a_provider_s_key_goes_only_to_its_own_hosts_over_https() -> None:
    assert keys.key_for_model("openai/gpt-4o") == "OPENAI_API_KEY"
    assert keys.key_for_model("openai/gpt-4o", "https://api.openai.com/v1") == "OPENAI_API_KEY"
    assert keys.key_for_model("anthropic/c", "https://api.anthropic.com") == "ANTHROPIC_API_KEY"
    for base in (
        "http://api.openai.com/v1",  # plain http
        "https://api.openai.com.example.net/v1",  # a look-alike host
        "https://example.net/api.openai.com/v1",
        "https://127.0.0.1:8000/v1",
    ):
        assert keys.key_for_model("openai/gpt-4o", base) is None, base
    assert keys.key_for_model("deepinfra/m", "https://api.openai.com/v1") is None  # not its own
    assert keys.key_for_model("openai/x", "http://10.0.0.5/v1", OWN) == OWN


def test_litellm_is_given_a_key_for_every_endpoint_so_it_reads_none_itself() -> None:
    """For any provider at an endpoint of the user's (anthropic/..., ollama_chat/...), an
    explicit placeholder: litellm would otherwise take the provider's variable itself."""
    client = LLMClient(api_base="http://127.0.0.1:9")
    for model in ("anthropic/claude-x", "ollama_chat/llama3.2", MODEL):
        profile = client.profile(model)
        kwargs = client._kwargs(
            LLMRequest(model, [("user", "hi")]), profile, profile.api_base, None
        )
        assert kwargs["api_key"] == keys.PLACEHOLDER_KEY, model


@pytest.mark.parametrize(
    ("base", "refused"),
    [
        ("http://10.0.0.5:8000/v1", True),
        ("http://gpu-box.lan/v1", True),
        ("https://gpu-box.lan/v1", False),
        ("http://127.0.0.1:8000/v1", False),
        ("http://127.3.2.1:8000/v1", False),
        ("http://localhost:8000/v1", False),
        ("http://[::1]:8000/v1", False),
    ],
)
def test_a_key_never_crosses_a_network_over_plain_http(base: str, refused: bool) -> None:
    assert bool(keys.key_refusal(base, OWN)) is refused
    assert keys.key_refusal(base, None) is None  # without a key, http is fine
    if refused:
        with pytest.raises(ValueError, match="sends no key over plain http"):
            settings.add_custom_model("openai/lan", "LAN", base, api_key_env=OWN)
        profile = resolve("openai/lan", base, api_key_env=OWN)
        with pytest.raises(FatalLLMError, match="sends no key over plain http"):
            keys.key_to_send(profile)


def test_a_hand_written_entry_over_plain_http_is_refused_without_a_connection() -> None:
    path = settings.user_models_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '[[models]]\nid = "openai/lan"\nname = "LAN"\napi_base = "http://192.0.2.1/v1"\n'
        f'api_key_env = "{OWN}"\n',
        encoding="utf-8",
    )
    with pytest.raises(FatalLLMError, match="sends no key over plain http") as info:
        ask(LLMClient(max_retries=0, timeout=1), "openai/lan")
    assert OWN_SECRET not in str(info.value)


@pytest.mark.parametrize("named", ["5", '"MYVAR"', '"A B_KEY"'])
def test_a_hand_written_entry_naming_no_usable_variable_is_refused_by_name(named: str) -> None:
    path = settings.user_models_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '[[models]]\nid = "openai/odd"\nname = "Odd"\napi_base = "http://127.0.0.1:9/v1"\n'
        f"api_key_env = {named}\n",
        encoding="utf-8",
    )
    assert keys.missing_key("openai/odd", "http://127.0.0.1:9/v1") is None  # pickers go on
    with pytest.raises(FatalLLMError, match="api_key_env in the model registry"):
        ask(LLMClient(max_retries=0, timeout=1), "openai/odd")


def test_the_cli_refuses_a_key_for_plain_http_or_for_no_endpoint(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    lan = cogbias("pair", "anchoring", "--models", "openai/x", "--api-base",
                  "http://192.0.2.1/v1", "--api-key-env", OWN, "--db", db)  # fmt: skip
    assert lan.returncode == 2 and "sends no key over plain http" in lan.stderr
    alone = cogbias("run", "pairs", "--biases", "anchoring", "--models", "openai/x",
                    "--api-key-env", OWN, "--db", db)  # fmt: skip
    assert alone.returncode == 2
    assert f"--api-key-env {OWN} names the key of the --api-base endpoint" in alone.stderr
    unnamed = cogbias("pair", "anchoring", "--api-key-env", "MYVAR", "--db", db)
    assert unnamed.returncode == 2 and "contains KEY, TOKEN, SECRET or PASSWORD" in unnamed.stderr
    for done in (lan, alone, unnamed):
        assert "Traceback" not in done.stderr and OWN_SECRET not in done.stderr


def test_a_refusing_endpoint_says_how_to_name_its_key() -> None:
    with FakeLLMServer(api_key=OWN_SECRET) as server:
        with pytest.raises(FatalLLMError, match="--api-key-env VAR") as info:
            ask(LLMClient(api_base=server.base_url, max_retries=0))
    assert OPENAI_SECRET not in str(info.value)


@pytest.mark.parametrize(
    "command",
    [["run", "pairs"], ["run", "dataset"], ["run", "study"], ["resume"], ["pair"], ["preview"]],
)
def test_the_flag_is_in_the_help(command: list[str], cogbias_main) -> None:
    done = cogbias_main(*command, "--help")
    assert done.returncode == 0 and "--api-key-env VAR" in done.stdout


# -- the Hub download ----------------------------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Recorder.seen.append(self.headers.get("Authorization", ""))
        body = b"bias,scenario,control,treatment,metric_params\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_hub_download_sends_no_token(
    recorder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard for the sibling: the dataset is public, so neither HF_TOKEN nor any other key
    goes with the download, wherever COGBIAS_HUB_URL points."""
    from cogbias.datasets.hub import download

    monkeypatch.setenv("HF_TOKEN", "hf_test_SENTINEL_0123456789")
    Recorder.seen = []
    assert download(f"{recorder}/full_dataset.csv", tmp_path).is_file()
    assert Recorder.seen == [""]


# -- the app's model settings --------------------------------------------------------------


def test_the_settings_page_names_an_endpoint_s_key_and_refuses_plain_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogbias.llm.registry import get_model
    from tests.test_app_pages import assert_clean, open_page

    monkeypatch.setenv("COGBIAS_DB", str(tmp_path / "app.db"))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    at = open_page("settings")
    at.text_input(key="add_served").input("keyed")
    at.text_input(key="add_base").input("http://127.0.0.1:8000/v1")
    at.text_input(key="add_key_env").input(OWN)
    at.button(key="add_submit").click().run()
    assert_clean(at)
    entry = get_model("openai/keyed")
    assert entry is not None and entry.api_key_env == OWN
    table = at.dataframe[0].value
    assert table[table["id"] == "openai/keyed"].iloc[0]["key"] == f"{OWN} ✅"
    at.text_input(key="add_served").input("lan")
    at.text_input(key="add_base").input("http://10.0.0.5:8000/v1")
    at.button(key="add_submit").click().run()
    assert any("sends no key over plain http" in e.value for e in at.error)
    assert get_model("openai/lan") is None
    assert OWN_SECRET not in "".join(e.value for e in at.error)
