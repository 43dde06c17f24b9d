"""A run kind added as docs/architecture.md says ("Add a run kind") works through every
command the built-in kinds use, with no edit to cogbias.

The toy kind is `tests/toy_kind.py`: one module whose last line registers it
(`kinds.register(ToyKind())`), named to every process by `COGBIAS_PLUGINS=toy_kind`. Nothing
else was touched for it: no file of `cogbias/` or `app_pages/` names it (the first test
checks), its table is its own (`toy_units`, made by its first write), and its read side
(`read_side.ReadSide`: its table, its export, its cells) is what `cogbias runs`, `export`,
`report` and `delete` read. Planned in this process (as `--plan-only` does), it is then
worked by the commands in their own processes: resumed, cancelled midway, resumed to the end,
listed, exported, reported and deleted, leaving none of its rows.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from run_helpers import spec as paired_spec

from cogbias.cli.main import main as cogbias
from cogbias.runs import executor, kinds, paired_plan
from cogbias.runs.summaries import run_summaries
from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "toy_kind"


@pytest.fixture
def toy() -> Iterator[ModuleType]:
    """The toy kind's module, imported (which registers the kind) and forgotten after."""
    sys.modules.pop(PLUGIN, None)
    module = importlib.import_module(PLUGIN)
    try:
        yield module
    finally:
        kinds.unregister(module.ToyKind.name)
        sys.modules.pop(PLUGIN, None)


def command(*args: object, **env: str) -> subprocess.Popen[str]:
    """`cogbias ARGS` in its own process, told of the plugin as a user would tell it."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
        "COGBIAS_PLUGINS": PLUGIN,
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    assert "Traceback" not in out + err, err
    return process.returncode, out, err


def wait_for_units(db: str, run_id: str, units: int, toy: ModuleType) -> None:
    """Until `units` of the run are stored (a bound only against a hang: never a timing)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with Store(db) as store:
            if len(toy.stored_units(store, run_id)) >= units:
                return
        time.sleep(0.1)
    raise AssertionError(f"the worker stored fewer than {units} units")


def test_no_product_file_knows_the_toy_kind() -> None:
    product = [
        *(ROOT / "cogbias").rglob("*.py"),
        *(ROOT / "app_pages").glob("*.py"),
        ROOT / "app.py",
    ]
    named = [str(p) for p in product if "toy" in p.read_text().lower()]
    assert not named, named
    plugin = (ROOT / "tests" / f"{PLUGIN}.py").read_text()
    assert plugin.count("kinds.register(") == 1  # its one registry line


def test_a_plugin_kind_is_run_cancelled_resumed_listed_exported_reported_and_deleted(
    toy: ModuleType, tmp_path: Path
) -> None:
    db = str(tmp_path / "toy.db")
    with Store(db) as store:  # planned and stored as `cogbias run ... --plan-only` does
        run_id = executor.create(kinds.plan(toy.ToySpec(units=40), store), store, "toy")
        other = executor.create(kinds.plan(toy.ToySpec(units=3, seed=1), store), store)
        assert kinds.kind_of(store.run(run_id)["spec"]).name == "toy"

    # worked by a worker process, as the app starts a run: held after 5 units, then cancelled
    worker = command("resume", run_id, "--db", db, "--concurrency", "1", TOY_HOLD_AFTER="5")
    wait_for_units(db, run_id, 5, toy)
    code, _, said = finished(command("cancel", run_id, "--db", db))
    assert code == 0 and "cancelling" in said, said
    code, _, said = finished(worker)
    assert code == 0, said
    with Store(db) as store:
        run = store.run(run_id)
        assert run["status"] == "cancelled" and toy.stored_units(store, run_id) == list(range(5))
        assert run["done"] == 5

    code, _, said = finished(command("resume", run_id, "--db", db))
    assert code == 0 and "40 of 40 units, 0 failed" in said, said
    assert finished(command("resume", other, "--db", db))[0] == 0
    with Store(db) as store:
        assert toy.stored_units(store, run_id) == list(range(40))
        assert store.run(run_id)["status"] == "done"

    code, listed, _ = finished(command("runs", "--db", db))
    [line] = [row for row in listed.splitlines() if row.startswith(run_id)]
    assert code == 0 and " done " in line and "toy x40" in line, listed

    out = tmp_path / "units.csv"
    code, _, said = finished(command("export", "--run", run_id, "--db", db, "-o", out))
    assert code == 0 and "wrote 40 rows" in said, said
    with out.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["unit"]) for r in rows] == list(range(40))
    assert {r["run_id"] for r in rows} == {run_id}

    report = tmp_path / "toy.html"
    code, _, said = finished(command("report", "--run", run_id, "--db", db, "-o", report))
    html = report.read_text(encoding="utf-8")
    assert code == 0 and "a toy run on toy x40" in html, said
    assert "data-table='cells'" in html and "<td>even</td>" in html
    assert html.count("<td class='num'>20</td>") == 2  # 20 even units, 20 odd

    code, out_text, said = finished(command("delete", "run", run_id, "--db", db, "--yes"))
    assert code == 0 and f"run {run_id}: 40 unit(s)" in out_text, out_text + said
    with Store(db) as store:
        assert store.run(run_id) is None and toy.stored_units(store, run_id) == []
        assert toy.stored_units(store, other) == [0, 1, 2]  # another run's rows stay


def test_a_kind_without_a_read_side_is_refused_by_name() -> None:
    class Bare:
        name = "bare"

    with pytest.raises(TypeError, match="the run kind 'bare' has no page, tables"):
        kinds.register(Bare())  # type: ignore[arg-type]
    assert "bare" not in {k.name for k in kinds.registry()}


def test_a_plugin_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    code, _, said = finished(
        command("runs", "--db", tmp_path / "x.db", COGBIAS_PLUGINS="no_such_plugin_module")
    )
    assert code == 2 and "COGBIAS_PLUGINS names the module 'no_such_plugin_module'" in said, said


def test_a_registered_kind_runs_in_process_and_is_refused_by_batch_by_name(
    toy: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "toy.db")
    with Store(db) as store:
        outcome = executor.execute(kinds.plan(toy.ToySpec(units=3, seed=1), store), store)
    assert outcome.status == "done" and outcome.done == 3
    out = str(tmp_path / "requests.jsonl")
    assert cogbias(["batch", "export", outcome.id, "--db", db, "-o", out]) == 2
    assert "a toy run asks its units directly" in capsys.readouterr().err


def test_stored_specs_name_their_kind_and_old_ones_load_as_before(tmp_path: Path) -> None:
    spec = paired_spec(None, scenarios=1)
    with Store(tmp_path / "k.db") as store:
        plan = paired_plan.plan(spec, store)
        run_id = executor.create(plan, store)
        stored = store.run(run_id)["spec"]
        kind, fields = kinds.read_stored(stored)
        assert json.loads(stored)["kind"] == "paired" and kind.name == "paired"
        # the kind is not hashed: the id is the spec's, as before kinds were stored
        assert paired_plan.RunSpec.from_stored(fields).run_id == run_id == plan.spec.run_id
        assert kinds.replan(store, run_id).spec.run_id == run_id
        old = plan.spec.canonical()  # a spec stored before kinds were named
        assert kinds.read_stored(old) == (kind, old)


def test_a_kind_this_cogbias_does_not_know_is_listed_but_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "k.db")
    with Store(db) as store:
        store.create_run("run-fromafuture", {"kind": "hologram", "models": ["random"]}, 1)
        assert kinds.kind_of(store.run("run-fromafuture")["spec"]).name == "paired"  # listed
        assert [r.id for r in run_summaries(store)] == ["run-fromafuture"]
    assert cogbias(["resume", "run-fromafuture", "--db", db]) == 2
    said = capsys.readouterr().err
    assert "'hologram'" in said and "upgrade cogbias" in said
