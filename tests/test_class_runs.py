"""`cogbias class ask` end to end: the real command asks models a session's question as a
class run, prints its progress and its id, and `cogbias runs`, `cancel` and `resume` work on
it; the grammars it sends the local model admit exactly the answers the reader accepts; a
database of the previous schema keeps its models' answers; and on the real local model (marker
`local_model`) no answer is left unread.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cogbias.classroom import sessions
from cogbias.classroom.questions import classic_question
from cogbias.core.answers import parse_number
from cogbias.runs import grammars, kinds
from cogbias.runs.class_plan import ClassSpec
from cogbias.store import SCHEMA_VERSION, Store
from cogbias.store import migrations as store_migrations
from cogbias.store.connection import sqlite_utils
from tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent


def cogbias(db: Path, *words: object, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, words), "--db", str(db)],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _open(db: Path, test: str) -> str:
    done = cogbias(db, "class", "open", "--study", "classics", "--test", test)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _regex(rule: str) -> re.Pattern[str]:
    """The GBNF rule as a regular expression (the rules use literals, character classes,
    groups, alternatives and `?`, which mean the same in both)."""
    parts = []
    for token in re.findall(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|[()|?+]|\S', rule):
        parts.append(re.escape(json.loads(token)) if token.startswith('"') else token)
    return re.compile("".join(parts))


def test_a_bounded_number_grammar_admits_exactly_the_numbers_in_range():
    percent = _regex(grammars.number_within(0, 100))
    for n in range(0, 1000):
        assert bool(percent.fullmatch(str(n))) == (n <= 100), n
    assert not any(percent.fullmatch(t) for t in ("-1", "007", "50.5", "1e2", " 5", ""))
    price = _regex(grammars.number_within(0, 9.25))
    for cents in range(0, 1200):
        for text in {f"{cents / 100:.2f}", f"{cents / 100:.1f}", f"{cents / 100:g}"}:
            value = float(text)
            admitted = bool(price.fullmatch(text))
            assert admitted == (value <= 9.25 and parse_number(text, 0, 9.25).ok), text
    assert price.fullmatch("9") and price.fullmatch("0.5") and not price.fullmatch("9.")
    assert _regex(grammars.number_within(0, 0.5)).fullmatch("0.5")
    assert grammars.number_within(-10, 10) == grammars.number_within(0, None) == grammars.NUMBER


def test_a_database_of_the_previous_schema_keeps_its_models_answers(tmp_path):
    path = tmp_path / "v12.db"
    db = sqlite_utils.Database(path)
    db["meta"].create({"key": str, "value": str}, pk="key")
    for version in range(1, 13):
        store_migrations.MIGRATIONS[version](db)
    db["meta"].insert({"key": "schema_version", "value": "12"})
    question = classic_question("classics", "theatre_ticket")
    db["class_sessions"].insert({"code": "OLDONE", "question": question.to_json(),
                                 "created_at": "2000-01-01T00:00:00"})  # fmt: skip
    for repeat in range(3):
        db["class_model_answers"].insert(
            {"session": "OLDONE", "model": "random", "condition": "lost_ticket", "mode": "sample",
             "temperature": 0.7, "repeat": repeat, "answer": "a", "option": 0,
             "created_at": "2000-01-01T00:00:00"}
        )  # fmt: skip
    db.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION >= 13
        kept = store.model_answers("OLDONE")
        assert [(a.run_id, a.repeat, a.option) for a in kept] == [
            ("", 0, 0),
            ("", 1, 0),
            ("", 2, 0),
        ]
        [summary] = sessions.results(store, "OLDONE").models
        assert (summary.model, summary.n, summary.shares) == ("random", 3, [1.0, 0.0])
        run = kinds.plan(ClassSpec("OLDONE", ("random",), samples=3), store)
        from cogbias.runs import executor

        executor.execute(run, store)
        [new, _] = sessions.results(store, "OLDONE").models  # the run's answers replace them
        assert new.n == 3 and len(store.model_answers("OLDONE")) == 9


def test_class_ask_on_the_command_line_is_a_run_that_can_be_cancelled_and_resumed(tmp_path):
    db = tmp_path / "ask.db"
    code = _open(db, "asian_disease")
    asked = cogbias(db, "class", "ask", code, "--models", "random", "--samples", "5")
    assert asked.returncode == 0, asked.stderr
    run_id = asked.stdout.strip()
    assert re.fullmatch(r"run-[0-9a-f]{12}", run_id)
    assert "10/10 answers" in asked.stderr and "free (offline models" in asked.stderr
    listed = cogbias(db, "runs")
    assert run_id in listed.stdout and f"class {code}" in listed.stdout
    data = json.loads(cogbias(db, "class", "results", code, "--format", "json").stdout)
    assert [(m["model"], m["n"], m["n_unreadable"]) for m in data["models"]] == [
        ("random", 5, 0), ("random", 5, 0)
    ]  # fmt: skip
    with FakeLLMServer(lambda _: "B", latency=0.2) as fake:
        words = ["class", "ask", code, "--models", "openai/slow", "--scoring", "sample"]
        words += ["--samples", "30", "--api-base", fake.base_url, "--concurrency", "2"]
        with Store(db) as store:
            spec = ClassSpec(code, ("openai/slow",), 30, 0.7, "sample", fake.base_url)
            slow_id = kinds.plan(spec, store).spec.run_id
        worker = subprocess.Popen(
            [sys.executable, "-m", "cogbias", *words, "--db", str(db)], cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with Store(db) as store:
                if len(store.run_model_answers(slow_id)) >= 6:
                    break
            time.sleep(0.05)
        cancelled = cogbias(db, "cancel", slow_id)
        assert cancelled.returncode == 0, cancelled.stderr
        out, err = worker.communicate(timeout=120)
        with Store(db) as store:
            run = store.run(slow_id)
            partial = len(store.run_model_answers(slow_id))
        assert run["status"] == "cancelled" and 6 <= partial < 60, (err, partial)
        before = fake.calls
        resumed = cogbias(db, "resume", slow_id)
        assert resumed.returncode == 0, resumed.stderr
        assert "60 of 60 answers" in resumed.stderr
        assert fake.calls - before == 60 - partial  # only what was not stored
    with Store(db) as store:
        rows = store.run_model_answers(slow_id)
    assert len({(a.condition, a.repeat) for a in rows}) == len(rows) == 60


def test_class_ask_refuses_what_cannot_be_asked_in_a_sentence(tmp_path):
    db = tmp_path / "refuse.db"
    code = _open(db, "un_anchor")
    refused = cogbias(db, "class", "ask", code, "--models", "random", "--scoring", "probabilities")
    assert refused.returncode == 2 and "number question has no options" in refused.stderr
    assert "Traceback" not in refused.stderr
    missing = cogbias(db, "class", "ask", "NOSUCH", "--models", "random")
    assert missing.returncode == 2 and "no class session" in missing.stderr
    plan = cogbias(db, "class", "ask", code, "--models", "random", "--dry-run")
    assert plan.returncode == 0 and "20 sampled answers per condition" in plan.stderr
    assert "run-" not in plan.stdout and cogbias(db, "runs").stdout.count("class ") == 0


@pytest.mark.local_model
def test_local_model_leaves_no_answer_unread(tmp_path):
    """The issue's measure: the local model on the Asian disease, 20 answers per condition,
    asked the default way (its option probabilities) and sampled under its grammar."""
    pytest.importorskip("xllamacpp")
    db = tmp_path / "local.db"
    code = _open(db, "asian_disease")
    for extra in ([], ["--scoring", "sample"]):
        words = ["class", "ask", code, "--models", "random,local/smollm2", "--samples", "20"]
        asked = cogbias(db, *words, *extra)
        assert asked.returncode == 0, asked.stderr
        assert "could not be read" not in asked.stderr
    data = json.loads(cogbias(db, "class", "results", code, "--format", "json").stdout)
    local = [m for m in data["models"] if m["model"] == "local/smollm2"]
    assert {(m["mode"], m["n"]) for m in local} == {("probabilities", 1), ("sample", 20)}
    assert all(m["n_unreadable"] == 0 for m in local), local
    sampled = [m for m in local if m["mode"] == "sample"]
    assert all(sum(m["counts"]) == 20 for m in sampled)
