"""A run asks one design: resuming (or re-running) a run after its test case changed keeps the
version the run was planned with, or refuses with what to do; never half one, half the other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.library import testcases as library
from cogbias.runs import deletion, executor, paired_plan
from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent
CASE_ID = "framing_copy"


def _write_case(home: Path, low: int) -> None:
    """A user copy of the built-in framing test case whose drawn share starts at `low`."""
    text = library.to_toml(library.get_test_case("framing_effect"))
    text = text.replace('id = "framing_effect"', f'id = "{CASE_ID}"', 1)
    case = library.parse_test_case(text)
    share = case.values["share"]
    text = text.replace(f"min = {share.params['min']}", f"min = {low}", 1)
    folder = home / "biases"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{CASE_ID}.toml").write_text(text, encoding="utf-8")


def _spec() -> paired_plan.RunSpec:
    return paired_plan.RunSpec(models=["random"], biases=[CASE_ID], scenarios=3, instances=2)


def _hashes(db: Path, run_id: str) -> list[str]:
    with Store(db) as store:
        rows = store.query(
            "select i.test_case_hash as h from decisions d join instances i "
            "on i.id = d.instance_id where d.run_id = ?",
            (run_id,),
        )
    return [r["h"] for r in rows]


def test_a_run_resumed_after_its_test_case_changed_keeps_the_version_it_began_with(
    tmp_path: Path, isolated_home: Path
) -> None:
    db = tmp_path / "runs.db"
    _write_case(isolated_home, 51)
    old = library.get_test_case(CASE_ID).content_hash
    with Store(db) as store:
        first = paired_plan.plan(_spec(), store)
        executor.execute(first, store)
        run_id = first.spec.run_id
        # a kill lost half the pairs; then the library changes before the resume
        store.db.execute(
            "delete from decisions where rowid in "
            "(select rowid from decisions where run_id = ? limit 3)",
            (run_id,),
        )
        store.db.conn.commit()
    _write_case(isolated_home, 60)
    assert library.get_test_case(CASE_ID).content_hash != old

    env = {**os.environ, "COGBIAS_HOME": str(isolated_home)}
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "resume", run_id, "--db", str(db)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hashes = _hashes(db, run_id)
    assert len(hashes) == first.planned and set(hashes) == {old}

    # the same arguments name the same run: it keeps its version, and the plan says so
    with Store(db) as store:
        again = paired_plan.plan(_spec(), store)
    assert again.kept == (CASE_ID,) and again.cases[CASE_ID].content_hash == old
    assert f"delete the run (cogbias delete run {run_id})" in again.describe()

    # another run takes the current design
    with Store(db) as store:
        other = paired_plan.plan(paired_plan.RunSpec(**{**_spec().__dict__, "seed": 7}), store)
    assert other.kept == () and other.cases[CASE_ID].content_hash != old


def test_a_run_whose_stored_version_cannot_be_rebuilt_is_refused_with_what_to_do(
    tmp_path: Path, isolated_home: Path
) -> None:
    db = tmp_path / "runs.db"
    _write_case(isolated_home, 51)
    with Store(db) as store:
        first = paired_plan.plan(_spec(), store)
        executor.execute(first, store)
        store.db.execute("update test_cases set source = 'id = 1'")
        store.db.conn.commit()
        with pytest.raises(ValueError, match="earlier version of test case 'framing_copy'"):
            paired_plan.plan(_spec(), store)
    assert _hashes(db, first.spec.run_id)  # nothing it had is lost


def test_deleting_a_run_forgets_its_versions(tmp_path: Path, isolated_home: Path) -> None:
    db = tmp_path / "runs.db"
    _write_case(isolated_home, 51)
    with Store(db) as store:
        first = paired_plan.plan(_spec(), store)
        executor.execute(first, store)
        assert store.pinned_test_cases(first.spec.run_id)
        deletion.apply(store, deletion.plan_run(store, first.spec.run_id))
        assert store.pinned_test_cases(first.spec.run_id) == {}
