"""Reasoning models through the client, against a scripted server that answers as they do
(tests/fake_llm_server.py): a trace in `reasoning_content` or inline `<think>` tags, thinking
tokens in `completion_tokens_details`, a trace cut by the token limit. Both transports: the
lean path and litellm."""

from __future__ import annotations

from typing import Any

import pytest

from cogbias.core import reasoning
from cogbias.llm import LLMClient, LLMError, LLMRequest, cache_key, resolve
from cogbias.llm.profiles import TRANSPORT_ENV
from cogbias.runs.pipeline import run_sync
from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_client import DictCache

MODEL = "openai/thinker"
WEIGHING = "Tentatively, I choose Option 7. But Option 2 fits the facts better."


@pytest.fixture(params=["direct", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(TRANSPORT_ENV, request.param)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    return str(request.param)


def ask(srv: FakeLLMServer, cache: DictCache | None = None, **fields: Any) -> Any:
    client = LLMClient(cache=cache, api_base=srv.base_url, backoff_base=0.005, timeout=10)
    request = LLMRequest(MODEL, (("user", "Choose Option 1 or Option 2."),), **fields)
    return run_sync(client.complete(request))


# -- the trace, split off -------------------------------------------------------------------


def test_an_inline_trace_is_taken_out_of_the_answer() -> None:
    split = reasoning.split_trace(f"<think>{WEIGHING}</think>\n\nOption 2")
    assert split == reasoning.Split("Option 2", WEIGHING, unfinished=False)
    # a chat template that opened the tag itself: only the closing one arrives
    assert reasoning.split_trace(f"{WEIGHING}</think>Option 2").answer == "Option 2"
    # stopped while thinking: the tag never closed, nothing is answer
    stopped = reasoning.split_trace(f"<think>{WEIGHING}")
    assert stopped.answer == "" and stopped.trace == WEIGHING and stopped.unfinished
    assert reasoning.split_trace("Option 2") == reasoning.Split("Option 2", "")


@pytest.mark.parametrize("shape", ["reasoning_content", "reasoning", "inline"])
def test_the_answer_is_the_final_content_and_the_trace_travels_beside_it(transport, shape):
    reply: dict[str, Any] = {"content": "Option 2", "reasoning_tokens": 40}
    if shape == "inline":
        reply["content"] = f"<think>{WEIGHING}</think>\n\nOption 2"
    else:
        reply[shape] = WEIGHING
    cache = DictCache()
    with FakeLLMServer(lambda request: reply) as srv:
        answer = ask(srv, cache)
        again = ask(srv, cache)
    assert answer.text == "Option 2" and answer.reasoning == WEIGHING
    assert answer.reasoning_tokens == 40
    (record,) = cache.records.values()
    assert record["text"] == "Option 2" and record["reasoning"] == WEIGHING
    assert again.cached and again.text == "Option 2" and again.reasoning == WEIGHING
    assert again.reasoning_tokens == 40 and srv.calls == 1


def test_an_answer_cached_with_its_trace_inline_is_split_when_read() -> None:
    cache = DictCache()
    with FakeLLMServer() as srv:
        client = LLMClient(cache=cache, api_base=srv.base_url, timeout=10)
        request = LLMRequest(MODEL, (("user", "Choose."),))
        key = cache_key(request, client.profile(MODEL))
        cache.put(key, {"text": f"<think>{WEIGHING}</think>Option 1", "prompt_tokens": 3})
        answer = run_sync(client.complete(request))
    assert answer.cached and answer.text == "Option 1" and answer.reasoning == WEIGHING
    assert srv.calls == 0


def test_thinking_tokens_are_priced_as_output(transport) -> None:
    # gpt-4o-mini's price from litellm's map, its answer from the scripted server
    reply = {"content": "Option 1", "reasoning_content": WEIGHING, "reasoning_tokens": 1000}
    with FakeLLMServer(lambda request: reply) as srv:
        client = LLMClient(api_base=srv.base_url, timeout=10)
        priced = "openai/gpt-4o-mini"
        answer = run_sync(client.complete(LLMRequest(priced, (("user", "Hi"),))))
        profile = client.profile(priced)
    # OpenAI counts thinking inside completion_tokens (1000 + the answer's 2 words)
    assert answer.completion_tokens == 1002 and answer.reasoning_tokens == 1000
    assert answer.cost == pytest.approx(profile.price_per_call(answer.prompt_tokens, 1002))


# -- out of room while thinking -------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        {"content": f"<think>{WEIGHING}", "finish_reason": "length"},
        {"content": "", "reasoning_content": WEIGHING, "finish_reason": "length"},
        {"content": None, "reasoning_tokens": 300, "finish_reason": "length"},
    ],
)
def test_an_answer_that_ran_out_of_room_thinking_is_stopped_while_reasoning(transport, reply):
    with FakeLLMServer(lambda request: reply) as srv, pytest.raises(LLMError) as failed:
        ask(srv, max_tokens=300)
    assert failed.value.failure_kind == "stopped_reasoning"
    message = str(failed.value)
    assert "stopped while reasoning" in message and "300 tokens" in message
    assert "--thinking-budget" in message  # how to raise it


def test_an_empty_answer_without_thinking_is_still_an_empty_answer(transport) -> None:
    with FakeLLMServer(lambda request: {"content": "", "finish_reason": "stop"}) as srv:
        with pytest.raises(LLMError, match="empty answer") as failed:
            ask(srv)
    assert failed.value.failure_kind == "unparseable"


# -- effort and budget on the wire ----------------------------------------------------------


def test_the_effort_is_sent_and_is_part_of_the_cache_key(transport) -> None:
    with FakeLLMServer(lambda request: "Option 1") as srv:
        ask(srv, reasoning_effort="low")
        ask(srv)
    assert srv.requests[0]["reasoning_effort"] == "low"
    assert "reasoning_effort" not in srv.requests[1]  # nothing asked, nothing sent
    profile = resolve(MODEL, srv.base_url, registry=[])
    plain = LLMRequest(MODEL, (("user", "x"),))
    keys = {
        cache_key(plain, profile),
        cache_key(LLMRequest(MODEL, (("user", "x"),), reasoning_effort="low"), profile),
        cache_key(LLMRequest(MODEL, (("user", "x"),), reasoning_effort="high"), profile),
        cache_key(LLMRequest(MODEL, (("user", "x"),), thinking_budget=2048), profile),
    }
    assert len(keys) == 4


def test_a_reasoning_models_answer_gets_room_for_its_thinking() -> None:
    plain = resolve(MODEL, "http://127.0.0.1:9/v1", registry=[])
    assert not plain.reasoning
    assert plain.thinking("high", 4096) == {
        "max_tokens": plain.answer_tokens,
        "reasoning_effort": None,  # a model that does not reason is asked as before
        "thinking_budget": None,
    }
    thinker = resolve("o3-mini", registry=[])  # litellm's map: supports_reasoning
    assert thinker.reasoning
    low, high = thinker.thinking("low", None), thinker.thinking("high", None)
    assert low["reasoning_effort"] == "low" and high["max_tokens"] > low["max_tokens"]
    assert thinker.thinking("low", 3000)["max_tokens"] == thinker.answer_tokens + 3000


def test_provider_batches_carry_the_effort_and_bring_the_trace_back() -> None:
    from cogbias.llm import anthropic_batches

    claude = "anthropic/claude-3-7-sonnet-20250219"
    request = LLMRequest(claude, (("user", "Hi"),), max_tokens=4396, reasoning_effort="low")
    assert request.chat_body("gpt")["reasoning_effort"] == "low"  # an OpenAI batch line
    params = anthropic_batches.message_params(request, resolve(claude, registry=[]))
    assert params["thinking"] == {"type": "enabled", "budget_tokens": 1024}  # litellm's
    budgeted = LLMRequest(claude, (("user", "Hi"),), max_tokens=3300, thinking_budget=3000)
    assert anthropic_batches.message_params(budgeted, resolve(claude, registry=[]))["thinking"] == {
        "type": "enabled",
        "budget_tokens": 3000,
    }
    blocks = [{"type": "thinking", "thinking": WEIGHING}, {"type": "text", "text": "Option 2"}]
    result = {"type": "succeeded", "message": {"content": blocks, "usage": {"output_tokens": 9}}}
    line = anthropic_batches.openai_line({"custom_id": "k", "result": result})
    message = line["response"]["body"]["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Option 2", "reasoning_content": WEIGHING}
