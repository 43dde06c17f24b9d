"""The numbered schema migrations. Every table of a cogbias database is created here.

A database records the last migration it has (`meta.schema_version`); opening it runs the
missing ones in one transaction, and a file from a newer cogbias is refused. Every migration
keeps what is already there (tables, columns and indexes are created only when missing), so
a file whose version was set back by hand opens as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils

SCHEMA_VERSION = 16

# The texts of a study turn (`study_calls`), every one redacted when stored (`store.turns`; a
# self-help rewrite becomes the next prompt and its value): as texts, and JSON texts inside
# their strings only (`core.redact.redact_json`).
TURN_TEXTS = ("prompt", "original", "response", "error")
TURN_JSON = ("value", "presented")


def _schema_v1(db: sqlite_utils.Database) -> None:
    db["test_cases"].create(
        {"hash": str, "id": str, "name": str, "source": str, "created_at": str},
        pk="hash",
        if_not_exists=True,
    )
    db["scenarios"].create(
        {"id": int, "industry_group": str, "position": str, "decision": str, "text": str},
        pk="id",
        if_not_exists=True,
    )
    db["datasets"].create(
        {"name": str, "kind": str, "source": str, "rows": int, "meta": str, "imported_at": str},
        pk="name",
        if_not_exists=True,
    )
    db["instances"].create(
        {
            "id": str,
            "test_case": str,  # bias id, e.g. "anchoring"
            "test_case_hash": str,
            "dataset": str,  # set for imported instances
            "scenario_id": int,
            "scenario": str,
            "instance_index": int,
            "generator": str,
            "temperature": float,
            "seed": int,
            "variant": str,
            "values_json": str,
            "insertions": str,
            "control": str,  # JSON {situation, prompt, options}
            "treatment": str,
            "n_options": int,
            "metric": str,  # JSON {k, y1, y2, flip_control, flip_treatment}
            "status": str,  # ok | failed
            "error": str,
            "created_at": str,
        },
        pk="id",
        if_not_exists=True,
    )
    db["runs"].create(
        {
            "id": str,
            "name": str,
            "spec": str,
            "status": str,  # planned | running | done | cancelled | failed
            "planned": int,
            "done": int,
            "failed": int,
            "tokens": int,
            "cost": float,
            "created_at": str,
            "started_at": str,
            "finished_at": str,
            "heartbeat_at": str,
            "pid": int,
            "cancel_requested": int,
            "error": str,
        },
        pk="id",
        if_not_exists=True,
    )
    db["decisions"].create(
        {
            "id": str,
            "run_id": str,
            "instance_id": str,
            "test_case": str,
            "model": str,
            "temperature": float,
            "repeat": int,
            "reversed": int,
            "control_order": str,
            "treatment_order": str,
            "control_answer": str,
            "treatment_answer": str,
            "control_extraction": str,
            "treatment_extraction": str,
            "control_choice": int,  # 0-based, original option order
            "treatment_choice": int,
            "score": float,
            "status": str,  # ok | failed
            "error": str,
            "tokens": int,
            "cost": float,
            "created_at": str,
        },
        pk="id",
        if_not_exists=True,
    )
    db["llm_calls"].create(
        {
            "key": str,
            "model": str,
            "api_base": str,
            "request": str,
            "response": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "latency_s": float,
            "created_at": str,
        },
        pk="key",
        if_not_exists=True,
    )
    db["decisions"].create_index(["run_id", "status"], if_not_exists=True)
    db["decisions"].create_index(["test_case", "model"], if_not_exists=True)
    db["instances"].create_index(["dataset"], if_not_exists=True)
    db["instances"].create_index(["test_case"], if_not_exists=True)


def _schema_v2(db: sqlite_utils.Database) -> None:
    """Covering indexes for per-cell aggregates (Explore): with status and score in the index,
    summarising 600,000 decisions reads only the index, never the wide decision rows. They
    replace the narrower indexes with the same leading columns, which they also serve."""
    db.execute("drop index if exists idx_decisions_test_case_model")
    db.execute("drop index if exists idx_decisions_run_id_status")
    db["decisions"].create_index(["test_case", "model", "status", "score"], if_not_exists=True)
    db["decisions"].create_index(
        ["run_id", "test_case", "model", "status", "score"], if_not_exists=True
    )


def _schema_v3(db: sqlite_utils.Database) -> None:
    """Runs also report instance generation, so progress moves before the first decision."""
    _add_columns(db, "runs", {"generated": int, "to_generate": int})


def _schema_v4(db: sqlite_utils.Database) -> None:
    """Runs you can trust: failure kinds, a worker lease, honest cost, accumulated duration."""
    _add_columns(
        db,
        "runs",
        {"spec_version": int, "lease_owner": str, "duration_s": float, "cost_saved": float,
         "waiting": int, "wait_reason": str},
    )  # fmt: skip
    _add_columns(
        db,
        "decisions",
        {"failure_kind": str, "truncated": int, "cached": int, "cost_saved": float},
    )
    _add_columns(db, "instances", {"failure_kind": str})
    db["llm_calls"].create_index(["model"], if_not_exists=True)
    db["llm_calls"].create_index(["created_at"], if_not_exists=True)


def _schema_v5(db: sqlite_utils.Database) -> None:
    """Requests handed to a batch engine, so that its answers can be checked and cached."""
    db["batch_requests"].create(
        {"key": str, "run_id": str, "model": str, "api_base": str, "request": str,
         "round": str, "batch_id": str, "attempts": int, "created_at": str},
        pk="key",
        if_not_exists=True,
    )  # fmt: skip
    db["batches"].create(
        {"id": str, "run_id": str, "model": str, "api_base": str, "round": str, "status": str,
         "total": int, "completed": int, "failed": int, "input_file": str, "output_file": str,
         "error_file": str, "expected_at": str, "created_at": str, "updated_at": str},
        pk="id",
        if_not_exists=True,
    )  # fmt: skip
    db["batches"].create_index(["run_id", "status"], if_not_exists=True)
    # where an answer came from: NULL (an interactive call) or "batch" (charged at batch prices)
    _add_columns(db, "llm_calls", {"source": str})


def _schema_v6(db: sqlite_utils.Database) -> None:
    """Study runs: one row per model call (a turn of a conversation), and the study sources
    runs were planned from (so a run resumes with the words it started with)."""
    db["study_sources"].create(
        {"hash": str, "study": str, "source": str, "created_at": str},
        pk="hash",
        if_not_exists=True,
    )
    db["study_calls"].create(
        {"id": str, "run_id": str, "conversation": str, "turn": int, "role": str, "test": str,
         "bias": str, "condition": str, "model": str, "temperature": float, "variant": str,
         "mitigation": str, "slot": int, "ord": int, "attempt": int, "presented": str,
         "status_quo_at": int, "prompt": str, "original": str, "response": str, "value": str,
         "status": str, "error": str, "failure_kind": str, "cache_key": str, "created_at": str},
        pk="id",
        if_not_exists=True,
    )  # fmt: skip
    db["study_calls"].create_index(["run_id", "test", "model"], if_not_exists=True)
    db["study_calls"].create_index(["conversation", "turn"], if_not_exists=True)


def _schema_v7(db: sqlite_utils.Database) -> None:
    """The Mohr (2025) thesis' published data: effect sizes, study prompts, model features
    (`cogbias.store.effects`). Imports before this migration created them themselves, with
    these very statements, so an existing table is kept as it is."""
    for statement in (
        """create table if not exists effect_sizes (
            dataset text not null, bias text not null, bias_name text not null,
            scenario text not null, model text not null, temperature real not null,
            n_control integer not null, n_treatment integer not null,
            d real not null, d_capped real not null, source_row integer,
            primary key (dataset, bias, scenario, model, temperature))""",
        """create table if not exists study_prompts (
            dataset text not null, prompt_id text not null, bias text not null,
            bias_name text not null, experiment_type text, scenario text not null,
            content text not null, variables text not null, response_type text not null,
            target_response text, part integer not null, parts_total integer not null,
            source_row integer, primary key (dataset, prompt_id))""",
        """create table if not exists model_features (
            dataset text not null, model text not null, temperature real,
            local integer, release_date text, number_parameters real,
            features text not null, source_row integer,
            primary key (dataset, model, temperature))""",
    ):
        db.execute(statement)


def _schema_v8(db: sqlite_utils.Database) -> None:
    """`--scoring probabilities`: each half's option probabilities beside the decision
    (`cogbias.core.probabilities`: JSON {"p", "outside", "unlisted"}; NULL otherwise)."""
    _add_columns(
        db, "decisions", {"control_distribution": "text", "treatment_distribution": "text"}
    )


def _schema_v9(db: sqlite_utils.Database) -> None:
    """`run_test_cases`: the version of each test case a library run was planned with, so a
    resume asks the same design even after the library changed (`store.decisions`). Runs made
    before this migration are pinned to the versions their decisions already used."""
    db.execute(
        """create table if not exists run_test_cases (
            run_id text not null, test_case text not null, hash text not null,
            primary key (run_id, test_case))"""
    )
    db.execute(
        """insert or ignore into run_test_cases (run_id, test_case, hash)
           select distinct d.run_id, i.test_case, i.test_case_hash
           from decisions d join instances i on i.id = d.instance_id
           where i.dataset is null and i.test_case_hash is not null
             and i.test_case_hash in (select hash from test_cases)"""
    )


def _schema_v10(db: sqlite_utils.Database) -> None:
    """Issue 29: a self-help rewrite that echoed a key kept it in the rewrite's `value` and
    in the next turn's `prompt` (and, escaped, in the cached request of that turn): before
    this version only a turn's `response` and `error` were redacted. Every turn of a
    conversation with a rewrite, and the cached calls of those turns, are redacted once,
    with the redactor of this moment: the keys in the environment of the process that opens
    the file first (the CLI's shell, the app's secrets) and key-shaped strings, known or not.
    The other turns hold only the study's own words and answers already redacted."""
    from cogbias.core.redact import redact_json, redact_row, redactor

    clean = redactor()
    columns = ("id", *TURN_TEXTS, *TURN_JSON)
    sets = ", ".join(f"{c} = ?" for c in columns[1:])
    conversations = [
        c
        for (c,) in db.execute(
            "select distinct conversation from study_calls where role = 'rewrite'"
        )
    ]
    for chunk in _chunks(conversations):
        keys = []
        for values in db.execute(
            f"select {', '.join(columns)}, cache_key from study_calls where conversation in "
            f"({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall():
            row = dict(zip(columns, values, strict=False))
            keys += [values[-1]] if values[-1] else []
            scrubbed = redact_row(row, clean, TURN_TEXTS, TURN_JSON)
            if scrubbed != row:
                db.execute(
                    f"update study_calls set {sets} where id = ?",
                    [*(scrubbed[c] for c in columns[1:]), row["id"]],
                )
        for key, *texts in db.execute(
            "select key, request, response from llm_calls where key in "
            f"({','.join('?' * len(keys))})",
            keys,
        ).fetchall():
            scrubbed = [redact_json(t, clean) for t in texts]
            if scrubbed != texts:
                db.execute(
                    "update llm_calls set request = ?, response = ? where key = ?",
                    [*scrubbed, key],
                )


def _schema_v11(db: sqlite_utils.Database) -> None:
    """`--scoring consistency:N`: every sample of each half beside the decision, whose
    answer is the modal one (now `cogbias.runs.sampling`, any sampled run: a JSON list;
    NULL otherwise).
    Columns already there are kept (a file whose version was set back by hand)."""
    _add_columns(db, "decisions", {"control_samples": "text", "treatment_samples": "text"})


def _schema_v12(db: sqlite_utils.Database) -> None:
    """Issue 33, a class answers the question: sessions (`class_sessions`, the question as
    JSON), each participant's condition (`class_assignments`, kept per token so a reload
    keeps it), their one answer (`class_answers`) and the models' answers to the same
    question (`class_model_answers`). A participant is a hash of a random cookie token: no
    name, no address. Tables already there are kept (a file whose version was set back by
    hand)."""
    db.execute(
        """create table if not exists class_sessions (
            code text primary key, question text not null, created_at text not null,
            closed_at text, revealed_at text)"""
    )
    db.execute(
        """create table if not exists class_assignments (
            session text not null, token_hash text not null, condition text not null,
            created_at text not null, primary key (session, token_hash))"""
    )
    db.execute(
        """create table if not exists class_answers (
            session text not null, token_hash text not null, condition text not null,
            answer text not null, created_at text not null,
            primary key (session, token_hash))"""
    )
    db.execute(
        """create table if not exists class_model_answers (
            session text not null, model text not null, condition text not null,
            mode text not null, temperature real not null, repeat integer not null,
            answer text not null, option integer, probabilities text, error text,
            created_at text not null,
            primary key (session, model, condition, mode, temperature, repeat))"""
    )


_CLASS_MODEL_ANSWERS = """create table {name} (
    session text not null, run_id text not null default '', model text not null,
    condition text not null, mode text not null, temperature real not null,
    repeat integer not null, answer text not null, option integer, probabilities text,
    error text, failure_kind text, grammar text, created_at text not null,
    primary key (session, run_id, model, condition, mode, temperature, repeat))"""


def _schema_v13(db: sqlite_utils.Database) -> None:
    """Issue 40, the class's model answers become a run kind (`cogbias.runs.class_answers`):
    each answer names the run that asked it (`run_id`; '' for answers asked before, which
    are kept), why it failed (`failure_kind`: a transient failure is asked again on resume)
    and the grammar it was asked under (`grammar`, NULL when none was sent: a report says
    "grammar" only then). SQLite cannot change a primary key in place: the table is copied.
    A table that has the columns already is kept (a file whose version was set back)."""
    if "run_id" in db["class_model_answers"].columns_dict:
        return
    db.execute(_CLASS_MODEL_ANSWERS.format(name="class_model_answers_v13"))
    kept = "session, model, condition, mode, temperature, repeat, answer, option, probabilities"
    kept += ", error, created_at"
    db.execute(
        f"insert into class_model_answers_v13 ({kept}) select {kept} from class_model_answers"
    )
    db.execute("drop table class_model_answers")
    db.execute("alter table class_model_answers_v13 rename to class_model_answers")
    db.execute("create index if not exists class_model_answers_run on class_model_answers (run_id)")


def _schema_v14(db: sqlite_utils.Database) -> None:
    """Issue 45, a class a prankster cannot steer: each session's conditions follow a balanced
    sequence of its own (`seed`, and `slots`: how many participants it has placed), so a new
    participant takes the next place in it and cannot draw again; `throttled` counts the
    requests its participant server refused as too fast (the teacher's page shows it).
    Existing sessions get a random seed and continue after the participants they have."""
    _add_columns(
        db,
        "class_sessions",
        {
            "seed": "integer",
            "slots": "integer not null default 0",
            "throttled": "integer not null default 0",
        },
    )
    db.execute(
        "update class_sessions set seed = abs(random() % 4611686018427387904) where seed is null"
    )
    db.execute(
        "update class_sessions set slots = (select count(*) from class_assignments a "
        "where a.session = class_sessions.code) where slots = 0"
    )


def _add_columns(db: sqlite_utils.Database, table: str, columns: dict[str, Any]) -> None:
    """Add the columns `table` lacks, keeping those it has, so a migration can run again on a
    file whose `schema_version` was set back by hand. A column's kind is a Python type, or
    the SQL type as the migration first wrote it ("text")."""
    have = db[table].columns_dict
    for column, kind in columns.items():
        if column in have:
            continue
        if isinstance(kind, str):
            db.execute(f"alter table {table} add column {column} {kind}")
        else:
            db[table].add_column(column, kind)


def _schema_v15(db: sqlite_utils.Database) -> None:
    """Issue 42, a lesson a teacher can give: a session moves lobby -> answering -> locked ->
    revealed (`started_at`: answers opened, NULL in the lobby; `seconds`: its countdown;
    `deadline`: when that countdown locks it), and several sessions make a lesson under one
    code (`class_lessons`, its `current` question; each session's `lesson` and `position`).
    Sessions stored before took answers from their start, so they start when they opened.
    Only what is missing is added (a file whose version was set back keeps its states)."""
    had_start = "started_at" in db["class_sessions"].columns_dict
    _add_columns(
        db,
        "class_sessions",
        {
            "lesson": "text",
            "position": "integer",
            "started_at": "text",
            "seconds": "integer",
            "deadline": "text",
        },
    )
    if not had_start:
        db.execute("update class_sessions set started_at = created_at")
    db.execute(
        """create table if not exists class_lessons (
            code text primary key, created_at text not null, current integer not null default 1)"""
    )
    db.execute("create index if not exists class_sessions_lesson on class_sessions (lesson)")


# Issue 44's columns (migration 16): decisions keep each half's trace, the pair's thinking
# tokens, the trace signal and a self-help rewrite; the cache keeps each answer's trace.
_DECISION_REASONING = {
    "control_reasoning": "text",
    "treatment_reasoning": "text",
    "reasoning_tokens": "integer",
    "control_trace_mentions": "integer",
    "treatment_trace_mentions": "integer",
    "control_rewrite": "text",
    "treatment_rewrite": "text",
}
_CALL_REASONING = {"reasoning": "text", "reasoning_tokens": "integer"}


def _schema_v16(db: sqlite_utils.Database) -> None:
    """Issue 44, reasoning models and interventions: a reasoning model's trace of each half,
    kept apart from its answer, with its thinking tokens (`decisions`, and each cached answer
    in `llm_calls`, so an answer read from the cache keeps its trace); whether a trace names
    the treatment's eliciting detail; a self-help rewrite of each half. Only what is missing
    is added (a file whose version was set back keeps its columns)."""
    _add_columns(db, "decisions", _DECISION_REASONING)
    _add_columns(db, "llm_calls", _CALL_REASONING)


def _chunks(items: list[Any], size: int = 200) -> Iterator[list[Any]]:
    """Lists of at most `size` items: SQLite binds at most 999 parameters a statement."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


MIGRATIONS = {
    1: _schema_v1,
    2: _schema_v2,
    3: _schema_v3,
    4: _schema_v4,
    5: _schema_v5,
    6: _schema_v6,
    7: _schema_v7,
    8: _schema_v8,
    9: _schema_v9,
    10: _schema_v10,
    11: _schema_v11,
    12: _schema_v12,
    13: _schema_v13,
    14: _schema_v14,
    15: _schema_v15,
    16: _schema_v16,
}
