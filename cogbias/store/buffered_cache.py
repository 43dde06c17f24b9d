"""A write buffer over the store's LLM response cache (the `llm_calls` table).

A run commits its cached answers together with its results, every few tens of milliseconds,
instead of one transaction per model call; the app's Learn page does the same per action.
Reads see the buffered answers first, so a question asked twice in one batch is asked once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cogbias.core.records import dumps

if TYPE_CHECKING:
    from cogbias.store import Store


class BufferedCache:
    """The LLM response cache: reads from the store, writes batched with the run's results."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        record = self.pending.get(key)
        if record is not None:
            return record
        return self.store.get_llm_call(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        self.pending[key] = record

    def drain(self) -> list[dict[str, Any]]:
        """The buffered answers as `llm_calls` rows, emptying the buffer."""
        rows = [
            {
                "key": key,
                "model": r["model"],
                "api_base": r.get("api_base"),
                "request": dumps(r.get("request", {})),
                "response": r["text"],
                "prompt_tokens": r.get("prompt_tokens", 0),
                "completion_tokens": r.get("completion_tokens", 0),
                "cost": r.get("cost", 0.0),
                "latency_s": r.get("latency_s", 0.0),
                "reasoning": r.get("reasoning") or None,
                "reasoning_tokens": r.get("reasoning_tokens") or 0,
            }
            for key, r in self.pending.items()
        ]
        self.pending = {}
        return rows
