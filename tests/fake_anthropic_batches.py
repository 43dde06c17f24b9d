"""A small server on 127.0.0.1 that speaks Anthropic's Messages API and its Message Batches,
with scripted answers, for tests.

    with FakeAnthropic(errored=1, expired=1) as server:
        ...  # point `--api-base` at server.base_url ("http://127.0.0.1:PORT")

`POST /v1/messages` answers interactively (counted in `calls`, bodies kept in `bodies`);
`POST /v1/messages/batches`, `GET /v1/messages/batches/{id}`, `POST …/{id}/cancel` and
`GET …/{id}/results` (JSONL) run batches: a batch ends `batch_delay` seconds after it is
created, answering each request with the same responder as the interactive path, except
that the first `errored` requests it processes (over all batches) come back errored and the
next `expired` ones expired. Every request's `x-api-key` header is kept in `api_keys`; a
request without `anthropic-version: 2023-06-01` is refused, as Anthropic does, and with
`api_key` set, one with another key gets a 401 that repeats the key it was sent.

A broken server, for the run's deadlines and cancel: `hang="poll"` never answers a poll of a
batch (`polls` still counts it), `hang="all"` neither a poll nor a cancel; `trickle` sends a
results file one byte every `trickle` seconds (`downloads` counts the downloads begun); and
`mangle(number, lines)` rewrites the results lines of batch `number` (1, 2, ...) before they
are sent (a duplicated, unknown or missing custom_id, a line that is not JSON or too long).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from fake_llm_server import default_responder

Responder = Callable[[dict[str, Any]], str]
_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class FakeAnthropic:
    def __init__(
        self,
        responder: Responder | None = None,
        *,
        batch_delay: float = 0.3,
        errored: int = 0,
        expired: int = 0,
        api_key: str | None = None,
        junk: str = "",
        hang: str = "",
        trickle: float = 0.0,
        mangle: Callable[[int, list[str]], list[str]] | None = None,
    ) -> None:
        self.responder = responder or default_responder
        self.batch_delay = batch_delay
        self.errored = errored
        self.expired = expired
        self.api_key = api_key
        self.junk = junk  # a first line every results file starts with (a broken server)
        self.hang, self.trickle, self.mangle = hang, trickle, mangle
        self.downloads = 0
        self.calls = 0  # interactive /v1/messages
        self.bodies: list[dict[str, Any]] = []  # what the interactive path sent
        self.params: list[dict[str, Any]] = []  # what batches carried, in order
        self.batches: dict[str, dict[str, Any]] = {}
        self.processed = 0  # batch requests answered (or failed) so far
        self.cancels = 0
        self.polls = 0
        self.api_keys: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the Messages API -------------------------------------------------------------

    def _message(self, params: dict[str, Any], number: int) -> dict[str, Any]:
        text = self.responder(params)
        words = sum(_tokens(json.dumps(m.get("content"))) for m in params.get("messages", []))
        return {
            "id": f"msg_{number}", "type": "message", "role": "assistant",
            "model": params.get("model"), "stop_reason": "end_turn", "stop_sequence": None,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": words, "output_tokens": _tokens(text)},
        }  # fmt: skip

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        body = await request.json()
        self.bodies.append(body)
        return web.json_response(self._message(body, self.calls))

    # -- Message Batches --------------------------------------------------------------

    def _public(self, batch: dict[str, Any]) -> dict[str, Any]:
        if batch["processing_status"] == "canceling":
            self._end(batch, cancelled=True)  # the next look after a cancel finds it ended
        elif batch["processing_status"] == "in_progress" and time.monotonic() >= batch["ready"]:
            self._end(batch, cancelled=False)
        return self._snapshot(batch)

    def _end(self, batch: dict[str, Any], cancelled: bool) -> None:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        results = []
        for item in batch["requests"]:
            if cancelled:
                kind = "canceled"
            else:
                self.processed += 1
                kind = "succeeded"
                if self.processed <= self.errored:
                    kind = "errored"
                elif self.processed <= self.errored + self.expired:
                    kind = "expired"
            counts[kind] += 1
            result: dict[str, Any] = {"type": kind}
            if kind == "succeeded":
                result["message"] = self._message(item["params"], self.processed)
            elif kind == "errored":
                result["error"] = {"type": "error", "error": {
                    "type": "overloaded_error", "message": "Overloaded"}}  # fmt: skip
            results.append({"custom_id": item["custom_id"], "result": result})
        batch["results"] = results
        batch["request_counts"] = counts
        batch["processing_status"] = "ended"
        batch["ended_at"] = "2026-01-01T00:00:00Z"
        batch["results_url"] = f"{self.base_url}/v1/messages/batches/{batch['id']}/results"

    async def _create(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        requests = payload.get("requests") if isinstance(payload, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "requests: a non-empty list is required")
        ids = [r.get("custom_id") for r in requests]
        if len(set(ids)) != len(ids) or not all(
            isinstance(i, str) and _CUSTOM_ID.fullmatch(i) for i in ids
        ):
            return _error(400, "custom_id must be unique, 1-64 characters of [a-zA-Z0-9_-]")
        for item in requests:
            params = item.get("params") or {}
            if not {"model", "max_tokens", "messages"} <= set(params):
                return _error(400, "params: model, max_tokens and messages are required")
            self.params.append(params)
        batch_id = f"msgbatch_{len(self.batches) + 1:04d}"
        self.batches[batch_id] = {
            "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0,
                               "canceled": 0, "expired": 0},
            "ended_at": None, "created_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-02T00:00:00Z", "cancel_initiated_at": None,
            "results_url": None, "requests": requests,
            "ready": time.monotonic() + self.batch_delay,
        }  # fmt: skip
        return web.json_response(self._public(self.batches[batch_id]))

    async def _get(self, request: web.Request) -> web.StreamResponse:
        self.polls += 1
        if self.hang:
            await asyncio.sleep(3600)
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        return web.json_response(self._public(batch))

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        self.cancels += 1
        if self.hang == "all":
            await asyncio.sleep(3600)
        if batch["processing_status"] == "in_progress":
            batch["processing_status"] = "canceling"
            batch["cancel_initiated_at"] = "2026-01-01T00:00:01Z"
            return web.json_response(self._snapshot(batch))
        return web.json_response(self._public(batch))

    def _snapshot(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if k not in ("ready", "requests", "results")}

    async def _results(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None or "results" not in batch:
            return _error(404, "results are not ready")
        lines = [json.dumps(r) for r in batch["results"]]
        if self.mangle is not None:
            lines = self.mangle(list(self.batches).index(batch["id"]) + 1, lines)
        text = self.junk + "".join(line + "\n" for line in lines)
        self.downloads += 1
        if not self.trickle:
            return web.Response(text=text, content_type="application/binary")
        response = web.StreamResponse(headers={"Content-Type": "application/binary"})
        await response.prepare(request)
        for byte in text.encode():
            await response.write(bytes([byte]))
            await asyncio.sleep(self.trickle)
        await response.write_eof()
        return response

    # -- lifecycle --------------------------------------------------------------------

    @web.middleware
    async def _check(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.api_keys.append(request.headers.get("x-api-key", ""))
        if request.headers.get("anthropic-version") != "2023-06-01":
            return _error(400, "anthropic-version: header is required")
        sent = request.headers.get("x-api-key", "")
        if self.api_key is not None and sent != self.api_key:  # echoed, as careless APIs do
            return _error(401, f"invalid x-api-key: {sent}", "authentication_error")
        return await handler(request)

    async def _start(self) -> None:
        app = web.Application(middlewares=[self._check])
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._get)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", self._cancel)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._results)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._start())
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    def __enter__(self) -> FakeAnthropic:
        self._thread = threading.Thread(target=self._run, name="fake-anthropic", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake Anthropic server did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.StreamResponse:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.json_response(body, status=status)
