"""A gap fill that does not keep the design is refused and an example fill takes its place,
with the reason shown (issue 41, 3): a reply cut at its token limit (the server's
`finish_reason: "length"`, carried through the client), a fill cut at the JSON schema's
length limit, one that stops mid-sentence ("… transporting a maximum of.") or copies the
scenario sentence. The scripted server is the only double."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.cli.main import main
from cogbias.library import examples
from cogbias.library import testcases as library
from cogbias.library.scenarios import load_scenarios
from cogbias.llm import LLMClient, LLMRequest, settings
from cogbias.runs import generate, live, pipeline
from cogbias.runs.generate import GenerationError
from cogbias.store import Store
from tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
CUT = "transporting a maximum of"  # where the budget ran out


def cut_fills(request: dict[str, Any]) -> Any:
    """Gap fills as a server cut at max_tokens sends them: the first fill whole, the JSON
    stopped inside the last one, and `finish_reason` "length"; decisions as usual."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return "Option 1"
    keys = fmt["json_schema"]["schema"]["required"]
    text = "{" + "".join(f'"{k}": "the spare parts budget", ' for k in keys[:-1])
    return {"content": text + f'"{keys[-1]}": "{CUT}', "finish_reason": "length"}


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_the_client_says_when_an_answer_was_cut_at_its_token_limit(
    transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if transport == "litellm":
        monkeypatch.setenv("COGBIAS_LLM_TRANSPORT", "litellm")

    def answer(request: dict[str, Any]) -> Any:
        cut = request.get("max_tokens") == 2
        return {"content": "Option one", "finish_reason": "length" if cut else "stop"}

    cut = LLMRequest("openai/fake", (("user", "Choose."),), max_tokens=2)
    whole = LLMRequest("openai/fake", (("user", "Choose."),), max_tokens=20)
    with FakeLLMServer(answer) as server, Store(tmp_path / "c.db") as store:
        with live.cached_client(store, api_base=server.base_url) as client:
            asked = [pipeline.run_sync(client.complete(r)) for r in (cut, whole)]
        assert [a.finish_reason for a in asked] == ["length", "stop"]
        assert [a.cut for a in asked] == [True, False]
        # the store keeps no finish reason: an answer that used its whole budget was cut
        with live.cached_client(store, api_base=server.base_url) as client:
            again = [pipeline.run_sync(client.complete(r)) for r in (cut, whole)]
        assert server.calls == 2 and all(a.cached for a in again)
        assert [a.cut for a in again] == [True, False]


def test_a_cut_reply_keeps_its_whole_fills_and_refuses_the_cut_one() -> None:
    case = library.get_test_case("anchoring")
    scenario = load_scenarios()[0].text
    with FakeLLMServer(cut_fills) as server:
        client = LLMClient(api_base=server.base_url, max_retries=0)
        instance = pipeline.run_sync(pipeline.generate(client, case, scenario, "openai/fake"))
        fills = [r for r in server.requests if r.get("response_format")]
    assert len(fills) == 2  # the cut reply is asked again once, then refused
    assert "cut off" in fills[1]["messages"][-1]["content"]
    model = [i for i in instance.insertions if i["source"] == "llm"]
    refused = [i for i in instance.insertions if i.get("note")]
    assert [i["text"] for i in model] == ["the spare parts budget"]
    (note,) = [i["note"] for i in refused]
    assert f"the model's fill '{CUT}' was rejected" in note
    assert "the reply was cut off at its limit of" in note and "tokens" in note
    assert refused[0]["source"] == "example"
    assert refused[0]["text"] in case.examples[refused[0]["gap"]]
    for half in ("control", "treatment"):
        assert CUT not in instance.decision_text(half)


def test_cogbias_preview_refuses_a_fill_cut_at_its_token_limit(tmp_path, capsys) -> None:
    with FakeLLMServer(cut_fills) as server:
        args = ["preview", "anchoring", "--generator", "openai/fake"]
        args += ["--api-base", server.base_url, "--db", str(tmp_path / "p.db")]
        assert main(args) == 0
    printed = capsys.readouterr().out
    pair, insertions = printed.split("\nInsertions:")
    assert CUT not in pair
    (line,) = [line for line in insertions.splitlines() if CUT in line]
    assert line.startswith("  [example] ") and "was rejected (the reply was cut off at" in line


def test_preview_page_shows_the_fill_cut_at_its_token_limit_as_refused(
    app_db: Path,
) -> None:
    with FakeLLMServer(cut_fills) as server:
        settings.add_custom_model("openai/cutter", "Cutter", server.base_url, json_schema=True)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        at.switch_page("app_pages/preview.py").run()
        at.selectbox(key="pv_case").set_value("anchoring")
        at.selectbox(key="pv_generator").set_value("openai/cutter").run()
        at.button(key="pv_fill").click().run()
    assert not at.exception, [e.value for e in at.exception]
    notes = [c.value for c in at.caption if c.value.startswith("Example fill for")]
    assert len(notes) == 1 and "cut off at its limit of" in notes[0], notes
    assert CUT in notes[0].replace("\\", "")  # named, as plain text
    shown = "\n".join(m.value for m in at.markdown)
    assert "the spare parts budget" in shown and f">{CUT}<" not in shown


def test_a_cut_fill_without_an_example_to_replace_it_fails_the_fill_by_name() -> None:
    case = library.get_test_case("anchoring")
    bare = dataclasses.replace(case, examples={})
    with FakeLLMServer(cut_fills) as server:
        client = LLMClient(api_base=server.base_url, max_retries=0)
        with pytest.raises(GenerationError, match="cut off at its limit of"):
            pipeline.run_sync(pipeline.generate(client, bare, "A manager.", "openai/fake"))


def test_salvage_reads_the_closed_fills_of_a_cut_reply() -> None:
    whole, partial = generate.salvage_fills('{"a": "one \\"x\\"", "b": "two", "c": "thr')
    assert whole == {"a": 'one "x"', "b": "two"} and partial == {"c": "thr"}
    assert generate.salvage_fills('{"a": "one", "b') == ({"a": "one"}, {})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a truck fleet transporting a maximum of.", "ends mid-sentence, on 'of'"),
        ("the new line, which", "ends mid-sentence"),
        ("a warehouse with room for the", "ends mid-sentence, on 'the'"),
        ("cheaper, faster and", "ends mid-sentence, on 'and'"),
        ("the decision to expand,", "ends mid-sentence, on"),
        ("a budget of twelve (", "ends mid-sentence"),
        ("the team will expand...", "ends mid-sentence"),
        ("x" * 160, "cut off at the 160-character limit"),
        (
            "A product development manager at a company from the Materials industry group "
            "deciding which resin to scale up",
            "copies the scenario sentence",
        ),
    ],
)
def test_a_fill_that_stops_mid_sentence_or_copies_the_scenario_is_refused(text, reason):
    scenario = (
        "A product development manager at a company from the Materials industry group "
        "deciding which bio-based resin formulation to scale up for a new line of packaging."
    )
    problem = examples.check_fill("name one resource you manage", text, scenario=scenario)
    assert problem is not None and reason in problem, problem


def test_every_built_in_example_fill_ends_as_a_fill_should() -> None:
    """The checks that refuse a model's cut fill pass every author-written example fill (an
    example fill is what takes a refused one's place)."""
    scenario = load_scenarios()[0].text
    for case in library.load_library(include_user=False).values():
        for fills in case.examples.values():
            for text in fills:
                assert examples.check_fill("zq", text, scenario=scenario) is None, text


def test_fill_requests_still_ask_for_json_within_the_length_limit() -> None:
    """The schema the local model gets bounds each fill at FILL_CHARS (its grammar closes the
    text there, which `check_fill` refuses as cut)."""
    seen: list[dict] = []

    def answer(request: dict[str, Any]) -> str:
        seen.append(request)
        keys = request["response_format"]["json_schema"]["schema"]["required"]
        return json.dumps({k: "the spare parts budget" for k in keys})

    case = library.get_test_case("anchoring")
    with FakeLLMServer(answer) as server:
        client = LLMClient(api_base=server.base_url, max_retries=0)
        pipeline.run_sync(pipeline.generate(client, case, "A manager.", "openai/fake"))
    props = seen[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert all(
        p["maxLength"] == generate.FILL_CHARS == examples.FILL_MAX_CHARS for p in props.values()
    )
