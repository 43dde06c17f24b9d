"""Reasoning models in paired runs, against the scripted server answering as they do: a trace
that weighs other options before the final answer, sent inline (`<think>` tags) or in
`reasoning_content`, with thinking tokens in `completion_tokens_details` (issue 44, point 1
and 2's acceptance): no pair is unreadable because of its trace; every trace is stored,
exported and shown; thinking tokens are recorded; the requests carry the effort asked."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder

from cogbias.cli.main import main
from cogbias.core import reasoning
from cogbias.core.export_columns import PAIR_COLUMNS, pair_record
from cogbias.core.records import DecisionStatus, Instance
from cogbias.core.run_record import RunStatus
from cogbias.runs import executor, paired_plan
from cogbias.store import Store
from cogbias.views import shown_pairs

THINKER = "openai/thinker"
BIASES = ["anchoring", "framing_effect", "loss_aversion"]
THINKING_TOKENS = 120


def register_thinker(home: Path, base_url: str) -> None:
    """The user's registry says the model on the scripted server reasons."""
    (home / "models.toml").write_text(
        f'[[models]]\nid = "{THINKER}"\nname = "Thinker"\napi_base = "{base_url}"\n'
        "reasoning = true\n",
        encoding="utf-8",
    )


class Thinker:
    """Answers as a reasoning model: a trace that restates the question's prompt and names
    another option first ("Tentatively, I choose Option 7"), then the scripted final answer;
    inline and in `reasoning_content` by turns."""

    def __init__(self) -> None:
        self.turn = itertools.count()

    def __call__(self, request: dict[str, Any]) -> Any:
        final = default_responder(request)
        if "Option" not in _last_user_text(request) or not final.startswith("Option"):
            return final
        asked = _last_user_text(request)
        prompt = asked.partition("Prompt:")[2].partition("Answer options")[0].strip()
        trace = (
            f"The question: {prompt} Tentatively, I choose Option 7, but Option 1 looks "
            f"safer. On reflection: {final}."
        )
        reply = {"reasoning_tokens": THINKING_TOKENS}
        if next(self.turn) % 2:
            return {**reply, "content": f"<think>{trace}</think>\n\n{final}"}
        return {**reply, "content": final, "reasoning_content": trace}


def run_thinker(tmp_path: Path, srv: FakeLLMServer, **fields: Any) -> str:
    spec = paired_plan.RunSpec(
        models=[THINKER], biases=BIASES, instances=3, api_base=srv.base_url, **fields
    )
    with Store(tmp_path / "r.db") as store:
        plan = paired_plan.plan(spec, store)
        run = executor.execute(plan, store, concurrency=4)
    assert run.status == RunStatus.DONE, run.error
    return run.id


def test_a_trace_weighing_other_options_leaves_every_pair_readable(isolated_home, tmp_path):
    with FakeLLMServer(Thinker()) as srv:
        register_thinker(isolated_home, srv.base_url)
        run_id = run_thinker(tmp_path, srv, reasoning_effort="low")
        decisions = [r for r in srv.requests if "Option" in _last_user_text(r)]
    with Store(tmp_path / "r.db") as store:
        pairs = store.pairs(run_id=run_id)
    assert len(pairs) == 9
    assert [p.decision.status for p in pairs] == [
        DecisionStatus.OK
    ] * 9  # before: 8 of 9 "names several"
    for pair in pairs:
        d = pair.decision
        assert d.control_answer.startswith("Option") and "<think>" not in d.control_answer
        assert "Tentatively, I choose Option 7" in d.control_reasoning
        assert "Tentatively, I choose Option 7" in d.treatment_reasoning
        assert d.reasoning_tokens == 2 * THINKING_TOKENS  # apart from the answer's tokens
        record = pair_record(pair)
        assert set(record) == set(PAIR_COLUMNS)
        assert record["control_reasoning"] == d.control_reasoning
        assert record["reasoning_tokens"] == 2 * THINKING_TOKENS
        shown = shown_pairs.shown_stored_pair(pair)
        assert shown is not None and shown.treatment.reasoning == d.treatment_reasoning
    # every decision request carried the effort asked, and no answer needed an extraction
    assert decisions and all(r.get("reasoning_effort") == "low" for r in decisions)
    assert not [r for r in srv.requests if "Below are the answer options" in json.dumps(r)]


def test_the_trace_signal_is_a_string_match_of_the_treatments_detail(isolated_home, tmp_path):
    with FakeLLMServer(Thinker()) as srv:
        register_thinker(isolated_home, srv.base_url)
        run_id = run_thinker(tmp_path, srv)
    with Store(tmp_path / "r.db") as store:
        pairs = store.pairs(run_id=run_id)
        instances = {r["id"]: r for r in store.instances([p.decision.instance_id for p in pairs])}
    signalled = 0
    for pair in pairs:
        instance = Instance.from_row(instances[pair.decision.instance_id])
        detail = reasoning.eliciting_detail(
            *(f"{h.situation}\n{h.prompt}" for h in (instance.control, instance.treatment))
        )
        for half in ("control", "treatment"):
            trace = getattr(pair.decision, f"{half}_reasoning").lower()
            mentioned = getattr(pair.decision, f"{half}_trace_mentions")
            if not detail:
                assert mentioned is None  # nothing to look for: no signal, not "no"
                continue
            # recomputed by hand: a whole word or number of the detail in the trace
            by_hand = any(word in re.findall(r"[\w.,]+", trace) for word in detail)
            assert mentioned is by_hand
            signalled += mentioned
    assert signalled  # a treatment's trace restates its prompt: the anchor is found


def test_effort_is_refused_for_a_model_that_does_not_reason(tmp_path, capsys):
    code = main(
        ["run", "pairs", "--models", "random,local/smollm2", "--biases", "anchoring",
         "--reasoning-effort", "high", "--dry-run", "--db", str(tmp_path / "x.db")]
    )  # fmt: skip
    assert code != 0
    err = capsys.readouterr().err
    assert "local/smollm2 is not known to" in err and "reasoning = true" in err


def test_each_effort_is_a_run_of_its_own_and_the_default_keeps_its_id(isolated_home):
    base = paired_plan.RunSpec(models=[THINKER], biases=["anchoring"])
    assert "reasoning_effort" not in base.canonical()  # old ids stay
    ids = {
        paired_plan.RunSpec(models=[THINKER], biases=["anchoring"], reasoning_effort=e).run_id
        for e in reasoning.EFFORTS
    }
    assert len(ids) == len(reasoning.EFFORTS) and base.run_id not in ids


@pytest.mark.parametrize("budget", ["100", "abc"])
def test_a_thinking_budget_out_of_range_is_refused_by_name(tmp_path, capsys, budget):
    with pytest.raises(SystemExit):
        main(["run", "pairs", "--models", "random", "--thinking-budget", budget, "--dry-run"])
    assert "--thinking-budget" in capsys.readouterr().err


def test_explore_shows_each_trace_collapsed_and_the_trace_signal(isolated_home, app_db):
    from tests.test_app_pages import assert_clean, open_page, texts

    with FakeLLMServer(Thinker()) as srv:
        register_thinker(isolated_home, srv.base_url)
        run_id = run_thinker(app_db.parent, srv)
    (app_db.parent / "r.db").rename(app_db)
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run_id}").run()
    at.selectbox(key="explore_bias").set_value("anchoring")
    at.selectbox(key="explore_model").set_value(THINKER).run()
    assert_clean(at)
    labels = [e.label for e in at.expander]
    assert any(label.startswith("Trace signal") for label in labels)
    traces = [label for label in labels if label.startswith("Reasoning trace (")]
    assert len(traces) == 2 * 3  # both halves of the cell's three pairs, each collapsed
    assert "Tentatively, I choose Option 7" in "\n".join(str(t.value) for t in at.text)
    assert "string match" in texts(at)


def test_a_model_that_thinks_only_at_temperature_1_is_refused_at_another(tmp_path, capsys):
    claude = "anthropic/claude-3-7-sonnet-20250219"  # the registry: thinks only when asked
    asked = ["run", "pairs", "--models", claude, "--biases", "anchoring", "--dry-run",
             "--db", str(tmp_path / "t.db")]  # fmt: skip
    assert main([*asked, "--reasoning-effort", "low"]) != 0
    assert "add --temperature 1" in capsys.readouterr().err
    assert main([*asked, "--reasoning-effort", "low", "--temperature", "1"]) == 0
    assert main(asked) == 0  # without thinking it is asked as any model
