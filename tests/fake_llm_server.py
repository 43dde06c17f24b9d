"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

It is a test double of the *network*, not of our code: `cogbias.llm` talks to it through
litellm and the openai SDK exactly as it would talk to a real provider, so retries, status
codes, headers, timeouts and concurrency are exercised for real. Answers come from a
scripted `responder(request_json) -> str`; latency, HTTP 500s and 429s (with Retry-After)
are injected on demand, and the server counts what it received.

    with FakeLLMServer(latency=0.0, fail_500=0.1, fail_429=0.1) as srv:
        ...  # point a client at srv.base_url ("http://127.0.0.1:PORT/v1")

It runs its own asyncio loop in a background thread and sleeps asynchronously, so hundreds
of concurrent requests with `latency=1.0` cost it almost nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

# A responder answers with the text, or with a dict: {"content": text} and any of "logprobs"
# (OpenAI's `choices[0].logprobs` beside it), "reasoning_content" or "reasoning" (a reasoning
# model's trace in a field of its own, as vLLM, DeepSeek or Ollama send it), "reasoning_tokens"
# (counted inside `completion_tokens` and in `completion_tokens_details`, as OpenAI counts
# them) and "finish_reason" (default "stop"; "length" when the answer ran out of room).
Responder = Callable[[dict[str, Any]], Any]
_MESSAGE_FIELDS = ("reasoning_content", "reasoning")


def completion(text: Any, prompt_tokens: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the choice, the usage) of a responder's answer (see `Responder`)."""
    reply = text if isinstance(text, dict) else {"content": text}
    content = reply.get("content")
    message = {"role": "assistant", "content": content}
    message.update({k: reply[k] for k in _MESSAGE_FIELDS if k in reply})
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": reply.get("finish_reason", "stop"),
    }
    if "logprobs" in reply:
        choice["logprobs"] = reply["logprobs"]
    thinking = int(reply.get("reasoning_tokens", 0))
    completion_tokens = (_count_tokens(content) if content else 0) + thinking
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if thinking:
        usage["completion_tokens_details"] = {"reasoning_tokens": thinking}
    return choice, usage


class FakeHTTPError(Exception):
    """Raised by a responder to answer with an HTTP error instead of a completion."""

    def __init__(self, status: int, message: str = "", headers: dict[str, str] | None = None):
        super().__init__(message or f"HTTP {status}")
        self.status = status
        self.message = message or f"HTTP {status}"
        self.headers = headers or {}


_OPTION_RE = re.compile(r"Option\s+(\d+)")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _example_value(schema: dict[str, Any], key: str) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return _example_object(schema)
    return f"{key} value"


def _example_object(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {})
    keys = schema.get("required") or list(props)
    return {k: _example_value(props.get(k, {}), k) for k in keys}


def default_responder(request: dict[str, Any]) -> str:
    """Deterministic answers: "Option N" for decisions, schema-shaped JSON for gap fills.

    N is derived from a hash of the whole prompt and lies within the highest option
    number the prompt mentions (at least 2), so the same prompt always gets the same answer.
    """
    prompt = _last_user_text(request)
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema", {}).get("schema", {})
        if fmt.get("json_schema", {}).get("name") == "gap_fills":
            # a fill that reads like one (an echo of the instruction would be rejected)
            keys = schema.get("required") or list(schema.get("properties", {}))
            return json.dumps({k: f"fake fill {i + 1}" for i, k in enumerate(keys)})
        return json.dumps(_example_object(schema))
    if fmt.get("type") == "json_object":
        return "{}"
    if "Option" in prompt:
        n_options = max([int(n) for n in _OPTION_RE.findall(prompt)] + [2])
        whole = json.dumps(request.get("messages", []), sort_keys=True)
        digest = hashlib.sha256(whole.encode()).digest()
        return f"Option {digest[0] % n_options + 1}"
    return "OK"


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


class FakeLLMServer:
    """OpenAI-compatible `POST /v1/chat/completions` with scripted answers and faults.

    Args:
        responder: maps the request JSON to the answer text; may raise `FakeHTTPError`.
        latency: seconds to wait (asynchronously) before answering each request.
        fail_500: fraction of requests answered with HTTP `server_status` (seeded, random).
        server_status: the 5xx status of injected server errors (500, 502, 503, ...).
        fail_429: fraction answered with HTTP 429 and a `Retry-After: retry_after` header.
        retry_after: value of the Retry-After header on injected 429s, in seconds.
        script: HTTP statuses for the first requests, in arrival order (e.g. [500, 429]);
            200 means "answer normally". Deterministic alternative to the fractions.
        api_key: when set, requests without `Authorization: Bearer <api_key>` get a 401
            whose body echoes the key that was sent, as careless providers do, so tests
            can check that our error messages never repeat it.
        seed: seeds the fault-injection random generator.
        batch_delay: seconds after which a created batch (`/v1/batches`) is complete.
        batch_fail: fraction of the requests inside a batch answered with an error.
        batch_hang: polls and cancels of a batch never answer (a server that hangs).

    Setting `held` to True makes every request wait (asynchronously) until it is set back to
    False: a test sees what a run shows before any answer, then lets the answers come.

    Batches follow OpenAI's Batch API: `POST /v1/files` (multipart, purpose "batch"),
    `POST /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`, and
    `GET /v1/files/{id}/content`; answers come from the same responder, and
    `batch_requests` counts the requests answered inside batches (not in `calls`).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        fail_500: float = 0.0,
        server_status: int = 500,
        fail_429: float = 0.0,
        retry_after: float = 0.05,
        script: Iterable[int] = (),
        api_key: str | None = None,
        seed: int = 0,
        batch_delay: float = 0.5,
        batch_fail: float = 0.0,
        batch_hang: bool = False,
    ) -> None:
        self.responder = responder or default_responder
        self.latency = latency
        self.held = False
        self.fail_500 = fail_500
        self.server_status = server_status
        self.fail_429 = fail_429
        self.retry_after = retry_after
        self.script = list(script)
        self.api_key = api_key
        self._rng = random.Random(seed)
        self.batch_delay = batch_delay
        self.batch_fail = batch_fail
        self.batch_hang = batch_hang  # polls and cancels of a batch never answer
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_requests = 0
        self.batch_polls = 0  # GET /v1/batches/{id}: how often a worker looked
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.statuses: Counter[int] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.arrival_times: list[float] = []
        self.authorizations: list[str] = []  # every request's Authorization header ("" if none)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def reset_counts(self) -> None:
        """Forget what was received so far (counts, requests, timings)."""
        self.calls = 0
        self.max_in_flight = self.in_flight
        self.statuses.clear()
        self.requests.clear()
        self.arrival_times.clear()

    # -- request handling -------------------------------------------------------------

    def _pick_fault(self) -> int:
        if self.script:
            return self.script.pop(0)
        draw = self._rng.random()
        if draw < self.fail_500:
            return self.server_status
        if draw < self.fail_500 + self.fail_429:
            return 429
        return 200

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None):
        self.statuses[status] += 1
        kind = "server_error" if status >= 500 else "invalid_request_error"
        kind = "rate_limit_error" if status == 429 else kind
        body = {"error": {"message": message, "type": kind, "code": status}}
        return web.json_response(body, status=status, headers=headers)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        self.arrival_times.append(time.monotonic())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        self.requests.append(payload)
        while self.held:
            await asyncio.sleep(0.05)
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.api_key is not None:
            sent = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if sent != self.api_key:
                return self._error(401, f"Incorrect API key provided: {sent}.")
        fault = self._pick_fault()
        if fault == 429:
            headers = {"Retry-After": f"{self.retry_after:g}"}
            return self._error(429, "Rate limit reached, slow down.", headers)
        if fault >= 500:
            return self._error(fault, "The server had an error processing your request.")
        if fault != 200:
            return self._error(fault, f"Request rejected with HTTP {fault}.")
        try:
            text = self.responder(payload)
        except FakeHTTPError as exc:
            return self._error(exc.status, exc.message, exc.headers)
        prompt_tokens = sum(_count_tokens(_text_of(m.get("content"))) for m in payload["messages"])
        choice, usage = completion(text, prompt_tokens)
        self.statuses[200] += 1
        return web.json_response(
            {
                "id": f"chatcmpl-fake-{self.calls}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": payload.get("model", "fake"),
                "choices": [choice],
                "usage": usage,
            }
        )

    # -- batches ----------------------------------------------------------------------

    def _file(self, content: bytes, name: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = content
        return {"id": file_id, "object": "file", "bytes": len(content), "filename": name,
                "created_at": int(time.time()), "purpose": "batch", "status": "processed"}  # fmt: skip

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form["file"]
        return web.json_response(self._file(upload.file.read(), upload.filename))  # type: ignore[union-attr]

    async def _content(self, request: web.Request) -> web.StreamResponse:
        content = self.files.get(request.match_info["file_id"])
        if content is None:
            return self._error(404, "No such file")
        return web.Response(body=content, content_type="application/jsonl")

    async def _create_batch(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        if payload.get("input_file_id") not in self.files:
            return self._error(400, "unknown input_file_id")
        batch_id = f"batch-{len(self.batches) + 1}"
        lines = self.files[payload["input_file_id"]].decode().splitlines()
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": payload["endpoint"],
            "input_file_id": payload["input_file_id"],
            "completion_window": payload.get("completion_window", "24h"),
            "status": "validating", "created_at": int(time.time()),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "ready_at": time.monotonic() + self.batch_delay,
        }  # fmt: skip
        return web.json_response(self._public(batch_id))

    def _public(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        if (
            batch["status"] in ("validating", "in_progress")
            and time.monotonic() >= batch["ready_at"]
        ):
            self._finish(batch)
        elif batch["status"] == "validating":
            batch["status"] = "in_progress"
        return {k: v for k, v in batch.items() if k != "ready_at"}

    def _finish(self, batch: dict[str, Any]) -> None:
        out, errors = [], []
        for line in self.files[batch["input_file_id"]].decode().splitlines():
            item = json.loads(line)
            self.batch_requests += 1
            if self._rng.random() < self.batch_fail:
                errors.append({"id": f"req-{self.batch_requests}", "custom_id": item["custom_id"],
                               "response": {"status_code": 500, "body": {"error": {"message": "server error"}}},
                               "error": None})  # fmt: skip
                continue
            choice, usage = completion(self.responder(item["body"]), 10)
            body = {"id": f"chatcmpl-batch-{self.batch_requests}", "object": "chat.completion",
                    "choices": [choice], "usage": usage}  # fmt: skip
            out.append({"id": f"req-{self.batch_requests}", "custom_id": item["custom_id"],
                        "response": {"status_code": 200, "body": body}, "error": None})  # fmt: skip
        encode = lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()  # noqa: E731
        batch["output_file_id"] = self._file(encode(out), "output.jsonl")["id"]
        if errors:
            batch["error_file_id"] = self._file(encode(errors), "errors.jsonl")["id"]
        batch["request_counts"] = {"total": len(out) + len(errors), "completed": len(out),
                                   "failed": len(errors)}  # fmt: skip
        batch["status"], batch["completed_at"] = "completed", int(time.time())

    async def _get_batch(self, request: web.Request) -> web.StreamResponse:
        batch_id = request.match_info["batch_id"]
        self.batch_polls += 1
        if self.batch_hang:
            await asyncio.sleep(3600)
        if batch_id not in self.batches:
            return self._error(404, "No such batch")
        return web.json_response(self._public(batch_id))

    async def _cancel_batch(self, request: web.Request) -> web.StreamResponse:
        batch_id = request.match_info["batch_id"]
        if self.batch_hang:
            await asyncio.sleep(3600)
        if batch_id not in self.batches:
            return self._error(404, "No such batch")
        batch = self.batches[batch_id]
        if batch["status"] in ("validating", "in_progress"):
            batch["status"], batch["cancelled_at"] = "cancelled", int(time.time())
        return web.json_response(self._public(batch_id))

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    # -- lifecycle --------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.authorizations.append(request.headers.get("Authorization", ""))
        return await handler(request)

    async def _start(self) -> None:
        app = web.Application(middlewares=[self._record])
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{file_id}/content", self._content)
        app.router.add_post("/v1/batches", self._create_batch)
        app.router.add_get("/v1/batches/{batch_id}", self._get_batch)
        app.router.add_post("/v1/batches/{batch_id}/cancel", self._cancel_batch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=2048).start()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start())
        except BaseException as exc:  # surface bind errors to the caller's thread
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        if self._runner is not None:
            loop.run_until_complete(self._runner.cleanup())
        # Requests still sleeping (e.g. from a client that was killed) end here, quietly.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    def start(self) -> FakeLLMServer:
        """Start serving in a background thread; returns once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="fake-llm-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise RuntimeError("fake LLM server failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Stop the loop and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
