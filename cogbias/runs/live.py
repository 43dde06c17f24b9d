"""One question asked now, outside any run: Learn, Preview and `cogbias pair`/`preview`.

Such a question reads and fills the store's response cache like a run does, so asking the
same thing from a page and from the command line is paid for once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cogbias.llm import LLMClient
from cogbias.llm.factory import open_client
from cogbias.store import Store
from cogbias.store.buffered_cache import BufferedCache


@contextmanager
def cached_client(store: Store, api_base: str | None = None, **tuning: Any) -> Iterator[LLMClient]:
    """A client over `store`'s response cache; what it was answered is stored on the way out,
    also when the question failed half-way (the answers it did get were paid for)."""
    cache = BufferedCache(store)
    try:
        yield open_client(cache, api_base=api_base, **tuning)
    finally:
        store.put_llm_calls(cache.drain())
