"""Runs you can trust, against a real HTTP server on 127.0.0.1 and real `cogbias` processes:
failures retried on resume, one worker per run, kill -9 at any moment, cancel while every call
hangs, honest cost for cached answers, stable run ids, and a big import beside a running run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer
from run_helpers import spec

from cogbias.runs import executor, paired_plan
from cogbias.store import Store, now

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def run_args(s: paired_plan.RunSpec, db: Path) -> list[str]:
    args = ["run", "--db", str(db), "--models", ",".join(s.models), "--biases", ",".join(s.biases)]
    args += ["--scenarios", str(s.scenarios), "--instances", str(s.instances)]
    return args + ["--generator", s.generator, "--api-base", str(s.api_base)]


def cogbias(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def start(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cogbias", *map(str, args)], cwd=ROOT, env=ENV,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def decision_keys(db: Path) -> list[tuple]:
    with Store(db) as store:
        rows = store.query("select run_id, instance_id, model, repeat from decisions")
    return [tuple(r.values()) for r in rows]


def planned_keys(s: paired_plan.RunSpec, db: Path) -> set[tuple]:
    with Store(db) as store:
        plan = paired_plan.plan(s, store)
    return {
        (s.run_id, i, m, r) for i in plan.instance_ids for m in s.models for r in range(s.repeats)
    }


def wait_for_decisions(db: Path, at_least: int, proc: subprocess.Popen, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with Store(db) as store:
                if store.counts().get("decisions", 0) >= at_least:
                    return
        time.sleep(0.05)


# --------------------------------------------------------------------------- (a) outage


def test_resume_after_an_outage_asks_again_only_for_what_failed_and_ends_done(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer(
        fail_500=0.3, server_status=503, fail_429=0.2, retry_after=0.01, seed=5
    ) as server:
        s = spec(server.base_url)
        first = cogbias(*run_args(s, db), "--max-retries", "0")
        assert first.returncode == 1, first.stderr
        assert f"cogbias resume {s.run_id}" in first.stderr
        assert server.statuses[503] > 0 and server.statuses[429] > 0
        with Store(db) as store:
            run = store.run(s.run_id)
            assert run["status"] == "incomplete" and run["failed"] > 0
            kinds = {
                r["failure_kind"]
                for r in store.query("select failure_kind from decisions where status = 'failed'")
            }
            assert kinds == {"transient"}
            # an outage is never inherited by another run through the shared instances
            assert not store.query("select id from instances where status = 'failed'")
            ok_before = {
                r["id"]: r["created_at"]
                for r in store.query("select id, created_at from decisions where status = 'ok'")
            }
            failed_before = len(
                store.query(
                    "select id from decisions where status = 'failed' and model != 'random'"
                )
            )
            answered = {r["request"] for r in store.query("select request from llm_calls")}
        server.fail_500 = server.fail_429 = 0.0
        server.reset_counts()
        again = cogbias("resume", s.run_id, "--db", db)
        assert again.returncode == 0, again.stderr
        # nothing answered on the first pass is asked again, and no more than the failed
        # pairs (plus the instances whose generation failed) need
        asked = [json.dumps(r["messages"], sort_keys=True) for r in server.requests]
        stored = {json.dumps(json.loads(a)["messages"], sort_keys=True) for a in answered}
        assert server.calls > 0 and not set(asked) & stored
    with Store(db) as store:
        run = store.run(s.run_id)
        assert (
            run["status"] == "done" and run["failed"] == 0 and run["done"] == run["planned"] == 24
        )
        after = {
            r["id"]: r["created_at"]
            for r in store.query("select id, created_at from decisions where status = 'ok'")
        }
    assert all(after[k] == v for k, v in ok_before.items())  # finished pairs were not redone
    assert len(after) == 24 and failed_before > 0


# --------------------------------------------------------------------------- (b) two workers


def test_two_workers_on_one_run_one_is_refused_and_no_call_is_made_twice(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer(latency=0.5) as server:
        s = spec(server.base_url)
        with Store(db):
            pass  # migrate first, so both workers start from the same point
        procs = [start(*run_args(s, db), "--concurrency", "4") for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        with Store(db) as store:
            calls = sum(paired_plan.plan(s, store).llm_calls().values())
        assert sorted(p.returncode for p in procs) == [0, 3], outs
        refused = next(err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode == 3)
        assert "already being worked on" in refused and "cogbias cancel" in refused
        assert server.calls <= calls
    keys = decision_keys(db)
    assert len(keys) == len(set(keys)) and set(keys) == planned_keys(s, db)


# --------------------------------------------------------------------------- (c) kill -9


def test_twenty_kills_at_random_moments_then_resume_gives_exactly_the_planned_pairs(tmp_path):
    db = tmp_path / "x.db"
    rng = random.Random(11)
    with FakeLLMServer(latency=0.05) as server:
        s = spec(server.base_url, scenarios=4)
        planned = planned_keys(s, db)
        for attempt in range(20):
            # `run` with the same arguments resumes: a kill may land before the run is stored
            proc = start(*run_args(s, db), "--concurrency", "4")
            time.sleep(rng.uniform(0.3, 3.0))
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            keys = decision_keys(db)
            assert len(keys) == len(set(keys)) and set(keys) <= planned, attempt
        # `run` again, not `resume`: on a loaded machine every kill may land before the run
        # was stored, and finishing must still give exactly the planned pairs
        final = cogbias(*run_args(s, db))
        assert final.returncode == 0, final.stderr
    keys = decision_keys(db)
    assert len(keys) == len(planned) == 48 and set(keys) == planned
    with Store(db) as store:
        run = store.run(s.run_id)
    assert run["status"] == "done" and run["done"] == 48 and not run["lease_owner"]


# --------------------------------------------------------------------------- (d) cancel


def test_cancel_while_every_call_hangs_stops_the_worker_and_resume_finishes(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer(latency=0.05) as server:
        s = spec(server.base_url, scenarios=4)
        proc = start(*run_args(s, db), "--concurrency", "4")
        wait_for_decisions(db, 6, proc)
        server.latency = 600  # from now on the provider hangs on every call
        time.sleep(1.0)
        asked = time.monotonic()
        cancel = cogbias("cancel", s.run_id, "--db", db)
        assert cancel.returncode == 0, cancel.stderr
        proc.communicate(timeout=60)
        exited = time.monotonic() - asked
        print(f"worker exited {exited:.2f} s after the cancel command returned")
        with Store(db) as store:
            run = store.run(s.run_id)
            stored = store.query(
                "select count(*) as n, coalesce(sum(status = 'failed'), 0) as f from decisions"
            )[0]
        assert run["status"] == "cancelled" and 0 < run["done"] < 48
        assert (run["done"], run["failed"]) == (stored["n"], stored["f"])
        first_duration = run["duration_s"]
        server.latency = 0.0
        again = cogbias("resume", s.run_id, "--db", db)
        assert again.returncode == 0, again.stderr
    with Store(db) as store:
        run = store.run(s.run_id)
    assert run["status"] == "done" and run["done"] == 48
    assert run["duration_s"] > first_duration  # durations add up across resumes
    assert set(decision_keys(db)) == planned_keys(s, db)


# --------------------------------------------------------------------------- (e) honest cost


def test_a_fully_cached_rerun_costs_nothing_and_reports_what_it_saved(tmp_path):
    db = tmp_path / "x.db"
    priced = "openai/gpt-4o-mini"  # litellm's price map knows it
    with FakeLLMServer() as server:
        first = spec(server.base_url, models=[priced], generator=priced)
        with Store(db) as store:
            one = executor.execute(paired_plan.plan(first, store), store, concurrency=8)
            decided = store.query(
                "select sum(cost + cost_saved) as c from decisions where run_id = ?", (one.id,)
            )[0]["c"]
            # what deciding cost, with answers already cached within the run counted too
            assert one.status == "done" and one.cost > 0 and decided > 0
            server.reset_counts()
            # another run asking the same questions (plus the free random baseline)
            second = spec(server.base_url, models=[priced, "random"], generator=priced)
            two = executor.execute(paired_plan.plan(second, store), store, concurrency=8)
        assert server.calls == 0
    assert two.status == "done" and two.cost == 0 and two.tokens == 0
    assert two.cost_saved == pytest.approx(decided)


# --------------------------------------------------------------------------- (f) identity


GOLDEN_RUN_ID = "run-56ffbeb3d3ff"  # the same id as before run specs were versioned


def test_run_id_is_pinned_and_survives_a_new_optional_spec_field():
    fixed = spec("http://127.0.0.1:8000/v1")
    assert fixed.run_id == GOLDEN_RUN_ID
    Extended = dataclasses.make_dataclass(
        "Extended",
        [("mitigation", str, dataclasses.field(default="none"))],
        bases=(paired_plan.RunSpec,),
        frozen=True,
    )
    same = Extended(**dataclasses.asdict(fixed))
    assert same.run_id == GOLDEN_RUN_ID
    assert Extended(**dataclasses.asdict(fixed), mitigation="awareness").run_id != GOLDEN_RUN_ID


def test_a_stored_spec_round_trips_and_a_newer_one_is_refused_clearly():
    fixed = spec("http://127.0.0.1:8000/v1", temperature=0.5)
    assert paired_plan.RunSpec.from_stored(json.dumps(fixed.canonical())) == fixed
    with pytest.raises(ValueError, match="newer cogbias"):
        paired_plan.RunSpec.from_stored({**fixed.canonical(), "from_the_future": 1})


def test_endpoints_with_credentials_are_refused_before_anything_is_stored(tmp_path):
    db = tmp_path / "x.db"
    for url in (
        "http://user:sk-secret-1234567890@127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1?api_key=sk-secret-1234567890",
    ):
        out = cogbias(*run_args(spec(url), db))
        assert out.returncode == 2 and "must not hold" in out.stderr
        assert "sk-secret" not in out.stderr + out.stdout
    with Store(db) as store:
        assert store.runs() == []


def test_the_random_generator_refuses_llm_gaps_by_name_before_the_run(tmp_path):
    out = cogbias(
        "run",
        "--db",
        tmp_path / "x.db",
        "--models",
        "random",
        "--generator",
        "random",
        "--biases",
        "anchoring",
    )
    assert out.returncode == 2 and "[[" in out.stderr and "anchoring" in out.stderr, out.stderr


# --------------------------------------------------------------------------- (g) big import


def test_a_300000_row_import_beside_a_running_run_both_finish(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import_bench = __import__("import")
    folder = tmp_path / "set"
    folder.mkdir()
    rows = import_bench.synthesize(folder, tests=15_000, models=19)
    assert rows >= 300_000
    db = tmp_path / "x.db"
    with FakeLLMServer(latency=1.0) as server:
        s = spec(server.base_url, scenarios=4)
        worker = start(*run_args(s, db), "--concurrency", "4")
        wait_for_decisions(db, 2, worker)
        with Store(db) as store:
            assert store.run(s.run_id)["status"] == "running"
            import_started = now()
        imported = cogbias("import", "malberg2024", folder, "--db", db, timeout=600)
        _, err = worker.communicate(timeout=600)
    assert imported.returncode == 0, imported.stderr
    assert worker.returncode == 0, err
    assert "Traceback" not in err + imported.stderr
    assert set(decision_keys(db)) >= planned_keys(s, db)
    with Store(db) as store:
        run = store.run(s.run_id)
        assert run["status"] == "done" and run["finished_at"] > import_started
        [dataset] = store.datasets()
        assert dataset["rows"] == 15_000 and dataset["meta"]["decisions"] == rows - 15_000


def test_a_resume_after_a_kill_asks_each_unfinished_pair_once_and_no_finished_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished pair asked again would be answered from the cache and stored the same, so
    only counting what the client is asked shows it: the resume asks exactly the requests of
    the pairs the killed run had not stored, and leaves the stored ones as they were."""
    from cogbias.llm.client import LLMClient

    db = tmp_path / "x.db"
    with FakeLLMServer(latency=0.05) as server:
        s = spec(server.base_url, scenarios=4, models=["openai/fake"], generator="examples")
        proc = start(*run_args(s, db), "--concurrency", "4")
        wait_for_decisions(db, 8, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        with Store(db) as store:
            plan = paired_plan.plan(s, store)
            before = {r["id"]: r for r in store.query("select * from decisions")}
        assert 0 < len(before) < plan.planned, len(before)
        per_pair = plan.llm_calls()["decide"] // plan.planned  # a control and a treatment
        asked = []
        complete = LLMClient.complete

        async def counted(client: LLMClient, request: Any) -> Any:
            asked.append(request)
            return await complete(client, request)

        monkeypatch.setattr(LLMClient, "complete", counted)
        with Store(db) as store:
            run = executor.execute(plan, store, concurrency=4)
            after = {r["id"]: r for r in store.query("select * from decisions")}
    assert run.status == "done" and len(after) == plan.planned
    assert len(asked) == per_pair * (plan.planned - len(before))
    assert {k: after[k] for k in before} == before
