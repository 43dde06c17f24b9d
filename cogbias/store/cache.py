"""The response cache (`llm_calls`) and the requests handed to batch engines."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cogbias.core.redact import redact_json, redactor
from cogbias.store.connection import StoreBase, now

# An answer with log-probabilities is JSON the client made (`llm.logprobs.encode_answer`);
# its request says so in the canonical JSON the cache stores (`records.dumps`).
_MADE_JSON = "instr(request, '\"top_logprobs\":') > 0"
# what a cached answer is read as (`llm.client.LLMClient`'s cache records)
_READ_NAMES = (
    "text", "prompt_tokens", "completion_tokens", "cost", "latency_s", "source", "reasoning",
    "reasoning_tokens",
)  # fmt: skip
_READ_COLUMNS = ", ".join(("response", *_READ_NAMES[1:]))


def _parses(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except (ValueError, RecursionError):
        return False
    return True


class CacheRepo(StoreBase):
    """`llm_calls`, `batch_requests` and `batches`."""

    def put_llm_calls(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Cache answers. Requests and answers are redacted (`redact_json`: a JSON text inside
        its strings only, so a secret that matches a number cannot break it)."""
        if not rows:
            return
        clean, stamp = redactor(), now()
        clean_rows = [
            {
                **r,
                "response": redact_json(r["response"], clean),
                "reasoning": clean(r.get("reasoning")),
                "request": redact_json(r.get("request"), clean),
                "created_at": stamp,
            }
            for r in rows
        ]
        # one prepared statement for the batch (a run commits a few hundred answers at once);
        # a column no row names is left to its default, as an insert of those rows leaves it
        columns = list(dict.fromkeys(c for r in clean_rows for c in r))
        sql = (
            f"insert or replace into llm_calls ({', '.join(f'[{c}]' for c in columns)}) "
            f"values ({', '.join('?' * len(columns))})"
        )
        with self.atomic():
            self.db.conn.executemany(sql, [tuple(r.get(c) for c in columns) for r in clean_rows])

    def get_llm_call(self, key: str) -> dict[str, Any] | None:
        """A cached answer, or None (`get_llm_calls` for one key)."""
        return self.get_llm_calls([key]).get(key)

    def get_llm_calls(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The cached answers among `keys`, read in bulk. An answer with log-probabilities
        that no longer parses (an older version redacted it as text: `-0.***12`) is a miss,
        deleted so that the model is asked again: never read, never a crash."""
        found: dict[str, dict[str, Any]] = {}
        broken: list[str] = []
        for i in range(0, len(keys), 500):
            chunk = list(keys[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(
                f"select key, {_READ_COLUMNS}, {_MADE_JSON} from llm_calls where key in ({marks})",
                chunk,
            ).fetchall():
                if row[-1] and not _parses(row[1]):
                    broken.append(row[0])
                else:
                    found[row[0]] = dict(zip(_READ_NAMES, row[1:-1], strict=True))
        if broken and not self.read_only:
            with self.atomic():
                self.db.conn.executemany(
                    "delete from llm_calls where key = ?", [(key,) for key in broken]
                )
        return found

    def llm_call_responses(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored answers among `keys` (a batch import keeps them, see runs/batch.py)."""
        found: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = list(keys[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for key, response in self.db.execute(
                f"select key, response from llm_calls where key in ({marks})", chunk
            ).fetchall():
                found[key] = response
        return found

    def save_batch_requests(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self.atomic():
            if rows:
                self.db["batch_requests"].insert_all(
                    [{**r, "created_at": now()} for r in rows], pk="key", replace=True
                )

    def save_batch(self, row: Mapping[str, Any]) -> None:
        """Insert or update a provider batch (by its id)."""
        with self.atomic():
            self.db["batches"].upsert({**row, "updated_at": now()}, pk="id")

    def batches(self, run_id: str | None = None, open_only: bool = False) -> list[dict[str, Any]]:
        clauses, params = [], []
        if run_id:
            clauses.append("run_id = ?")
            params.append(run_id)
        if open_only:
            clauses.append("status in ('validating', 'in_progress', 'finalizing', 'cancelling')")
        where = f" where {' and '.join(clauses)}" if clauses else ""
        return self.query(f"select * from batches{where} order by created_at", params)

    def batch_requests(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Exported batch requests by key (those among `keys`)."""
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(keys), 500):
            chunk = list(keys[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.query(f"select * from batch_requests where key in ({marks})", chunk):
                found[row["key"]] = row
        return found

    def cache_stats(self) -> list[dict[str, Any]]:
        """Per model: cached answers, tokens, what they cost, oldest and newest."""
        return self.query(
            "select model, count(*) as answers, "
            "coalesce(sum(prompt_tokens + completion_tokens), 0) as tokens, "
            "round(coalesce(sum(cost), 0), 6) as cost, min(created_at) as oldest, "
            "max(created_at) as newest from llm_calls group by model order by model"
        )

    def prune_cache(self, older_than: str | None = None, model: str | None = None) -> int:
        """Delete cached answers created before `older_than` (ISO time) and/or of `model`."""
        clauses, params = [], []
        if older_than:
            clauses.append("created_at < ?")
            params.append(older_than)
        if model:
            clauses.append("model = ?")
            params.append(model)
        where = f" where {' and '.join(clauses)}" if clauses else ""
        with self.atomic():
            return self.db.execute(f"delete from llm_calls{where}", params).rowcount
