"""A full disk stops a run at its first failed write and says what to do; what was written
stays, and a resume with room again finishes the run without a duplicate (issue 29, point 8).

SQLite is made full with `PRAGMA max_page_count`, which holds for one connection only: the
run is worked in this process (`executor.execute`, as the CLI and the app's worker call it)
on a Store whose connection carries the pragma, set once the run has committed its first
rows. The resume is the real command in its own process, on a connection without a limit.
A full disk once went unsaid for minutes: every later row re-wrote (and re-redacted) the
whole growing buffer, each attempt failing again.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cogbias.cli.main import main
from cogbias.runs import executor, paired_plan, study_plan, work
from cogbias.store import Store
from cogbias.store.connection import StoreBase
from tests.dataset_helpers import snapshot

ROOT = Path(__file__).resolve().parent.parent

# Each kind's rows and the columns that make one row: a duplicate would repeat them.
TABLES = {
    "paired": ("decisions", "instance_id, model, repeat"),
    "study": ("study_calls", "conversation, turn"),
}


def _plan(kind: str, store: Store) -> Any:
    if kind == "paired":  # 2,000 pairs of the offline baseline
        spec = paired_plan.RunSpec(
            models=["random"], biases=["anchoring", "framing_effect"], instances=50, repeats=20
        )
        return paired_plan.plan(spec, store)
    spec = study_plan.StudySpec("mohr8", ["random"], temperatures=[0.2], repeats=12)
    study = study_plan.load_study(spec.study, store)
    return study_plan.plan(study_plan.resolve(spec, study), study)


def _rows(db: Path, kind: str) -> dict[str, tuple]:
    table, _ = TABLES[kind]
    with Store(db) as store:
        return {r["id"]: tuple(r.values()) for r in store.query(f"select * from {table}")}


def _fill_disk(store: Store, committed: dict[str, Any]) -> Callable[[work.LiveRun], None]:
    """A progress callback that makes the database full once a first batch is committed
    (the file may not grow past the pages it has), keeping what was committed by then."""

    def progress(run: work.LiveRun) -> None:
        if committed or not run.done:
            return
        pages = store.db.execute("pragma page_count").fetchone()[0]
        store.db.execute(f"pragma max_page_count = {pages}")
        committed["pages"] = pages

    return progress


def _count_flushes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every commit the run's writer tries, and whether it was written."""
    tried: list[bool] = []
    flush = work.Writer.flush

    def counted(self: work.Writer) -> bool:
        tried.append(flush(self))
        return tried[-1]

    monkeypatch.setattr(work.Writer, "flush", counted)
    return tried


@pytest.mark.parametrize("kind", ["paired", "study"])
def test_a_full_disk_stops_the_run_at_once_keeps_what_was_written_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    db = tmp_path / "full.db"
    tried = _count_flushes(monkeypatch)
    committed: dict[str, Any] = {}
    with Store(db) as store:
        plan = _plan(kind, store)
        outcome = executor.execute(plan, store, progress=_fill_disk(store, committed))
    run_id = outcome.id
    assert committed, "the run never committed a first batch"

    # stopped at the first failed commit (and one last attempt at the end), not once a row
    assert tried.count(False) <= 2, f"{tried.count(False)} failed commits"
    assert outcome.status == "failed", outcome
    said = outcome.error
    assert f"the disk holding {db} is full" in said and "free some space" in said, said
    assert f"`cogbias resume {run_id}`" in said, said
    with Store(db) as store:
        stored = store.run(run_id)
    assert stored is not None and stored["status"] == "failed" and stored["error"] == said
    kept = _rows(db, kind)
    assert kept and len(kept) < plan.planned  # what was written stays; the rest is to do

    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "resume", run_id, "--db", str(db)],
        cwd=ROOT, env={**os.environ}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    with Store(db) as store:
        assert store.run(run_id)["status"] == "done"
        table, key = TABLES[kind]
        total, distinct = store.db.execute(
            f"select count(*), count(distinct {key.replace(', ', ' || char(0) || ')}) "
            f"from {table} where run_id = ?",
            (run_id,),
        ).fetchone()
    assert total == distinct  # nothing twice
    after = _rows(db, kind)
    assert {k: after[k] for k in kept} == kept  # what was written before is untouched
    if kind == "paired":
        assert total == plan.planned


def test_when_not_even_the_ending_can_be_written_stderr_says_so_and_resume_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk also refuses the WAL the status would be written to, which a page limit
    cannot show: that last write is refused here as SQLite refuses it."""
    db = tmp_path / "full.db"
    with Store(db) as store:
        plan = _plan("paired", store)
        update = store.update_run

        def refused(run_id: str, **fields: Any) -> None:
            if fields.get("status") == "failed":
                raise sqlite3.OperationalError("database or disk is full")
            update(run_id, **fields)

        monkeypatch.setattr(store, "update_run", refused)
        outcome = executor.execute(plan, store, progress=_fill_disk(store, {}))
    said = capsys.readouterr().err
    run_id = outcome.id
    assert outcome.status == "failed" and "is full" in outcome.error, outcome
    assert f"could not record in {db} that run {run_id} ended failed" in said, said
    assert f"`cogbias resume {run_id}`" in said
    with Store(db) as store:  # still says running, with no live worker: resume takes it over
        assert store.run(run_id)["status"] == "running"
        assert store.run(run_id)["lease_owner"] is None
        resumed = executor.execute(paired_plan.plan(plan.spec, store), store)
    assert resumed.status == "done" and resumed.done == plan.planned


def _full_connections(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    """Every connection the command opens on `db` may not grow the file."""
    connect = StoreBase._connect

    def limited(self: StoreBase) -> sqlite3.Connection:
        conn = connect(self)
        if self.path == db:
            pages = conn.execute("pragma page_count").fetchone()[0]
            conn.execute(f"pragma max_page_count = {pages}")
        return conn

    monkeypatch.setattr(StoreBase, "_connect", limited)


def test_an_import_into_a_full_database_says_the_disk_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "full.db"
    Store(db).close()
    before = snapshot(db)
    _full_connections(monkeypatch, db)
    folder = ROOT / "tests" / "fixtures" / "malberg2024-format"
    code = main(["import", "malberg2024", str(folder), "--db", str(db)])
    said = capsys.readouterr().err
    assert code == 1, said
    assert f"{db} could not be written: its disk is full" in said, said
    assert "free some space and run the command again" in said
    assert "Traceback" not in said and "unexpected" not in said
    assert snapshot(db) == before


def test_an_export_to_a_full_disk_says_so_naming_the_file_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    """The disk is filled for real: the exporting process may not write files past 40 kB
    (its size limit, which the kernel enforces as it enforces a full disk)."""
    db = tmp_path / "e.db"
    made = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "pairs", "--models", "random",
         "--biases", "anchoring,framing_effect,loss_aversion", "--instances", "100", "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
    target = tmp_path / "pairs.csv"
    target.write_text("kept\n")

    def small_files() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    for fmt in ("csv", "jsonl", "parquet"):
        out = target.with_suffix(f".{fmt}")
        done = subprocess.run(
            [sys.executable, "-m", "cogbias", "export", "--run", run_id, "-o", str(out),
             "--force", "--db", str(db)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=small_files,
        )  # fmt: skip
        assert done.returncode == 1, (fmt, done.stderr)
        assert f"error: could not write {out}:" in done.stderr, done.stderr
        assert "nothing was written" in done.stderr and "free some space" in done.stderr
        assert "Traceback" not in done.stderr
    assert target.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.db", "pairs.csv"]
