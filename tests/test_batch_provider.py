"""Provider batches against a test server implementing OpenAI's Batch API on 127.0.0.1:
a `--batch` run completes from batches alone, equals an interactive run, survives a kill
while its batches are pending, and retries the requests a batch failed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from batch_helpers import PAIRS, ROOT, cogbias, needs_extraction
from dataset_helpers import HUB_CSV
from fake_llm_server import FakeLLMServer

from cogbias.runs import executor, kinds, paired_plan
from cogbias.store import Store


def batch_args(db: Path, base_url: str) -> list[object]:
    return ["run", "--db", db, "--dataset", "malberg2024-hub", "--per-bias", 1, "--models",
            "openai/x", "--api-base", base_url, "--batch", "--poll-seconds", 0.1]  # fmt: skip


def imported(db: Path) -> Path:
    out = cogbias("import", "malberg2024-hub", HUB_CSV, "--db", db)
    assert out.returncode == 0, out.stderr
    return db


def start_until_a_batch_is_submitted(
    db: Path, base_url: str
) -> tuple[subprocess.Popen[bytes], list[dict]]:
    """A `--batch` worker in the background, once its first batch is stored."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "cogbias", *map(str, batch_args(db, base_url))],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    submitted: list[dict] = []
    while not submitted and time.monotonic() < deadline:
        time.sleep(0.1)
        with Store(db) as store:
            submitted = store.batches()
    return worker, submitted


def test_a_batch_run_completes_from_batches_and_equals_an_interactive_run(tmp_path, monkeypatch):
    db = imported(tmp_path / "batch.db")
    scratch = tmp_path / "tmp"  # the run's temporary folder (its batch files) goes here
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    with FakeLLMServer(needs_extraction, batch_delay=0.3, batch_fail=0.25, seed=2) as server:
        out = cogbias(*batch_args(db, server.base_url))
        assert out.returncode == 0, out.stderr
        assert not list(scratch.glob("cogbias-*"))  # its batch files are not left behind
        assert server.calls == 0 and server.batch_requests > 0  # nothing asked interactively
        with Store(db) as store:
            [run] = [r for r in store.runs() if r["id"].startswith("run-")]
            assert run["status"] == "done" and run["failed"] == 0 and run["done"] > 0
            batches = store.batches(run["id"])
            assert {b["round"] for b in batches} == {"decide", "extract"}
            retried = store.query("select count(*) as n from batch_requests where attempts > 1")
            assert retried[0]["n"] > 0  # requests a batch failed were asked again, and scored
            by_batch = store.query(PAIRS)
        interactive = imported(tmp_path / "interactive.db")
        with Store(interactive) as store:
            s = paired_plan.RunSpec.from_stored(kinds.read_stored(run["spec"])[1])
            executor.execute(paired_plan.plan(s, store), store, concurrency=8)
            assert store.query(PAIRS) == by_batch
    runs = cogbias("runs", "--db", db)
    assert "batch-" in runs.stdout and "completed" in runs.stdout


def test_a_batch_run_killed_while_batches_are_pending_resumes_without_resubmitting(tmp_path):
    db = imported(tmp_path / "batch.db")
    with FakeLLMServer(batch_delay=4.0) as server:
        worker, submitted = start_until_a_batch_is_submitted(db, server.base_url)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        assert submitted and submitted[0]["status"] in ("validating", "in_progress")
        created_before = len(server.batches)
        run_id = submitted[0]["run_id"]
        out = cogbias("resume", run_id, "--db", db, "--batch", "--poll-seconds", 0.1)
        assert out.returncode == 0, out.stderr
        assert server.calls == 0
        with Store(db) as store:
            first_round = [b for b in store.batches(run_id) if b["round"] == "decide"]
            assert len(first_round) == created_before  # polled, not submitted again
            assert store.query("select max(attempts) as n from batch_requests")[0]["n"] == 1
            assert store.run(run_id)["status"] == "done"


def test_cancelling_a_batch_run_cancels_its_provider_batches(tmp_path):
    db = imported(tmp_path / "batch.db")
    with FakeLLMServer(batch_delay=600) as server:
        worker, submitted = start_until_a_batch_is_submitted(db, server.base_url)
        cancelled = cogbias("cancel", submitted[0]["run_id"], "--db", db)
        assert cancelled.returncode == 0, cancelled.stderr
        worker.wait(timeout=60)
        assert {b["status"] for b in server.batches.values()} == {"cancelled"}
        assert server.calls == 0
    with Store(db) as store:
        assert store.run(submitted[0]["run_id"])["status"] == "cancelled"
        assert {b["status"] for b in store.batches()} == {"cancelled"}
