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

from cogbias.store import Store

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
def test_a_missing_run_is_named_as_missing(runs, argv, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    done = cogbias(*[w.format(out=out) for w in argv], "--db", runs["db"])
    said = clean(done)
    assert done.returncode == 2 and "no run" in said and "run-nope" in said, said
    assert not out.exists()  # `export` once wrote an empty file and said "wrote 0 rows"


def test_cancel_says_a_finished_run_has_nothing_to_cancel(runs) -> None:
    done = cogbias("cancel", runs["paired"], "--db", runs["db"])
    assert done.returncode == 0
    assert f"run {runs['paired']}: not running (done): nothing to cancel" in clean(done)
