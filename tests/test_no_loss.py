"""Issue 22, "nothing lost": an export never writes over the database or an existing file
unasked, a replace never strands runs, and a second batch import never replaces an answer.

Every refused operation leaves the database's bytes exactly as they were."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from dataset_helpers import HUB_CSV, edited_csv

from cogbias.cli.main import main
from cogbias.store import Store


def file_hash(db: Path) -> str:
    """The database's bytes and its WAL's: unchanged means nothing was written."""
    digest = hashlib.sha256(db.read_bytes())
    wal = db.with_name(db.name + "-wal")
    if wal.exists():
        digest.update(wal.read_bytes())
    return digest.hexdigest()


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str]:
    """`cogbias ARGS` in this process: the exit code and what it printed (both streams)."""
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture()
def run_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A database with one finished offline run (the random baseline on example fills)."""
    db = tmp_path / "runs.db"
    code, text = cli(
        capsys, "run", "pairs", "--models", "random", "--biases", "anchoring",
        "--scenarios", 1, "--instances", 2, "--db", db,
    )  # fmt: skip
    assert code == 0, text
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
    return db, run_id


# --------------------------------------------------------------------------- point 1


def test_export_never_writes_over_the_database_or_an_existing_file_unasked(
    run_db: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = run_db
    before, size = file_hash(db), db.stat().st_size
    # the probe: `export --run R -o DB --db DB` replaced the database with CSV, and
    # `batch export R -o DB --db DB` truncated it; --force does not make it allowed
    for force in ((), ("--force",)):
        for fmt in ("csv", "jsonl", "parquet"):
            code, text = cli(
                capsys, "export", "--run", run_id, "-o", db, "--format", fmt, "--db", db, *force
            )
            assert code == 2 and "is the database this command reads" in text, text
        code, text = cli(capsys, "batch", "export", run_id, "-o", db, "--db", db, *force)
        assert code == 2 and "is the database this command reads" in text, text
        # another spelling of the same file is the same file
        alias = tmp_path / "alias.db"
        alias.symlink_to(db)
        code, text = cli(
            capsys, "export", "--run", run_id, "-o", alias, "--format", "csv", "--db", db, *force
        )
        assert code == 2 and "is the database this command reads" in text, text
        alias.unlink()
        assert file_hash(db) == before and db.stat().st_size == size
    assert not list(tmp_path.glob(".*.part"))  # no temporary file stays behind

    # an existing output is kept unless --force says to replace it
    out = tmp_path / "pairs.csv"
    out.write_text("my own notes\n")
    code, text = cli(capsys, "export", "--run", run_id, "-o", out, "--db", db)
    assert code == 2 and "already exists; pass --force" in text, text
    assert out.read_text() == "my own notes\n"
    requests = tmp_path / "requests.jsonl"
    requests.write_text("keep me\n")
    code, text = cli(capsys, "batch", "export", run_id, "-o", requests, "--db", db)
    assert code == 2 and "already exists; pass --force" in text, text
    assert requests.read_text() == "keep me\n"
    assert file_hash(db) == before

    code, text = cli(capsys, "export", "--run", run_id, "-o", out, "--db", db, "--force")
    assert code == 0, text
    assert out.read_text().startswith("dataset,run_id,") and "wrote 2 rows" in text
    code, text = cli(capsys, "batch", "export", run_id, "-o", requests, "--db", db, "--force")
    assert code == 0 and requests.read_text() == "", text  # the run is done: nothing to ask
    assert not list(tmp_path.glob(".*.part"))


# --------------------------------------------------------------------------- point 3


def engine_output(requests: Path, results: Path, answer: str) -> int:
    """What a batch engine writes for a requests file: `answer` to every request."""
    lines = []
    for number, line in enumerate(requests.read_text(encoding="utf-8").splitlines()):
        body = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
        item = {"id": f"req-{number}", "custom_id": json.loads(line)["custom_id"],
                "response": {"status_code": 200, "body": body}, "error": None}  # fmt: skip
        lines.append(json.dumps(item) + "\n")
    results.write_text("".join(lines), encoding="utf-8")
    return len(lines)


def test_a_second_batch_import_keeps_the_stored_answer_and_reports_a_different_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "batch.db"
    code, text = cli(
        capsys, "run", "pairs", "--models", "openai/engine", "--api-base",
        "http://127.0.0.1:9/v1", "--biases", "anchoring", "--scenarios", 1, "--instances", 1,
        "--db", db, "--plan-only",
    )  # fmt: skip
    assert code == 0, text
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
    requests, first, second = (tmp_path / n for n in ("r.jsonl", "a.jsonl", "b.jsonl"))
    code, text = cli(capsys, "batch", "export", run_id, "-o", requests, "--db", db)
    assert code == 0, text
    count = engine_output(requests, first, "Option 1")
    assert count > 0
    code, text = cli(capsys, "batch", "import", first, "--db", db)
    assert code == 0 and f"imported {count} answer(s)" in text, text

    def stored() -> dict[str, str]:
        with Store(db) as store:
            rows = store.query("select key, response from llm_calls")
        return {r["key"]: r["response"] for r in rows}

    answers = stored()
    assert set(answers.values()) == {"Option 1"}
    before = file_hash(db)
    # the same file again: every answer is already stored, nothing is written
    code, text = cli(capsys, "batch", "import", first, "--db", db)
    assert code == 0 and f"imported 0 answer(s) into the cache; {count} already stored" in text
    assert file_hash(db) == before
    # the probe: other answers for the same requests silently replaced the cached ones
    engine_output(requests, second, "Option 2")
    code, text = cli(capsys, "batch", "import", second, "--db", db)
    assert code == 1, text
    assert "b.jsonl, line 1: custom_id" in text and "already has a different answer" in text
    assert f"error: {count} answer(s) conflict with answers already stored" in text
    assert stored() == answers
    assert file_hash(db) == before


# --------------------------------------------------------------------------- point 2


def test_a_replace_that_would_strand_runs_is_refused_and_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ds.db"
    code, text = cli(capsys, "import", "malberg2024-hub", HUB_CSV, "--name", "d", "--db", db)
    assert code == 0, text
    code, text = cli(capsys, "run", "dataset", "d", "--models", "random", "--db", db)
    assert code == 0, text
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
        planned = store.run(run_id)["planned"]
    exported = tmp_path / "before.csv"
    code, text = cli(capsys, "export", "--run", run_id, "-o", exported, "--db", db)
    assert code == 0 and f"wrote {planned} rows" in text, text

    # the probe: the replaced dataset left the run's decisions on instances that were gone
    # (export wrote 0 rows, resume counted "62 of 60")
    def drop_two(header: list[str], rows: list[dict[str, str]]) -> None:
        del rows[-2:]

    smaller = edited_csv(HUB_CSV, tmp_path / "smaller.csv", drop_two)
    before = file_hash(db)
    code, text = cli(
        capsys, "import", "malberg2024-hub", smaller, "--name", "d", "--replace", "--db", db
    )
    assert code == 2, text
    assert f"would strand the decisions of run(s) {run_id} (2 decision(s))" in text, text
    assert "--force" in text and "nothing was changed" in text
    assert file_hash(db) == before
    again = tmp_path / "again.csv"
    code, text = cli(capsys, "export", "--run", run_id, "-o", again, "--db", db)
    assert code == 0 and again.read_bytes() == exported.read_bytes(), text
    code, text = cli(capsys, "import", "malberg2024-hub", smaller, "--name", "d", "--force",
                     "--db", db)  # fmt: skip
    assert code == 2 and "--force only goes with --replace" in text, text
    assert file_hash(db) == before

    # a replace that keeps every instance the run used goes through
    def add_one(header: list[str], rows: list[dict[str, str]]) -> None:
        rows.append({**rows[0], "scenario": rows[0]["scenario"] + " Another one."})

    larger = edited_csv(HUB_CSV, tmp_path / "larger.csv", add_one)
    code, text = cli(
        capsys, "import", "malberg2024-hub", larger, "--name", "d", "--replace", "--db", db
    )
    assert code == 0 and "imported 'd'" in text, text
    with Store(db) as store:
        assert store.run(run_id) is not None

    # --force deletes the stranded run explicitly, with the replace, in one transaction
    code, text = cli(capsys, "import", "malberg2024-hub", smaller, "--name", "d", "--replace",
                     "--force", "--db", db)  # fmt: skip
    assert code == 0, text
    assert f"deleted run {run_id}: {planned} decision(s)" in text and "imported 'd'" in text
    with Store(db) as store:
        assert store.run(run_id) is None
        assert store.stranded_decisions([run_id]) == {}
        assert store.counts()["instances"] == planned - 2
