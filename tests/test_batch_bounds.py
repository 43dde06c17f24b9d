"""Batches bounded in time and memory (issue 22, points 7, 9 and 15): a cancel wakes the
poller whatever the poll interval, `batch import` reads only regular files and never a line
past its limit into memory, and the offline `examples` generator needs no batch."""

from __future__ import annotations

import json
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


# ------------------------------------------------------------------ point 9: bounded reading


def memory_capped(*args: object, megabytes: int = 400) -> subprocess.CompletedProcess[str]:
    """The CLI under an address-space limit: a reader that holds what it should not is
    killed (MemoryError) instead of growing to 24 GB as in the probe."""
    code = (
        "import resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_AS, ({megabytes << 20}, {megabytes << 20})); "
        "from cogbias.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def test_batch_import_refuses_a_device_a_pipe_and_a_folder(tmp_path: Path) -> None:
    """The probe: `batch import /dev/zero` was killed at 24 GB resident."""
    db = tmp_path / "b.db"
    Store(db).close()
    before = snapshot(db)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo, tmp_path):
        done = memory_capped("batch", "import", path, "--db", db)
        assert done.returncode == 1, done.stderr
        assert f"error: {path}: not a regular file (a device, pipe or folder)" in done.stderr
        assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert snapshot(db) == before


def test_a_line_past_the_limit_is_refused_without_being_held(tmp_path: Path) -> None:
    """The probe: the 10 MB line limit was checked after the whole line was read (a 300 MB
    one-line file took 630 MB). Here a 120 MB line under a 250 MB address-space limit (the
    interpreter and its imports take about 120 MB of it)."""
    db = tmp_path / "b.db"
    Store(db).close()
    before = snapshot(db)
    results = tmp_path / "results.jsonl"
    with results.open("wb") as handle:
        handle.write(b'{"custom_id": "x"}\n')
        chunk = b"a" * (1 << 20)
        for _ in range(120):
            handle.write(chunk)
        handle.write(b"\n" + b"not json\n")
    done = memory_capped("batch", "import", results, "--db", db, megabytes=250)
    assert done.returncode == 1, done.stderr
    assert "results.jsonl, line 2: longer than 10485760 bytes" in done.stderr
    assert "results.jsonl, line 3: not JSON we can read" in done.stderr  # read on after it
    assert "nothing was imported" in done.stderr
    assert "MemoryError" not in done.stderr and "unexpected" not in done.stderr
    assert snapshot(db) == before


def test_deep_nesting_and_lone_surrogates_in_a_batch_line_are_located(tmp_path: Path) -> None:
    """Point 16's batch line: deep nesting ended in "unexpected RecursionError", a lone
    surrogate in a bare codec message."""
    db = tmp_path / "b.db"
    Store(db).close()
    before = snapshot(db)
    results = tmp_path / "results.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    results.write_text(
        deep + "\n" + '{"custom_id": "k", "response": {"body": {"x": "\\ud800"}}}\n',
        encoding="utf-8",
    )
    done = cogbias("batch", "import", results, "--db", db)
    assert done.returncode == 1
    assert "results.jsonl, line 1: not JSON we can read (nested too deeply" in done.stderr
    assert "results.jsonl, line 2: not JSON we can read (holds a lone surrogate (\\ud800)" in (
        done.stderr
    )
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
    assert snapshot(db) == before


# ------------------------------------------------------------------ point 15: offline generator


def test_a_library_batch_run_with_the_examples_generator_runs(tmp_path: Path) -> None:
    """The probe: `--batch` refused library runs with the default `examples` generator
    ("examples is not one"); it asks no model, so only the decisions go in batches."""
    db = tmp_path / "b.db"
    with FakeLLMServer(batch_delay=0.2) as server:
        done = cogbias("run", "pairs", "--biases", "anchoring", "--generator", "examples",
                       "--models", "openai/x", "--api-base", server.base_url, "--batch",
                       "--poll-seconds", "0.1", "--db", db)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "is not one" not in done.stderr
        assert server.calls == 0 and server.batch_requests > 0  # every call went in a batch
    with Store(db) as store:
        [run] = store.runs()
        assert run["status"] == "done" and run["done"] == 1 and run["failed"] == 0
        rounds = {b["round"] for b in store.batches()}
        # no gap-fill round; an extraction round only for answers the reader could not read
        assert "decide" in rounds and rounds <= {"decide", "extract"}


def test_a_model_generator_that_cannot_batch_is_still_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    Store(db).close()
    before = snapshot(db)
    done = cogbias("run", "pairs", "--biases", "anchoring", "--generator", "local/smollm2",
                   "--models", "random", "--batch", "--db", db)  # fmt: skip
    assert done.returncode == 2
    assert "local/smollm2 is not one" in done.stderr
    assert snapshot(db) == before


def test_out_of_range_numbers_in_a_batch_answer_are_no_overflow(tmp_path: Path) -> None:
    """Token counts past what a database column holds once ended in "unexpected
    OverflowError"; they count as unknown, like a negative one. A status that is not a
    number is shown cut short."""
    db = tmp_path / "b.db"
    planned = cogbias("run", "pairs", "--biases", "anchoring", "--models", "openai/x",
                      "--api-base", "http://127.0.0.1:9/v1", "--generator", "examples",
                      "--plan-only", "--db", db)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    requests = tmp_path / "requests.jsonl"
    exported = cogbias("batch", "export", planned.stdout.strip(), "-o", requests, "--db", db)
    assert exported.returncode == 0, exported.stderr
    keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    body = {"choices": [{"message": {"content": "Option 1"}}],
            "usage": {"prompt_tokens": 10**30, "completion_tokens": 1e999}}  # fmt: skip
    lines = [{"custom_id": keys[0], "response": {"status_code": 200, "body": body}}]
    lines += [{"custom_id": k, "response": {"status_code": [[0] * 1000], "body": {}}}
              for k in keys[1:]]  # fmt: skip
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    done = cogbias("batch", "import", results, "--db", db)
    assert done.returncode == 0, done.stderr
    assert "imported 1 answer(s) into the cache" in done.stderr
    assert "line 2: the engine answered HTTP [[0, 0, 0, 0, 0, 0, \n" in done.stderr
    assert max(len(line) for line in done.stderr.splitlines()) < 400
    assert "unexpected" not in done.stderr
    with Store(db) as store:
        [row] = store.query("select prompt_tokens, completion_tokens from llm_calls")
        assert (row["prompt_tokens"], row["completion_tokens"]) == (0, 0)
