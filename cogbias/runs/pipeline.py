"""generate (fill gaps) · decide (answer + extract) · score — the paper's three functions.

Each step is a plain async function over an `LLMClient`; the runner decides how many run at
once and where results go. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cogbias.core import metrics
from cogbias.core.records import Instance, cap_text, decision_id, dumps, instance_id, stable_id
from cogbias.core.templates import (
    Filled,
    LLMGap,
    Template,
    fill,
    render_decision_text,
    render_options,
    show_value,
)
from cogbias.library import examples
from cogbias.library.testcases import TestCase
from cogbias.llm import random_provider
from cogbias.llm.profiles import RANDOM_MODEL
from cogbias.runs.prompting import BASELINE, decision_messages

if TYPE_CHECKING:
    from cogbias.llm import LLMClient, LLMResponse

FILL_CHARS = 160  # a gap fill is a phrase or two; longer runs on until max_tokens
FILL_TOKENS = 60  # per gap: FILL_CHARS characters with JSON quoting, in tokens
OPTION_RE = re.compile(r"\b[Oo]ption (\d+)\b")
T = TypeVar("T")


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine from synchronous code (CLI, app callbacks); closes the loop's
    HTTP sessions before the loop ends."""
    from cogbias.llm.direct import close_sessions

    async def main() -> T:
        try:
            return await coro
        finally:
            await close_sessions()

    return asyncio.run(main())


# --------------------------------------------------------------------------- generate


class GenerationError(RuntimeError):
    pass


def generate_offline(case: TestCase, scenario: str, seed: int = 0, index: int = 0) -> Instance:
    """Fill value gaps only; LLM gaps stay visible as `[[...]]` (no model needed)."""
    values = _sample(case, scenario, seed, index)

    return Instance(
        id=instance_id(case.content_hash, scenario, index, None, seed, 0.0),
        test_case=case.id,
        test_case_hash=case.content_hash,
        scenario=scenario,
        control=fill(case.control, values, lambda gap: None),
        treatment=fill(case.treatment, values, lambda gap: None),
        metric=case.metric_params(values),
        instance_index=index,
        seed=seed,
        variant=values["variant"],
        values=values,
        insertions=_value_insertions(case, values),
    )


def random_generator_refusal(case_id: str, gaps: list[str]) -> str:
    shown = ", ".join(f"[[{g}]]" for g in gaps[:5]) + (" ..." if len(gaps) > 5 else "")
    return (
        f"the random baseline cannot write text, and {case_id} has LLM gaps ({shown}); "
        "choose a language model as the generator (e.g. local/smollm2)"
    )


def _sample(case: TestCase, scenario: str, seed: int, index: int) -> dict[str, Any]:
    rng = random.Random(stable_id("values", case.content_hash, scenario, seed, index))
    return case.sample_values(rng)


def _value_insertions(case: TestCase, values: Mapping[str, Any]) -> list[dict[str, str]]:
    used = {g.name for t in (case.control, case.treatment) for g in t.value_gaps()}
    return [
        {"gap": name, "source": "value", "text": show_value(values[name])}
        for name in values
        if name in used and name not in case.named_gaps()
    ]


GEN_PROMPT = """Fill the gaps of a decision-task template so that it fits the scenario.

Scenario: {scenario}

Template:
{template}

Each gap is written in double square brackets and holds an instruction saying what to write \
there. Reply with one JSON object whose keys are exactly the instructions listed below and \
whose values are the texts that replace the gaps (without brackets). Follow each instruction \
precisely and keep each text short.

Instructions:
{keys}"""

GEN_EXAMPLE = (
    "Example. Scenario: A store manager at a company from the Food Retail industry group "
    'deciding which supplier to choose. Template: "You are [[a/an]] [[job title]] at '
    '[[organization]]." Reply: {"a/an": "a", "job title": "store manager", '
    '"organization": "a regional grocery chain"}'
)


async def generate(
    client: LLMClient,
    case: TestCase,
    scenario: str,
    generator: str,
    seed: int = 0,
    temperature: float = 0.7,
    index: int = 0,
    scenario_id: int | None = None,
) -> Instance:
    """Fill every gap of a test case for a scenario with the generator model.

    Control first, then treatment; identical instructions are asked once and copied, and a
    gap whose instruction refers to another gap waits for it (one request per round).
    """
    values = _sample(case, scenario, seed, index)
    fills: dict[str, str] = {}
    insertions = _value_insertions(case, values)
    filler = examples.ExampleFiller(case, scenario, seed, index)
    offline = generator == examples.EXAMPLES_GENERATOR
    missing = filler.prefill(values, fills, everything=offline)
    if offline and missing:
        raise GenerationError(
            f"{case.id} has no example fills for the gap '{missing[0].instruction}': add them "
            "under [examples] in its file, or choose a model as generator"
        )
    json_schema = offline or client.profile(generator).json_schema
    if generator == RANDOM_MODEL:
        gaps = list(
            dict.fromkeys(
                g.instruction for g in case.control.llm_gaps() + case.treatment.llm_gaps()
            )
        )
        if gaps:
            raise GenerationError(random_generator_refusal(case.id, gaps))
    for template in (case.control, case.treatment):
        await _fill_template(
            client,
            template,
            scenario,
            values,
            fills,
            generator,
            temperature,
            seed,
            json_schema,
            filler.vet,
        )

    def from_fills(gap: LLMGap) -> str:
        return fills[gap.resolve(values)]

    control = examples.fix_articles(fill(case.control, values, from_fills))
    for gap in case.control.llm_gaps() + case.treatment.llm_gaps():
        key = gap.resolve(values)
        if not any(i["gap"] == key for i in insertions):
            text = fills[key]
            if gap.instruction == examples.ARTICLE_GAP:
                text = examples.first_article(control) or "a"
            extra = filler.sources.get(key, {"source": "llm"})
            insertions.append({"gap": key, **extra, "text": text})

    return Instance(
        id=instance_id(case.content_hash, scenario, index, generator, seed, temperature),
        test_case=case.id,
        test_case_hash=case.content_hash,
        scenario=scenario,
        control=control,
        treatment=examples.fix_articles(fill(case.treatment, values, from_fills)),
        metric=case.metric_params(values),
        scenario_id=scenario_id,
        instance_index=index,
        generator=generator,
        temperature=temperature,
        seed=seed,
        variant=values["variant"],
        values=values,
        insertions=insertions,
    )


async def _fill_template(
    client: LLMClient,
    template: Template,
    scenario: str,
    values: dict[str, Any],
    fills: dict[str, str],
    generator: str,
    temperature: float,
    seed: int,
    json_schema: bool,
    vet: Callable[[list[LLMGap], dict[str, str], dict[str, Any]], None],
) -> None:
    gaps = template.llm_gaps()
    while True:
        ready = [
            g
            for g in gaps
            if all(r.name in values for r in g.refs) and g.resolve(values) not in fills
        ]
        if not ready:
            break
        keys = list(dict.fromkeys(g.resolve(values) for g in ready))
        answer = await _ask_for_fills(
            client, template, scenario, values, keys, generator, temperature, seed, json_schema
        )
        vet(ready, answer, values)  # a rejected fill falls back to an example fill
        fills.update(answer)
        for gap in ready:
            if gap.name:
                values[gap.name] = fills[gap.resolve(values)]
    missing = [g.instruction for g in gaps if g.resolve(values) not in fills]
    if missing:
        raise GenerationError(f"gaps could not be filled (unresolved references): {missing}")


async def _ask_for_fills(
    client: LLMClient,
    template: Template,
    scenario: str,
    values: Mapping[str, Any],
    keys: list[str],
    generator: str,
    temperature: float,
    seed: int,
    json_schema: bool,
) -> dict[str, str]:
    from cogbias.llm import LLMRequest

    prompt = GEN_PROMPT.format(
        scenario=scenario,
        template=_template_text(template, values),
        keys=json.dumps(keys, ensure_ascii=False, indent=1),
    )
    messages: list[dict[str, str]] = [
        {"role": "system", "content": GEN_EXAMPLE},
        {"role": "user", "content": prompt},
    ]
    response_format = None
    if json_schema:
        response_format = {
            "type": "json_schema",
            "json_schema": {
                "name": "gap_fills",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {
                        k: {"type": "string", "minLength": 1, "maxLength": FILL_CHARS} for k in keys
                    },
                    "required": keys,
                    "additionalProperties": False,
                },
            },
        }
    problem = ""
    for attempt in range(2):  # one repair retry
        request = LLMRequest(
            model=generator,
            messages=tuple((m["role"], m["content"]) for m in messages),
            temperature=temperature,
            seed=seed,
            max_tokens=64 + sum(len(k) // 3 + FILL_TOKENS for k in keys),  # keys are echoed
            response_format=response_format,
            repeat=attempt,
        )
        response = await client.complete(request)
        parsed, problem = _parse_fills(response.text, keys)
        if parsed is not None:
            return parsed
        messages += [
            {"role": "assistant", "content": response.text},
            {
                "role": "user",
                "content": f"That reply cannot be used: {problem}. Reply again with only the JSON object.",
            },
        ]
    raise GenerationError(f"the generator {generator} did not return usable gap fills: {problem}")


def _template_text(template: Template, values: Mapping[str, Any]) -> str:
    """The template as the generator sees it: values in, LLM gaps as [[instruction]]."""
    filled = fill(template, values, lambda gap: None)
    return render_decision_text(filled)


def _parse_fills(text: str, keys: list[str]) -> tuple[dict[str, str] | None, str]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object found"
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg})"
    if not isinstance(data, dict):
        return None, "the JSON is not an object"
    missing = [k for k in keys if not isinstance(data.get(k), str) or not data[k].strip()]
    if missing:
        return None, f"missing or empty keys: {missing}"
    return {k: data[k].strip().strip("[]").strip() for k in keys}, ""


# --------------------------------------------------------------------------- decide


DEC_PROMPT = """Here is a decision-making task with several answer options.

{task}

Think it through briefly, then choose exactly one of the options."""
# A 135M model's "reasoning" adds time, not accuracy: on 2 shared cores each token costs
# 15-100 ms. Its answer budget is short (profiles.LOCAL_ANSWER_TOKENS); ask for one sentence.
LOCAL_DEC_SUFFIX = "\nReply in one short sentence that names the option you choose."

EXTRACT_PROMPT = """Below are the answer options of a decision task and a written answer to it.

Options:
{options}

Answer:
{answer}

Which option does the answer choose? Reply with "Option N" and nothing else, where N is the \
number of the chosen option. If the answer does not choose exactly one option, reply \
"No option selected"."""


@dataclass
class HalfResult:
    answer: str = ""
    extraction: str = ""
    choice: int | None = None  # 0-based, original order
    error: str | None = None
    failure_kind: str | None = None
    tokens: int = 0  # incurred now (cached answers cost nothing)
    cost: float = 0.0
    cost_saved: float = 0.0
    cached: bool = True

    def account(self, response: LLMResponse) -> None:
        self.tokens += 0 if response.cached else response.prompt_tokens + response.completion_tokens
        self.cost += response.cost or 0.0  # the known part: an unpriced call is None
        self.cost_saved += response.cost_saved
        self.cached = self.cached and response.cached


def _single_option(answer: str, n_options: int) -> int | None:
    """The option number when the answer names exactly one valid "Option N", else None."""
    named = {int(m) for m in OPTION_RE.findall(answer)}
    if len(named) == 1 and 1 <= min(named) <= n_options:
        return named.pop()
    return None


def option_grammar(n_options: int) -> str:
    """GBNF that only admits "Option 1" .. "Option n" (for llama.cpp-served local models)."""
    choices = " | ".join(f'"{i}"' for i in range(n_options, 0, -1))
    return f'root ::= "Option " ({choices})'


async def decide_half(
    client: LLMClient,
    filled: Filled,
    order: Sequence[int],
    model: str,
    temperature: float,
    seed: int,
    repeat: int,
    prompting: str = BASELINE,
) -> HalfResult:
    """Free answer, then extraction of "Option N", mapped back to the original order.

    `prompting` (see `cogbias.runs.prompting`) shapes only the first question; the random model
    ignores it and the extraction step is the same for every method.
    """
    from cogbias.llm import LLMRequest

    n = len(filled.options)
    result = HalfResult()
    if model == RANDOM_MODEL:
        presented = random_provider.choose_option(
            n, stable_id("random", render_decision_text(filled, order), seed, repeat)
        )
        result.answer = result.extraction = f"Option {presented + 1}"
        result.choice = order[presented]
        return result
    profile = client.profile(model)
    task = render_decision_text(filled, order)
    local = profile.kind == "local"
    first = await client.complete(
        LLMRequest(
            model=model,
            messages=decision_messages(
                task, prompting, DEC_PROMPT + LOCAL_DEC_SUFFIX * (local and prompting == BASELINE)
            ),
            temperature=temperature,
            seed=seed,
            max_tokens=profile.answer_tokens,
            repeat=repeat,
        )
    )
    result.account(first)
    result.answer = first.text
    direct = _single_option(first.text, n) if local else None
    if direct is not None:
        # A tiny local model's answer that names exactly one valid option is read directly:
        # on 2 shared cores the extraction call costs as much as the answer itself.
        result.extraction = f"Option {direct}"
    else:
        second = await client.complete(
            LLMRequest(
                model=model,
                messages=(
                    (
                        "user",
                        EXTRACT_PROMPT.format(
                            options=render_options(filled.options, order), answer=first.text
                        ),
                    ),
                ),
                temperature=0.0,
                seed=seed,
                max_tokens=12,
                grammar=option_grammar(n) if profile.grammar else None,
                repeat=repeat,
            )
        )
        result.account(second)
        result.extraction = second.text.strip()
    match = OPTION_RE.search(result.extraction)
    if match is None:
        result.error = (
            f"no option could be extracted from the answer (extraction: {result.extraction[:80]!r})"
        )
    elif not 1 <= int(match.group(1)) <= n:
        result.error = f"the answer chose Option {match.group(1)}, but only 1-{n} exist"
    else:
        result.choice = order[int(match.group(1)) - 1]
    if result.error:
        result.failure_kind = "unparseable"
    return result


async def decide_pair(
    client: LLMClient,
    instance: Instance,
    model: str,
    run_id: str = "",
    temperature: float = 0.0,
    repeat: int = 0,
    seed: int = 0,
    prompting: str = BASELINE,
) -> dict[str, Any]:
    """Answer both halves (same option order for both) and score: one decisions row.

    Raises `FatalLLMError` (the run must stop); any other failed call becomes a failed row
    whose `failure_kind` says whether resuming should retry it.
    """
    from cogbias.llm import FatalLLMError, LLMError

    reverse = metrics.should_reverse(instance.id, seed)
    order = metrics.option_order(instance.n_options, reverse)
    halves: dict[str, HalfResult] = {}
    asks = [
        decide_half(client, instance.half(h), order, model, temperature, seed, repeat, prompting)
        for h in ("control", "treatment")
    ]
    if client is not None and client.profile(model).prefix_cache:
        # One after the other, so the local server reuses the control's prompt prefix (kept
        # in its KV cache) for the treatment: the halves differ in a few words only.
        outcomes = [await _settle(ask) for ask in asks]
    else:
        outcomes = await asyncio.gather(*asks, return_exceptions=True)
    for name, outcome in zip(("control", "treatment"), outcomes, strict=True):
        if isinstance(outcome, FatalLLMError):
            raise outcome
        if isinstance(outcome, LLMError):
            outcome = HalfResult(error=str(outcome), failure_kind=outcome.failure_kind)
        elif isinstance(outcome, BaseException):
            raise outcome
        halves[name] = outcome
    return _decision_row(
        instance,
        model,
        run_id,
        temperature,
        repeat,
        order,
        halves["control"],
        halves["treatment"],
        prompting,
    )


async def _settle(ask: Awaitable[T]) -> T | BaseException:
    """Await like `gather(..., return_exceptions=True)` does for one awaitable."""
    try:
        return await ask
    except Exception as exc:
        return exc


def failed_decision(
    instance: Instance,
    model: str,
    run_id: str,
    temperature: float,
    repeat: int,
    error: str,
    failure_kind: str,
    prompting: str = BASELINE,
) -> dict[str, Any]:
    """A decisions row for a pair that could not be asked (e.g. its generation failed)."""
    order = list(range(instance.n_options))
    failed = HalfResult(error=error, failure_kind=failure_kind)
    return _decision_row(
        instance, model, run_id, temperature, repeat, order, failed, HalfResult(), prompting
    )


# A pair fails with its most retryable half's kind: a transient half must be asked again.
_KIND_RANK = {kind: i for i, kind in enumerate(("transient", "invalid", "unparseable", "fatal"))}


def _decision_row(
    instance: Instance,
    model: str,
    run_id: str,
    temperature: float,
    repeat: int,
    order: Sequence[int],
    c: HalfResult,
    t: HalfResult,
    prompting: str = BASELINE,
) -> dict[str, Any]:
    failed = [(name, h) for name, h in (("control", c), ("treatment", t)) if h.error]
    score = None
    if not failed and c.choice is not None and t.choice is not None:
        score = score_instance(instance, c.choice, t.choice)
    kinds = sorted((h.failure_kind or "invalid" for _, h in failed), key=_KIND_RANK.__getitem__)
    control_answer, cut_c = cap_text(c.answer)
    treatment_answer, cut_t = cap_text(t.answer)
    return {
        "id": decision_id(run_id, instance.id, model, repeat, temperature, prompting),
        "run_id": run_id,
        "instance_id": instance.id,
        "test_case": instance.test_case,
        "model": model,
        "temperature": temperature,
        "repeat": repeat,
        "reversed": int(list(order) != sorted(order)),
        "control_order": dumps(list(order)),
        "treatment_order": dumps(list(order)),
        "control_answer": control_answer,
        "treatment_answer": treatment_answer,
        "control_extraction": c.extraction[:200],
        "treatment_extraction": t.extraction[:200],
        "control_choice": c.choice,
        "treatment_choice": t.choice,
        "score": score,
        "status": "failed" if failed else "ok",
        "error": "; ".join(f"{name}: {h.error}" for name, h in failed) or None,
        "failure_kind": kinds[0] if kinds else None,
        "truncated": int(cut_c or cut_t),
        "cached": int(c.cached and t.cached),
        "tokens": c.tokens + t.tokens,
        "cost": c.cost + t.cost,
        "cost_saved": c.cost_saved + t.cost_saved,
        "created_at": None,
    }


def score_instance(instance: Instance, control_choice: int, treatment_choice: int) -> float:
    """The test case's metric on a pair of 0-based answers in original order."""
    return metrics.score_pair(control_choice, treatment_choice, instance.metric, instance.n_options)
