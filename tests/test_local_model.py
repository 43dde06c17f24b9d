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
    assert profile.litellm_model == "openai/smollm2" and profile.grammar
    assert profile.cache_extras()["file"]  # the model file's hash, read when a key needs it
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


def _named_independently(answer: str, presented: list[str]) -> set[int]:
    """Presented positions the answer names, read without `cogbias.core.reading`: "Option N"
    (any N) and each option's whole text, where a text inside a longer named text (the "good"
    of "Very good") does not count on its own."""
    low = " ".join(answer.lower().split())
    named = {int(n) - 1 for n in re.findall(r"option\s*#?\s*(\d+)(?!\d)", low)}
    texts = {i: " ".join(t.lower().split()) for i, t in enumerate(presented)}
    found = {i for i, t in texts.items() if re.search(rf"(?<![\w%]){re.escape(t)}(?![\w%])", low)}
    inside = {i for i in found for j in found if i != j and texts[i] in texts[j]}
    return named | (found - inside)


def test_every_reading_of_the_local_model_is_what_its_answer_names(tmp_path) -> None:
    """5 test cases x 4 scenarios in the default mode: a stored choice is the one option the
    answer names; an answer that names none is unreadable, kept, and not scored."""
    pytest.importorskip("xllamacpp")
    from cogbias.runs import executor, paired_plan
    from cogbias.store import Store

    biases = ["anchoring", "framing_effect", "endowment_effect", "halo_effect", "loss_aversion"]
    spec = paired_plan.RunSpec(
        models=["local/smollm2"], biases=biases, scenarios=4, generator="examples"
    )
    with Store(tmp_path / "local.db") as store:
        run = executor.execute(paired_plan.plan(spec, store), store, concurrency=2)
        rows = store.query("select * from decisions")
        instances = {
            r["id"]: r for r in store.query("select id, control, treatment from instances")
        }
    assert run.planned == 20 and len(rows) == 20
    read = unreadable = 0
    for row in rows:
        order = json.loads(row["control_order"])
        for half in ("control", "treatment"):
            options = json.loads(instances[row["instance_id"]][half])["options"]
            presented = [options[j] for j in order]
            answer, choice = row[f"{half}_answer"], row[f"{half}_choice"]
            named = _named_independently(answer, presented)
            if choice is not None:
                read += 1
                picked = order.index(choice)
                assert picked in named, (answer, presented, choice)
                if len(named) > 1:  # then a sentence that states the decision names it alone
                    decisive = [
                        _named_independently(sentence, presented)
                        for sentence in re.split(r"[.!?;\n](?!\d)", answer)
                        if re.search(
                            r"\b(choose|select|pick|go with|opt for|answer)\b", sentence, re.I
                        )
                    ]
                    assert set().union(*decisive) == {picked}, (answer, presented, choice)
            else:
                unreadable += 1
                assert answer and row["status"] == "failed" and row["score"] is None
                assert row["failure_kind"] == "unparseable", row["error"]
    assert read + unreadable == 40
