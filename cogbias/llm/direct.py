"""The lean path: `POST {api_base}/chat/completions` on one pooled aiohttp session per endpoint.

For OpenAI-compatible servers (vLLM, llama.cpp, Ollama's /v1, our local model) litellm adds
nothing but CPU: about 4-15 ms per call for request building, cost lookups and success
logging, against well under 1 ms for one aiohttp request with a JSON body. Model profiles
choose this path for those endpoints; litellm stays for the providers only it covers. Both
paths send the same request, classify failures with the same function
(`errors.classify_failure`) and fill the same cache, so a run's stored results do not depend
on the path.

Sessions are bound to an event loop; `close_sessions()` closes the current loop's ones (the
runner and `pipeline.run_sync` call it before their loop ends).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from cogbias.llm.errors import LLMError, classify_failure, retry_after_of
from cogbias.llm.keys import PLACEHOLDER_KEY

_sessions: dict[int, Any] = {}  # event loop id -> aiohttp.ClientSession
# The largest answer body read: a chat completion of 4,096 tokens with 20 log-probabilities
# each is about 4 MB; a server sending more is broken or hostile, and its body would be
# parsed on the event loop that every other call of the run shares.
MAX_BODY_BYTES = 32_000_000


def _session() -> Any:
    import aiohttp  # on first use: the import costs ~0.25 s, which `cogbias --help` must not pay

    loop = asyncio.get_running_loop()
    session = _sessions.get(id(loop))
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        session = aiohttp.ClientSession(connector=connector, json_serialize=json.dumps)
        _sessions[id(loop)] = session
    return session


async def close_sessions() -> None:
    """Close the sessions of the running loop (call before the loop ends)."""
    session = _sessions.pop(id(asyncio.get_running_loop()), None)
    if session is not None:
        await session.close()


async def chat(
    api_base: str,
    body: dict[str, Any],
    model: str,
    timeout: float,
    api_key: str | None,
    hint: Callable[[str], str] | None = None,
) -> tuple[dict[str, Any], float]:
    """One attempt: (the parsed JSON answer, its latency). Raises `LLMError` with the
    provider's Retry-After in `retry_after`.

    `api_key` is what `llm.keys.key_to_send` chose for this endpoint; None sends a
    placeholder (servers that check no key still expect the header), never anyone's key.
    `hint(model)` says which key to check when the server refuses it."""
    import aiohttp

    url = api_base.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key or PLACEHOLDER_KEY}"}
    api_key = api_key or ""
    started = time.perf_counter()
    try:
        async with _session().post(
            url, json=body, headers=headers, timeout=_timeout(timeout)
        ) as response:
            raw = await _read_bounded(response, model, api_base)
            status = response.status
            # only a refusal's headers are read (a 200's never say when to retry)
            retry_after = None if status == 200 else retry_after_of(dict(response.headers))
    except TimeoutError as exc:
        raise classify_failure(
            None, str(exc) or "timed out", model, api_base, timeout=True
        ) from None
    except aiohttp.ClientError as exc:
        error = classify_failure(503, f"connection failed: {exc}", model, api_base, api_key)
        raise error from None
    latency = time.perf_counter() - started
    if status != 200:
        error = classify_failure(status, _error_text(raw), model, api_base, api_key, hint=hint)
        error.retry_after = retry_after  # type: ignore[attr-defined]
        raise error
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise LLMError(
            f"{model} at {api_base}: the answer is not JSON", kind="other", model=model
        ) from None
    if not isinstance(data, dict):
        raise LLMError(f"{model} at {api_base}: unexpected answer", kind="other", model=model)
    return data, latency


@lru_cache(maxsize=64)  # a deadline shortens each retry's timeout: a few values recur
def _timeout(total: float) -> Any:
    """An `aiohttp.ClientTimeout` of `total` seconds (one object per value, not per call)."""
    import aiohttp

    return aiohttp.ClientTimeout(total=total)


async def _read_bounded(response: Any, model: str, api_base: str) -> bytes:
    """The body, refused past MAX_BODY_BYTES before it is all in memory; read at once when
    the server says its length (what every OpenAI-compatible server does)."""
    length = response.content_length
    if length is not None and length <= MAX_BODY_BYTES:
        return await response.read()
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise LLMError(
                f"{model} at {api_base}: the answer is larger than "
                f"{MAX_BODY_BYTES:,} bytes; it was not read",
                kind="other",
                model=model,
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _error_text(raw: bytes) -> str:
    text = raw[:2000].decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or text)


def answer_of(data: dict[str, Any]) -> tuple[str | None, int, int]:
    """(text, prompt tokens, completion tokens) of a chat completion."""
    try:
        text = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        text = None
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        usage = {}
    return (
        text if isinstance(text, str) else None,
        _int(usage.get("prompt_tokens")),
        _int(usage.get("completion_tokens")),
    )


def finish_of(data: dict[str, Any]) -> str:
    """Why the answer ended, as the server says (`"stop"`, `"length"`: cut at `max_tokens`,
    ...); "" when it does not say."""
    try:
        reason = data["choices"][0].get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return reason[:40] if isinstance(reason, str) else ""


def _int(value: Any) -> int:
    """A token count; anything else (negative, a float, past 2**53, which no database
    column holds) counts as unknown: 0."""
    return value if isinstance(value, int) and 0 <= value < 2**53 else 0


def reasoning_of(data: dict[str, Any]) -> tuple[str, int]:
    """(the trace in a field of its own, reasoning tokens) of a chat completion. The trace is
    `reasoning_content` (DeepSeek, vLLM, litellm) or `reasoning` (OpenRouter, Ollama); the
    tokens are `usage.completion_tokens_details.reasoning_tokens`
    (OpenAI's place). Anything not of the expected type counts as absent."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        message = {}
    if not isinstance(message, dict):
        message = {}
    trace = next(
        (message[k] for k in ("reasoning_content", "reasoning") if isinstance(message.get(k), str)),
        "",
    )
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    tokens = _int(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    return trace, tokens
