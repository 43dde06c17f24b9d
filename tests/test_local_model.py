"""The built-in local model (SmolLM2-135M via xllamacpp) through the normal client path."""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest

from cogbias.llm import LLMClient, LLMRequest, ensure_local_server, resolve

pytestmark = pytest.mark.local_model

DECISION = """You are the head of procurement at a maker of car parts. The current supplier of a \
critical chip is reliable but raised prices by 12%. A new supplier is 8% cheaper but untested.

Option 1: Stay with the current supplier.
Option 2: Switch fully to the new supplier.
Option 3: Split orders between both suppliers.

Which option do you choose? Answer with "Option N"."""

GAP_KEYS = ["job title", "organization", "resource"]
GAP_EXAMPLE = (
    "Example. Scenario: a store manager in food retail choosing a supplier. Template: "
    '"You are [[job title]] at [[organization]] and manage [[resource]]." Reply: '
    '{"job title": "a store manager", "organization": "a regional grocery chain", '
    '"resource": "the shelf space"}'
)
GAP_PROMPT = """Scenario: a logistics manager in transportation allocating warehouse space.
Template: "You are [[job title]] at [[organization]] and manage [[resource]]."
Reply with one JSON object whose keys are "job title", "organization" and "resource"."""


@pytest.fixture(scope="module")
def client() -> LLMClient:
    pytest.importorskip("xllamacpp")
    ensure_local_server()
    return LLMClient(concurrency=4, timeout=120, max_retries=1)


def test_local_model_resolves_to_a_loopback_openai_endpoint(client: LLMClient) -> None:
    profile = resolve("local/smollm2")
    assert profile.litellm_model == "openai/smollm2" and profile.grammar and profile.file_identity
    api_base = ensure_local_server()
    assert urllib.parse.urlparse(api_base).hostname == "127.0.0.1"
    remote = resolve("openai/gpt-4o")
    assert remote.litellm_model == "openai/gpt-4o" and not remote.grammar and remote.priced


def test_grammar_constrains_a_decision(client: LLMClient) -> None:
    req = LLMRequest(
        "local/smollm2",
        (("user", DECISION),),
        max_tokens=60,
        grammar='root ::= "Option " [1-7]',
    )
    answer = client.complete_sync(req)
    assert re.fullmatch(r"Option [1-7]", answer.text)
    assert answer.cost == 0.0 and answer.prompt_tokens > 50 and answer.completion_tokens <= 4


def test_grammar_reaches_the_sampler_even_against_the_prompt(client: LLMClient) -> None:
    """A grammar the model would never follow by itself proves the constraint is applied."""
    req = LLMRequest(
        "local/smollm2",
        (("user", "Write a short poem about the sea."),),
        max_tokens=20,
        grammar='root ::= "zebra-" [0-9] [0-9]',
    )
    answer = client.complete_sync(req)
    assert re.fullmatch(r"zebra-\d\d", answer.text)


def test_json_schema_gap_fill_returns_the_required_keys(client: LLMClient) -> None:
    text_field = {"type": "string", "minLength": 1, "maxLength": 60}
    schema = {
        "type": "object",
        "properties": {key: text_field for key in GAP_KEYS},
        "required": GAP_KEYS,
        "additionalProperties": False,
    }
    req = LLMRequest(
        "local/smollm2",
        (("system", GAP_EXAMPLE), ("user", GAP_PROMPT)),
        temperature=0.7,
        seed=1,
        max_tokens=150,
        response_format={"type": "json_schema", "json_schema": {"name": "gaps", "schema": schema}},
    )
    answer = client.complete_sync(req)
    data = json.loads(answer.text)
    assert set(data) == set(GAP_KEYS)
    assert all(isinstance(v, str) and 1 <= len(v) <= 60 for v in data.values())
