"""generate: fill a test case's gaps for a scenario into an instance (the paper's first step).

A plain async function over an `LLMClient`; the executor decides how many run at once and
where results go. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from cogbias.core.errors import UserError
from cogbias.core.records import Instance, instance_id, stable_id
from cogbias.core.templates import (
    Filled,
    LLMGap,
    Template,
    fill,
    render_decision_text,
    show_value,
)
from cogbias.library import examples
from cogbias.library.testcases import TestCase

if TYPE_CHECKING:
    from cogbias.llm import LLMClient, LLMResponse

FILL_CHARS = 160  # a gap fill is a phrase or two; longer runs on until max_tokens
FILL_TOKENS = 60  # per gap: FILL_CHARS characters with JSON quoting, in tokens
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


class GenerationError(UserError, RuntimeError):
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
    insertions = _value_insertions(case, values)  # before the fills name their values
    filler = examples.ExampleFiller(case, scenario, seed, index)
    offline = generator == examples.EXAMPLES_GENERATOR
    missing = filler.prefill(values, fills, everything=offline)
    _check_generator(client, case, generator, offline, missing)
    json_schema = offline or client.profile(generator).json_schema
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

    raw_control = examples.fix_role(fill(case.control, values, from_fills), scenario)
    raw_treatment = examples.fix_role(fill(case.treatment, values, from_fills), scenario)
    _add_llm_insertions(case, values, fills, filler.sources, raw_control, insertions)
    return Instance(
        id=instance_id(case.content_hash, scenario, index, generator, seed, temperature),
        test_case=case.id,
        test_case_hash=case.content_hash,
        scenario=scenario,
        control=examples.fix_articles(raw_control),  # `a/an` is still marked in raw_control
        treatment=examples.fix_articles(raw_treatment),
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


def _check_generator(
    client: LLMClient, case: TestCase, generator: str, offline: bool, missing: list[LLMGap]
) -> None:
    """Refuse, naming the gap, what `generator` cannot fill: a gap without example fills
    for the offline examples, any LLM gap for a model that writes no text (the random
    baseline)."""
    if offline and missing:
        raise GenerationError(
            f"{case.id} has no example fills for the gap '{missing[0].instruction}': add them "
            "under [examples] in its file, or choose a model as generator"
        )
    if offline or client.profile(generator).writes_text:
        return
    llm_gaps = case.control.llm_gaps() + case.treatment.llm_gaps()
    gaps = list(dict.fromkeys(g.instruction for g in llm_gaps))
    if gaps:
        raise GenerationError(random_generator_refusal(case.id, gaps))


def _add_llm_insertions(
    case: TestCase,
    values: Mapping[str, Any],
    fills: Mapping[str, str],
    sources: Mapping[str, dict[str, str]],
    raw_control: Filled,
    insertions: list[dict[str, str]],
) -> None:
    """Add each filled LLM gap, once, to `insertions` (its source: the model, or an example
    fill that replaced a rejected one); an `a/an` gap records the article the control's text
    really has."""
    for gap in case.control.llm_gaps() + case.treatment.llm_gaps():
        key = gap.resolve(values)
        if not any(i["gap"] == key for i in insertions):
            text = fills[key]
            if gap.instruction == examples.ARTICLE_GAP:  # the article the text really has
                text = examples.first_article(raw_control) or "a"
            extra = sources.get(key, {"source": "llm"})
            insertions.append({"gap": key, **extra, "text": text})


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
    vet: Callable[[list[LLMGap], dict[str, str], dict[str, Any], dict[str, str]], None],
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
        answer, refused = await _ask_for_fills(
            client, template, scenario, values, keys, generator, temperature, seed, json_schema
        )
        vet(ready, answer, values, refused)  # a rejected fill falls back to an example fill
        unusable = [k for k in keys if k in refused and k not in answer]
        if unusable:  # refused, and no example fill to take its place
            raise GenerationError(
                f"the generator {generator} did not return usable gap fills: "
                f"{refused[unusable[0]]} (gap '{unusable[0][:80]}')"
            )
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
) -> tuple[dict[str, str], dict[str, str]]:
    """The generator's fills for `keys` and, for each key it gave no usable fill, why (a
    refused key's text, if the reply had one, is in the fills for the note to show). A
    reply that cannot be used is asked again once; what is still refused after that falls
    back to an example fill (`ExampleFiller.vet`)."""
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
    answer: dict[str, str] = {}
    refused: dict[str, str] = {}
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
        answer, refused = _read_fills(response, keys, request.max_tokens)
        if not refused:
            return answer, {}
        problem = "; ".join(dict.fromkeys(refused.values()))
        messages += [
            {"role": "assistant", "content": response.text},
            {
                "role": "user",
                "content": f"That reply cannot be used: {problem}. Reply again with only the "
                "JSON object, each text short and whole.",
            },
        ]
    return answer, refused


def _template_text(template: Template, values: Mapping[str, Any]) -> str:
    """The template as the generator sees it: values in, LLM gaps as [[instruction]]."""
    filled = fill(template, values, lambda gap: None)
    return render_decision_text(filled)


def _read_fills(
    response: LLMResponse, keys: list[str], max_tokens: int | None
) -> tuple[dict[str, str], dict[str, str]]:
    """A reply's fills, and why each key without a usable one was refused. A reply cut at its
    token limit keeps the fills it finished; the one it was writing is refused with its text
    (it ends wherever the budget ran out, mid-sentence) and so are those it never reached."""
    partial: dict[str, str] = {}
    if response.cut:
        given, partial = salvage_fills(response.text)
        why = f"the reply was cut off at its limit of {max_tokens} tokens"
    else:
        given, why = _parse_fills(response.text)
    answer = {k: _clean(given[k]) for k in keys if isinstance(given.get(k), str)}
    answer = {k: text for k, text in answer.items() if text}
    refused = {k: why or "the reply left it out or empty" for k in keys if k not in answer}
    answer |= {k: _clean(v) for k, v in partial.items() if k in refused and _clean(v)}
    return answer, refused


def _clean(text: str) -> str:
    return text.strip().strip("[]").strip()


_PAIR_RE = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)(")?')


def salvage_fills(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The `"key": "text"` pairs of a JSON object cut short: (those whose text is closed, the
    last one whose text the cut left open)."""
    whole: dict[str, str] = {}
    partial: dict[str, str] = {}
    for match in _PAIR_RE.finditer(text):
        key, value = _unquoted(match[1]), _unquoted(match[2].rstrip("\\"))
        if match[3]:
            whole[key] = value
        elif match.end() == len(text):
            partial[key] = value
    return whole, partial


def _unquoted(text: str) -> str:
    try:
        return str(json.loads(f'"{text}"'))
    except ValueError:
        return text


def _parse_fills(text: str) -> tuple[dict[str, Any], str]:
    """The JSON object in a reply, or ({}, why there is none)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return {}, "no JSON object found"
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON ({exc.msg})"
    except RecursionError:
        return {}, "invalid JSON (nested too deeply)"
    if not isinstance(data, dict):
        return {}, "the JSON is not an object"
    return data, ""
