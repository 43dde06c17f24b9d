"""The participant server's connections: how long one may sit idle or half-sent, how many
may be open at once, and what a request too broken to reach the app is answered.

aiohttp keeps a connection that sends nothing for an hour, logs every malformed request with
the sender's address and a traceback, and answers it with a page of its own that names
itself. Here a connection that waits `IDLE` seconds without a whole request is closed (idle
and half-sent alike: `Guard.sweep`, and aiohttp's own keep-alive timer as well), at most
`bound()` are open (below the process's file limit, so accepting never fails), the one that
has waited longest makes room for a new one, and a malformed request gets a plain 400 with
the app's headers; each is counted (`limits.Tally`), never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from cogbias.classroom import limits

IDLE = 5.0  # seconds a connection may wait for a whole request (idle or half-sent)
BODY = 10.0  # seconds to receive a posted form once its headers are in
LINGER = 1.0  # seconds to read away an unread body before closing
MAX_CONNECTIONS = 1024
_RESERVED_FILES = 64  # the database, its journal, the threads' connections, the terminal
_FILE_LIMIT_GOAL = 4096


def raise_file_limit() -> int:
    """Raise this process's open-file limit towards 4096 where the system allows (a laptop's
    default can be 256); the limit in force."""
    try:
        import resource
    except ImportError:  # not on Unix: the system decides
        return _FILE_LIMIT_GOAL
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    goal = _FILE_LIMIT_GOAL if hard == resource.RLIM_INFINITY else min(hard, _FILE_LIMIT_GOAL)
    if soft != resource.RLIM_INFINITY and soft < goal:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (goal, hard))
            soft = goal
    return _FILE_LIMIT_GOAL if soft == resource.RLIM_INFINITY else int(soft)


def bound(file_limit: int) -> int:
    """Connections open at once: what the file limit leaves, at most `MAX_CONNECTIONS`."""
    return max(8, min(MAX_CONNECTIONS, file_limit - _RESERVED_FILES))


class Guard:
    """The open connections, each with the time it began waiting for a request (when it
    opened, or when its last answer went out), and those being answered now (the app's
    middleware says when each begins and ends). `sweep` closes any that waited longer than
    `IDLE`; over the bound, a new connection closes the one that has waited longest (idle,
    or still sending its request), or itself if every other is being answered."""

    def __init__(self, most: int, tally: limits.Tally) -> None:
        self.most, self.tally = most, tally
        self.waiting: dict[web.RequestHandler, float] = {}
        self.answering: set[web.RequestHandler] = set()

    def opened(self, handler: web.RequestHandler) -> None:
        self.waiting[handler] = time.monotonic()
        if len(self.waiting) + len(self.answering) <= self.most:
            return
        victim = next((h for h in self.waiting if h is not handler), handler)
        self.tally.add(limits.EVICTED)
        self.closed(victim)
        victim.force_close()

    def begins(self, handler: Any) -> None:
        if self.waiting.pop(handler, None) is not None:
            self.answering.add(handler)

    def ends(self, handler: Any) -> None:
        if handler in self.answering:
            self.answering.discard(handler)
            self.waiting[handler] = time.monotonic()

    def closed(self, handler: web.RequestHandler) -> None:
        self.waiting.pop(handler, None)
        self.answering.discard(handler)

    def sweep(self) -> None:
        """Close every connection that has waited longer than `IDLE` for a whole request."""
        now = time.monotonic()
        for handler, since in list(self.waiting.items()):
            if now - since > IDLE:
                self.tally.add(limits.IDLE_CLOSED)
                self.closed(handler)
                handler.force_close()


class _Quiet(logging.Logger):
    """aiohttp's server logger for these connections: counts what aiohttp would log (with
    addresses and tracebacks) and prints none of it."""

    def __init__(self, tally: limits.Tally) -> None:
        super().__init__("cogbias.classroom.connections")
        self.tally = tally

    def handle(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.tally.add(limits.ERRORS)


class Bare(web.Response):
    """A response without aiohttp's `Server` header. The app's own responses lose it in its
    `on_response_prepare` hook; one for a request too broken to reach the app never passes
    there, so it is dropped as the headers are prepared."""

    async def _prepare_headers(self) -> None:
        await super()._prepare_headers()
        self.headers.pop("Server", None)


class _Handler(web.RequestHandler):
    """One connection: known to the guard while open; a malformed request is answered by
    `error_page` and counted, never logged."""

    def __init__(
        self, guard: Guard, error_page: Callable[[int], web.Response], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.guard, self.error_page = guard, error_page

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.guard.opened(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.guard.closed(self)
        super().connection_lost(exc)

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        self.guard.tally.add(limits.MALFORMED if status < 500 else limits.ERRORS)
        if request.writer.output_size > 0:  # the reply had begun: nothing more can be sent
            raise ConnectionError("the response was already being sent")
        response = self.error_page(status)
        response.force_close()
        return response


async def listen(
    runner: web.AppRunner,
    host: str,
    port: int,
    guard: Guard,
    error_page: Callable[[int], web.Response],
) -> asyncio.Server:
    """Accept connections for `runner`'s app on `host`:`port` with these limits."""
    loop = asyncio.get_running_loop()
    options: Mapping[str, Any] = {
        "keepalive_timeout": IDLE,
        "lingering_time": LINGER,
        "logger": _Quiet(guard.tally),
        "access_log": None,  # no request log: no addresses kept
    }

    def connection() -> _Handler:
        return _Handler(guard, error_page, manager=runner.server, loop=loop, **options)

    return await loop.create_server(connection, host, port, reuse_address=True)
