"""A model whose key is missing is named and refused before any call, in one sentence."""

from __future__ import annotations

import time

import pytest

from cogbias.llm import LLMRequest
from cogbias.llm.errors import FatalLLMError
from cogbias.llm.factory import open_client
from cogbias.llm.keys import missing_key


def test_missing_key_names_the_variable_only_where_one_is_needed() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-set"}
    assert missing_key("openai/gpt-4o", environ=env) == "OPENAI_API_KEY"
    assert missing_key("anthropic/claude-3-5-haiku", environ=env) is None
    assert missing_key("openai/mine", "http://127.0.0.1:8000/v1", environ=env) is None
    assert missing_key("random", environ=env) is None
    assert missing_key("local/smollm2", environ=env) is None
    assert missing_key("bedrock/anthropic.claude", environ=env) is None  # not ours to judge
    assert missing_key("openai/gpt-4o", environ={"OPENAI_API_KEY": "  "}) == "OPENAI_API_KEY"


def test_a_call_without_its_key_is_refused_at_once_in_our_words(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    request = LLMRequest(model="openai/gpt-4o-mini", messages=(("user", "Hello"),))
    started = time.monotonic()
    with pytest.raises(FatalLLMError) as info:
        open_client(None).complete_sync(request)
    assert info.value.kind == "auth" and info.value.failure_kind == "fatal"
    assert str(info.value) == (
        "openai/gpt-4o-mini needs an API key and OPENAI_API_KEY is not set: set it in the "
        'environment, or add OPENAI_API_KEY = "..." to .streamlit/secrets.toml for the app'
    )
    print(f"refused after {time.monotonic() - started:.3f} s")
