"""The paired kinds of run: library test cases, an imported dataset, the token-bias study.

A unit is one pair: both halves of one instance answered by one model for one repeat,
scored into one `decisions` row. A run from the library first generates its missing
instances (an instance that failed transiently is not stored, so another run does not
inherit an outage, and resuming generates it again); a dataset run takes its instances from
the store; the token-bias study is a dataset run whose pairs are written into the store
(`datasets.tokenbias_study.materialise`) when it is planned. What a run asks is in `paired_plan`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, replace
from typing import Any

from cogbias.core import expressions, metrics, records
from cogbias.core.metrics import MetricParams
from cogbias.core.records import Decision, DecisionStatus, Instance
from cogbias.core.run_record import Run
from cogbias.core.templates import Filled
from cogbias.library import testcases as library
from cogbias.runs import pipeline, scorers
from cogbias.runs.decide import PairAsk
from cogbias.runs.paired_plan import (
    InstanceJob,
    Plan,
    RunSpec,
    create_run,
    plan,
)
from cogbias.runs.paired_results import PairedResults
from cogbias.runs.work import Job, Writer, pool
from cogbias.store import Store


class PairedKind(PairedResults):
    """Library test cases × scenarios × instances × models × repeats (its read side:
    `paired_results.PairedResults`)."""

    name = "paired"
    unit_name = "pairs"
    batchable = True

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return "kind" not in spec

    def target(self, spec: Mapping[str, Any]) -> str:
        return spec.get("dataset") or ",".join(spec.get("biases", [])) or "all"

    def plan(self, spec: RunSpec, store: Store) -> Plan:
        return plan(spec, store)

    def replan(self, store: Store, run: Run) -> Plan:
        spec = RunSpec.from_stored(run.spec)
        if spec.option_order is None:  # stored before runs chose: half reversed, as all were
            spec = replace(spec, option_order=metrics.HALF_REVERSED)
        planned = plan(spec, store)
        if planned.spec.run_id != run.id:  # stored by an older cogbias under another id
            raise ValueError(
                f"run {run.id} cannot be resumed: its spec now maps to {planned.spec.run_id}"
            )
        return planned

    def create(self, plan: Plan, store: Store, name: str) -> str:
        return create_run(plan, store, name, kind=self.name)

    def prepare(self, plan: Plan, store: Store, retry_failed: bool) -> dict[str, Any]:
        for case in plan.cases.values():
            store.save_test_case(case.id, case.name, case.content_hash, library.to_toml(case))
        if plan.cases:  # the versions this run asks, kept for its resumes
            store.pin_test_cases(
                plan.spec.run_id, {c.id: c.content_hash for c in plan.cases.values()}
            )
        scenarios = {job.scenario.id: job.scenario for job in plan.jobs}
        store.save_scenarios([{**asdict(s), "text": s.text} for s in scenarios.values()])
        if retry_failed:
            store.forget_failed_instances([j.id for j in plan.jobs])
        return store.refresh_run_counts(plan.spec.run_id)

    async def work(self, job: Job) -> None:
        retried = retried_decisions(job.store, job.plan.spec.run_id, job.retry_failed)
        instances = await _instances(job)
        await _decisions(job, instances, retried)

    def save(self, store: Store, rows: Mapping[str, list[Any]]) -> None:
        store.save_instances(rows.get("instances", []))
        store.save_decisions(rows.get("decisions", []))

    def incomplete(self, job: Job) -> str | None:
        run_id, planned = job.plan.spec.run_id, job.plan.planned
        left = job.store.run_failure_kinds(run_id).get("transient", 0)
        counts = job.store.refresh_run_counts(run_id)
        if left:
            return (
                f"{left} pair(s) failed on transient errors (timeouts, rate limits, server "
                f"errors); run `cogbias resume {run_id}` to retry them"
            )
        if counts["done"] < planned:
            return f"only {counts['done']} of {planned} pairs were made; resume the run"
        return None

    def end_fields(self, job: Job) -> dict[str, Any]:
        return {}


class DatasetKind(PairedKind):
    """The instances of an imported dataset × models × repeats."""

    name = "dataset"

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return "kind" not in spec and bool(spec.get("dataset"))


class TokenBiasKind(DatasetKind):
    """The token-bias study: its pairs are stored as the dataset `tokenbias` when planned."""

    name = "tokenbias"
    dataset = "tokenbias"

    def owns(self, spec: Mapping[str, Any]) -> bool:
        return "kind" not in spec and spec.get("dataset") == self.dataset

    def plan(self, spec: RunSpec, store: Store) -> Plan:
        from cogbias.datasets import tokenbias_study  # pandas: only when this kind plans

        tokenbias_study.materialise(store)  # a no-op when the study file is unchanged
        return plan(spec, store)


def retried_decisions(store: Store, run_id: str, retry_failed: bool) -> dict[str, str]:
    """The run's failed decisions to ask again (id -> kind): transient ones on every resume,
    all of them with `retry_failed`."""
    kinds = records.FAILURE_KINDS if retry_failed else records.RETRIED_ON_RESUME
    return {k: v for k, v in store.failed_decisions(run_id).items() if v in kinds}


def decision_jobs(
    plan: Plan, instances: Mapping[str, Instance], skip: set[str]
) -> Iterator[tuple[Instance, str, int, str]]:
    """(instance, model, repeat, decision id) of every planned pair not in `skip`, in plan order."""
    spec = plan.spec
    run_id = spec.run_id  # a hash of the spec: made once, not once a pair
    for instance_id in plan.instance_ids:
        instance = instances.get(instance_id)
        if instance is None:
            continue
        for model in spec.models:
            for repeat in range(spec.repeats):
                key = records.decision_id(
                    run_id, instance.id, model, repeat, spec.temperature, spec.prompting
                )
                if key not in skip:
                    yield instance, model, repeat, key


async def _instances(job: Job) -> dict[str, Instance]:
    """The run's instances, generating the missing ones first.

    A generation that failed transiently is not stored (another run must not inherit an
    outage); its pairs fail as transient, and resuming generates it again.
    """
    plan, store, writer = job.plan, job.store, job.writer
    if plan.dataset_instances:
        return {r["id"]: Instance.from_row(r) for r in store.instances(plan.dataset_instances)}
    existing = store.existing_instance_ids(j.id for j in plan.jobs)
    made: dict[str, Instance] = {}
    spec = plan.spec

    async def make(instance_job: InstanceJob) -> None:
        from cogbias.llm import FatalLLMError, LLMError

        try:
            instance = await pipeline.generate(
                job.client,
                instance_job.case,
                instance_job.scenario.text,
                generator=spec.generator,
                seed=spec.seed,
                temperature=spec.generator_temperature,
                index=instance_job.index,
                scenario_id=instance_job.scenario.id,
            )
        except FatalLLMError:
            raise
        except LLMError as exc:
            instance = _failed_instance(instance_job, spec, str(exc), exc.failure_kind)
        except pipeline.GenerationError as exc:
            instance = _failed_instance(instance_job, spec, str(exc), "unparseable")
        except expressions.ExpressionError as exc:  # names case and values
            instance = _failed_instance(instance_job, spec, str(exc), "invalid")
        made[instance_job.id] = instance
        if instance.failure_kind != "transient":
            writer.add("instances", instance.to_row())
        writer.run.generated += 1

    missing = [j for j in plan.jobs if j.id not in existing]
    writer.run.generated, writer.run.to_generate = 0, len(missing)
    await pool(iter(missing), make, job.concurrency)
    rows = {r["id"]: r for r in store.instances(existing)}
    return made | {i: Instance.from_row(r) for i, r in rows.items()}


def _failed_instance(job: InstanceJob, spec: RunSpec, error: str, kind: str) -> Instance:
    """A stand-in for an instance that could not be made: enough to record its pairs."""
    blank = [
        Filled(t.situation, t.prompt, t.options) for t in (job.case.control, job.case.treatment)
    ]
    return Instance(
        id=job.id,
        test_case=job.case.id,
        test_case_hash=job.case.content_hash,
        scenario=job.scenario.text,
        control=blank[0],
        treatment=blank[1],
        metric=MetricParams(),
        scenario_id=job.scenario.id,
        instance_index=job.index,
        generator=spec.generator,
        temperature=spec.generator_temperature,
        seed=spec.seed,
        status=DecisionStatus.FAILED,
        error=f"generation failed: {error}",
        failure_kind=kind,
    )


def pair_ask(plan: Plan, repeat: int) -> PairAsk:
    """How `plan`'s run asks its pairs of `repeat` (the run's settings, its option order as
    planned): what every scorer's `decide` is handed."""
    spec = plan.spec
    return PairAsk(
        run_id=spec.run_id,
        temperature=spec.temperature,
        repeat=repeat,
        seed=spec.seed,
        prompting=spec.prompting,
        extractor=spec.extractor,
        option_order=plan.option_order,
        reading=spec.reading,
        samples=spec.samples,
        reducer=spec.reducer,
        reasoning_effort=spec.reasoning_effort,
        thinking_budget=spec.thinking_budget,
        intervention=spec.intervention,
    )


async def _decisions(job: Job, instances: dict[str, Instance], retried: dict[str, str]) -> None:
    plan, writer = job.plan, job.writer
    spec = plan.spec
    skip = job.store.existing_decision_ids(spec.run_id) - set(retried)
    uncounted = dict(retried)  # a retried pair replaces its failure in the counts
    asks = {repeat: pair_ask(plan, repeat) for repeat in range(spec.repeats)}
    scorer = scorers.get(spec.scoring)

    async def decide(pair: tuple[Instance, str, int, str]) -> None:
        instance, model, repeat, key = pair
        ask = asks[repeat]
        if instance.status != DecisionStatus.OK:
            error = instance.error or "instance failed"
            kind = instance.failure_kind or "invalid"
            row = pipeline.failed_decision(instance, model, ask, error, kind)
        else:
            asked_before = retried.get(key) not in (None, "transient")
            client = job.fresh if asked_before else job.client
            row = await scorer.decide(client, instance, model, ask)
        _add_decision(writer, uncounted, row)

    await pool(decision_jobs(plan, instances, skip), decide, job.concurrency)


def _add_decision(writer: Writer, retried: dict[str, str], decision: Decision) -> None:
    """Count a finished pair (a retried one replaces its failure) and hand it to the writer."""
    if retried.pop(decision.id, None) is None:
        writer.run.done += 1
    else:
        writer.run.failed -= 1
    writer.run.failed += decision.status == DecisionStatus.FAILED
    writer.add("decisions", decision)
