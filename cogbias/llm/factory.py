"""The one place an `LLMClient` is built, for every caller: CLI, app pages, runs and batches.

Callers differ only in what they pass (a cache, an endpoint, how many calls at once, how
patient to be); building the client in one function means an endpoint is checked the same
way everywhere and a page asking what a command asks reads the same cache entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cogbias.llm.client import LLMClient, ResponseCache
from cogbias.llm.profiles import ModelProfile
from cogbias.llm.registry import check_key_variable
from cogbias.llm.request import LLMRequest
from cogbias.llm.settings import check_api_base


def open_client(
    cache: ResponseCache | None = None,
    *,
    api_base: str | None = None,
    api_key_env: str | None = None,
    read_cache: bool = True,
    concurrency: int = 16,
    on_miss: Callable[[str, LLMRequest, ModelProfile], None] | None = None,
    **tuning: Any,
) -> LLMClient:
    """A client over `cache` (None: no cache) for `api_base` (None: each model's own), whose
    key is in the variable `api_key_env` (None: `api_base` gets no key; see `llm.keys`).

    `on_miss` makes it answer from the cache only (batch rounds; see `LLMClient`). `tuning`
    passes timeouts, retries and back-off through to `LLMClient` unchanged.
    """
    return LLMClient(
        cache=cache,
        concurrency=concurrency,
        api_base=check_api_base(api_base) if api_base else None,
        api_key_env=check_key_variable(api_key_env) if api_key_env else None,
        read_cache=read_cache,
        on_miss=on_miss,
        **tuning,
    )
