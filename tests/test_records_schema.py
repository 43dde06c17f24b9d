"""The SQLite schema (built by the store's numbered migrations) is held to the record
dataclasses: every column of `decisions`, `study_calls` and `instances` is a field of
`Decision`, `Turn` and `Instance` (in the same order) and every field is a column. A new column
needs a migration and a field, or this test fails."""

from dataclasses import fields

import pytest

from cogbias.core.export_columns import TURN_COLUMNS, pair_record
from cogbias.core.records import (
    DECISION_COLUMNS,
    INSTANCE_COLUMNS,
    TURN_EXPORT_NAMES,
    TURN_FIELDS,
    Decision,
    Pair,
    Turn,
)
from cogbias.store import Store

# Fields that are not columns, and columns that are not fields: none today. An entry here
# needs a reason next to it.
NOT_STORED: dict[str, set[str]] = {"decisions": set(), "study_calls": set(), "instances": set()}
NOT_A_FIELD: dict[str, set[str]] = {"decisions": set(), "study_calls": set(), "instances": set()}


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    with Store(tmp_path_factory.mktemp("schema") / "s.db") as store:
        return {
            table: [r["name"] for r in store.query(f"pragma table_info({table})")]
            for table in ("decisions", "study_calls", "instances")
        }


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("decisions", DECISION_COLUMNS),
        ("study_calls", TURN_FIELDS),
        ("instances", INSTANCE_COLUMNS),
    ],
)
def test_every_column_is_a_field_and_every_field_a_column(schema, table, columns):
    stored = [c for c in schema[table] if c not in NOT_A_FIELD[table]]
    declared = [c for c in columns if c not in NOT_STORED[table]]
    assert sorted(stored) == sorted(declared), (
        f"{table}: columns without a field {sorted(set(stored) - set(declared))}, "
        f"fields without a column {sorted(set(declared) - set(stored))}"
    )


def test_decision_and_turn_columns_are_their_fields():
    assert DECISION_COLUMNS == tuple(f.name for f in fields(Decision))
    assert TURN_FIELDS == tuple(f.name for f in fields(Turn))


def test_the_decision_codec_round_trips_a_stored_row():
    row = {
        **dict.fromkeys(DECISION_COLUMNS),
        "id": "d", "run_id": "r", "instance_id": "i", "test_case": "anchoring", "model": "m",
        "temperature": 0.7, "repeat": 1, "reversed": 1, "control_order": "[1,0]",
        "treatment_order": "[0,1]", "control_choice": 0, "treatment_choice": 1, "score": 0.5,
        "status": "ok", "truncated": 0, "cached": 1, "tokens": 12, "cost": 0.001,
    }  # fmt: skip
    decision = Decision.from_row(row)
    assert decision.control_order == [1, 0] and decision.reversed is True
    assert decision.cached is True and decision.truncated is False
    assert decision.to_row() == row


def test_the_turn_codec_and_its_export_columns():
    row = {name: None for name in TURN_FIELDS} | {
        "id": "t", "run_id": "r", "conversation": "c", "turn": 0, "role": "decide", "test": "x",
        "slot": 2, "ord": 5,
    }  # fmt: skip
    turn = Turn.from_row(row)
    assert turn.to_row() == row
    exported = turn.export()
    assert exported["repeat"] == 2 and exported["order"] == 5
    # the exported columns are the fields, renamed, without the keys and the time stamp, and
    # the coded answer (added by the exporter) right after the answer as read
    assert set(TURN_COLUMNS) == {TURN_EXPORT_NAMES.get(f, f) for f in TURN_FIELDS} - {
        "id", "cache_key", "created_at",
    } | {"coded"}  # fmt: skip
    names = list(TURN_COLUMNS)
    assert names.index("coded") == names.index("value") + 1 and TURN_COLUMNS["coded"] == "float"


def test_a_pair_read_from_a_stored_row_exports_its_orders_as_lists():
    row = {name: None for name in DECISION_COLUMNS} | {
        "id": "d", "run_id": "r", "instance_id": "i", "test_case": "b", "model": "m",
        "repeat": 0, "control_order": "[0,1]", "status": "failed", "metric": None,
    }  # fmt: skip
    assert pair_record(Pair.from_row(row))["control_order"] == [0, 1]
