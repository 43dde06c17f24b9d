"""The LLM client against a real HTTP endpoint on 127.0.0.1 (tests/fake_llm_server.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import traceback
from typing import Any

import pytest

from cogbias.core.redact import redact
from cogbias.llm import FatalLLMError, LLMClient, LLMError, LLMRequest, cache_key, resolve
from cogbias.llm.errors import classify
from cogbias.runs.pipeline import run_sync
from tests.fake_llm_server import FakeHTTPError, FakeLLMServer

SENTINEL = "sk-test-SENTINEL-123"
MODEL = "openai/fake-model"
PROFILE = resolve(MODEL, registry=[])
GOLDEN_CACHE_KEY = "9c9bb8be7313abeeafdde823a1493ea72ced46c910adc9302f7de8497bbabb40"


class DictCache:
    """The smallest ResponseCache: a dict (the real one lives in cogbias.store)."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    async def lookup(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        self.records[key] = record


@pytest.fixture(autouse=True)
def _no_real_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def decision(text: str = "Choose Option 1 or Option 2.", **kwargs: Any) -> LLMRequest:
    return LLMRequest(MODEL, (("system", "You are a manager."), ("user", text)), **kwargs)


def fast_client(cache: DictCache | None = None, **kwargs: Any) -> LLMClient:
    kwargs.setdefault("backoff_base", 0.005)
    kwargs.setdefault("timeout", 10)
    return LLMClient(cache=cache, **kwargs)


def run(coro: Any) -> Any:
    return run_sync(coro)  # closes the loop's HTTP sessions


# -- requests and keys -------------------------------------------------------------------


def test_request_normalises_messages_and_is_hashable() -> None:
    as_dicts = LLMRequest(MODEL, [{"role": "user", "content": "hi"}], temperature=0)
    as_pairs = LLMRequest(MODEL, (("user", "hi"),), temperature=0.0)
    assert as_dicts == as_pairs
    assert hash(as_dicts) == hash(as_pairs)
    assert cache_key(as_dicts, PROFILE) == cache_key(as_pairs, PROFILE)
    assert as_dicts.message_dicts() == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "change",
    [
        {"repeat": 1},
        {"temperature": 0.7},
        {"seed": 3},
        {"max_tokens": 10},
        {"grammar": 'root ::= "A"'},
        {"response_format": {"type": "json_object"}},
    ],
)
def test_cache_key_changes_with_every_answer_relevant_field(change: dict[str, Any]) -> None:
    assert cache_key(decision(), PROFILE) != cache_key(decision(**change), PROFILE)


def test_cache_key_includes_api_base_model_and_resolution_extras() -> None:
    base = cache_key(decision(), PROFILE)
    assert cache_key(decision(), resolve(MODEL, "http://127.0.0.1:1/v1")) != base
    other = LLMRequest("openai/other", decision().messages)
    assert cache_key(other, PROFILE) != base
    rebuilt = dataclasses.replace(PROFILE, file_identity="0123456789abcdef")
    assert cache_key(decision(), rebuilt) != base


def test_cache_key_leaves_out_timeouts_and_deadlines() -> None:
    slow = resolve(MODEL, timeout_s=999.0, deadline_s=9999.0)
    assert cache_key(decision(), slow) == cache_key(decision(), PROFILE)


def test_cache_key_of_a_fixed_request_is_pinned() -> None:
    """Golden value: a change here orphans every cached answer; bump CACHE_KEY_VERSION."""
    req = LLMRequest(
        "openai/fake-model",
        (("system", "You are a manager."), ("user", "Choose Option 1 or Option 2.")),
        temperature=0.0,
        seed=7,
        max_tokens=20,
        repeat=1,
    )
    profile = resolve("openai/fake-model", "http://127.0.0.1:8000/v1")
    assert cache_key(req, profile) == GOLDEN_CACHE_KEY


# -- calls over HTTP ---------------------------------------------------------------------


def test_successful_call_returns_text_tokens_and_caches_without_key() -> None:
    cache = DictCache()
    with FakeLLMServer() as srv:
        client = fast_client(cache, api_base=srv.base_url)
        answer = run(client.complete(decision()))
    assert re.fullmatch(r"Option [12]", answer.text)
    assert answer.prompt_tokens > 0 and answer.completion_tokens == 2
    assert answer.cost is None  # an unmapped model's price is unknown (never $0), no failure
    assert not answer.cached
    assert srv.calls == 1
    (record,) = cache.records.values()
    assert record["model"] == MODEL and record["api_base"] == srv.base_url
    assert record["request"]["messages"][1]["content"] == "Choose Option 1 or Option 2."
    assert "sk-no-key-required" not in json.dumps(record)
    assert set(record) == {
        "model",
        "api_base",
        "request",
        "text",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "latency_s",
        "reasoning",  # a reasoning model's trace (None here) and its thinking tokens
        "reasoning_tokens",
        "finish_reason",  # read by the buffer's readers; the store keeps no column for it
    }
    assert record["finish_reason"] == answer.finish_reason == "stop" and not answer.cut


def test_cache_hit_makes_no_http_call_and_repeat_makes_a_new_one() -> None:
    cache = DictCache()
    with FakeLLMServer() as srv:
        client = fast_client(cache, api_base=srv.base_url)
        first = run(client.complete(decision()))
        again = run(client.complete(decision()))
        assert srv.calls == 1
        assert again.cached and again.text == first.text and again.key == first.key
        run(client.complete(decision(repeat=1)))
        assert srv.calls == 2


def test_json_schema_and_grammar_reach_the_server() -> None:
    schema = {"type": "object", "properties": {"role": {"type": "string"}}, "required": ["role"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "gaps", "schema": schema}}
    with FakeLLMServer() as srv:
        client = fast_client(api_base=srv.base_url)
        answer = run(client.complete(decision("Fill the gaps.", response_format=fmt)))
        run(client.complete(decision(grammar='root ::= "Option " [1-2]', seed=7)))
    assert json.loads(answer.text) == {"role": "role value"}
    assert srv.requests[0]["response_format"] == fmt
    assert srv.requests[1]["grammar"] == 'root ::= "Option " [1-2]'
    assert srv.requests[1]["seed"] == 7


def test_http_errors_are_raised_and_not_cached() -> None:
    cache = DictCache()
    with FakeLLMServer(script=[400]) as srv:
        client = fast_client(cache, api_base=srv.base_url)
        with pytest.raises(LLMError) as info:
            run(client.complete(decision()))
        assert info.value.kind == "bad_request" and not info.value.retryable
        assert not isinstance(info.value, FatalLLMError)
        assert srv.calls == 1  # a 400 is not retried
        assert cache.records == {}
        run(client.complete(decision()))  # the next attempt really asks again
        assert srv.calls == 2 and len(cache.records) == 1


def test_empty_answers_are_errors_and_never_cached() -> None:
    cache = DictCache()
    with FakeLLMServer(responder=lambda request: "  ") as srv:
        client = fast_client(cache, api_base=srv.base_url)
        for _ in range(2):
            with pytest.raises(LLMError) as info:
                run(client.complete(decision()))
            assert info.value.kind == "empty"
        assert srv.calls == 2 and cache.records == {}


def test_retries_500_and_429_then_succeeds() -> None:
    with FakeLLMServer(script=[500, 429, 503, 502], retry_after=0.01) as srv:
        client = fast_client(api_base=srv.base_url)
        answer = run(client.complete(decision()))
    assert answer.text.startswith("Option")
    assert srv.calls == 5 and client.stats.retries == 4
    assert srv.statuses == {500: 1, 429: 1, 503: 1, 502: 1, 200: 1}


def test_honours_retry_after() -> None:
    with FakeLLMServer(script=[429], retry_after=0.3) as srv:
        client = fast_client(api_base=srv.base_url, backoff_base=0.001)
        run(client.complete(decision()))
    first, second = srv.arrival_times
    assert second - first >= 0.29  # our own backoff alone would wait at most 1 ms


def test_gives_up_after_max_retries() -> None:
    with FakeLLMServer(script=[500] * 10) as srv:
        client = fast_client(api_base=srv.base_url, max_retries=2)
        with pytest.raises(LLMError) as info:
            run(client.complete(decision()))
    assert info.value.kind == "server" and info.value.retryable
    assert "gave up after 3 attempts" in str(info.value)
    assert srv.calls == 3


def test_timeouts_are_retried_then_reported() -> None:
    with FakeLLMServer(latency=2.0) as srv:
        client = fast_client(api_base=srv.base_url, timeout=0.2, max_retries=1)
        with pytest.raises(LLMError) as info:
            run(client.complete(decision()))
        assert info.value.kind == "timeout" and info.value.retryable
        assert srv.calls == 2


def test_random_faults_under_concurrency_all_recover() -> None:
    with FakeLLMServer(fail_500=0.2, fail_429=0.2, retry_after=0.01, seed=1) as srv:
        client = fast_client(api_base=srv.base_url, concurrency=8, max_retries=12)

        async def many() -> list[Any]:
            reqs = [decision(f"Case {i}: Option 1 or Option 2?") for i in range(40)]
            return await asyncio.gather(*(client.complete(r) for r in reqs))

        answers = run(many())
    assert len(answers) == 40 and all(a.text.startswith("Option") for a in answers)
    assert srv.statuses[500] > 0 and srv.statuses[429] > 0 and srv.statuses[200] == 40
    assert client.stats.retries == srv.statuses[500] + srv.statuses[429]


def test_concurrency_bound_is_respected() -> None:
    with FakeLLMServer(latency=0.1) as srv:
        client = fast_client(api_base=srv.base_url, concurrency=3)

        async def many() -> None:
            reqs = [decision(f"Case {i}: Option 1 or 2?") for i in range(15)]
            await asyncio.gather(*(client.complete(r) for r in reqs))

        run(many())
    assert srv.calls == 15
    assert 1 < srv.max_in_flight <= 3


# -- fatal errors and secrets ------------------------------------------------------------


def test_401_is_fatal_at_once_and_never_shows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SERVER_KEY", SENTINEL)  # the endpoint's own key, named for it
    with FakeLLMServer(api_key="sk-the-right-key-000") as srv:
        client = fast_client(api_base=srv.base_url, api_key_env="FAKE_SERVER_KEY")
        with pytest.raises(FatalLLMError) as info:
            run(client.complete(decision()))
        assert srv.calls == 1  # no retries on auth errors
        assert srv.authorizations == [f"Bearer {SENTINEL}"]  # the wrong key was sent
    error = info.value
    assert error.kind == "auth" and not error.retryable
    assert MODEL in str(error) and "FAKE_SERVER_KEY is probably wrong" in str(error)
    shown = str(error) + repr(error) + "".join(traceback.format_exception(error))
    assert SENTINEL not in shown
    assert error.__cause__ is None and error.__context__ is None


def test_quota_exhaustion_is_fatal() -> None:
    def no_credit(request: dict[str, Any]) -> str:
        raise FakeHTTPError(429, "You exceeded your current quota (insufficient_quota).")

    with FakeLLMServer(responder=no_credit) as srv:
        client = fast_client(api_base=srv.base_url)
        with pytest.raises(FatalLLMError) as info:
            run(client.complete(decision()))
        assert info.value.kind == "quota" and srv.calls == 1


def test_404_model_not_found_is_fatal() -> None:
    def unknown(request: dict[str, Any]) -> str:
        raise FakeHTTPError(404, "The model `fake-model` does not exist.")

    with FakeLLMServer(responder=unknown) as srv:
        client = fast_client(api_base=srv.base_url)
        with pytest.raises(FatalLLMError) as info:
            run(client.complete(decision()))
    assert info.value.kind == "not_found" and MODEL in str(info.value)


def test_unknown_local_model_is_fatal_without_starting_anything() -> None:
    with pytest.raises(FatalLLMError, match="unknown local model"):
        run(fast_client().complete(LLMRequest("local/nope", (("user", "hi"),))))


def test_prices_come_from_litellm_for_mapped_models() -> None:
    with FakeLLMServer() as srv:
        client = fast_client(api_base=srv.base_url)
        answer = run(client.complete(LLMRequest("openai/gpt-4o-mini", (("user", "Hi"),))))
    assert answer.cost > 0


def test_local_model_without_any_runtime_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cogbias.llm import local

    def broken(path: object) -> str:
        raise ImportError("xllamacpp: illegal instruction")

    monkeypatch.setattr(local, "_api_base", None)
    monkeypatch.delenv("COGBIAS_LOCAL_API_BASE", raising=False)
    monkeypatch.setattr(local, "_start_xllamacpp", broken)
    real_find_spec = local.importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util,
        "find_spec",
        lambda name: None if name == "llama_cpp" else real_find_spec(name),
    )
    with pytest.raises(FatalLLMError, match="pip install 'llama-cpp-python"):
        local.ensure_local_server()


def test_local_model_reuses_a_shared_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from cogbias.llm import local

    with FakeLLMServer() as srv:
        monkeypatch.setattr(local, "_api_base", None)
        monkeypatch.setenv("COGBIAS_LOCAL_API_BASE", srv.base_url)
        answer = run(fast_client().complete(LLMRequest("local/smollm2", (("user", "Hi"),))))
        assert answer.text == "OK" and srv.requests[0]["model"] == "smollm2"


def test_missing_openai_key_is_classified_as_fatal_auth() -> None:
    from cogbias.llm import get_litellm

    litellm = get_litellm()
    exc = litellm.InternalServerError(
        message="OpenAIException - Missing credentials. Please pass an `api_key`.",
        llm_provider="openai",
        model="gpt-4o-mini",
    )
    error = classify(exc, "gpt-4o-mini", None)
    assert isinstance(error, FatalLLMError) and error.kind == "auth"
    assert "OPENAI_API_KEY" in str(error)


def test_redact_removes_env_values_extra_values_and_key_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOME_PROVIDER_TOKEN", "plain-secret-value")
    text = "key plain-secret-value and sk-proj-abcdef123456 and hunter22 and xyz"
    assert redact(text, ("hunter22",)) == "key *** and *** and *** and xyz"


# -- cost that cannot be known, and the random provider ----------------------------------


def test_an_unpriced_model_costs_unknown_stored_as_null_and_a_priced_one_keeps_its_cost(
    tmp_path: Any,
) -> None:
    from cogbias.store import Store
    from cogbias.store.buffered_cache import BufferedCache

    with Store(tmp_path / "calls.db") as store, FakeLLMServer() as srv:
        cache = BufferedCache(store)
        client = fast_client(cache, api_base=srv.base_url)
        unpriced = run(client.complete(decision()))
        priced = run(client.complete(LLMRequest("openai/gpt-4o-mini", (("user", "Hi"),))))
        store.put_llm_calls(cache.drain())
        assert unpriced.cost is None and priced.cost is not None and priced.cost > 0
        assert store.get_llm_call(unpriced.key)["cost"] is None  # NULL: unknown, not $0
        assert store.get_llm_call(priced.key)["cost"] == pytest.approx(priced.cost)
        assert client.stats.unpriced == 1 and client.stats.cost == pytest.approx(priced.cost)
        again = run(client.complete(decision()))  # a cached unpriced answer saved nothing known
        assert again.cached and again.cost == 0.0 and again.cost_saved == 0.0


def test_random_answers_behind_the_client_from_its_answer_space_without_a_call() -> None:
    from cogbias.llm.random_provider import AnswerSpace, choose_option, option_space

    cache = DictCache()
    client = fast_client(cache)
    request = LLMRequest("random", (("user", "Pick one."),), answer_space=option_space(3, "s"))
    answer = run(client.complete(request))
    assert answer.text == f"Option {choose_option(3, 's') + 1}"
    assert answer.cost == 0.0 and not answer.cached and not cache.records
    assert client.stats.requests == 0 and client.stats.http_attempts == 0
    space = AnswerSpace(low=1, high=10, lines=3, seed=5)
    lines = run(client.complete(LLMRequest("random", (("user", "x"),), answer_space=space)))
    assert [1 <= int(v) <= 10 for v in lines.text.split("\n")] == [True] * 3
    # the answer space is not part of the cache key: equal questions share one entry
    profile = client.profile(MODEL)
    assert cache_key(decision(answer_space=space), profile) == cache_key(decision(), profile)
    with pytest.raises(LLMError, match="random baseline"):  # free text it cannot write
        run(client.complete(LLMRequest("random", (("user", "Write a story."),))))


def test_capabilities_are_resolved_on_the_profile() -> None:
    local = resolve("local/smollm2")
    assert local.grammar and local.prefix_cache and local.logprobs and not local.batchable
    own = resolve("openai/my-model", "http://127.0.0.1:9/v1", registry=[])
    assert own.batchable and own.json_schema and own.max_temperature == 2.0
    claude = resolve("anthropic/claude-3-5-sonnet-20240620", registry=[])
    assert claude.max_temperature == 1.0 and not claude.logprobs
    assert claude.batchable and claude.batch_api == "anthropic"  # Message Batches
    rnd = resolve("random")
    assert not rnd.writes_text and rnd.max_temperature == 2.0 and not rnd.batchable


def test_a_run_that_used_an_unpriced_model_shows_its_cost_as_unknown_or_a_lower_bound() -> None:
    from cogbias.core.run_record import Run
    from cogbias.llm import costs
    from cogbias.runs.summaries import cost_text

    def text(cost: float | None, spec: str | None) -> str:  # a stored row's cost, as shown
        return cost_text(Run.from_row({"id": "r", "cost": cost, "spec": spec}))

    spec = json.dumps({"models": ["random", MODEL], "generator": "examples"})
    assert text(0.0, spec) == "unknown"
    assert text(0.0123, spec) == "≥ $0.0123, some unknown"
    assert costs.cost_cell(0.0123, text(0.0123, spec)) == "≥ $0.0123, some unknown"
    priced = json.dumps({"models": ["random", "openai/gpt-4o-mini"], "generator": "examples"})
    assert text(0.0123, priced) == "$0.0123"
    assert costs.cost_cell(0.0123, text(0.0123, priced)) == 0.0123
    assert text(None, None) == "$0.0000"
    generator = json.dumps({"models": ["random"], "generator": MODEL})  # it asked one too
    assert text(0.0, generator) == "unknown"


def test_an_answer_put_while_a_lookup_resumes_is_seen_so_it_is_not_asked_twice(
    tmp_path: Any,
) -> None:
    """Two identical questions in one run: the first is answered in the loop turn between
    the second's bulk read (a miss) and the second resuming; the second must see it."""
    from cogbias.store import Store
    from cogbias.store.buffered_cache import BufferedCache

    record = {"model": MODEL, "text": "A", "prompt_tokens": 1, "completion_tokens": 1}

    async def scenario(cache: BufferedCache) -> dict[str, Any] | None:
        second = asyncio.create_task(cache.lookup("k"))
        await asyncio.sleep(0)  # the second starts its lookup; the bulk read is scheduled
        await asyncio.sleep(0)  # the bulk read runs (a miss); the second is woken next
        cache.put("k", record)  # the first's answer arrives before the second resumes
        return await second

    with Store(tmp_path / "calls.db") as store:
        assert run(scenario(BufferedCache(store))) == record


def test_a_lookup_left_waiting_by_an_ended_event_loop_does_not_stall_the_next_run(
    tmp_path: Any,
) -> None:
    from cogbias.store import Store
    from cogbias.store.buffered_cache import BufferedCache

    with Store(tmp_path / "calls.db") as store:
        cache = BufferedCache(store)
        first = asyncio.new_event_loop()
        first.create_task(cache.lookup("k"))
        first.call_soon(first.stop)  # the lookup starts, then the loop stops before its read
        first.run_forever()
        first.close()
        found = asyncio.run(asyncio.wait_for(cache.lookup("k2"), timeout=5))
        assert found is None  # answered (a miss), not left waiting for the dead loop's read
