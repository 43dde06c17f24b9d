"""Samples: a run asks each half N times (`--samples N`) and its reducer (`--reducer`,
`runs/reducers.py`) makes the N answers into the half's answer. `--scoring consistency:N`
(self-consistency) is the `choice` scorer asked so, reduced by `mode`.

- Sample k of the decision's repeat r is asked as request repeat r·N + k, so every sample has
  its own cache key and its own seed (`LLMRequest.sent_seed`), and one sample asks exactly
  what the scorer asks once. The reducer changes no request: runs that differ only in their
  reducer are answered from one another's cache.
- A sample whose call failed (a provider error after retries) fails its half with that
  error's kind, so a resume asks it again (the others come from the cache). A half none of
  whose samples named an option (or, for a reducer of distributions, gave probabilities) is
  unparseable. Otherwise the reducer decides: an option, a distribution, or an abstention
  (the pair is then `abstained`, `decide.decision_row`).
- Every sample is stored beside the decision (`decisions.*_samples`, a JSON list of
  {"repeat", "answer", "extraction", "choice", "error"}, with "distribution" where the scorer
  gives probabilities, "reasoning" where a reasoning model wrote a trace and "rewrite" for
  `--intervention self_help`) and exported as it is; the half's own answer, extraction and choice
  are those of the first sample naming the option the reducer gave (of the first sample with
  probabilities, for a distribution; none for an abstained half).

Batches take it where they take the scorer: each sample is one more request of the same
round. Nothing here touches the database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from cogbias.core import metrics
from cogbias.core.probabilities import Distribution
from cogbias.core.records import Decision, Instance, cap_text, dumps
from cogbias.runs import decide, probabilities, reducers

if TYPE_CHECKING:
    from cogbias.core.templates import Filled
    from cogbias.llm import LLMClient

MAX_SAMPLES = 20  # per half: 20 answers of 20,000 characters at most stay a small row


class AskHalf(Protocol):
    """How a scorer asks one half once (`decide.decide_half`, `probabilities.decide_half`):
    the half read, with its `distribution` where the scorer reads probabilities."""

    def __call__(
        self,
        client: LLMClient,
        filled: Filled,
        order: Sequence[int],
        model: str,
        ask: decide.PairAsk,
        draw: str = "",
    ) -> Awaitable[decide.HalfResult]: ...


def sample_count(text: str, flag: str = "--samples") -> int:
    """N from its spelling: ASCII digits only, leading zeros dropped ("03" is 3), 1 to
    MAX_SAMPLES. A run id is a hash of the spelling, so one number has one spelling: "٣",
    "𝟑" and "²" (which Python's int() and str.isdigit take) are refused, naming `flag`."""
    digits = text.lstrip("0") if re.fullmatch(r"[0-9]+", text) else None
    if digits is None or len(digits) > 2 or not 1 <= int(digits) <= MAX_SAMPLES:
        raise ValueError(
            f"{flag} takes a whole number of samples per half from 1 to {MAX_SAMPLES}, "
            f"written with the digits 0-9, not {text[:20]!r}"
        )
    return int(digits)


def _readable(sample: decide.HalfResult, reducer: reducers.Reducer) -> bool:
    """Whether the sample gave what `reducer` reads."""
    if reducer.reads == reducers.DISTRIBUTIONS:
        return sample.distribution is not None
    return sample.choice is not None


def half_of(
    samples: Sequence[decide.HalfResult], reducer: reducers.Reducer, n_options: int
) -> decide.HalfResult:
    """One half from its samples: what `reducer` makes of them, every sample's cost."""
    half = decide.HalfResult()
    for sample in samples:
        half.tokens += sample.tokens
        half.cost += sample.cost
        half.cost_saved += sample.cost_saved
        half.reasoning_tokens += sample.reasoning_tokens
        half.cached = half.cached and sample.cached
    failed = sorted(
        (s for s in samples if s.error and s.failure_kind != "unparseable"),
        key=lambda s: decide.KIND_RANK[s.failure_kind or "invalid"],
    )
    if failed:
        half.error = f"a sample's call failed: {failed[0].error}"
        half.failure_kind = failed[0].failure_kind or "invalid"
        return half
    readable = [s for s in samples if _readable(s, reducer)]
    if not readable:
        half.error = f"none of the {len(samples)} samples named an option ({samples[0].error})"
        half.failure_kind = "unparseable"
        return half
    reduced = reducer.reduce(samples)
    if reduced is None:
        half.abstained = True
        return half
    if isinstance(reduced, Distribution) and len(reduced.p) == n_options:
        winner = readable[0]
        half.distribution = reduced
    elif isinstance(reduced, int) and not isinstance(reduced, bool) and 0 <= reduced < n_options:
        winner = next((s for s in samples if s.choice == reduced), decide.HalfResult())
        winner = replace(winner, choice=reduced)
    else:
        half.error = (
            f"the reducer '{reducer.name}' gave {str(reduced)[:40]!r}, not an option "
            f"(0 to {n_options - 1}), a distribution over them or None"
        )
        half.failure_kind = "invalid"
        return half
    half.answer, half.extraction, half.choice = winner.answer, winner.extraction, winner.choice
    half.reasoning, half.rewrite = winner.reasoning, winner.rewrite
    return half


def stored_samples(samples: Sequence[decide.HalfResult], first_repeat: int) -> str:
    """The samples as stored and exported: a JSON list, each answer capped as answers are."""
    stored: list[dict[str, Any]] = []
    for k, s in enumerate(samples):
        one: dict[str, Any] = {
            "repeat": first_repeat + k,
            "answer": cap_text(s.answer)[0],
            "extraction": s.extraction[:200],
            "choice": s.choice,
            "error": s.error,
        }
        if s.distribution is not None:
            one["distribution"] = json.loads(s.distribution.to_json())  # as *_distribution
        for text in ("reasoning", "rewrite"):  # a trace, a self-help rewrite: as the half's
            if getattr(s, text):
                one[text] = cap_text(getattr(s, text))[0]
        stored.append(one)
    return dumps(stored)


async def decide_half(
    client: LLMClient,
    instance: Instance,
    half: str,
    order: Sequence[int],
    model: str,
    ask: decide.PairAsk,
    ask_half: AskHalf,
) -> list[decide.HalfResult]:
    """The `ask.samples` samples of the half `half` of `instance`: sample k of the pair's
    repeat r is asked as repeat r·N + k, with its own draw of the random model."""
    n = ask.samples
    first = ask.repeat * n
    asks = [
        ask_half(
            client,
            instance.half(half),
            order,
            model,
            replace(ask, repeat=first + k),
            draw=decide.random_draw(ask.run_id, instance.id, half, first + k, ask.seed),
        )
        for k in range(n)
    ]
    one_by_one = client.profile(model).prefix_cache
    return [decide.settled(o) for o in await decide.ask_all(asks, one_by_one)]


async def decide_pair(
    client: LLMClient,
    instance: Instance,
    model: str,
    ask: decide.PairAsk,
    ask_half: AskHalf = decide.decide_half,
) -> Decision:
    """Both halves asked `ask.samples` times by `ask_half` and reduced by `ask.reducer`: one
    decision, with its `control_samples` and `treatment_samples` (and the halves'
    distributions, for a reducer that gives them: such a pair is scored by expectation)."""
    reducer = reducers.get(ask.reducer or reducers.DEFAULT)
    order = metrics.presented_order(instance.n_options, ask.option_order, instance.id, ask.seed)
    asks = [decide_half(client, instance, h, order, model, ask, ask_half) for h in decide.HALVES]
    outcomes = await decide.ask_all(asks, client.profile(model).prefix_cache)
    halves: dict[str, list[decide.HalfResult]] = {}
    for name, outcome in zip(decide.HALVES, outcomes, strict=True):
        if isinstance(outcome, BaseException):  # the run must stop, or a batch collects
            raise outcome
        halves[name] = outcome
    control, treatment = (half_of(halves[h], reducer, instance.n_options) for h in decide.HALVES)
    expected = control.distribution is not None and treatment.distribution is not None
    score = partial(probabilities.expected, instance) if expected else None
    row = decide.decision_row(instance, model, ask, order, control, treatment, score=score)
    row.control_distribution = probabilities.distribution_json(control)
    row.treatment_distribution = probabilities.distribution_json(treatment)
    row.control_samples = stored_samples(halves["control"], ask.repeat * ask.samples)
    row.treatment_samples = stored_samples(halves["treatment"], ask.repeat * ask.samples)
    return row
