"""Offline batch engines: `cogbias batch export` → an engine answers the JSONL →
`cogbias batch import` → the run completes from the cache with no interactive call."""

from __future__ import annotations

import json
from pathlib import Path

from batch_helpers import PAIRS, cogbias
from dataset_helpers import snapshot
from fake_llm_server import FakeLLMServer, default_responder
from run_helpers import spec

from cogbias.runs import executor, paired_plan
from cogbias.store import Store


def vllm_stand_in(requests: Path, results: Path) -> int:
    """What `vllm run-batch` does with a requests file: one output line per request."""
    lines = []
    for number, line in enumerate(requests.read_text(encoding="utf-8").splitlines()):
        item = json.loads(line)
        assert item["url"] == "/v1/chat/completions" and item["method"] == "POST"
        text = default_responder(item["body"])
        body = {
            "id": f"cmpl-{number}",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
        lines.append({"id": f"batch-req-{number}", "custom_id": item["custom_id"],
                      "response": {"status_code": 200, "body": body}, "error": None})  # fmt: skip
    results.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return len(lines)


def test_export_answer_import_rounds_then_the_run_completes_without_interactive_calls(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer() as server:
        s = spec(server.base_url)
        made = cogbias("run", "--db", db, "--models", "random,openai/fake", "--biases",
                       ",".join(s.biases), "--scenarios", 2, "--instances", 2,
                       "--generator", "openai/fake", "--api-base", server.base_url, "--plan-only")  # fmt: skip
        assert made.returncode == 0 and made.stdout.strip() == s.run_id, made.stderr
        rounds = 0
        while True:
            requests, results = tmp_path / f"r{rounds}.jsonl", tmp_path / f"o{rounds}.jsonl"
            out = cogbias("batch", "export", s.run_id, "--db", db, "-o", requests)
            assert out.returncode == 0, out.stderr
            if not requests.read_text():
                break
            vllm_stand_in(requests, results)
            imported = cogbias("batch", "import", results, "--db", db)
            assert imported.returncode == 0 and "imported" in imported.stderr, imported.stderr
            rounds += 1
            assert rounds < 8
        assert rounds >= 3  # gap fills, decisions, extractions
        resumed = cogbias("resume", s.run_id, "--db", db)
        assert resumed.returncode == 0, resumed.stderr
        assert server.calls == 0  # every answer came from the batch engine
        # the same run made interactively, against a server answering the same way
        with Store(tmp_path / "interactive.db") as other:
            executor.execute(paired_plan.plan(s, other), other, concurrency=8)
            interactive = other.query(PAIRS)
    with Store(db) as store:
        run = store.run(s.run_id)
        assert run["status"] == "done" and run["done"] == 24 and run["failed"] == 0
        assert store.query(PAIRS) == interactive


def test_malformed_results_are_refused_with_line_numbers_and_nothing_is_written(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer() as server:
        made = cogbias("run", "--db", db, "--models", "openai/fake", "--biases", "anchoring",
                       "--generator", "openai/fake", "--api-base", server.base_url, "--plan-only")  # fmt: skip
        assert made.returncode == 0, made.stderr
        requests, results = tmp_path / "r.jsonl", tmp_path / "o.jsonl"
        run_id = made.stdout.strip()
        assert cogbias("batch", "export", run_id, "--db", db, "-o", requests).returncode == 0
        vllm_stand_in(requests, results)
    good = results.read_text().splitlines()
    bad = [
        good[0],
        "{not json",
        json.dumps({"custom_id": "0" * 64, "response": {"status_code": 200, "body": {}}}),
        json.dumps({"response": {}}),
    ]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(bad) + "\n")
    before = snapshot(db)
    out = cogbias("batch", "import", broken, "--db", db)
    assert out.returncode == 1
    for number in (2, 3, 4):
        assert f"broken.jsonl, line {number}:" in out.stderr, out.stderr
    assert "nothing was imported" in out.stderr and "Traceback" not in out.stderr
    assert snapshot(db) == before
    # an engine's own per-request errors are listed, and the good answers still go in
    mixed = tmp_path / "mixed.jsonl"
    failed = json.loads(good[0]) | {"response": None, "error": {"message": "out of memory"}}
    mixed.write_text(json.dumps(failed) + "\n" + "\n".join(good[1:]) + "\n")
    out = cogbias("batch", "import", mixed, "--db", db)
    assert out.returncode == 0 and "mixed.jsonl, line 1: the engine reported an error" in out.stderr
