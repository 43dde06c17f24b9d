"""Anthropic's Message Batches API: create, poll, cancel, and fetch results, over plain HTTP.

Why plain HTTP (aiohttp, already our lean client's transport) and not litellm or the
`anthropic` SDK: litellm (1.110) can retrieve an Anthropic batch but not create one ("not yet
implemented"), and the SDK would be one more dependency for four requests whose shapes are
documented and small. Plain HTTP
is also what a local test server can speak (`tests/fake_anthropic_batches.py`), and it lets
us hold the key in one place: it is sent only in the `x-api-key` header, only to the base
URL the interactive call uses (`--api-base`, a registry entry's `api_base`, else
api.anthropic.com), never to a `results_url` the server names, and no redirect is followed.

A batch answer must be stored exactly as an interactive answer is, so each request's
`params` are the body litellm posts to `/v1/messages` for the same `LLMRequest`
(`message_params`: system messages as text blocks, consecutive turns of one role merged, no
`seed`, which Anthropic does not take), and a result's text is what litellm reads from a
Message (its text blocks, joined). `tests/test_batch_anthropic.py` holds the two to
litellm's. Requests with a JSON schema (the generator's gap fills) take a tool or an
`output_format` in litellm, shaped per model: they are not sent through batches here.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

from cogbias.llm.errors import LLMError, classify_failure, retry_after_of
from cogbias.llm.keys import PLACEHOLDER_KEY, auth_hint
from cogbias.llm.profiles import ModelProfile
from cogbias.llm.request import LLMRequest
from cogbias.llm.thinking import ANTHROPIC_BUDGETS

DEFAULT_BASE = "https://api.anthropic.com"  # what litellm calls without an api_base
API_VERSION = "2023-06-01"
MAX_REQUESTS = 100_000  # Anthropic's limit per batch
MAX_BYTES = 200 * 1024 * 1024  # under Anthropic's 256 MB per batch
MAX_ANSWER_BYTES = 8_000_000  # a batch object or an error body; anything larger is refused
MAX_RESULTS_BYTES = 4 * 1024**3  # a results file is written to disk as it arrives, up to this
_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")  # Anthropic's rule for custom_id; also batch ids
TIMEOUT_S = 120.0
ATTEMPTS = 4  # per request to the Batches API: transient failures are retried with backoff
DEADLINE_S = 300.0  # one request to the Batches API, its retries included
RESULTS_DEADLINE_S = 3 * 3600.0  # a results file, whole (MAX_RESULTS_BYTES at 400 KB/s)
MIN_RESULTS_RATE = 1024  # bytes per second on average, once RATE_AFTER_S have passed
RATE_AFTER_S = 60.0


def custom_id(cache_key: str) -> str:
    """The request's `custom_id`: its cache key (a sha256 in hex, 64 characters of
    [0-9a-f], which is within Anthropic's 64 characters of [a-zA-Z0-9_-]), so an answer is
    found under the key the interactive client looks up."""
    if not _ID_RE.fullmatch(cache_key):
        raise ValueError(f"cache key {cache_key[:16]}… cannot be an Anthropic custom_id")
    return cache_key


def batchable_request(req: LLMRequest) -> str | None:
    """Why `req` cannot go through Anthropic batches (None: it can)."""
    if req.response_format is not None:
        return "a JSON-schema request (a gap fill) takes a model-specific tool in litellm"
    if req.grammar is not None or req.top_logprobs is not None:
        return "grammars and log-probabilities are not Anthropic features"
    return None


def message_params(req: LLMRequest, profile: ModelProfile) -> dict[str, Any]:
    """The Messages API body litellm sends for `req` (see the module docstring)."""
    why = batchable_request(req)
    if why:
        raise ValueError(f"{req.model}: {why}")
    system: list[dict[str, str]] = []
    turns: list[dict[str, Any]] = []
    for role, content in req.messages:
        if role == "system" and not turns and content.strip():
            system.append({"type": "text", "text": content})
            continue
        if role not in ("user", "assistant") or not content.strip():
            return litellm_body(req, profile)  # shapes litellm rewrites: ask it
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].append({"type": "text", "text": content})
        else:
            turns.append({"role": role, "content": [{"type": "text", "text": content}]})
    if not turns or turns[-1]["role"] != "user":
        return litellm_body(req, profile)
    params: dict[str, Any] = {
        "model": profile.served_name,
        "messages": turns,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens or _default_max_tokens(profile),
    }
    if system:
        params["system"] = system
    budget = anthropic_budget(req.reasoning_effort, req.thinking_budget)
    if budget is not None:  # as litellm maps the effort for an interactive call
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return params


def anthropic_budget(effort: str | None, budget: int | None) -> int | None:
    """The thinking budget a Message Batches request carries: the one given, else litellm's
    budget for the effort (`thinking.ANTHROPIC_BUDGETS`); None for no thinking."""
    if budget is not None:
        return budget
    return ANTHROPIC_BUDGETS.get(effort or "")


def litellm_body(req: LLMRequest, profile: ModelProfile) -> dict[str, Any]:
    """litellm's own body for a shape it rewrites (a system message mid-conversation, an empty
    turn, an assistant turn last): slower (tens of ms), never needed by the run kinds today."""
    from litellm.types.utils import CallTypes
    from litellm.utils import return_raw_request

    from cogbias.llm.client import get_litellm

    get_litellm()
    kwargs = req.chat_body(str(profile.litellm_model)) | {"drop_params": True}
    kwargs["api_base"] = "http://127.0.0.1:9"  # never called: the body is only built
    raw = return_raw_request(CallTypes.completion, kwargs)
    body = raw.get("raw_request_body")
    if not isinstance(body, dict):
        raise ValueError(f"{req.model}: litellm could not build the request ({raw.get('error')})")
    return body


def _default_max_tokens(profile: ModelProfile) -> int:
    from cogbias.llm.client import get_litellm

    return int(get_litellm().AnthropicConfig.get_max_tokens_for_model(profile.served_name))


def thinking_of(message: Any) -> str:
    """The thinking blocks of a Message, as one trace (litellm's `reasoning_content`)."""
    blocks = message.get("content") if isinstance(message, dict) else None
    return "".join(
        b["thinking"]
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict)
        and b.get("type") == "thinking"
        and isinstance(b.get("thinking"), str)
    )


def text_of(message: Any) -> tuple[str | None, int, int]:
    """(text, input tokens, output tokens) of a Message, read as litellm reads one."""
    if not isinstance(message, dict):
        return None, 0, 0
    blocks = message.get("content")
    texts = [
        b["text"]
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
    prompt = sum(
        _count(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return ("".join(texts) or None), prompt, _count(usage.get("output_tokens"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and 0 <= value < 2**53 else 0


def openai_line(item: Any) -> dict[str, Any] | None:
    """A results line in the shape `runs.batch.import_results` reads (an OpenAI batch output
    line): the answer as a chat completion, or the reason there is none as an `error`.
    None when the line has no custom_id (the importer reports it)."""
    if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
        return None
    result = item.get("result") if isinstance(item.get("result"), dict) else {}
    kind = str(result.get("type"))[:40]
    line: dict[str, Any] = {"custom_id": item["custom_id"]}
    if kind != "succeeded":
        error = result.get("error")
        inner = error.get("error") if isinstance(error, dict) else None
        detail = inner.get("message") if isinstance(inner, dict) else None
        line["error"] = {"message": f"{kind}" + (f": {detail}" if detail else ""), "type": kind}
        return line
    text, prompt, completion = text_of(result.get("message"))
    message = {"role": "assistant", "content": text}
    if trace := thinking_of(result.get("message")):
        message["reasoning_content"] = trace
    body = {
        "choices": [{"index": 0, "message": message}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }
    line["response"] = {"status_code": 200, "body": body}
    return line


class BatchesAPI:
    """One endpoint's Message Batches, for one model's key. Each method is one call (retried
    while the failure is transient); a refusal raises `LLMError` in our words, the key
    redacted from whatever the server said."""

    def __init__(self, profile: ModelProfile, key: str | None) -> None:
        self.model = profile.id
        self.where = profile.api_base
        self.base = (profile.api_base or DEFAULT_BASE).rstrip("/") + "/v1/messages/batches"
        self._key = key or PLACEHOLDER_KEY  # an endpoint of the user's without a key of its own
        self._hint = auth_hint(profile)

    def create(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        return self._json("POST", "", {"requests": requests})

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        return self._json("GET", f"/{checked_id(batch_id)}")

    def cancel(self, batch_id: str) -> dict[str, Any]:
        return self._json("POST", f"/{checked_id(batch_id)}/cancel")

    def results(self, batch_id: str, path: Path) -> None:
        """Write the batch's results (JSONL) to `path` as they arrive, at most
        MAX_RESULTS_BYTES. Asked of the documented results endpoint under our base URL."""
        self._call("GET", f"/{checked_id(batch_id)}/results", None, path)

    def _json(self, method: str, suffix: str, body: Any = None) -> dict[str, Any]:
        raw = self._call(method, suffix, body, None)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise LLMError(
                f"{self._name()}: the Batches API answered something not JSON", model=self.model
            )
        return data

    def _name(self) -> str:
        return f"{self.model}" + (f" at {self.where}" if self.where else "")

    def _call(self, method: str, suffix: str, body: Any, path: Path | None) -> bytes:
        """One request, retried while transient, within an overall deadline (DEADLINE_S; a
        results file RESULTS_DEADLINE_S): a server that never answers fails the request."""
        end = time.monotonic() + (DEADLINE_S if path is None else RESULTS_DEADLINE_S)
        for attempt in range(ATTEMPTS):
            left = end - time.monotonic()
            try:
                return asyncio.run(self._once(method, suffix, body, path, left))
            except LLMError as exc:
                delay = min(float(getattr(exc, "retry_after", None) or 0.5 * 2**attempt), 30.0)
                if not exc.retryable or attempt == ATTEMPTS - 1 or delay >= end - time.monotonic():
                    raise
                time.sleep(delay)
        raise AssertionError("unreachable")

    async def _once(
        self, method: str, suffix: str, body: Any, path: Path | None, seconds: float
    ) -> bytes:
        import aiohttp

        headers = {"x-api-key": self._key, "anthropic-version": API_VERSION}
        # a results file may take long to arrive whole, but never a minute without a byte
        timeout = aiohttp.ClientTimeout(
            total=max(min(seconds, TIMEOUT_S if path is None else seconds), 0.1),
            sock_connect=30,
            sock_read=TIMEOUT_S,
        )
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.request(
                    method, self.base + suffix, json=body, headers=headers, allow_redirects=False
                ) as response,
            ):
                status = response.status
                retry_after = retry_after_of(dict(response.headers))
                if status == 200 and path is not None:
                    await _save(response, path, self._name(), self.model)
                    return b""
                raw = await _bounded(response, self._name(), self.model)
        except TimeoutError:
            raise classify_failure(
                None, "timed out", self.model, self.where, timeout=True
            ) from None
        except aiohttp.ClientError as exc:
            error = classify_failure(503, f"connection failed: {exc}", self.model, self.where)
            raise error from None
        if status != 200:
            text = raw[:2000].decode("utf-8", errors="replace")
            error = classify_failure(
                status, _message(text), self.model, self.where, self._key, hint=self._hint
            )
            error.retry_after = retry_after  # type: ignore[attr-defined]
            raise error
        return raw


def checked_id(batch_id: str) -> str:
    """A batch id fit for a URL path and the store: only what Anthropic's ids are made of."""
    if not isinstance(batch_id, str) or not _ID_RE.fullmatch(batch_id):
        raise LLMError(f"the Batches API named a batch {str(batch_id)[:40]!r}: not a batch id")
    return batch_id


def _message(text: str) -> str:
    """Anthropic's error message (`{"error": {"message": ...}}`), else the text itself."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    error = data.get("error") if isinstance(data, dict) else None
    return str(error.get("message") or error) if isinstance(error, dict) else text


async def _bounded(response: Any, name: str, model: str) -> bytes:
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise LLMError(
                f"{name}: the Batches API answered more than {MAX_ANSWER_BYTES:,} bytes",
                model=model,
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _save(response: Any, path: Path, name: str, model: str) -> None:
    """Write the results to `path` as they arrive: at most MAX_RESULTS_BYTES, and at least
    MIN_RESULTS_RATE bytes a second on average once RATE_AFTER_S have passed (a server that sends
    a byte every few seconds would otherwise hold the run for the whole deadline)."""
    size, start = 0, time.monotonic()
    with path.open("wb") as handle:
        async for chunk in response.content.iter_chunked(1 << 20):
            size += len(chunk)
            if size > MAX_RESULTS_BYTES:
                raise LLMError(
                    f"{name}: a batch's results run past {MAX_RESULTS_BYTES:,} bytes", model=model
                )
            handle.write(chunk)
            elapsed = time.monotonic() - start
            if elapsed > RATE_AFTER_S and size < MIN_RESULTS_RATE * elapsed:
                raise LLMError(
                    f"{name}: the batch's results arrive at {size / elapsed:,.0f} bytes a "
                    f"second, too slowly to finish; resume the run later to fetch them again",
                    kind="timeout",
                    retryable=True,
                    model=model,
                )
