"""The run the runner tests share: three biases, two scenarios, two instances, the random
baseline and a model on the scripted test server, which also fills the gaps."""

from __future__ import annotations

from typing import Any

from cogbias.core.records import Decision
from cogbias.runs import paired_plan

BIASES = ["anchoring", "framing_effect", "loss_aversion"]


def spec(base_url: str, **overrides: object) -> paired_plan.RunSpec:
    fields: dict[str, object] = dict(
        models=["random", "openai/fake"],
        biases=BIASES,
        scenarios=2,
        instances=2,
        generator="openai/fake",
        api_base=base_url,
    )
    return paired_plan.RunSpec(**{**fields, **overrides})  # type: ignore[arg-type]


def decision_of(**fields: Any) -> Decision:
    """A decision with placeholder ids and the given answers, for the pair views' tests."""
    ids = dict(id="d", run_id="r", instance_id="i", test_case="b", model="m")
    return Decision(**{**ids, **fields})
