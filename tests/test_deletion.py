"""Deleting a run or a dataset removes exactly that: every other row stays byte for byte."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.datasets import import_hub
from cogbias.runs import deletion, executor, paired_plan
from cogbias.runs.summaries import run_summaries
from cogbias.store import Store
from tests.app_helpers import make_results_db
from tests.dataset_helpers import HUB_CSV

ROOT = Path(__file__).resolve().parent.parent


def rows(db: Path) -> dict[str, set[tuple]]:
    """Every row of every table, as sets (order-free)."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        return {t: set(conn.execute(f"select * from [{t}]").fetchall()) for t in tables}
    finally:
        conn.close()


def ids(db: Path, sql: str, *params: object) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute(sql, params)}
    finally:
        conn.close()


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, str, str, str]:
    """Run A (anchoring, framing), run B (anchoring only, other models): they share the
    anchoring instances; run C on loss aversion shares nothing."""
    db = tmp_path / "d.db"
    a = make_results_db(db, ("anchoring", "framing_effect"), ("random",), instances=4, name="A")
    b = make_results_db(db, ("anchoring",), ("random_b",), instances=4, name="B")
    c = make_results_db(db, ("loss_aversion",), ("random",), instances=3, name="C")
    return db, a, b, c


def test_deleting_a_run_keeps_shared_instances_and_touches_nothing_else(two_runs) -> None:
    db, a, b, c = two_runs
    with Store(db) as store, store.atomic():  # requests handed to a batch engine, per run
        for key, run in (("k-a", a), ("k-b", b)):
            store.db["batch_requests"].insert({"key": key, "run_id": run, "model": "random"})
    before = rows(db)
    shared = ids(db, "select instance_id from decisions where run_id = ?", b)
    only_a = ids(db, "select instance_id from decisions where run_id = ?", a) - shared
    with Store(db) as store:
        plan = deletion.plan_run(store, a)
        assert (plan.decisions, plan.instances) == (8, 4)  # framing's 4 instances are A's alone
        assert "run " + a in plan.describe()
        deletion.apply(store, plan)
    after = rows(db)
    gone = {t: before[t] - after[t] for t in before}
    assert after["decisions"] <= before["decisions"] and after["instances"] <= before["instances"]
    assert {r[0] for r in gone["runs"]} == {a}
    assert len(gone["decisions"]) == 8 and {r[1] for r in gone["decisions"]} == {a}
    assert {r[0] for r in gone["instances"]} == only_a
    assert not any(after[t] - before[t] for t in before), "a row was changed or added"
    assert {r[0] for r in gone["batch_requests"]} == {"k-a"}
    untouched = set(before) - {"runs", "decisions", "instances", "batch_requests"}
    assert all(not gone[t] for t in untouched)
    assert shared <= ids(db, "select id from instances")
    assert {r[0] for r in after["runs"]} == {b, c}


def test_a_running_run_or_an_unknown_one_is_refused(two_runs) -> None:
    db, a, _, _ = two_runs
    with Store(db) as store:
        store.update_run(a, status="running", pid=os.getpid())  # a live process holds it
        with pytest.raises(ValueError, match="still running"):
            deletion.plan_run(store, a)
        with pytest.raises(KeyError, match="no run 'nope'"):
            deletion.plan_run(store, "nope")
        with pytest.raises(KeyError, match="no dataset 'nope'"):
            deletion.plan_dataset(store, "nope")


def test_a_run_being_cancelled_is_still_running_and_is_refused(two_runs) -> None:
    """A running run whose cancel was asked reads "cancelling" while its worker stops and
    still writes: deletion called only "planned" and "running" active, so it let such a run
    be deleted under its worker. One definition of active (`RunStatus`) refuses it, as the
    pages do."""
    db, a, _, _ = two_runs
    with Store(db) as store:
        store.update_run(a, status="running", pid=os.getpid(), cancel_requested=1)
        assert next(r for r in run_summaries(store) if r.id == a).status == "cancelling"
        with pytest.raises(ValueError, match="still running"):
            deletion.plan_run(store, a)


@pytest.mark.skipif(not HUB_CSV.is_file(), reason=f"dataset fixture missing: {HUB_CSV}")
def test_deleting_a_dataset_takes_its_runs_and_leaves_the_other_dataset(two_runs) -> None:
    db, a, b, c = two_runs
    with Store(db) as store:
        import_hub(store, HUB_CSV, name="first")
        import_hub(store, HUB_CSV, name="second")
        on_first = executor.execute(
            paired_plan.plan(paired_plan.RunSpec(["random"], dataset="first"), store), store
        )
        on_second = executor.execute(
            paired_plan.plan(paired_plan.RunSpec(["random"], dataset="second", per_bias=2), store),
            store,
        )
    before = rows(db)
    with Store(db) as store:
        plan = deletion.plan_dataset(store, "first")
        assert plan.runs == [on_first.id] and plan.instances > 0
        assert plan.decisions == on_first.done
        deletion.apply(store, plan)
        assert [d["name"] for d in store.datasets()] == ["second"]
    after = rows(db)
    assert not any(after[t] - before[t] for t in before), "a row was changed or added"
    assert {r[0] for r in before["runs"] - after["runs"]} == {on_first.id}
    assert {r[0] for r in after["runs"]} == {a, b, c, on_second.id}
    assert not ids(db, "select id from instances where dataset = 'first'")
    left = ids(db, "select distinct run_id from decisions")
    assert left == {a, b, c, on_second.id}


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *args], input=stdin, capture_output=True, text=True,
        env=env, timeout=120,
    )  # fmt: skip


def test_cli_asks_first_and_deletes_only_when_told(two_runs) -> None:
    db, a, b, _ = two_runs
    before = rows(db)
    refused = cli("delete", "run", a, "--db", str(db), stdin="n\n")
    assert refused.returncode == 1 and "Nothing deleted" in refused.stderr
    assert f"This deletes run {a}" in refused.stdout
    no_answer = cli("delete", "run", a, "--db", str(db))  # stdin closed: not confirmed
    assert no_answer.returncode == 1 and rows(db) == before
    asked = cli("delete", "run", a, "--db", str(db), stdin="y\n")
    assert asked.returncode == 0 and f"Deleted run {a}" in asked.stdout
    assert a not in ids(db, "select id from runs")
    forced = cli("delete", "run", b, "--db", str(db), "--yes")
    assert forced.returncode == 0 and b not in ids(db, "select id from runs")
    unknown = cli("delete", "dataset", "nope", "--db", str(db), "--yes")
    assert unknown.returncode == 2 and "no dataset 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
