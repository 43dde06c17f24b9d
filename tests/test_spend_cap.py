"""`--max-cost USD` (issue 44, point 5): a priced run (gpt-4o-mini's price from litellm's map,
its answers from the scripted server) stops before the call that could pass the cap, ends
resumable saying what was spent and how to go on, never spends past it, and resumes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer

from cogbias.cli.main import main
from cogbias.core.run_record import RunStatus
from cogbias.llm import LLMClient, LLMRequest, resolve
from cogbias.llm.spending import SpendCap, SpendCapReached, most_it_costs
from cogbias.runs.pipeline import run_sync
from cogbias.store import Store

PRICED = "openai/gpt-4o-mini"
CAP = 0.002


def _run(db: Path, base: str, *extra: str) -> int:
    return main(
        ["run", "pairs", "--models", PRICED, "--biases", "anchoring,framing_effect",
         "--scenarios", "4", "--instances", "3", "--api-base", base, "--db", str(db),
         "--concurrency", "4", *extra]
    )  # fmt: skip


def test_a_priced_run_stops_at_its_cap_never_over_it_and_resumes(tmp_path, capsys):
    db = tmp_path / "c.db"
    with FakeLLMServer() as srv:
        assert _run(db, srv.base_url, "--max-cost", str(CAP)) == 1
        err = capsys.readouterr().err
        with Store(db) as store:
            [run] = store.runs()
            spent = store.query("select coalesce(sum(cost), 0) as c from llm_calls")[0]["c"]
        assert run["status"] == RunStatus.INCOMPLETE and 0 < run["done"] < run["planned"]
        assert "stopped at the spend cap" in run["error"] and f"cogbias resume {run['id']}" in err
        assert spent <= CAP and run["cost"] <= CAP  # never over it
        asked = srv.calls
        assert main(["resume", run["id"], "--db", str(db), "--max-cost", "1"]) == 0
        assert srv.calls > asked
    with Store(db) as store:
        [run] = store.runs()
    assert run["status"] == RunStatus.DONE and run["done"] == run["planned"]


def test_the_cap_holds_each_calls_bound_before_it_is_sent() -> None:
    profile = resolve(PRICED, "http://127.0.0.1:9/v1")
    request = LLMRequest(PRICED, (("user", "Choose Option 1 or Option 2."),), max_tokens=300)
    bound = most_it_costs(request, profile)
    assert bound is not None and bound > profile.price_per_call(10, 300)  # bytes count high
    cap = SpendCap(limit=2.5 * bound)
    assert cap.hold(request, profile) == bound and cap.hold(request, profile) == bound
    with pytest.raises(SpendCapReached, match=r"\$0\.0000 spent"):
        cap.hold(request, profile)  # a third in flight could pass it
    cap.release(bound, 0.0001)
    assert cap.spent == pytest.approx(0.0001) and cap.held == pytest.approx(bound)


def test_an_unpriced_model_cannot_run_under_a_cap() -> None:
    with FakeLLMServer() as srv:
        client = LLMClient(api_base=srv.base_url, spend_cap=SpendCap(1.0), timeout=10)
        with pytest.raises(SpendCapReached, match="price is unknown"):
            run_sync(client.complete(LLMRequest("openai/unpriced", (("user", "Hi"),))))
    assert srv.calls == 0


def test_max_cost_and_batch_are_refused_together(tmp_path, capsys):
    code = main(["run", "pairs", "--models", "random", "--biases", "anchoring", "--batch",
                 "--max-cost", "1", "--db", str(tmp_path / "b.db")])  # fmt: skip
    assert code != 0 and "--max-cost" in capsys.readouterr().err
