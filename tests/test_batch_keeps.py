"""Issue 45, point 3: a batch keeps what it paid for, and a cancel stops it whatever the server
does. Against scripted local servers (`fake_anthropic_batches.py`, `fake_llm_server.py`).

One bad line in an Anthropic batch's results (a duplicated, unknown or missing custom_id, a
line that is not JSON or longer than 10 MB) imported nothing: the run failed, every resume
downloaded the same file and failed again, and the answers Anthropic charged for never
reached the cache; a line past 10 MB shifted the numbers of the lines after it. A poll that
never answered held `cogbias cancel` (promised within 2 s) for minutes, and results that
trickled in had no overall deadline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import (
    ANTHROPIC_KEY,
    ANTHROPIC_MODEL,
    KEY_ENV,
    ROOT,
    anthropic_run,
    cogbias,
    needs_extraction,
)
from fake_anthropic_batches import FakeAnthropic
from fake_llm_server import FakeLLMServer

from cogbias.llm import anthropic_batches
from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import resolve
from cogbias.store import Store

MODEL, KEY = ANTHROPIC_MODEL, ANTHROPIC_KEY
UNKNOWN = "f" * 64
WAIT_S = 120  # a generous bound for a worker to end: never a timing assertion


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def broken(number: int, lines: list[str]) -> list[str]:
    """The first batch's results with every kind of bad line: the second request's own line
    is replaced by a line past 10 MB, so its answer is lost and must be asked again."""
    if number != 1:
        return lines
    first, second, *rest = lines
    item = json.loads(first)
    unknown = json.dumps(item | {"custom_id": UNKNOWN})
    nameless = json.dumps({k: v for k, v in item.items() if k != "custom_id"})
    big = json.dumps(json.loads(second) | {"pad": "x" * (11 * 1024 * 1024)})
    return [first, first, unknown, nameless, "{not json", big, "{after the long line", *rest]


def keys_of(lines: list[dict[str, Any]]) -> list[str]:
    return [r["custom_id"] for r in lines]


def test_every_good_line_is_kept_and_each_bad_line_is_named_and_asked_again(tmp_path):
    db = tmp_path / "batch.db"
    with FakeAnthropic(needs_extraction, mangle=broken) as server:
        out = cogbias(*anthropic_run(db, server.base_url, "--batch", "--poll-seconds", 0.1))
        first = keys_of(server.batches["msgbatch_0001"]["results"])
        later = [keys_of(b["requests"]) for b in list(server.batches.values())[1:]]
    assert out.returncode == 0, out.stderr
    where = "msgbatch_0001.jsonl, line"
    for line, what in ((2, "answered twice (the first kept)"), (3, "matches no exported request"),
                       (4, "no custom_id"), (5, "not JSON we can read"),
                       (6, "longer than 10485760 bytes"), (7, "not JSON we can read")):  # fmt: skip
        [said] = [s for s in out.stderr.splitlines() if s.startswith(f"  {where} {line}: ")]
        assert what in said, out.stderr
    assert "batch msgbatch_0001: 6 line(s) of its results could not be read" in out.stderr
    assert "nothing was imported" not in out.stderr and "Traceback" not in out.stderr
    lost = first[1]
    assert any(lost in keys for keys in later)  # asked again, in a later batch
    with Store(db) as store:
        [run] = store.runs()
        assert run["status"] == "done" and run["failed"] == 0 and run["done"] == 3
        calls = store.query("select key, source from llm_calls")
        kept = {c["key"] for c in calls if c["source"] == "batch"}
        assert set(first) <= kept  # the paid answers of batch 1, and the lost one asked again
        assert UNKNOWN not in kept
        attempts = store.batch_requests(first)
        assert attempts[lost]["attempts"] == 2
        assert {attempts[k]["attempts"] for k in first if k != lost} == {1}


def start_worker(db: Path, base_url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cogbias",
         *map(str, anthropic_run(db, base_url, "--batch", "--poll-seconds", 0.1))],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def cancel_and_end(db: Path, worker: subprocess.Popen[bytes]) -> tuple[str, str]:
    """Cancel the worker's run; (its status once the worker ended, the worker's stderr)."""
    with Store(db) as store:
        [run] = store.runs()
    cancelled = cogbias("cancel", run["id"], "--db", db)
    assert cancelled.returncode == 0, cancelled.stderr
    try:
        _, err = worker.communicate(timeout=WAIT_S)
    finally:
        worker.kill()
    with Store(db) as store:
        return store.run(run["id"])["status"], err.decode()


@pytest.mark.parametrize("hang", ["poll", "all"])
def test_a_cancel_stops_a_run_whose_polls_never_answer(tmp_path: Path, hang: str) -> None:
    """`hang="all"`: the cancel Anthropic is sent never answers either; the run still ends."""
    db = tmp_path / "batch.db"
    with FakeAnthropic(needs_extraction, batch_delay=600, hang=hang) as server:
        worker = start_worker(db, server.base_url)
        wait_for(lambda: server.polls > 0, "a poll in flight")
        status, err = cancel_and_end(db, worker)
    assert status == "cancelled" and worker.returncode == 0, err
    assert "Traceback" not in err
    with Store(db) as store:
        [row] = store.batches()
    assert row["status"] == ("cancelling" if hang == "poll" else "in_progress")
    if hang == "all":
        assert "the provider did not take the cancel" in err


def test_a_cancel_stops_a_run_whose_results_trickle_in(tmp_path: Path) -> None:
    db = tmp_path / "batch.db"
    with FakeAnthropic(needs_extraction, batch_delay=0.1, trickle=1.0) as server:
        worker = start_worker(db, server.base_url)
        wait_for(lambda: server.downloads > 0, "a download in flight")
        status, err = cancel_and_end(db, worker)
    assert status == "cancelled" and worker.returncode == 0, err
    with Store(db) as store:  # nothing half-imported
        assert store.query("select count(*) as n from llm_calls")[0]["n"] == 0


def test_an_openai_batch_poll_that_never_answers_is_cancelled_too(tmp_path: Path) -> None:
    db = tmp_path / "batch.db"
    with FakeLLMServer(batch_delay=600, batch_hang=True) as server:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cogbias", "run", "pairs", "--db", str(db), "--biases",
             "anchoring", "--generator", "examples", "--models", "openai/x", "--api-base",
             server.base_url, "--batch", "--poll-seconds", "0.1"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        wait_for(lambda: server.batch_polls > 0, "a poll in flight")
        status, err = cancel_and_end(db, worker)
    assert status == "cancelled" and worker.returncode == 0, err


# ------------------------------------------------------------------ the Batches API's deadlines


def api(base_url: str) -> anthropic_batches.BatchesAPI:
    return anthropic_batches.BatchesAPI(resolve(MODEL, base_url, registry=[]), KEY)


def ended_batch(batches: anthropic_batches.BatchesAPI) -> dict[str, Any]:
    """A batch of one request, created and polled until it has ended (the server says at once)."""
    batch = batches.create([{"custom_id": "k1", "params": {
        "model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}}])  # fmt: skip
    assert batches.retrieve(batch["id"])["processing_status"] == "ended"
    return batch


def test_a_poll_that_never_answers_fails_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anthropic_batches, "DEADLINE_S", 1.0)
    with FakeAnthropic(hang="poll") as server:
        with pytest.raises(LLMError, match="timed out"):
            api(server.base_url).retrieve("msgbatch_0001")


def test_results_that_trickle_fail_at_the_deadline(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(anthropic_batches, "RESULTS_DEADLINE_S", 2.0)
    with FakeAnthropic(batch_delay=0, trickle=0.5) as server:
        batches = api(server.base_url)
        batch = ended_batch(batches)
        with pytest.raises(LLMError, match="timed out"):
            batches.results(batch["id"], tmp_path / "r.jsonl")


def test_results_that_trickle_too_slowly_are_refused_before_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(anthropic_batches, "RATE_AFTER_S", 0.5)
    monkeypatch.setattr(anthropic_batches, "ATTEMPTS", 1)
    with FakeAnthropic(batch_delay=0, trickle=0.3) as server:
        batches = api(server.base_url)
        batch = ended_batch(batches)
        with pytest.raises(LLMError, match="bytes a second, too slowly to finish"):
            batches.results(batch["id"], tmp_path / "r.jsonl")
