"""Batches bounded in time and memory (issue 22, points 7, 9 and 15): a cancel wakes the
poller whatever the poll interval, `batch import` reads only regular files and never a line
past its limit into memory, and the offline `examples` generator needs no batch."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fake_llm_server import FakeLLMServer

from cogbias.store import Store
from tests.dataset_helpers import HUB_CSV, snapshot

ROOT = Path(__file__).resolve().parent.parent


def cogbias(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def imported(db: Path) -> Path:
    done = cogbias("import", "malberg2024-hub", HUB_CSV, "--db", db)
    assert done.returncode == 0, done.stderr
    return db


# ------------------------------------------------------------------ point 7: cancel wakes the poller


def test_cancel_of_a_batch_run_is_seen_between_polls(tmp_path: Path) -> None:
    """The probe: cancel waited up to the poll interval (27.7 s of the default 30 s). With an
    interval of ten minutes the worker must still stop, well before the next poll."""
    db = imported(tmp_path / "b.db")
    with FakeLLMServer(batch_delay=3600) as server:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cogbias", "run", "dataset", "malberg2024-hub", "--db", str(db),
             "--per-bias", "1", "--models", "openai/x", "--api-base", server.base_url, "--batch",
             "--poll-seconds", "600"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        submitted: list[dict] = []
        for _ in range(1200):  # until its batch is submitted and polled once
            if submitted and server.batch_polls:
                break
            time.sleep(0.1)
            with Store(db) as store:
                submitted = store.batches()
        assert submitted and server.batch_polls == 1, "no batch was submitted and polled"
        polls = server.batch_polls
        cancelled = cogbias("cancel", submitted[0]["run_id"], "--db", db)
        assert cancelled.returncode == 0, cancelled.stderr
        assert "the worker stops within 2 s" in cancelled.stderr
        assert worker.wait(timeout=120) == 0  # far less than the 600 s poll interval
        assert server.batch_polls == polls  # stopped between polls, not at the next one
        assert {b["status"] for b in server.batches.values()} == {"cancelled"}
    with Store(db) as store:
        assert store.run(submitted[0]["run_id"])["status"] == "cancelled"
