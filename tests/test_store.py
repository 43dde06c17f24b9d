import sqlite3
from dataclasses import replace

import pytest

from cogbias import store as store_module
from cogbias.core.records import Decision
from cogbias.store import SCHEMA_VERSION, SchemaError, Store


def decision(i: int, run: str = "r1", status: str = "ok") -> Decision:
    return Decision(
        id=f"d{i}",
        run_id=run,
        instance_id=f"i{i}",
        test_case="anchoring",
        model="random",
        status=status,
        score=0.5 if status == "ok" else None,
        error=None if status == "ok" else "no option",
    )


def test_new_store_has_schema_wal_and_version(tmp_path):
    with Store(tmp_path / "x.db") as store:
        assert store.schema_version == SCHEMA_VERSION
        assert {"test_cases", "scenarios", "instances", "runs", "decisions", "llm_calls"} <= set(
            store.db.table_names()
        )
        mode = store.db.execute("pragma journal_mode").fetchone()[0]
        assert mode == "wal"


def test_migrations_run_once_and_newer_files_are_refused(tmp_path):
    path = tmp_path / "x.db"
    Store(path).close()
    Store(path).close()  # reopening does not re-create anything
    conn = sqlite3.connect(path)
    conn.execute("update meta set value = '99' where key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="newer cogbias"):
        Store(path)


def test_a_write_that_fails_midway_leaves_no_partial_rows(tmp_path):
    with Store(tmp_path / "x.db") as store:
        store.save_decisions([decision(0)])
        before = store.counts()
        with pytest.raises(RuntimeError), store.atomic():
            store.save_decisions([decision(1), decision(2)])
            store.put_llm_calls(
                [{"key": "k", "model": "m", "api_base": None, "request": "{}", "response": "x",
                  "prompt_tokens": 1, "completion_tokens": 1, "cost": 0.0, "latency_s": 0.1}]
            )  # fmt: skip
            raise RuntimeError("boom")
        assert store.counts() == before
        assert [r["id"] for r in store.query("select id from decisions")] == ["d0"]


def test_a_failing_statement_inside_a_batch_rolls_back_the_batch(tmp_path):
    with Store(tmp_path / "x.db") as store:
        bad = replace(decision(2), control_order=[object()])  # cannot be written
        with pytest.raises(TypeError):
            with store.atomic():
                store.save_decisions([decision(1)])
                store.save_decisions([bad])
        assert store.counts()["decisions"] == 0


def test_the_one_door_of_each_table_takes_its_records_only(tmp_path):
    """A dict (or a tuple) would pass the record's codec by: refused, naming where."""
    with Store(tmp_path / "x.db") as store:
        as_dict = decision(2).to_row()
        with pytest.raises(TypeError, match="Decision records only: item 1 is a dict"):
            store.save_decisions([decision(1), as_dict])
        with pytest.raises(TypeError, match="Turn records only: item 0 is a tuple"):
            store.save_study_calls([("t1", "r1")])
        assert store.counts()["decisions"] == 0


def test_decisions_are_upserted_by_key_never_duplicated(tmp_path):
    with Store(tmp_path / "x.db") as store:
        store.save_decisions([decision(1, status="failed")])
        store.save_decisions([decision(1), decision(2)])
        rows = store.query("select id, status from decisions order by id")
        assert rows == [{"id": "d1", "status": "ok"}, {"id": "d2", "status": "ok"}]


def test_results_aggregate_mean_n_and_failures(tmp_path):
    with Store(tmp_path / "x.db") as store:
        store.save_decisions([decision(1), decision(2), decision(3, status="failed")])
        [row] = store.results("r1")
        assert row == {
            "bias": "anchoring",
            "model": "random",
            "mean": 0.5,
            "n": 2,
            "failures": 1,
            "abstained": 0,
        }


def test_secrets_are_redacted_before_writing(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SENTINEL-0123456789")
    with Store(tmp_path / "x.db") as store:
        row = replace(
            decision(1, status="failed"), error="401: bad key sk-test-SENTINEL-0123456789"
        )
        store.save_decisions([row])
        stored = store.query("select error from decisions")[0]["error"]
        assert "SENTINEL" not in stored and "***" in stored
    for path in tmp_path.iterdir():
        assert b"SENTINEL" not in path.read_bytes()


def test_dumps_is_canonical():
    assert store_module.dumps({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_a_version_1_file_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.db"
    db = store_module.sqlite_utils.Database(path)
    db["meta"].create({"key": str, "value": str}, pk="key")
    store_module._schema_v1(db)
    db["meta"].insert({"key": "schema_version", "value": "1"})
    db["runs"].insert({"id": "r1", "status": "done", "planned": 3})
    db.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        [run] = store.runs()
        assert run["id"] == "r1" and run["planned"] == 3 and "generated" in run


def test_a_version_6_file_with_thesis_tables_keeps_them(tmp_path):
    """Before migration 7 the Mohr importer created its tables itself: a file that has them
    migrates forward with its rows, and one without them gets them."""
    with_tables, without = tmp_path / "with.db", tmp_path / "without.db"
    for path in (with_tables, without):
        db = store_module.sqlite_utils.Database(path)
        db["meta"].create({"key": str, "value": str}, pk="key")
        for version in range(1, 7):
            store_module.MIGRATIONS[version](db)
        db["meta"].insert({"key": "schema_version", "value": "6"})
        if path == with_tables:
            store_module.MIGRATIONS[7](db)
            db.execute(
                "insert into model_features (dataset, model, features) values ('m', 'x', '{}')"
            )
            db.conn.commit()
        db.close()
    with Store(with_tables) as store:
        assert store.schema_version == SCHEMA_VERSION >= 7
        assert [r["model"] for r in store.model_features("m")] == ["x"]
    with Store(without) as store:
        assert store.effect_sizes() == [] and not store.has_effect_sizes()
        assert store.study_prompt_datasets() == []
