"""The participant server's database work, off its event loop and never long.

Each store call runs on one of a few threads, each with its own connection to the file, so a
slow call never holds the others up. A write waits at most `WAIT` seconds for another
process's write lock (the teacher's app, a run, an import); when it is still locked the call
raises `Busy`, and for `PAUSE` seconds after, a write does not wait at all (reads go on:
the file is in WAL mode), so calls do not queue behind the lock and participants get a quick
"try again" page rather than a 30 s wait.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from cogbias.store import Store

THREADS = 4
WAIT = 2.0  # seconds a write waits for another process's lock
PAUSE = 2.0  # seconds writes do not wait after one found the database locked
MAX_WAITING = 256  # calls queued for a thread at once; more are refused as busy
T = TypeVar("T")


class Busy(Exception):
    """The database is locked by another process just now: try again in a moment."""


def _locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class StorePool:
    """Store calls on `THREADS` threads, each with its own `Store` on the file at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="class-db")
        self._local = threading.local()
        self._stores: list[Store] = []
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._waiting = 0

    def _store(self, wait: float) -> Store:
        """This thread's store, waiting at most `wait` seconds for another's write lock."""
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = Store(self.path)
            self._local.store, self._local.wait = store, None
            with self._lock:
                self._stores.append(store)
        if self._local.wait != wait:
            store.set_busy_timeout(wait)
            self._local.wait = wait
        return store

    def _call(self, work: Callable[..., T], args: tuple[Any, ...]) -> T:
        paused = time.monotonic() < self._paused_until
        try:
            return work(self._store(0.0 if paused else WAIT), *args)
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
            if not paused:
                self._paused_until = time.monotonic() + PAUSE
            raise Busy(str(exc)) from None

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """`work(store, *args)` on a database thread; Busy when the file is locked."""
        if self._waiting >= MAX_WAITING:
            raise Busy("too many requests wait for the database")
        self._waiting += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, self._call, work, args)
        finally:
            self._waiting -= 1

    def close(self) -> None:
        """Wait for the calls under way, then close every thread's connection."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for store in self._stores:
                store.close()
            self._stores.clear()
