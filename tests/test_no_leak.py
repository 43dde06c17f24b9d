"""Issue 22, "nothing leaked": a key a provider echoes (plainly or disguised) reaches no
output, database or export, and no engine message; nothing printed can act on the terminal.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_llm_server import FakeLLMServer, default_responder

from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-probe-9Fh3Ka7Qz2Lm5Xw8Rt4"
# what a provider tricked into revealing the key sends back (the probe's disguises)
DISGUISES = {
    "plain": KEY,
    "reversed": KEY[::-1],
    "spaced": " ".join(KEY),
    "upper": KEY.upper(),
    "base64": base64.b64encode(f"my key is {KEY}".encode()).decode(),
    "url-safe base64": base64.urlsafe_b64encode(f"key={KEY}!".encode()).decode(),
}


def cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cogbias ARGS` in a child process (its own environment, as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY, **(env or {})},
    )  # fmt: skip


def leaks(data: str | bytes) -> list[str]:
    """Which disguises of the key `data` still holds."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [name for name, form in DISGUISES.items() if form in text]


def disguising_responder(request: dict) -> str:
    """Every answer and every gap fill carries the key in all its disguises."""
    echoed = " / ".join(DISGUISES.values())
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"].get("properties", {})
        return json.dumps({key: f"fill {echoed}" for key in keys})
    return f"{default_responder(request)} (my key: {echoed})"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(disguising_responder) as srv:
        yield srv


# --------------------------------------------------------------------------- point 4


def test_pair_prints_the_answer_redacted_as_run_stores_it(server: FakeLLMServer, tmp_path: Path):
    done = cli(
        "pair", "anchoring", "--models", "openai/echo", "--generator", "openai/echo",
        "--api-base", server.base_url, "--db", tmp_path / "p.db",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "control: answer 'Option" in done.stdout and "***" in done.stdout, done.stdout
    assert leaks(done.stdout + done.stderr) == []


# --------------------------------------------------------------------------- point 5


def test_disguised_keys_reach_no_decision_call_insertion_or_export(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    db = tmp_path / "run.db"
    ran = cli(
        "run", "pairs", "--biases", "anchoring", "--models", "openai/echo", "--generator",
        "openai/echo", "--api-base", server.base_url, "--instances", 2, "--db", db,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    outputs = [ran.stdout + ran.stderr]
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
        stored = {
            "decisions": store.query("select * from decisions"),
            "calls": store.query("select * from llm_calls"),
            "instances": store.query("select * from instances"),
        }
    for table, rows in stored.items():
        assert rows, table
        assert leaks(json.dumps(rows, ensure_ascii=False)) == [], table
    assert "***" in json.dumps(stored["decisions"]) and "***" in json.dumps(stored["instances"])
    for path in tmp_path.glob("run.db*"):
        assert leaks(path.read_bytes()) == [], path
    for command in (["runs"], ["results"], ["analyze"]):
        done = cli(*command, "--db", db)
        outputs.append(done.stdout + done.stderr)
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"pairs.{fmt}"
        done = cli("export", "--run", run_id, "-o", out, "--db", db)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
        data = out.read_bytes() if fmt != "parquet" else json.dumps(pq.read_table(out).to_pylist())
        assert leaks(data) == [], fmt
    for text in outputs:
        assert leaks(text) == []


# --------------------------------------------------------------------------- point 6


def test_batch_import_never_prints_an_engine_message_with_the_key(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    made = cli(
        "run", "pairs", "--models", "openai/engine", "--api-base", "http://127.0.0.1:9/v1",
        "--biases", "anchoring", "--scenarios", 1, "--instances", 1, "--db", db, "--plan-only",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = made.stdout.strip()
    requests = tmp_path / "r.jsonl"
    assert cli("batch", "export", run_id, "-o", requests, "--db", db).returncode == 0
    keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    messages = [f"invalid api key {form}" for form in DISGUISES.values()]
    lines = [
        {"custom_id": key, "response": None, "error": {"message": messages[i % len(messages)]}}
        for i, key in enumerate(keys)
    ]
    results = tmp_path / "o.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert len(keys) >= 2
    done = cli("batch", "import", results, "--db", db)
    assert done.returncode == 0, done.stderr
    assert "the engine reported an error: invalid api key ***" in done.stderr, done.stderr
    assert leaks(done.stdout + done.stderr) == []
    # each disguise in turn, as an error that is a plain string rather than an object
    for form in DISGUISES.values():
        first = {"custom_id": keys[0], "response": None, "error": f"bad key: {form}"}
        results.write_text(json.dumps(first) + "\n")
        done = cli("batch", "import", results, "--db", db)
        assert done.returncode == 0 and "error: bad key: " in done.stderr, done.stderr
        assert "***" in done.stderr
        assert leaks(done.stdout + done.stderr) == []
