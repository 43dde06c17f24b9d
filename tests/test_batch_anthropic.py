"""Anthropic's Message Batches for `--batch` (issue 34, point 3), against a local server that
speaks the Messages API and Message Batches (`fake_anthropic_batches.py`): a paired batch
run makes no interactive call and stores what an interactive run of the same spec stores,
through the same litellm request bodies; errored and expired requests are reported, never
stored as answers, and asked again; a cancel reaches Anthropic's batch; the key goes only in
`x-api-key`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_helpers import (
    ANTHROPIC_KEY,
    ANTHROPIC_MODEL,
    KEY_ENV,
    PAIRS,
    ROOT,
    anthropic_run,
    cogbias,
    needs_extraction,
)
from dataset_helpers import snapshot
from fake_anthropic_batches import FakeAnthropic

from cogbias.llm import LLMRequest
from cogbias.llm.anthropic_batches import litellm_body, message_params, openai_line, text_of
from cogbias.llm.profiles import resolve
from cogbias.store import Store

MODEL, KEY = ANTHROPIC_MODEL, ANTHROPIC_KEY


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key every `cogbias` process of these tests reads (and must never write)."""
    monkeypatch.setenv(KEY_ENV, KEY)


def run_args(db: Path, base_url: str, *extra: object) -> list[object]:
    return anthropic_run(db, base_url, *extra)


def canonical(bodies: list[dict]) -> set[str]:
    return {json.dumps(b, sort_keys=True) for b in bodies}


def stored_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_a_batch_run_equals_an_interactive_run_and_failed_requests_are_asked_again(tmp_path):
    batch_db, interactive_db = tmp_path / "batch.db", tmp_path / "interactive.db"
    with FakeAnthropic(needs_extraction, errored=1, expired=1) as server:
        out = cogbias(*run_args(batch_db, server.base_url, "--batch", "--poll-seconds", 0.1))
        assert out.returncode == 0, out.stderr
        assert server.calls == 0 and server.params  # (a) nothing asked interactively
        first = server.batches["msgbatch_0001"]["results"]
        failed = {r["custom_id"]: r["result"]["type"] for r in first}
        failed = {k: v for k, v in failed.items() if v != "succeeded"}
        assert sorted(failed.values()) == ["errored", "expired"]
        # (c) reported, by line and kind
        assert "msgbatch_0001: 2 request(s) not answered (not stored" in out.stderr
        assert "line 1: the engine reported an error: errored: Overloaded" in out.stderr
        assert "line 2: the engine reported an error: expired" in out.stderr
        out_i = cogbias(*run_args(interactive_db, server.base_url))
        assert out_i.returncode == 0, out_i.stderr
        assert server.calls > 0
        # the batch carried exactly the bodies litellm posts interactively
        assert canonical(server.params) == canonical(server.bodies)
        assert {server.api_keys.count(KEY)} == {len(server.api_keys)}  # only in x-api-key
    with Store(batch_db) as store, Store(interactive_db) as other:
        [run] = store.runs()
        assert run["status"] == "done" and run["failed"] == 0 and run["done"] == 3
        assert store.query(PAIRS) == other.query(PAIRS)  # (b) the same stored decisions
        batches = store.batches(run["id"])
        assert {b["round"] for b in batches} == {"decide", "extract"}
        assert {b["status"] for b in batches} == {"completed"}
        assert batches[0]["failed"] == 2 and batches[0]["completed"] == 4
        # (c) never stored as answers: asked again, and their answers are the model's
        attempts = store.batch_requests(list(failed))
        assert {attempts[k]["attempts"] for k in failed} == {2}
        answers = store.llm_call_responses(list(failed))
        assert set(answers) == set(failed)
        assert not any("Overloaded" in a or "expired" in a for a in answers.values())
        assert all(a.startswith("I would not pick Option") for a in answers.values())
    assert KEY not in out.stdout + out.stderr and KEY.encode() not in stored_bytes(batch_db)


def test_cancelling_a_batch_run_cancels_its_message_batch_and_a_resume_finishes_it(tmp_path):
    db = tmp_path / "batch.db"
    with FakeAnthropic(batch_delay=600) as server:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cogbias",
             *map(str, run_args(db, server.base_url, "--batch", "--poll-seconds", 600))],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        submitted: list[dict] = []
        deadline = time.monotonic() + 120
        while not submitted and time.monotonic() < deadline:
            time.sleep(0.1)
            with Store(db) as store:
                submitted = store.batches()
        assert submitted, "no batch was submitted"
        run_id = submitted[0]["run_id"]
        cancelled = cogbias("cancel", run_id, "--db", db)
        assert cancelled.returncode == 0, cancelled.stderr
        assert worker.wait(timeout=120) == 0
        assert server.cancels == 1 and server.calls == 0  # (d) Anthropic was asked to cancel
        with Store(db) as store:
            assert store.run(run_id)["status"] == "cancelled"
            assert [b["status"] for b in store.batches()] == ["cancelling"]
        # a resume polls the cancelled batch (its requests come back "canceled", never
        # answers) and asks them again in a new batch
        server.batch_delay = 0.1
        resumed = cogbias("resume", run_id, "--db", db, "--batch", "--poll-seconds", 0.1)
        assert resumed.returncode == 0, resumed.stderr
        assert "the engine reported an error: canceled" in resumed.stderr
        assert server.calls == 0
    with Store(db) as store:
        assert store.run(run_id)["status"] == "done"
        assert [b["status"] for b in store.batches()] == ["cancelled", "completed"]


def test_a_refused_key_fails_the_run_in_our_words_and_is_never_repeated(tmp_path):
    db = tmp_path / "batch.db"
    with FakeAnthropic(api_key="another-fake-value-98765") as server:
        out = cogbias(*run_args(db, server.base_url, "--batch", "--poll-seconds", 0.1))
        assert server.calls == 0 and not server.batches
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "authentication failed; COGBIAS_TEST_ANTHROPIC_KEY is probably wrong" in out.stderr
    assert KEY not in out.stdout + out.stderr and KEY.encode() not in stored_bytes(db)
    with Store(db) as store:
        [run] = store.runs()
        assert run["status"] == "failed" and "authentication failed" in run["error"]


def test_an_unreadable_line_is_named_and_every_answer_is_kept(tmp_path):
    """Issue 45 changed this: a line that cannot be read once failed the run and imported
    nothing (the answers Anthropic charged for were lost); now it costs only itself."""
    db = tmp_path / "batch.db"
    with FakeAnthropic(junk="{not json\n") as server:
        out = cogbias(*run_args(db, server.base_url, "--batch", "--poll-seconds", 0.1))
        assert server.calls == 0
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "msgbatch_0001.jsonl, line 1: not JSON we can read" in out.stderr
    assert "nothing was imported" not in out.stderr
    with Store(db) as store:
        [run] = store.runs()
        assert run["status"] == "done" and run["failed"] == 0
        assert store.query("select count(*) as n from llm_calls")[0]["n"] > 0


def test_an_anthropic_generator_is_refused_by_name_before_any_work(tmp_path):
    db = tmp_path / "b.db"
    Store(db).close()
    before = snapshot(db)
    done = cogbias("run", "pairs", "--db", db, "--biases", "anchoring", "--generator", MODEL,
                   "--models", MODEL, "--api-base", "http://127.0.0.1:9", "--batch")  # fmt: skip
    assert done.returncode == 2
    assert f"--batch with {MODEL} as the generator" in done.stderr
    assert "Traceback" not in done.stderr and snapshot(db) == before


def test_a_study_run_is_refused_by_name(tmp_path):
    done = cogbias("run", "study", "mohr8", "--db", tmp_path / "b.db", "--models", MODEL,
                   "--api-base", "http://127.0.0.1:9", "--batch")  # fmt: skip
    assert done.returncode == 2  # conversations: each turn needs the answer before it
    assert "--batch only apply to `cogbias run pairs`" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("messages", "max_tokens"),
    [
        ([("user", "Pick Option 1 or Option 2.")], 40),
        (
            [("system", "S1"), ("system", "S2"), ("user", "u1"), ("assistant", "a"), ("user", "u")],
            9,
        ),
        ([("system", "S"), ("user", "u1"), ("user", "u2")], None),  # litellm's default
        ([("user", "u"), ("system", "late")], 5),  # a shape litellm rewrites: its own body
    ],
)
def test_request_params_are_the_body_litellm_sends(messages, max_tokens) -> None:
    profile = resolve(MODEL, "http://127.0.0.1:9", registry=[])
    req = LLMRequest(MODEL, messages, temperature=0.7, seed=5, max_tokens=max_tokens, repeat=2)
    params = message_params(req, profile)
    assert params == litellm_body(req, profile) and "seed" not in params


def test_a_message_is_read_as_litellm_reads_it_and_failures_are_errors() -> None:
    message = {"content": [{"type": "text", "text": "Option 2"}, {"type": "tool_use"},
                           {"type": "text", "text": " fits."}],
               "usage": {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": -1}}  # fmt: skip
    assert text_of(message) == ("Option 2 fits.", 10, 0)
    ok = openai_line({"custom_id": "k", "result": {"type": "succeeded", "message": message}})
    assert ok["response"]["body"]["choices"][0]["message"]["content"] == "Option 2 fits."
    for kind in ("errored", "expired", "canceled", "something-new"):
        line = openai_line({"custom_id": "k", "result": {"type": kind}})
        assert "response" not in line and line["error"]["message"].startswith(kind)
    assert openai_line({"result": {"type": "succeeded"}}) is None  # the importer names it
