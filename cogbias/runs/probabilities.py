"""The `probabilities` scoring: each half asks for an option's letter and reads the model's
probability of every option from its token log-probabilities; the pair's score is the exact
expectation of the test case's metric over both distributions (`core.probabilities`).

One call per half, no extraction call, no sampling noise. The options are labelled A, B, C…
(single tokens, unlike "Option 10"); the label position's `top_logprobs` are read merging the
spellings of a label (`llm.logprobs`), renormalised over the options, and the probability
left outside the options is stored beside them. A model that writes no text (the random
baseline: its profile's `writes_text`) draws uniformly, so its distribution is uniform. What
can use this mode is checked when a run is planned (`refusal`): a profile's `top_logprobs`,
not only its `logprobs`, since a lone sampled token is no distribution. Nothing here touches
the database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from cogbias.core import metrics
from cogbias.core import probabilities as probs
from cogbias.core.records import Decision, Instance
from cogbias.core.templates import Filled
from cogbias.llm import logprobs, random_provider
from cogbias.llm.profiles import resolve
from cogbias.runs import decide
from cogbias.runs.prompting import BASELINE

if TYPE_CHECKING:
    from cogbias.llm import LLMClient

SCORING = "probabilities"  # its name in `runs.scorers` and in stored specs

LABEL_PROMPT = """Here is a decision-making task with several answer options.

{task}

Choose exactly one of the options. Reply with its letter only."""


def render_labelled(filled: Filled, order: Sequence[int]) -> str:
    """The task as `render_decision_text` shows it, options labelled A, B, C… as presented."""
    marks = logprobs.labels(len(order))
    lines = [f"Situation: {filled.situation.strip()}", "", f"Prompt: {filled.prompt.strip()}", ""]
    lines.append("Answer options:")
    lines += [f"{marks[i]}: {filled.options[j]}" for i, j in enumerate(order)]
    return "\n".join(lines)


def letterable(n_options: int) -> bool:
    """Whether a question of `n_options` options can be asked for a letter (A–K)."""
    return 2 <= n_options <= len(logprobs.LABELS)


def refusal(
    models: Sequence[str],
    api_base: str | None,
    prompting: str,
    option_counts: Mapping[str, int],
) -> str | None:
    """Why a run cannot be scored by probabilities, or None. `option_counts` maps each test
    case to its number of options (checked against the single-token labels A–K)."""
    for model in models:
        profile = resolve(model, api_base)
        if not profile.writes_text or profile.top_logprobs:
            continue
        if profile.logprobs:
            return (
                f"--scoring probabilities reads the most probable tokens beside the sampled "
                f"one, and {model} does not list them (its profile has logprobs but no "
                "top_logprobs; state top_logprobs = true in its registry entry if its server "
                "lists them); use --scoring choice for it"
            )
        return (
            f"--scoring probabilities needs token log-probabilities, and {model} does not "
            "expose them (its profile has no logprobs); use --scoring choice for it"
        )
    if prompting != BASELINE:
        return (
            f"--scoring probabilities asks for the option's letter alone; the prompting method "
            f"'{prompting}' asks for more (use baseline)"
        )
    for case, n in option_counts.items():
        try:
            logprobs.labels(n)
        except ValueError as exc:
            return f"{case}: {exc}, so --scoring probabilities cannot ask for it"
    return None


async def decide_half(
    client: LLMClient,
    filled: Filled,
    order: Sequence[int],
    model: str,
    ask: decide.PairAsk,
    draw: str = "",
) -> decide.HalfResult:
    """Ask for the letter of one half: the half as sampled, with its `distribution` in
    original option order (as `decide.decide_half` asks a half, so `runs.sampling` can ask
    it N times). No option among the listed tokens is an unparseable half. A model that
    writes no text (the random baseline) is asked nothing: `draw` seeds its sampled letter
    (`decide.random_draw`: per decision, not per text), and its distribution is uniform
    whatever it draws."""
    from cogbias.llm import LLMRequest

    n = len(filled.options)
    result = decide.HalfResult()
    task = render_labelled(filled, order)
    profile = client.profile(model)
    if not profile.writes_text:
        presented = random_provider.choose_option(n, draw)
        result.answer = result.extraction = logprobs.LABELS[presented]
        result.choice = order[presented]
        result.distribution = probs.uniform(n)
        return result
    response = await client.complete(
        LLMRequest(
            model=model,
            messages=(("user", LABEL_PROMPT.format(task=task)),),
            temperature=ask.temperature,
            seed=ask.seed,
            max_tokens=1 if profile.grammar else 4,
            grammar=logprobs.label_grammar(n) if profile.grammar else None,
            repeat=ask.repeat,
            top_logprobs=logprobs.TOP_LOGPROBS,
        )
    )
    result.account(response)
    try:
        result.answer, presented_dist, sampled = read_half(response.text, n)
    except probs.NotADistribution as exc:
        result.answer = _text_of(response.text)
        result.error = f"the log-probabilities are no distribution over the options: {exc}"
        result.failure_kind = "unparseable"
        return result
    if sampled is not None:
        result.extraction = logprobs.LABELS[sampled]
        result.choice = order[sampled]
    original = [0.0] * n
    for k, j in enumerate(order):
        original[j] = presented_dist.p[k]
    result.distribution = probs.Distribution(
        tuple(original), presented_dist.outside, presented_dist.unlisted
    )
    return result


def read_half(text: str, n_options: int) -> tuple[str, probs.Distribution, int | None]:
    """(the answer's text, its distribution over the presented options, the presented
    option it sampled or None) from an answer `logprobs.encode_answer` made. Raises
    `NotADistribution` with the reason whenever what the server listed is not one: the
    half is then unreadable, never scored as a one-hot."""
    answer, positions = logprobs.decode_answer(text)
    masses, listed, at = logprobs.option_masses(positions, n_options)
    if not any(masses):
        raise probs.NotADistribution(
            f"none of the options {', '.join(logprobs.labels(n_options))} is among the "
            f"{logprobs.TOP_LOGPROBS} most probable tokens where the answer begins"
        )
    dist = probs.from_masses(masses, listed)
    return answer, dist, logprobs.label_of(positions[at][0][0], n_options)


def _text_of(text: str) -> str:
    """The answer's text of an unreadable half, for the record (its stored JSON if need be)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return str(data.get("text") or "") if isinstance(data, dict) else text


async def decide_pair(
    client: LLMClient, instance: Instance, model: str, ask: decide.PairAsk
) -> Decision:
    """Both halves' distributions and the expected score: one decision (with its
    `control_distribution` and `treatment_distribution`). `ask.extractor` and `ask.reading`
    are unused: nothing is extracted here."""
    order = metrics.presented_order(instance.n_options, ask.option_order, instance.id, ask.seed)
    asks = [
        decide_half(
            client, instance.half(h), order, model, ask, decide.random_draw_of(ask, instance, h)
        )
        for h in decide.HALVES
    ]
    # at once: the local server does not reuse a cached prefix for these requests (see
    # LLMClient._call), so asking the halves one after the other would gain nothing
    outcomes = await asyncio.gather(*asks, return_exceptions=True)
    control, treatment = (decide.settled(outcome) for outcome in outcomes)
    row = decide.decision_row(
        instance, model, ask, order, control, treatment, score=partial(expected, instance)
    )
    row.control_distribution = distribution_json(control)
    row.treatment_distribution = distribution_json(treatment)
    return row


def expected(instance: Instance, c: decide.HalfResult, t: decide.HalfResult) -> float | None:
    """The pair's exact expected score from both halves' distributions (None without one)."""
    if c.distribution is None or t.distribution is None:
        return None
    return probs.expected_score(c.distribution, t.distribution, instance.metric, instance.n_options)


def distribution_json(half: decide.HalfResult) -> str | None:
    """A half's distribution as stored (`decisions.*_distribution`), or None."""
    return half.distribution.to_json() if half.distribution else None
