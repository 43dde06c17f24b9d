"""A rerun whose every answer is cached reads them in bulk and makes no call: the command
never imports an HTTP client (aiohttp, litellm, the openai SDK) and stores what the first
run stored."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ("aiohttp", "litellm", "openai")
# `main(argv)` keeps the interpreter (a real command line leaves at once), so the modules the
# command imported can be listed after it
COMMAND = (
    "import json, sys; from cogbias.cli.main import main; code = main(sys.argv[1:]); "
    f"print(json.dumps([code, sorted(m for m in {CLIENTS!r} if m in sys.modules)]))"
)
KEPT = (
    "id, instance_id, model, control_order, treatment_order, control_answer, treatment_answer, "
    "control_extraction, treatment_extraction, control_choice, treatment_choice, score, status, "
    "error, failure_kind"
)


def _run(db: Path, base_url: str) -> tuple[int, list[str]]:
    args = ["run", "pairs", "--biases", "anchoring,framing_effect", "--scenarios", "3",
            "--generator", "examples", "--models", "openai/fake", "--api-base", base_url,
            "--scoring", "choice", "--concurrency", "8", "--db", str(db)]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", COMMAND, *args], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    code, imported = json.loads(out.stdout.strip().splitlines()[-1])
    return code, imported


def _stored(db: Path) -> tuple[list[tuple], list[tuple]]:
    con = sqlite3.connect(db)
    try:
        decisions = con.execute(f"select {KEPT} from decisions order by id").fetchall()
        cache = con.execute("select key, response from llm_calls order by key").fetchall()
    finally:
        con.close()
    return decisions, cache


def test_a_fully_cached_rerun_imports_no_http_client_and_stores_the_same_results(tmp_path):
    db = tmp_path / "runs.db"
    with FakeLLMServer() as server:
        assert _run(db, server.base_url)[0] == 0
        first, cache = _stored(db)
        asked = server.calls
        assert first and asked > 0 and len(cache) > 0
        con = sqlite3.connect(db)
        with con:  # the run forgotten, its answers kept in the cache
            con.execute("delete from decisions")
            con.execute("delete from runs")
        con.close()
        code, imported = _run(db, server.base_url)
        assert server.calls == asked  # not one request reached the server
    assert code == 0 and imported == []
    assert _stored(db) == (first, cache)
