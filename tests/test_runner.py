"""The batch runner against a real HTTP endpoint on 127.0.0.1 and a real SQLite file."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer
from run_helpers import BIASES, spec

from cogbias.runs import executor, paired_plan
from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent


def cli_args(s: paired_plan.RunSpec, db: Path) -> list[str]:
    """`cogbias run` arguments asking for the run `s` (the CLI is what these tests drive)."""
    args = ["run", "--db", str(db), "--models", ",".join(s.models), "--biases", ",".join(s.biases)]
    args += ["--scenarios", str(s.scenarios), "--instances", str(s.instances)]
    args += ["--generator", s.generator, "--seed", str(s.seed), "--repeats", str(s.repeats)]
    return args + ["--api-base", s.api_base] if s.api_base else args


def test_rerunning_an_identical_run_makes_no_new_llm_calls(llm_server, store):
    server = llm_server
    first = executor.execute(paired_plan.plan(spec(server.base_url), store), store, concurrency=8)
    assert first.status == "done" and first.done == first.planned == 24
    assert server.calls > 0
    server.reset_counts()
    again = executor.execute(paired_plan.plan(spec(server.base_url), store), store, concurrency=8)
    assert again.status == "done" and server.calls == 0
    assert store.counts()["decisions"] == 24
    # a different run over the same instances asks the model again only where needed:
    # the response cache answers every identical request
    server.reset_counts()
    other = spec(server.base_url, models=["openai/fake"])
    executor.execute(paired_plan.plan(other, store), store, concurrency=8)
    assert server.calls == 0


def test_injected_500s_and_429s_end_with_every_pair_scored_or_failed_with_reason(tmp_path):
    with FakeLLMServer(fail_500=0.1, fail_429=0.1, retry_after=0.01, seed=3) as server:
        with Store(tmp_path / "x.db") as store:
            run = executor.execute(
                paired_plan.plan(spec(server.base_url), store), store, concurrency=8
            )
            assert server.statuses[500] > 0 and server.statuses[429] > 0
            assert run.done == run.planned == 24
            rows = store.query("select status, score, error from decisions")
            assert len(rows) == 24
            for row in rows:
                assert (row["status"] == "ok" and row["score"] is not None) or (
                    row["status"] == "failed" and row["error"]
                )


def test_unanswerable_halves_are_stored_as_failures_not_crashes(tmp_path):
    def responder(request):
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            keys = fmt["json_schema"]["schema"]["required"]
            return json.dumps({k: "filled" for k in keys})
        return "I would rather not choose."

    with FakeLLMServer(responder) as server, Store(tmp_path / "x.db") as store:
        run = executor.execute(
            paired_plan.plan(spec(server.base_url, models=["openai/fake"]), store), store
        )
        assert run.status == "done" and run.failed == run.planned
        errors = {r["error"] for r in store.query("select error from decisions")}
        assert all("no option could be extracted" in e for e in errors)


def test_a_sigkilled_run_resumes_with_nothing_lost_or_duplicated(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer(latency=0.05) as server:
        args = cli_args(spec(server.base_url, scenarios=4), db) + ["--concurrency", "4"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "cogbias", *args], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        done = 0
        while time.monotonic() < deadline and done < 10:
            time.sleep(0.1)
            if db.exists():
                with Store(db) as store:
                    done = store.counts().get("decisions", 0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Store(db) as store:
            partial = store.counts()["decisions"]
            planned = paired_plan.plan(spec(server.base_url, scenarios=4), store).planned
        assert 0 < partial < planned, (partial, planned)
        resumed = subprocess.run(
            [sys.executable, "-m", "cogbias", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert resumed.returncode == 0, resumed.stderr
        with Store(db) as store:
            rows = store.query("select run_id, instance_id, model, repeat from decisions")
            assert len(rows) == planned == 48
            assert len({tuple(r.values()) for r in rows}) == planned
            [run] = store.runs()
            assert run["status"] == "done" and run["done"] == planned


def test_an_auth_error_stops_the_run_and_no_key_value_is_stored(tmp_path, monkeypatch):
    sentinel = "sk-test-SENTINEL-abcdef0123456789"
    monkeypatch.setenv("FAKE_SERVER_KEY", sentinel)  # the endpoint's own key, named for it
    db = tmp_path / "x.db"
    with FakeLLMServer(api_key="sk-the-right-one-0123456789") as server:
        result = subprocess.run(
            [sys.executable, "-m", "cogbias", *cli_args(spec(server.base_url), db),
             "--api-key-env", "FAKE_SERVER_KEY"],
            cwd=ROOT, capture_output=True, text=True, env={**os.environ},
        )  # fmt: skip
        assert f"Bearer {sentinel}" in server.authorizations  # the wrong key was sent
    assert result.returncode != 0
    assert "openai/fake" in result.stderr and "FAKE_SERVER_KEY" in result.stderr
    assert sentinel not in result.stdout + result.stderr
    with Store(db) as store:
        [run] = store.runs()
        assert run["status"] == "failed"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert sentinel.encode() not in path.read_bytes(), path


def test_a_key_echoed_by_the_provider_never_reaches_the_store_or_exports(tmp_path):
    sentinel = "sk-test-SENTINEL-fedcba9876543210"
    db = tmp_path / "x.db"

    def echo(request):
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            keys = fmt["json_schema"]["schema"]["required"]
            return json.dumps({k: f"text {sentinel}" for k in keys})
        return f"Option 1, said the model holding {sentinel}"

    env = {**os.environ, "OPENAI_API_KEY": sentinel}
    with FakeLLMServer(echo) as server:
        run = subprocess.run(
            [sys.executable, "-m", "cogbias", *cli_args(spec(server.base_url), db)],
            cwd=ROOT, capture_output=True, text=True, env=env,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    with Store(db) as store:
        [row] = store.runs()
        assert store.query("select count(*) as n from decisions where status = 'ok'")[0]["n"] > 0
    for fmt in ("csv", "jsonl", "parquet"):
        out = subprocess.run(
            [sys.executable, "-m", "cogbias", "export", "--db", str(db), "--run", row["id"],
             "-o", str(tmp_path / f"pairs.{fmt}")],
            cwd=ROOT, capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    for path in files:
        assert sentinel.encode() not in path.read_bytes(), path
    assert sentinel not in run.stdout + run.stderr


def test_cli_results_json_lists_bias_model_n_and_failures(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer() as server:
        subprocess.run(
            [sys.executable, "-m", "cogbias", *cli_args(spec(server.base_url), db)],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "cogbias", "results", "--db", str(db), "--format", "json"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    rows = json.loads(out.stdout)
    assert {(r["bias"], r["model"]) for r in rows} == {
        (b, m) for b in BIASES for m in ["random", "openai/fake"]
    }
    for row in rows:
        assert row["n"] + row["failures"] == 4 and -1 <= row["mean"] <= 1
    runs = subprocess.run(
        [sys.executable, "-m", "cogbias", "runs", "--db", str(db)],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert "done" in runs.stdout


def test_cancel_request_stops_a_run(tmp_path):
    with FakeLLMServer(latency=0.05) as server, Store(tmp_path / "x.db") as store:
        plan = paired_plan.plan(spec(server.base_url, scenarios=4), store)
        store.create_run(plan.spec.run_id, {}, plan.planned)
        seen = []

        def progress(run):
            seen.append(run.done)
            if run.done >= 4:
                store.request_cancel(run.id)

        run = executor.execute(plan, store, concurrency=2, progress=progress)
        assert run.status == "cancelled"
        assert 0 < run.done < plan.planned


@pytest.mark.parametrize("bad", [{"models": []}, {"biases": ["no_such_bias"]}, {"scenarios": 999}])
def test_bad_specs_are_refused_with_a_message(tmp_path, bad):
    with Store(tmp_path / "x.db") as store, pytest.raises((KeyError, ValueError)):
        paired_plan.plan(spec("http://127.0.0.1:9/v1", **bad), store)
