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
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cogbias.llm import direct, keys, thinking, traces
from cogbias.llm.errors import (
    CacheMiss,
    FatalLLMError,
    LLMError,
    classify,
    retry_after_seconds,
)
from cogbias.llm.local import LOCAL_CONCURRENCY, ensure_local_server, local_server_started
from cogbias.llm.profiles import ModelProfile, resolve
from cogbias.llm.random_provider import answer as random_answer
from cogbias.llm.request import LLMRequest, cache_key
from cogbias.llm.spending import SpendCap

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


@dataclass(slots=True)
class LLMResponse:
    """One answer. `cost` is in USD: 0.0 for free models (random, local) and cache hits, None
    when the model's price is unknown (recorded as unknown, never as $0);
    `latency_s` is the duration of the successful HTTP attempt (or of the original call,
    for cached answers); `key` is the cache key, to link stored rows to `llm_calls`.
    `text` is the answer alone: a reasoning model's trace (`llm.traces`) is `reasoning`, with
    its `reasoning_tokens` (kept when cached). `finish_reason` is why the answer ended:
    "length" when it was cut at the request's `max_tokens` ("stop", or "" when unknown,
    otherwise). The cache keeps no finish reason, so a cached answer that used its whole token
    budget counts as cut (`_saved`)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    latency_s: float
    cached: bool
    key: str = ""
    cost_saved: float = 0.0
    reasoning: str = ""
    reasoning_tokens: int = 0
    finish_reason: str = ""

    @property
    def cut(self) -> bool:
        """Whether the answer stopped at its token limit, not where the model ended it."""
        return self.finish_reason == "length"


class ResponseCache(Protocol):
    """Where answers are kept; the store implements it over SQLite."""

    async def lookup(self, key: str) -> dict[str, Any] | None:
        """Return the record put under `key` (text, tokens, cost, latency_s) or None."""
        ...

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Keep a successful answer: model, api_base, request, text, tokens, cost, latency_s."""
        ...


@dataclass(slots=True)
class ClientStats:
    """Counters for progress displays, run totals and benchmarks (cheap increments).

    `cost`/`tokens` are what calls to providers incurred; `cost_saved`/`tokens_saved` what
    cached answers would have cost. `waiting` is the number of calls sleeping before a retry
    right now, `wait_reason` why the last one waits (e.g. "rate limit (HTTP 429)").
    `unpriced` counts calls whose cost is unknown (not in `cost`: a total with unpriced calls
    is a lower bound).
    """

    requests: int = 0
    cache_hits: int = 0
    merged: int = 0
    http_attempts: int = 0
    retries: int = 0
    failures: int = 0
    tokens: int = 0
    cost: float = 0.0
    tokens_saved: int = 0
    cost_saved: float = 0.0
    waiting: int = 0
    wait_reason: str = ""
    unpriced: int = 0


class LLMClient:
    """Async LLM client: cache lookup, then a bounded, retried `litellm.acompletion`.

    Args:
        cache: where successful answers are kept; None disables caching.
        concurrency: maximum requests in flight at once (backoff sleeps do not hold a slot).
        timeout: per-attempt timeout in seconds (default: the model profile's).
        deadline: give up on a call after this many seconds, retries included (default:
            the model profile's); the failure is transient, so a resumed run retries it.
        max_retries: retries after the first attempt, for transient failures only.
        api_base: base URL for remote models, overriding the registry's (OpenAI-compatible
            servers).
        api_key_env: the environment variable holding `api_base`'s key (`--api-key-env`);
            without it the endpoint gets no key but its registry entry's (`llm.keys`).
        read_cache: False asks every model afresh (new answers still replace cached ones).
        backoff_base, backoff_max: exponential backoff with full jitter, in seconds.
        max_retry_after: upper bound on how long a server's Retry-After may make us wait.
        on_miss: makes the client cache-only: a request the cache cannot answer is handed to
            `on_miss(key, request, profile)` once per key and raises `CacheMiss`, so a batch
            round learns exactly which calls a run would make next without making any.
        spend_cap: a call that could pass it is not sent (`llm.spending`: `SpendCapReached`).
    """

    def __init__(
        self,
        cache: ResponseCache | None = None,
        concurrency: int = 16,
        timeout: float | None = None,
        max_retries: int = 6,
        api_base: str | None = None,
        *,
        deadline: float | None = None,
        read_cache: bool = True,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        on_miss: Callable[[str, LLMRequest, ModelProfile], None] | None = None,
        api_key_env: str | None = None,
        spend_cap: SpendCap | None = None,
    ) -> None:
        self.cache = cache
        self.spend_cap = spend_cap
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = timeout
        self.deadline = deadline
        self.max_retries = max_retries
        self.api_base = api_base
        self.read_cache = read_cache
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.on_miss = on_miss
        self._missed: set[str] = set()
        self.stats = ClientStats()
        self._profiles: dict[str, ModelProfile] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._local_semaphore: asyncio.Semaphore | None = None
        self._alone: asyncio.Semaphore | None = None  # local log-probability requests
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: dict[str, asyncio.Future[LLMResponse]] = {}

    def profile(self, model: str) -> ModelProfile:
        """The model's profile (resolved once per client)."""
        found = self._profiles.get(model)
        if found is None:
            found = resolve(
                model,
                self.api_base,
                timeout_s=self.timeout,
                deadline_s=self.deadline,
                api_key_env=self.api_key_env,
            )
            self._profiles[model] = found
        return found

    def _slots(self, local: bool, alone: bool = False) -> tuple[asyncio.Semaphore, ...]:
        # One set of semaphores per event loop: the CLI and tests may call asyncio.run
        # repeatedly. Local models also get at most LOCAL_CONCURRENCY requests in flight: more
        # would only queue inside llama.cpp, where the wait counts against our timeout.
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._local_semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._local_semaphore = asyncio.Semaphore(min(self.concurrency, LOCAL_CONCURRENCY))
            self._alone = asyncio.Semaphore(1)
            self._loop = loop
            self._in_flight = {}
        if alone:  # see `_call`: one at a time, so no other prompt shares its batch
            return (self._alone, self._local_semaphore, self._semaphore)  # type: ignore[return-value]
        return (self._local_semaphore, self._semaphore) if local else (self._semaphore,)

    async def complete(self, req: LLMRequest) -> LLMResponse:
        """Answer `req` from the cache or the model. Raises `LLMError` / `FatalLLMError`.

        Identical requests in flight at the same moment are sent once (single flight): the
        later ones wait for the first and count as cached. The `random` model answers at once
        (`random_provider`): free, never cached, not counted as a request.
        """
        profile = self.profile(req.model)
        if not profile.writes_text:
            return _random_response(req)
        self.stats.requests += 1
        key = cache_key(req, profile)
        if self.cache is not None and self.read_cache:
            hit = await self.cache.lookup(key)
            if hit is not None:
                return self._saved(hit, key, req.max_tokens)
        if self.on_miss is not None:
            if key not in self._missed:
                self._missed.add(key)
                self.on_miss(key, req, profile)
            raise CacheMiss(key)
        self._slots(profile.kind == "local")  # binds the in-flight table to this loop
        waiting = self._in_flight.get(key)
        if waiting is not None:
            first = await asyncio.shield(waiting)
            self.stats.merged += 1
            return self._saved(_as_record(first), key, req.max_tokens)
        held = self.spend_cap.hold(req, profile) if self.spend_cap else 0.0  # or stop the run
        future: asyncio.Future[LLMResponse] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            response = await self._call(req, profile)
        except BaseException as exc:
            self._spent(held, getattr(exc, "cost", None))  # an empty answer was paid for
            if isinstance(exc, Exception):
                future.set_exception(exc)
            else:  # cancelled: the identical requests waiting on this one fail as transient
                future.set_exception(
                    LLMError(f"{req.model}: request abandoned", kind="other", retryable=True)
                )
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        finally:
            self._in_flight.pop(key, None)
        future.set_result(response)
        self._spent(held, response.cost)
        response.key = key
        self.stats.tokens += response.prompt_tokens + response.completion_tokens
        if response.cost is None:
            self.stats.unpriced += 1
        else:
            self.stats.cost += response.cost
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "model": req.model,
                    "api_base": profile.api_base,
                    "request": req.request_record(),
                    **_as_record(response),  # the store keeps all but the finish reason
                },
            )
        return response

    def _spent(self, held: float, cost: float | None) -> None:
        if self.spend_cap is not None:
            self.spend_cap.release(held, cost)

    def _saved(self, hit: Mapping[str, Any], key: str, max_tokens: int | None) -> LLMResponse:
        """A response that cost nothing now: what it cost originally counts as saved (but not
        for answers a batch engine delivered for this purpose: the run paid for those). An
        answer cached with its trace inline (before traces were kept apart, or delivered by a
        batch) is split as a fresh one is; its finish reason is `traces.cached_finish`."""
        self.stats.cache_hits += 1
        split = traces.split(hit["text"], hit.get("reasoning"), traces.cached_json(hit))
        response = LLMResponse(
            text=split.answer,
            prompt_tokens=int(hit.get("prompt_tokens") or 0),
            completion_tokens=int(hit.get("completion_tokens") or 0),
            cost=0.0,
            latency_s=float(hit.get("latency_s") or 0.0),
            cached=True,
            key=key,
            cost_saved=0.0 if hit.get("source") == "batch" else float(hit.get("cost") or 0.0),
            reasoning=split.trace,
            reasoning_tokens=int(hit.get("reasoning_tokens") or 0),
            finish_reason=traces.cached_finish(hit, max_tokens),
        )
        self.stats.tokens_saved += response.prompt_tokens + response.completion_tokens
        self.stats.cost_saved += response.cost_saved
        return response

    def complete_sync(self, req: LLMRequest) -> LLMResponse:
        """Blocking `complete` for one-off calls from the CLI or a Streamlit page."""

        async def once() -> LLMResponse:
            try:
                return await self.complete(req)
            finally:
                await direct.close_sessions()

        return asyncio.run(once())

    async def _call(self, req: LLMRequest, profile: ModelProfile) -> LLMResponse:
        api_base = profile.api_base
        # A missing key, or one that would cross a network unencrypted, is refused here, at
        # once and in our words, instead of by the provider after a wait.
        key = keys.key_to_send(profile)
        if profile.kind == "local":
            api_base = (
                ensure_local_server()
                if local_server_started()
                else await asyncio.to_thread(ensure_local_server)
            )
        if profile.direct and api_base:
            kwargs = req.chat_body(profile.served_name)
        else:
            kwargs = self._kwargs(req, profile, api_base, key)
        if req.top_logprobs is not None and profile.kind == "local":
            # llama.cpp's numbers depend on the batch a prompt is evaluated in: a prefix
            # reused from its prompt cache, or another prompt sharing the batch, moves
            # log-probabilities by 0.01-0.05. A distribution must not depend on what else the
            # server was asked, so these prompts are evaluated whole (no prompt cache) and one
            # at a time (`_slots(alone=True)`).
            body = kwargs if profile.direct and api_base else kwargs.setdefault("extra_body", {})
            body["cache_prompt"] = False
        return await self._call_with_retries(req.model, profile, api_base, kwargs, key)

    def _kwargs(
        self, req: LLMRequest, profile: ModelProfile, api_base: str | None, key: str | None
    ) -> dict[str, Any]:
        """litellm's arguments: the chat body, with the grammar as `extra_body`, and always an
        explicit key for an endpoint given: litellm would otherwise read the provider's
        variable (OPENAI_API_KEY, ...) itself and send it wherever `api_base` points."""
        kwargs = req.chat_body(str(profile.litellm_model))
        grammar = kwargs.pop("grammar", None)
        if grammar is not None:
            kwargs["extra_body"] = {"grammar": grammar}
        if req.thinking_budget is not None:  # litellm maps it onto Anthropic's and Gemini's
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": req.thinking_budget}
        kwargs["num_retries"] = 0  # we retry ourselves, see module docstring
        kwargs["drop_params"] = True  # e.g. `seed` for providers without it, instead of a 400
        if api_base:
            kwargs["api_base"] = api_base
            kwargs["api_key"] = key or keys.PLACEHOLDER_KEY  # never empty: litellm reads env then
        elif key:
            kwargs["api_key"] = key  # the provider's own host
        return kwargs

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    async def _call_with_retries(
        self,
        model_id: str,
        profile: ModelProfile,
        api_base: str | None,
        kwargs: dict[str, Any],
        key: str | None,
    ) -> LLMResponse:
        attempt = 0
        started = time.monotonic()
        deadline = started + profile.deadline_s
        while True:
            left = deadline - time.monotonic()
            async with contextlib.AsyncExitStack() as stack:
                alone = profile.kind == "local" and kwargs.get("top_logprobs") is not None
                for semaphore in self._slots(profile.kind == "local", alone):
                    await stack.enter_async_context(semaphore)
                self.stats.http_attempts += 1
                attempt_timeout = max(0.05, min(profile.timeout_s, left))
                try:
                    answer = await self._attempt(profile, api_base, kwargs, attempt_timeout, key)
                except asyncio.CancelledError:
                    raise
                except LLMError as exc:  # the direct path classifies its own failures
                    error, retry_after = exc, getattr(exc, "retry_after", None)
                except Exception as exc:
                    error = classify(exc, model_id, api_base, key or "", keys.auth_hint(profile))
                    retry_after = retry_after_seconds(exc)
                else:
                    return self._to_response(answer, kwargs, model_id, profile)
            # Raised outside the except block so the provider's exception (whose text may
            # contain a key) is neither chained nor shown in tracebacks.
            if isinstance(error, FatalLLMError) or not error.retryable:
                self.stats.failures += 1
                raise error
            delay = self._backoff(attempt, retry_after)
            if attempt >= self.max_retries or time.monotonic() + delay >= deadline:
                self.stats.failures += 1
                spent = time.monotonic() - started
                error.args = (
                    f"{error.args[0]} (gave up after {attempt + 1} attempts in {spent:.0f} s)",
                )
                raise error
            self.stats.waiting += 1
            self.stats.wait_reason = error.describe()
            try:
                await asyncio.sleep(delay)
            finally:
                self.stats.waiting -= 1
            attempt += 1
            self.stats.retries += 1

    async def _attempt(
        self,
        profile: ModelProfile,
        api_base: str | None,
        kwargs: dict[str, Any],
        timeout: float,
        key: str | None,
    ) -> traces.Attempt:
        """One attempt: the answer, its tokens, trace and finish reason, and its latency."""
        if profile.direct and api_base:  # `kwargs` is the chat body
            hint = keys.auth_hint(profile)
            data, latency = await direct.chat(api_base, kwargs, profile.id, timeout, key, hint)
        else:
            kwargs["timeout"] = timeout
            started = time.perf_counter()
            # litellm passes the timeout on to the HTTP client; the outer guard makes sure a
            # provider that never answers cannot hold a call past its deadline.
            raw = await asyncio.wait_for(get_litellm().acompletion(**kwargs), timeout + 5.0)
            latency = time.perf_counter() - started
            data = raw.model_dump()
        return traces.attempt_of(data, latency, kwargs, profile.id)

    def _to_response(
        self,
        answer: traces.Attempt,
        kwargs: Mapping[str, Any],
        model_id: str,
        profile: ModelProfile,
    ) -> LLMResponse:
        """The attempt's answer with its trace taken out (`core.reasoning`), priced with its
        thinking as output; an answer that is empty once the trace is out fails, as
        "stopped while reasoning" when the model ran out of room thinking."""
        split = traces.split(answer.text, answer.reasoning, traces.json_asked(kwargs))
        billed = thinking.billed_output(answer.completion_tokens, answer.reasoning_tokens)
        cost = profile.price_per_call(answer.prompt_tokens, billed)
        if not split.answer.strip():
            self.stats.failures += 1
            # paid for all the same: a spend cap and the run's cost count it
            self.stats.tokens += answer.prompt_tokens + answer.completion_tokens
            self.stats.cost += cost or 0.0
            error = traces.no_answer(answer, split, kwargs, model_id)
            error.cost = cost  # type: ignore[attr-defined]
            raise error
        return LLMResponse(
            text=split.answer,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cost=cost,
            latency_s=answer.latency,
            cached=False,
            reasoning=split.trace,
            reasoning_tokens=answer.reasoning_tokens,
            finish_reason=answer.finish_reason,
        )


def _random_response(req: LLMRequest) -> LLMResponse:
    """The random baseline's answer from the request's answer space (free, instant)."""
    if req.answer_space is None:
        raise LLMError(
            f"{req.model} is the random baseline, not a language model; it cannot answer "
            "free-text requests",
            kind="bad_request",
            model=req.model,
        )
    text = random_answer(req.answer_space)
    return LLMResponse(text, 0, 0, cost=0.0, latency_s=0.0, cached=False)


def _as_record(response: LLMResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "cost": response.cost,
        "latency_s": response.latency_s,
        "reasoning": response.reasoning or None,  # stored NULL without a trace
        "reasoning_tokens": response.reasoning_tokens,
        "finish_reason": response.finish_reason,
    }
