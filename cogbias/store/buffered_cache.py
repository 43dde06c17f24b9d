"""A write buffer over the store's LLM response cache (the `llm_calls` table).

A run commits its cached answers together with its results, every few tens of milliseconds,
instead of one transaction per model call; the app's Learn page does the same per action.
Reads see the buffered answers first, so a question asked twice in one batch is asked once.
Reads are made in bulk: the lookups of every call that starts in one turn of the event loop
(a run starts hundreds at once) are answered by one query, so a rerun whose answers are all
cached costs little more than reading them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cogbias.core.records import dumps

if TYPE_CHECKING:
    from cogbias.store import Store


class BufferedCache:
    """The LLM response cache: reads from the store, writes batched with the run's results."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: dict[str, dict[str, Any]] = {}
        # lookups waiting for the next bulk read: key -> one future per caller (a caller that
        # is cancelled cancels its own future only)
        self._wanted: dict[str, list[asyncio.Future[dict[str, Any] | None]]] = {}
        self._read_loop: asyncio.AbstractEventLoop | None = None  # where the next read runs

    async def lookup(self, key: str) -> dict[str, Any] | None:
        """The record under `key` (buffered or stored), or None; read with the lookups of
        the other calls that start in this turn of the event loop."""
        record = self.pending.get(key)
        if record is not None:
            return record
        loop = asyncio.get_running_loop()
        if self._read_loop is not loop:  # a run before this one ended on another loop: its
            self._wanted = {}  # waiting lookups died with it and its read will never run
        if not self._wanted:
            loop.call_soon(self._read_wanted)
            self._read_loop = loop
        future: asyncio.Future[dict[str, Any] | None] = loop.create_future()
        self._wanted.setdefault(key, []).append(future)
        found = await future
        # An answer put between the bulk read and this caller resuming is seen: the client
        # registers its request as in flight without awaiting again, so no identical
        # question slips through to the model twice.
        return found if found is not None else self.pending.get(key)

    def _read_wanted(self) -> None:
        wanted, self._wanted = self._wanted, {}
        try:
            found = self.store.get_llm_calls(list(wanted))
        except Exception as exc:  # each caller fails as its own read would have
            for futures in wanted.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for key, futures in wanted.items():
            record = self.pending.get(key) or found.get(key)
            for future in futures:
                if not future.done():
                    future.set_result(record)

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
