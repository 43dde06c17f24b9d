"""One records layer: ids, the filled-half codec, both CSV exports, the default database, and
store failures inside a worker."""

from __future__ import annotations

import csv
import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer

from cogbias.core import export_columns, records
from cogbias.library import testcases as library
from cogbias.runs import executor, paired_plan, pipeline, summaries
from cogbias.store import Store
from cogbias.views.export import csv_bytes

ROOT = Path(__file__).resolve().parent.parent


def spec(base_url: str, **overrides) -> paired_plan.RunSpec:
    fields = dict(
        models=["random", "openai/fake"],
        biases=["anchoring", "framing_effect"],
        scenarios=2,
        generator="openai/fake",
        api_base=base_url,
    )
    return paired_plan.RunSpec(**{**fields, **overrides})


def test_an_instance_survives_its_row_codec_and_its_id_is_pinned():
    case = library.get_test_case("anchoring")
    instance = pipeline.generate_offline(case, "A scenario.", seed=3)
    again = records.Instance.from_row(instance.to_row())
    assert again == instance
    assert records.decision_id("run-x", "inst", "openai/m", 0, 0.0) == "4dc47a029425edc3e903"
    assert records.decode_filled(records.encode_filled(instance.control)) == instance.control


def test_answers_are_capped_with_the_cut_recorded():
    text, cut = records.cap_text("x" * (records.MAX_ANSWER_CHARS + 10))
    assert cut and text.endswith(records.TRUNCATION_MARK)
    assert len(text) == records.MAX_ANSWER_CHARS + len(records.TRUNCATION_MARK)
    assert records.cap_text("short") == ("short", False)


def test_the_app_download_and_cogbias_export_agree_column_for_column(tmp_path):
    db = tmp_path / "x.db"
    with FakeLLMServer() as server, Store(db) as store:
        run = executor.execute(paired_plan.plan(spec(server.base_url), store), store, concurrency=8)
        # the Explore page's download: the pairs it shows, through the export's columns
        shown = store.pairs(run_id=run.id, limit=10_000)
        app = csv_bytes(export_columns.pair_record(r) for r in shown).decode()
    out = tmp_path / "pairs.csv"
    cli = subprocess.run(
        [sys.executable, "-m", "cogbias", "export", "--db", str(db), "--run", run.id, "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    app_rows = list(csv.DictReader(io.StringIO(app)))
    cli_rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(app_rows[0]) == list(cli_rows[0]) == list(export_columns.PAIR_COLUMNS)
    by_id = {r["decision_id"]: r for r in cli_rows}
    assert len(app_rows) == len(cli_rows) == 8
    for row in app_rows:
        assert row == by_id[row["decision_id"]]
    # the presented order is there, and the answers are indices into the original order
    for row in cli_rows:
        if row["status"] == "ok":
            order = [int(x) for x in row["control_order"].strip("[]").split(",")]
            assert sorted(order) == list(range(int(row["n_options"])))
            assert 0 <= int(row["control_answer"]) < int(row["n_options"])


def test_commands_work_without_db_on_the_shared_default_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COGBIAS_DB"}
    env["COGBIAS_HOME"] = str(tmp_path / "home")

    def cogbias(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cogbias", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )

    with FakeLLMServer() as server:
        s = spec(server.base_url, models=["random"], biases=["anchoring"])
        made = cogbias("run", "--models", "random", "--biases", "anchoring", "--scenarios", "2",
                       "--generator", "openai/fake", "--api-base", server.base_url)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "home" / "cogbias.db").is_file()
    runs = cogbias("runs")
    assert runs.returncode == 0 and s.run_id in runs.stdout and "done" in runs.stdout
    results = cogbias("results", "--format", "csv")
    assert results.returncode == 0 and "anchoring,random" in results.stdout
    exported = cogbias("export", "--run", s.run_id, "-o", str(tmp_path / "p.csv"))
    assert exported.returncode == 0, exported.stderr
    assert len(list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8")))) == 2
    stats = cogbias("cache", "stats")
    assert stats.returncode == 0 and "openai/fake" in stats.stdout
    cleared = cogbias("cache", "clear", "--model", "openai/fake")
    assert cleared.returncode == 0 and "removed" in cleared.stderr
    assert "openai/fake" not in cogbias("cache", "stats").stdout


class FailingStore(Store):
    """A store whose disk gives out after a few commits (fault injection at the file layer)."""

    writes = 0

    def save_decisions(self, rows):  # type: ignore[no-untyped-def]
        if rows:
            FailingStore.writes += 1
            if FailingStore.writes > 1:
                raise sqlite3.DatabaseError("disk I/O error")
        super().save_decisions(rows)


def test_a_failing_write_inside_a_worker_ends_the_run_failed_with_the_error(tmp_path):
    with FakeLLMServer(latency=0.05) as server, FailingStore(tmp_path / "x.db") as store:
        run = executor.execute(paired_plan.plan(spec(server.base_url), store), store, concurrency=2)
    assert run.status == "failed"
    assert "disk I/O error" in run.error and "could not write results" in run.error
    with Store(tmp_path / "x.db") as store:
        [row] = summaries.run_summaries(store)
    assert row.status == "failed" and "disk I/O error" in row.error


@pytest.mark.parametrize("kind", ["transient", "unparseable"])
def test_retry_failed_asks_again_and_resume_alone_only_retries_transient(tmp_path, kind):
    answers = {"n": 0}

    def responder(request):
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            keys = fmt["json_schema"]["schema"]["required"]
            return "{" + ",".join(f'"{k}": "x"' for k in keys) + "}"
        if "Which option does the answer choose" not in str(request["messages"]):
            # negates one option: the reader leaves it to the extraction, which it can confirm
            return "I would not take Option 2; Option 1 fits."
        answers["n"] += 1
        if answers["n"] == 1 and kind == "unparseable":  # identical halves: asked once
            return "No option selected"
        return "Option 1"

    script = [503] * 3 if kind == "transient" else []
    with FakeLLMServer(responder, script=script) as server, Store(tmp_path / "x.db") as store:
        s = spec(server.base_url, models=["openai/fake"], biases=["anchoring"], scenarios=1)
        first = executor.execute(paired_plan.plan(s, store), store, concurrency=1, max_retries=0)
        assert first.failed > 0
        again = executor.execute(paired_plan.plan(s, store), store, concurrency=1)
        if kind == "transient":
            assert again.status == "done" and again.failed == 0
        else:  # a result: a plain resume keeps it, --retry-failed asks afresh
            assert again.failed == first.failed
            third = executor.execute(
                paired_plan.plan(s, store), store, concurrency=1, retry_failed=True
            )
            assert third.status == "done" and third.failed == 0


def test_the_lean_path_and_litellm_store_identical_runs(tmp_path, monkeypatch):
    """Model profiles pick the lean OpenAI-compatible client for own endpoints; a run made
    through litellm instead stores exactly the same rows (a scripted, deterministic server)."""
    stored = {}
    server = FakeLLMServer().start()
    for transport in ("litellm", "auto"):
        monkeypatch.setenv("COGBIAS_LLM_TRANSPORT", transport)
        server.reset_counts()
        with Store(tmp_path / f"{transport}.db") as store:
            s = spec(server.base_url, scenarios=3)
            assert (
                paired_plan.plan(s, store)
                and (transport == "auto")
                == paired_plan.resolve("openai/fake", server.base_url).direct
            )
            run = executor.execute(paired_plan.plan(s, store), store, concurrency=4)
            assert run.status == "done" and server.calls > 0
            stored[transport] = {
                "decisions": store.query(
                    "select id, instance_id, model, control_order, control_answer, "
                    "treatment_answer, control_extraction, treatment_extraction, control_choice, "
                    "treatment_choice, score, status, tokens from decisions order by id"
                ),
                "instances": store.query(
                    "select id, control, treatment, insertions from instances order by id"
                ),
                "cache": store.query("select key, response from llm_calls order by key"),
            }
    server.stop()
    assert stored["litellm"] == stored["auto"]
    assert len(stored["auto"]["decisions"]) == 12
