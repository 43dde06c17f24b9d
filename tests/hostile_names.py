"""A finished run whose test case and model names carry what no name may hold any more (BEL,
a right-to-left override, 20,000 and 3,000 characters), written straight into the store as an
old database would hold it: `cogbias run` and `library check` refuse such names now.

The pairs are real: anchoring filled offline and decided by the random baseline (as
`app_helpers.make_results_db` does), stored once under its own id and again under each hostile
test case id, for each hostile model."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from pathlib import Path

from cogbias.library import testcases as library
from cogbias.llm import LLMClient
from cogbias.runs import pipeline
from cogbias.runs.paired_plan import RunSpec
from cogbias.store import Store

BEL_CASE = "evil\u202e case \x07 bell"
LONG_CASE = "long_case_" + "x" * 19_990
BEL_MODEL = "openai/m\x07\u202eodel"
LONG_MODEL = "openai/" + "y" * 3_000
MODELS = ("random", BEL_MODEL, LONG_MODEL)
CASES = ("anchoring", BEL_CASE, LONG_CASE)
RUN_NAME = "hostile \x07 run \u202e"
INSTANCES = 3


def hostile_run_db(path: Path) -> str:
    """Write the run (3 test cases x 3 models x INSTANCES pairs) to `path`; returns its id."""
    spec = RunSpec(models=list(MODELS), biases=list(CASES), instances=INSTANCES)
    run_id = spec.run_id
    case = library.get_test_case("anchoring")
    scenarios = library.load_scenarios()
    client = LLMClient(cache=None)  # the random model answers behind the client, uncached
    instances, decisions = [], []
    for i in range(INSTANCES):
        filled = pipeline.generate_offline(case, scenarios[i].text, seed=0, index=i)
        filled.scenario_id = scenarios[i].id
        for case_id in CASES:
            inst = dataclasses.replace(filled, test_case=case_id)
            inst.id = pipeline.stable_id("instance", case_id, filled.id)
            instances.append(inst.to_row())
            for seed, model in enumerate(MODELS):
                ask = pipeline.PairAsk(run_id=run_id, seed=seed)
                decision = pipeline.run_sync(pipeline.decide_pair(client, inst, "random", ask))
                decision.model = model
                decision.id = pipeline.stable_id("decision", run_id, inst.id, model)
                decisions.append(decision)
    with Store(path) as store:
        store.create_run(run_id, asdict(spec), len(decisions), name=RUN_NAME)
        store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
        with store.atomic():
            store.save_instances(instances)
            store.save_decisions(decisions)
            store.refresh_run_counts(run_id)
            store.update_run(run_id, status="done")
    return run_id
