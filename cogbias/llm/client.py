"""One async client over `litellm.acompletion`: cache, bounded concurrency, retries, cost.

Why our own retry loop instead of litellm's `num_retries`: we need to classify failures
(fatal auth/quota errors must stop a run at once, transient ones must back off and honour
`Retry-After`), to hold a concurrency slot only while a request is actually in flight, and
to keep errors and empty answers out of the cache. litellm is imported lazily because
importing it takes ~3 s, and `cogbias --help` must not pay for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cogbias.llm.errors import FatalLLMError, LLMError, classify, retry_after_seconds
from cogbias.llm.local import (
    LOCAL_CONCURRENCY,
    LOCAL_PREFIX,
    LOCAL_TIMEOUT_S,
    local_server_started,
    resolve_model,
)

Message = tuple[str, str]
DUMMY_API_KEY = "sk-no-key-required"

_litellm_module: Any = None


def get_litellm() -> Any:
    """Import and configure litellm once (lazily: the import costs ~3 s of CPU)."""
    global _litellm_module
    if _litellm_module is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True  # no "Provider List" banners on every error
        # We report failures ourselves; litellm's own warnings (e.g. its logging worker
        # noticing a new event loop on each asyncio.run) are noise for our users.
        logging.getLogger("LiteLLM").setLevel(logging.ERROR)
        _litellm_module = litellm
    return _litellm_module


def _normalize_messages(messages: Iterable[Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    for m in messages:
        if isinstance(m, Mapping):
            extra = set(m) - {"role", "content"}
            if extra:
                raise TypeError(f"message keys other than role/content are not supported: {extra}")
            out.append((str(m["role"]), str(m["content"])))
        else:
            role, content = m
            out.append((str(role), str(content)))
    return tuple(out)


@dataclass(frozen=True)
class LLMRequest:
    """Everything that determines an answer; hashable, and the basis of the cache key.

    `messages` may be given as (role, content) pairs or {"role", "content"} dicts; it is
    stored as a tuple of pairs. `repeat` only enters the cache key, so repeated samples at
    temperature > 0 are distinct calls. `grammar` (GBNF) is sent as `extra_body` and only
    understood by llama.cpp servers.
    """

    model: str
    messages: tuple[Message, ...]
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = field(default=None, hash=False)
    grammar: str | None = None
    repeat: int = 0
    api_base: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalize_messages(self.messages))
        object.__setattr__(self, "temperature", float(self.temperature))

    def message_dicts(self) -> list[dict[str, str]]:
        """Messages in the OpenAI wire format."""
        return [{"role": role, "content": content} for role, content in self.messages]

    def request_record(self) -> dict[str, Any]:
        """JSON-able description of the request for the store (never keys or headers)."""
        return {
            "messages": self.message_dicts(),
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "response_format": self.response_format,
            "grammar": self.grammar,
            "repeat": self.repeat,
        }


def cache_key(req: LLMRequest, api_base: str | None) -> str:
    """sha256 of the canonical JSON of everything that can change the answer."""
    payload = {
        "model": req.model,
        "api_base": api_base.rstrip("/") if api_base else None,
        "messages": req.messages,
        "temperature": req.temperature,
        "seed": req.seed,
        "max_tokens": req.max_tokens,
        "response_format": req.response_format,
        "grammar": req.grammar,
        "repeat": req.repeat,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(slots=True)
class LLMResponse:
    """One answer. `cost` is in USD (0.0 when litellm has no price for the model);
    `latency_s` is the duration of the successful HTTP attempt (or of the original call,
    for cached answers); `key` is the cache key, to link stored rows to `llm_calls`."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    cached: bool
    key: str = ""


class ResponseCache(Protocol):
    """Where answers are kept; the store implements it over SQLite."""

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the record put under `key` (text, tokens, cost, latency_s) or None."""
        ...

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Keep a successful answer: model, api_base, request, text, tokens, cost, latency_s."""
        ...


@dataclass(slots=True)
class ClientStats:
    """Counters for progress displays and benchmarks (cheap integer increments)."""

    requests: int = 0
    cache_hits: int = 0
    http_attempts: int = 0
    retries: int = 0
    failures: int = 0


class LLMClient:
    """Async LLM client: cache lookup, then a bounded, retried `litellm.acompletion`.

    Args:
        cache: where successful answers are kept; None disables caching.
        concurrency: maximum requests in flight at once (backoff sleeps do not hold a slot).
        timeout: per-attempt timeout in seconds.
        max_retries: retries after the first attempt, for transient failures only.
        api_base: default base URL for models that need one (OpenAI-compatible servers).
        backoff_base, backoff_max: exponential backoff with full jitter, in seconds.
        max_retry_after: upper bound on how long a server's Retry-After may make us wait.
    """

    def __init__(
        self,
        cache: ResponseCache | None = None,
        concurrency: int = 16,
        timeout: float = 120,
        max_retries: int = 6,
        api_base: str | None = None,
        *,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
    ) -> None:
        self.cache = cache
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.api_base = api_base
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.stats = ClientStats()
        self._semaphore: asyncio.Semaphore | None = None
        self._local_semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unpriced: set[str] = set()

    def _slots(self, local: bool) -> tuple[asyncio.Semaphore, ...]:
        # One set of semaphores per event loop: the CLI and tests may call asyncio.run
        # repeatedly. Local models also get at most LOCAL_CONCURRENCY requests in flight: more
        # would only queue inside llama.cpp, where the wait counts against our timeout.
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._local_semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._local_semaphore = asyncio.Semaphore(min(self.concurrency, LOCAL_CONCURRENCY))
            self._loop = loop
        return (self._local_semaphore, self._semaphore) if local else (self._semaphore,)

    def identity_api_base(self, req: LLMRequest) -> str | None:
        """The api_base that identifies the endpoint in the cache key (None for local/)."""
        if req.model.startswith(LOCAL_PREFIX):
            return None  # its port changes every process; the model id already identifies it
        base = req.api_base or self.api_base
        if base is None and req.model.startswith("openai/"):
            base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        return base

    async def complete(self, req: LLMRequest) -> LLMResponse:
        """Answer `req` from the cache or the model. Raises `LLMError` / `FatalLLMError`."""
        self.stats.requests += 1
        identity_base = self.identity_api_base(req)
        key = cache_key(req, identity_base)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return LLMResponse(
                    text=hit["text"],
                    prompt_tokens=int(hit.get("prompt_tokens") or 0),
                    completion_tokens=int(hit.get("completion_tokens") or 0),
                    cost=float(hit.get("cost") or 0.0),
                    latency_s=float(hit.get("latency_s") or 0.0),
                    cached=True,
                    key=key,
                )
        if req.model.startswith(LOCAL_PREFIX) and not local_server_started():
            model, api_base, extra = await asyncio.to_thread(resolve_model, req.model)
        else:
            model, api_base, extra = resolve_model(req.model)
        api_base = api_base or identity_base
        kwargs = self._kwargs(req, model, api_base, extra)
        response = await self._call_with_retries(req.model, api_base, kwargs)
        response.key = key
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "model": req.model,
                    "api_base": identity_base,
                    "request": req.request_record(),
                    "text": response.text,
                    "prompt_tokens": response.prompt_tokens,
                    "completion_tokens": response.completion_tokens,
                    "cost": response.cost,
                    "latency_s": response.latency_s,
                },
            )
        return response

    def complete_sync(self, req: LLMRequest) -> LLMResponse:
        """Blocking `complete` for one-off calls from the CLI or a Streamlit page."""
        return asyncio.run(self.complete(req))

    def _kwargs(
        self, req: LLMRequest, model: str, api_base: str | None, extra: dict[str, Any]
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": req.message_dicts(),
            "temperature": req.temperature,
            "timeout": max(self.timeout, LOCAL_TIMEOUT_S)
            if req.model.startswith(LOCAL_PREFIX)
            else self.timeout,
            "num_retries": 0,  # we retry ourselves, see module docstring
            "drop_params": True,  # e.g. `seed` for providers without it, instead of a 400
        }
        if api_base:
            kwargs["api_base"] = api_base
            if model.startswith("openai/") and (
                req.model.startswith(LOCAL_PREFIX) or not os.environ.get("OPENAI_API_KEY")
            ):
                kwargs["api_key"] = DUMMY_API_KEY  # litellm insists on some key
        if req.seed is not None:
            kwargs["seed"] = req.seed
        if req.max_tokens is not None:
            kwargs["max_tokens"] = req.max_tokens
        if req.response_format is not None:
            kwargs["response_format"] = req.response_format
        if req.grammar is not None:
            kwargs["extra_body"] = {"grammar": req.grammar}
        for name, value in extra.items():
            if name == "extra_body" and "extra_body" in kwargs:
                kwargs["extra_body"] = {**value, **kwargs["extra_body"]}
            else:
                kwargs[name] = value
        return kwargs

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    async def _call_with_retries(
        self, model_id: str, api_base: str | None, kwargs: dict[str, Any]
    ) -> LLMResponse:
        litellm = get_litellm()
        attempt = 0
        local = model_id.startswith(LOCAL_PREFIX)
        while True:
            async with contextlib.AsyncExitStack() as stack:
                for semaphore in self._slots(local):
                    await stack.enter_async_context(semaphore)
                self.stats.http_attempts += 1
                started = time.perf_counter()
                try:
                    raw = await litellm.acompletion(**kwargs)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    error = classify(exc, model_id, api_base, kwargs.get("api_key", ""))
                    retry_after = retry_after_seconds(exc)
                else:
                    latency = time.perf_counter() - started
                    return self._to_response(raw, model_id, kwargs["model"], latency)
            # Raised outside the except block so the provider's exception (whose text may
            # contain a key) is neither chained nor shown in tracebacks.
            if isinstance(error, FatalLLMError) or not error.retryable:
                self.stats.failures += 1
                raise error
            if attempt >= self.max_retries:
                self.stats.failures += 1
                error.args = (f"{error.args[0]} (gave up after {attempt + 1} attempts)",)
                raise error
            await asyncio.sleep(self._backoff(attempt, retry_after))
            attempt += 1
            self.stats.retries += 1

    def _to_response(self, raw: Any, model_id: str, model: str, latency: float) -> LLMResponse:
        try:
            text = raw.choices[0].message.content
        except (AttributeError, IndexError):
            text = None
        if not text or not text.strip():
            self.stats.failures += 1
            raise LLMError(f"{model_id}: empty answer", kind="empty", model=model_id)
        usage = getattr(raw, "usage", None)
        return LLMResponse(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost=self._cost(raw, model_id, model),
            latency_s=latency,
            cached=False,
        )

    def _cost(self, raw: Any, model_id: str, model: str) -> float:
        # litellm already priced the response while building it (`_hidden_params`); pricing
        # it again would double the cost lookup, which is ~1-2 ms for an unmapped model.
        if model_id.startswith(LOCAL_PREFIX) or model in self._unpriced:
            return 0.0
        hidden = getattr(raw, "_hidden_params", None) or {}
        if "response_cost" in hidden:
            return float(hidden["response_cost"] or 0.0)
        try:
            return float(get_litellm().completion_cost(completion_response=raw) or 0.0)
        except Exception:  # unmapped model: litellm raises several different errors
            self._unpriced.add(model)
            return 0.0
