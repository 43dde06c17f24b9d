"""Every kind of run, started from the CLI or as the app starts it, killed with `kill -9`
midway and resumed, ends with exactly its planned units: none missing, none twice.

One executor works every kind (`cogbias.runs.executor`), so one test holds them all to it:
paired test cases, an imported dataset, the token-bias study, a study of conversations and a
class session's question asked of models.
The models are a scripted server on 127.0.0.1 whose latency makes the kill land mid-run.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer
from run_helpers import spec as paired_spec
from test_study_runs import admissions_responder

from cogbias.classroom.questions import classic_question
from cogbias.core.run_record import ResultsPage
from cogbias.datasets import tokenbias_study
from cogbias.runs import executor, kinds, paired_plan, study_plan
from cogbias.runs.class_plan import ClassSpec
from cogbias.store import Store
from cogbias.studies import tokenbias

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("paired", "dataset", "tokenbias", "study", "class")
SESSION = "KINDS2"  # a class session opened under a fixed code, so its spec can be written
COPY = "tbcopy"  # an imported dataset: the token-bias pairs stored under another name
STUDY_FLAGS = ["--tests", "anchoring", "--mitigations", "none,selfhelp", "--repeats", "1"]


def _cogbias(*args: object, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _store_copy(db: Path) -> None:
    with Store(db) as store:
        study = tokenbias.load_study()
        tokenbias_study.materialise(store, dataclasses.replace(study, id=COPY))


def _spec(kind: str, base_url: str) -> Any:
    """The spec the app would start for each kind."""
    if kind == "paired":
        return paired_spec(base_url, scenarios=4)
    if kind == "class":
        return ClassSpec(SESSION, ("openai/fake",), 60, 0.7, "sample", base_url)
    if kind == "study":
        return study_plan.StudySpec(
            "biasbuster", ["openai/fake"], tests=["anchoring"], mitigations=["none", "selfhelp"],
            repeats=1, api_base=base_url,
        )  # fmt: skip
    dataset = COPY if kind == "dataset" else "tokenbias"
    return paired_plan.RunSpec(models=["openai/fake"], dataset=dataset, api_base=base_url)


def _cli_args(kind: str, base_url: str, db: Path) -> list[str]:
    """`cogbias run` arguments for the same run."""
    common = ["--db", db, "--api-base", base_url, "--concurrency", "3"]
    if kind == "paired":
        s = paired_spec(base_url, scenarios=4)
        return ["run", *common, "--models", ",".join(s.models), "--biases", ",".join(s.biases),
                "--scenarios", 4, "--instances", 2, "--generator", s.generator]  # fmt: skip
    if kind == "study":
        return ["run", *common, "--study", "biasbuster", "--models", "openai/fake", *STUDY_FLAGS]
    if kind == "class":
        return ["class", "ask", SESSION, *common, "--models", "openai/fake", "--scoring",
                "sample", "--samples", 60]  # fmt: skip
    if kind == "dataset":
        return ["run", *common, "--dataset", COPY, "--models", "openai/fake"]
    return ["run", *common, "--study", "tokenbias", "--models", "openai/fake"]


def _stored(db: Path, kind: str) -> int:
    """Rows the run has stored so far (pairs, or a study's turns)."""
    if not db.exists():
        return 0
    table = {"study": "study_calls", "class": "class_model_answers"}.get(kind, "decisions")
    with Store(db) as store:
        return store.counts().get(table, 0)


def _the_run(db: Path, kind: str) -> dict:
    with Store(db) as store:
        [run] = [r for r in store.runs() if kinds.kind_of(r["spec"]).name == kind]
        return run


def _kill_midway(db: Path, kind: str, pid: Callable[[], int | None], at_least: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _stored(db, kind) < at_least:
        time.sleep(0.05)
    os.kill(pid(), signal.SIGKILL)


def _check_exactly_planned(db: Path, kind: str, run_id: str) -> None:
    with Store(db) as store:
        run = store.run(run_id)
        plan = kinds.replan(store, run_id)
        assert run["status"] == "done", run["error"]
        assert run["done"] == plan.planned
        if kind == "class":
            answers = store.run_model_answers(run_id)
            assert len({(a.condition, a.repeat) for a in answers}) == len(answers) == plan.planned
            return
        if kind != "study":
            rows = store.query(
                "select instance_id, model, repeat from decisions where run_id = ?", [run_id]
            )
            assert len(rows) == plan.planned
            assert len({tuple(r.values()) for r in rows}) == plan.planned
            return
        rows = store.query(
            "select id, conversation, turn from study_calls where run_id = ?", [run_id]
        )
    assert len({r["id"] for r in rows}) == len(rows)
    turns: dict[str, list[int]] = {}
    for r in rows:
        turns.setdefault(r["conversation"], []).append(r["turn"])
    for unit in plan.units:
        script = study_plan.compose(plan.study, plan.spec, unit)
        expected = len(script.turns) + (script.revise is not None)
        assert sorted(turns.pop(unit.conversation(run_id))) == list(range(expected))
    assert not turns  # no conversation beyond the plan


@pytest.mark.parametrize("start", ["cli", "app"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_of_every_kind_killed_midway_resumes_to_exactly_its_planned_units(
    tmp_path, kind, start
):
    db = tmp_path / "k.db"
    responder = admissions_responder if kind == "study" else None
    # the app's worker asks 16 at once, the CLI 3: slower answers keep the kill mid-run
    latency = 0.3 if start == "app" else 0.1
    with FakeLLMServer(responder, latency=latency) as server:
        if kind == "dataset":
            _store_copy(db)
        if kind == "class":
            with Store(db) as store:
                question = classic_question("classics", "asian_disease")
                store.add_class_session(SESSION, question.to_json())
        if start == "cli":
            proc = subprocess.Popen(
                [sys.executable, "-m", "cogbias", *map(str, _cli_args(kind, server.base_url, db))],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            _kill_midway(db, kind, lambda: proc.pid, at_least=8)
            proc.wait()
            run_id = _the_run(db, kind)["id"]
        else:
            run_id = executor.launch(_spec(kind, server.base_url), db)  # the pages' call
            _kill_midway(db, kind, lambda: _the_run(db, kind)["pid"], at_least=8)
            os.waitpid(_the_run(db, kind)["pid"], 0)  # reap it: a zombie looks alive
        partial = _stored(db, kind)
        if start == "cli":
            resumed = _cogbias("resume", run_id, "--db", db)
            assert resumed.returncode == 0, resumed.stderr
        else:
            executor.start_background(run_id, db)  # the Run page's Resume button
            with Store(db) as store:
                assert store.wait_for(run_id, timeout=180)["status"] == "done"
        total = _stored(db, kind)
    assert kinds.kind_of(_the_run(db, kind)["spec"]).name == kind
    assert 0 < partial < total, (partial, total)
    _check_exactly_planned(db, kind, run_id)


def test_study_plans_estimate_their_cost_like_paired_plans():
    study = study_plan.load_study("biasbuster")

    def plan_for(models: list[str], api_base: str | None = None) -> study_plan.StudyPlan:
        asked = study_plan.StudySpec(
            "biasbuster", models, tests=["anchoring"], repeats=1, api_base=api_base
        )
        return study_plan.plan(study_plan.resolve(asked, study), study)

    assert plan_for(["random"]).estimated_cost() == 0.0
    priced = plan_for(["openai/gpt-4o-mini"])
    assert priced.estimated_cost() > 0 and "estimated cost: $" in priced.describe()
    # a model whose price nobody knows: unknown, never $0
    unknown = plan_for(["openai/fake"], "http://127.0.0.1:9/v1")
    assert unknown.estimated_cost() is None and "estimated cost: unknown" in unknown.describe()


def test_the_registry_alone_tells_kinds_apart():
    base = "http://127.0.0.1:9/v1"
    for kind in KINDS:
        assert kinds.kind_of(_spec(kind, base)).name == kind
        assert kinds.kind_of(_spec(kind, base).canonical()).name == kind  # as stored
    assert kinds.kind_of(None).name == "paired"  # a run stored without a spec
    assert {"paired", "dataset", "tokenbias", "study", "class"} <= {
        k.name for k in kinds.registry()
    }
    assert all(k.unit_name for k in kinds.registry())  # every kind says what it counts
    assert kinds.get("paired").unit_name == "pairs" and kinds.get("study").unit_name == "units"
    assert kinds.get("class").page is ResultsPage.CLASS  # the page its results are on
    assert kinds.get("study").page is ResultsPage.STUDIES
    assert kinds.get("paired").page is ResultsPage.EXPLORE
