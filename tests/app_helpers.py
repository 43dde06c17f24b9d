"""Build small result databases for the app tests: real pipeline code, no LLM needed.

Instances are filled by the value generators only (`generate_offline`) and decided by the
random baseline through `pipeline.decide_pair`, so the rows are exactly what a run writes.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from cogbias.library import testcases as library
from cogbias.llm import LLMClient
from cogbias.runs import pipeline
from cogbias.runs.paired_plan import RunSpec
from cogbias.store import Store

DEFAULT_BIASES = ("framing_effect", "anchoring", "loss_aversion")


def make_results_db(
    path: Path,
    biases: tuple[str, ...] = DEFAULT_BIASES,
    models: tuple[str, ...] = ("random", "random_b"),
    instances: int = 12,
    name: str = "test run",
) -> str:
    """Write one finished run; returns its id. `random_*` models decide like `random`."""
    spec = RunSpec(models=list(models), biases=list(biases), instances=instances, generator="none")
    run_id = spec.run_id
    scenarios = library.load_scenarios()
    client = LLMClient(cache=None)  # the random model answers behind the client, uncached
    with Store(path) as store:
        store.create_run(run_id, asdict(spec), len(biases) * instances * len(models), name=name)
        instance_rows, decision_rows = [], []
        for bias in biases:
            case = library.get_test_case(bias)
            store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
            for i in range(instances):
                scenario = scenarios[i % len(scenarios)]
                inst = pipeline.generate_offline(case, scenario.text, seed=0, index=i)
                inst.scenario_id = scenario.id
                instance_rows.append(inst.to_row())
                for model in models:
                    decision = pipeline.run_sync(
                        pipeline.decide_pair(
                            client,
                            inst,
                            "random",
                            pipeline.PairAsk(run_id=run_id, seed=models.index(model)),
                        )
                    )
                    decision.model = model
                    decision.id = pipeline.stable_id("decision", run_id, inst.id, model)
                    decision_rows.append(decision)
        with store.atomic():
            store.save_instances(instance_rows)
            store.save_decisions(decision_rows)
            store.refresh_run_counts(run_id)
            store.update_run(
                run_id,
                status="done",
                started_at="2026-01-01T00:00:00.000000Z",
                finished_at="2026-01-01T00:00:01.000000Z",
            )
    return run_id
