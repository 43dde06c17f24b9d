"""A stored run is a `Run` record and its status a `RunStatus`: the spec is parsed and the
kind resolved once, and what "active" means is said in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cogbias.cli.main import main
from cogbias.core.run_record import ACTIVE, RESUMABLE, Run, RunStatus
from cogbias.runs import executor, kinds
from cogbias.runs.paired_plan import RunSpec
from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent


def test_statuses_are_the_stored_words_and_active_is_one_set() -> None:
    assert [s.value for s in RunStatus] == [
        "planned", "running", "done", "incomplete", "failed", "cancelled", "interrupted",
        "cancelling",
    ]  # fmt: skip
    assert RunStatus.RUNNING == "running" and f"{RunStatus.DONE}" == "done"
    assert ACTIVE == {"planned", "running", "cancelling"}
    assert not ACTIVE & set(RESUMABLE) and "done" not in RESUMABLE


def test_a_record_parses_its_spec_once_and_names_an_unreadable_one(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        store.create_run("r-ok", {"models": ["random"], "biases": ["anchoring"]}, 2, name="n")
        store.create_run("r-bad", {"models": ["random"]}, 1)
        store.db.execute("update runs set spec = 'not json' where id = 'r-bad'")
        ok, bad = (kinds.record(store.run(i) or {}) for i in ("r-ok", "r-bad"))
    assert ok.spec == {"models": ["random"], "biases": ["anchoring"]} and ok.spec_readable
    assert (ok.name, ok.status, ok.planned, ok.done) == ("n", "planned", 2, 0)
    assert ok.kind is not None and ok.kind.name == "paired" and ok.active
    assert bad.spec == {} and not bad.spec_readable
    assert Run.from_row({"id": "x", "spec": '["a list"]'}).spec_readable is False


def test_one_run_started_from_the_app_resolves_its_kind_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start asked for the kind twice (planning, storing) and the worker three times
    (finding the run, the command, the executor): five for one run. Now once in the app's
    process and once in the worker's."""
    db = tmp_path / "k.db"
    calls: list[object] = []
    kind_of = kinds.kind_of

    def counted(spec: object) -> object:
        calls.append(spec)
        return kind_of(spec)

    monkeypatch.setattr(kinds, "kind_of", counted)
    monkeypatch.setattr(executor, "start_background", lambda *a, **k: None)  # no process
    spec = RunSpec(models=["random"], biases=["anchoring"], instances=2, generator="examples")
    run_id = executor.launch(spec, db)
    assert len(calls) == 1
    assert main(["resume", run_id, "--db", str(db)]) == 0  # what the worker process runs
    assert len(calls) == 2
    with Store(db) as store:
        assert (store.run(run_id) or {})["status"] == RunStatus.DONE


def test_status_words_and_run_specs_are_read_in_one_place() -> None:
    """No module spells out which statuses are active (a tuple of status words with an active
    one: "planned", "running", "cancelling"), and the
    layers below `runs` never parse a run's spec (the run-spec format is the runs layer's)."""
    words = {s.value for s in RunStatus}
    found = []
    for path in [*(ROOT / "cogbias").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]:
        if path.name == "run_record.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Tuple, ast.Set)) and len(node.elts) > 1:
                texts = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if texts & ACTIVE and texts <= words and len(texts) == len(node.elts):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(texts)}")
    assert not found, "\n".join(found)
    below = [ROOT / "cogbias" / layer for layer in ("core", "library", "llm", "store")]
    reads = [
        f"{path.relative_to(ROOT)}"
        for folder in below
        for path in folder.rglob("*.py")
        if path.name != "run_record.py"
        and any(s in path.read_text() for s in ('["spec"]', '.get("spec")', "run_models"))
    ]
    assert not reads, reads
