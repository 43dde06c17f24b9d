"""Every command that takes a RUN_ID says what is true of it, through the real command: a run
of a kind the command does not handle is refused naming what the run is and what to use
instead (`batch export` on a study run once said a newer cogbias had made it), a run that
does not exist is named as missing, and nothing is written for either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.runs import executor, paired_plan
from cogbias.store import LEASE_STALE_S, Store, lease_owner, now

ROOT = Path(__file__).resolve().parent.parent


def cogbias(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def clean(done: subprocess.CompletedProcess[str]) -> str:
    """The command's stderr, once it is known to hold no traceback and no false claim."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "newer cogbias" not in done.stderr, done.stderr
    return done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A database with a finished study run and a finished paired run: {kind: run id}."""
    db = tmp_path_factory.mktemp("kinds") / "k.db"
    made = cogbias("run", "study", "mohr8", "--models", "random", "--tests", "anchoring",
                   "--temperatures", "0.2", "--variants", "0_normal", "--repeats", "2", "--db", db)  # fmt: skip
    assert made.returncode == 0, made.stderr
    made = cogbias("run", "pairs", "--models", "random", "--biases", "anchoring", "--db", db)
    assert made.returncode == 0, made.stderr
    with Store(db) as store:
        ids = {
            ("study" if '"kind":"study"' in r["spec"] else "paired"): r["id"] for r in store.runs()
        }
    return {**ids, "db": str(db)}


def test_batch_export_refuses_a_study_run_saying_what_it_is(runs, tmp_path: Path) -> None:
    out = tmp_path / "requests.jsonl"
    done = cogbias("batch", "export", runs["study"], "--db", runs["db"], "-o", out)
    said = clean(done)
    assert done.returncode == 2
    assert f"run {runs['study']} is a study run (study mohr8)" in said, said
    assert "batch export writes the calls of paired, dataset and token-bias runs" in said
    assert f"`cogbias resume {runs['study']}`" in said  # what to use instead
    assert not out.exists()
    # a paired run is exported as before
    done = cogbias("batch", "export", runs["paired"], "--db", runs["db"], "-o", out)
    assert done.returncode == 0 and "wrote 0 request(s)" in clean(done)


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["analyze", "--run", "{run}"], "analyze works on the pairs of paired"),
        (["export", "--run", "{run}", "--test-cases", "-o", "{out}"], "--test-cases works on"),
    ],
    ids=["analyze", "export-test-cases"],
)
def test_a_command_of_paired_runs_refuses_a_study_run(runs, argv, what, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    words = [w.format(run=runs["study"], out=out) for w in argv]
    done = cogbias(*words, "--db", runs["db"])
    said = clean(done)
    assert done.returncode == 2 and what in said, said
    assert "is a study run (study mohr8)" in said and "`cogbias results run" in said
    assert not out.exists()


def test_effects_refuses_a_paired_run_saying_what_it_is(runs) -> None:
    done = cogbias("effects", "--run", runs["paired"], "--db", runs["db"])
    said = clean(done)
    assert done.returncode == 2
    assert f"run {runs['paired']} is a paired run (anchoring), not a study run" in said, said


@pytest.mark.parametrize(
    "argv",
    [
        ["batch", "export", "run-nope", "-o", "{out}"],
        ["resume", "run-nope"],
        ["cancel", "run-nope"],
        ["export", "--run", "run-nope", "-o", "{out}"],
        ["analyze", "--run", "run-nope"],
        ["effects", "--run", "run-nope"],
        ["results", "run", "run-nope"],
        ["delete", "run", "run-nope", "--yes"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_missing_run_is_named_as_missing(runs, argv, tmp_path: Path, cogbias_main) -> None:
    out = tmp_path / "out.csv"  # in this process: the other tests start the real one
    done = cogbias_main(*[w.format(out=out) for w in argv], "--db", runs["db"])
    said = clean(done)
    assert done.returncode == 2 and "no run" in said and "run-nope" in said, said
    assert not out.exists()  # `export` once wrote an empty file and said "wrote 0 rows"


def test_cancel_says_a_finished_run_has_nothing_to_cancel(runs) -> None:
    done = cogbias("cancel", runs["paired"], "--db", runs["db"])
    assert done.returncode == 0
    assert f"run {runs['paired']}: already finished (done): nothing to cancel" in clean(done)


def _cancel_of(db: Path, run_id: str) -> str:
    done = cogbias("cancel", run_id, "--db", db)
    assert done.returncode == 0, done.stderr
    return clean(done)


def test_cancel_of_a_run_finished_by_a_process_that_lives_on_says_it_is_finished(
    tmp_path: Path,
) -> None:
    """The run is worked in this process (as `run pairs --prompting a,b` goes on to its next
    run, or a notebook, or the app): its process lives on after the run is done. Cancel said
    "cancelling (the worker stops within 2 s)" and left a request that cancelled the next
    resume of the run before it asked anything."""
    db = tmp_path / "k.db"
    with Store(db) as store:
        plan = paired_plan.plan(paired_plan.RunSpec(models=["random"], biases=["anchoring"]), store)
        run_id = executor.execute(plan, store).id
    said = _cancel_of(db, run_id)
    assert f"run {run_id}: already finished (done): nothing to cancel" in said, said
    assert "cancelling" not in said
    with Store(db) as store:
        assert store.run(run_id)["cancel_requested"] == 0
        assert executor.execute(paired_plan.plan(plan.spec, store), store).status == "done"
    said = _cancel_of(db, run_id)  # and again, after the resume
    assert "already finished (done): nothing to cancel" in said, said


def test_cancel_says_what_became_of_runs_that_ended_and_of_a_worker_still_letting_go(
    tmp_path: Path,
) -> None:
    db = tmp_path / "k.db"
    with Store(db) as store:
        plan = paired_plan.plan(paired_plan.RunSpec(models=["random"], biases=["anchoring"]), store)
        run_id = paired_plan.create_run(plan, store, "")
    said = _cancel_of(db, run_id)  # planned, no worker: marked at once
    assert f"run {run_id}: cancelled" in said and "already" not in said, said
    said = _cancel_of(db, run_id)  # a cancelled run is not cancelled twice
    assert f"run {run_id}: already cancelled: nothing to cancel" in said, said
    with Store(db) as store:
        store.update_run(run_id, status="incomplete", finished_at=now())
    said = _cancel_of(db, run_id)
    assert f"run {run_id}: not running (it ended incomplete): nothing to cancel" in said, said
    assert f"`cogbias resume {run_id}` continues it" in said

    # A live worker that has recorded the end of the run and not yet let go of it
    owner = lease_owner(os.getpid(), "ending")
    with Store(db) as store:
        assert store.claim_run(run_id, owner, os.getpid(), LEASE_STALE_S) is None
        store.update_run(run_id, status="done", finished_at=now())
    said = _cancel_of(db, run_id)
    assert f"run {run_id}: already finished (done): nothing to cancel" in said, said
    with Store(db) as store:
        assert store.run(run_id)["cancel_requested"] == 0
        store.release_run(run_id, owner)
        # a worker started for the run (the app's Resume) that has not yet claimed it
        store.update_run(run_id, status="incomplete", pid=os.getpid())
    said = _cancel_of(db, run_id)
    assert f"run {run_id}: cancelling (the worker stops within 2 s)" in said, said
    with Store(db) as store:
        assert store.run(run_id)["cancel_requested"] == 1
