"""What is sent on to the extraction call is capped as what is stored is capped (issue 22,
point 10): a 5 MB answer once went whole to a paid API a second time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_llm_server import FakeLLMServer, default_responder
from run_helpers import spec

from cogbias.core.limits import MAX_EXTRACTION_CHARS, extraction_input
from cogbias.core.records import MAX_ANSWER_CHARS
from cogbias.runs import decide, executor, paired_plan
from cogbias.store import Store

HUGE = "I weigh every option carefully. " * 160_000  # 5 MB of words, then the choice
CHOICE = "In the end I choose Option 2."


def long_answers(request: dict[str, Any]) -> str:
    prompt = request["messages"][-1]["content"]
    if prompt.startswith(decide.EXTRACT_PROMPT[:40]):
        return "Option 2"
    if request.get("response_format"):
        return default_responder(request)
    return HUGE + CHOICE


def test_a_5_mb_answer_is_never_sent_on_whole(tmp_path: Path) -> None:
    with FakeLLMServer(long_answers) as server, Store(tmp_path / "x.db") as store:
        run = spec(server.base_url, models=["openai/fake"], biases=["anchoring"], scenarios=1,
                   instances=1, generator="examples")  # fmt: skip
        outcome = executor.execute(paired_plan.plan(run, store), store)
        assert outcome.status in ("done", "incomplete"), outcome.error
        extractions = [
            r["messages"][-1]["content"]
            for r in server.requests
            if r["messages"][-1]["content"].startswith(decide.EXTRACT_PROMPT[:40])
        ]
        # the reader leaves an answer past its limit unread, so nothing goes on; and whatever
        # an extraction is asked, it carries at most the cap
        for text in extractions:
            assert len(text) < MAX_EXTRACTION_CHARS + 2_000  # the prompt around the answer
        [row] = store.query("select control_answer, control_choice, error from decisions")
        assert len(row["control_answer"]) <= MAX_ANSWER_CHARS + 20  # stored capped, as before
        assert row["control_choice"] is not None or "characters" in (row["error"] or "")


def test_a_short_answer_is_sent_whole() -> None:
    assert extraction_input("Option 1 because") == "Option 1 because"
    text = "a" * MAX_EXTRACTION_CHARS
    assert extraction_input(text) is text
    cut = extraction_input("b" + text + "c")
    assert cut.startswith("b") and cut.endswith("c") and "[…]" in cut
