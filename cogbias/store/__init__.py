"""The SQLite store: the only package that speaks SQL to a cogbias database.

One connection (`connection.StoreBase`: open, pragmas, locks, transactions, migrations) and one
repository mixin per aggregate, each owning its tables:

- `migrations`: the numbered migrations that create every table;
- `runs`: runs, their worker lease and cancel requests;
- `cache`: the response cache (`llm_calls`) and batch requests;
- `decisions`: test cases, scenarios, instances and decisions;
- `turns`: study conversation turns (`study_calls`) and study sources;
- `datasets`: imported datasets and their rows;
- `effects`: the Mohr thesis tables (effect sizes, study prompts, model features);
- `class_sessions`: a class's sessions (their states and countdown), participants'
  conditions and answers;
- `class_lessons`: lessons, several sessions in a row under one code;
- `class_models`: the models' answers to a session's question.

`Store` combines them, so callers keep one object. Every row a run writes has a deterministic
key, which makes re-running idempotent and a killed run resumable.
"""

from __future__ import annotations

from cogbias.core.errors import SchemaError, StoreError
from cogbias.core.records import dumps
from cogbias.store.cache import CacheRepo
from cogbias.store.class_lessons import ClassLessonsRepo
from cogbias.store.class_models import ClassModelsRepo
from cogbias.store.connection import (
    LOCK_TIMEOUT,
    StoreBase,
    cogbias_home,
    default_path,
    describe_error,
    disk_full,
    now,
    parse_time,
    sqlite_utils,
)
from cogbias.store.datasets import DatasetsRepo
from cogbias.store.decisions import DecisionsRepo, PairFilter
from cogbias.store.effects import EffectsRepo
from cogbias.store.migrations import MIGRATIONS, SCHEMA_VERSION, _schema_v1
from cogbias.store.runs import HOST, LEASE_STALE_S, RunsRepo, lease_alive, lease_owner, pid_alive
from cogbias.store.turns import TurnsRepo

__all__ = [
    "HOST",
    "LEASE_STALE_S",
    "LOCK_TIMEOUT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PairFilter",
    "SchemaError",
    "Store",
    "StoreBase",
    "StoreError",
    "_schema_v1",
    "cogbias_home",
    "default_path",
    "describe_error",
    "disk_full",
    "dumps",
    "lease_alive",
    "lease_owner",
    "now",
    "parse_time",
    "pid_alive",
    "sqlite_utils",
]


class Store(
    RunsRepo,
    CacheRepo,
    DecisionsRepo,
    TurnsRepo,
    DatasetsRepo,
    EffectsRepo,
    ClassLessonsRepo,
    ClassModelsRepo,
):
    """A cogbias database file. Cheap to open; safe to use from one thread at a time.

    A file the user may not write (or in a folder they may not write) is opened read-only,
    so the reading commands and pages still work on it; writing then fails with a clear
    `StoreError`-style message rather than half-way.
    """
