"""The `consistency:N` scoring (self-consistency): each half is asked N times at the run's
temperature, read as `choice` reads one answer, and the option the samples name most often
(the modal answer) is scored with the test case's metric.

- Sample k of the decision's repeat r is asked as request repeat r·N + k, so every sample has
  its own cache key and its own seed (`LLMRequest.sent_seed`), and `consistency:1` asks
  exactly what `choice` asks.
- Ties: of the options named by the most samples, the one named first (lowest k) is the
  modal answer. The rule is deterministic, so a resume scores a pair as it was scored.
- A sample that names no option abstains; a half none of whose samples names one is
  unparseable. A sample whose call failed (a provider error after retries) fails its half
  with that error's kind, so a resume asks it again (the others come from the cache).
- Every sample is stored beside the decision (`decisions.*_samples`, a JSON list of
  {"repeat", "answer", "extraction", "choice", "error"}) and exported as it is; the half's
  own answer, extraction and choice are those of the first sample naming the modal option.

Batches take it: each sample is one more request of the same round. Nothing here touches
the database.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cogbias.core import metrics
from cogbias.core.records import Decision, Instance, cap_text, dumps
from cogbias.runs import decide

if TYPE_CHECKING:
    from cogbias.llm import LLMClient

SCORING = "consistency"  # stored in specs as "consistency:N"
MAX_SAMPLES = 20  # per half: 20 answers of 20,000 characters at most stay a small row


def sample_count(argument: str) -> int:
    """N of "consistency:N"; ValueError naming the bounds otherwise."""
    if not argument.isdigit() or not 1 <= int(argument) <= MAX_SAMPLES:
        raise ValueError(
            f"{SCORING}:N takes a whole number of samples per half from 1 to {MAX_SAMPLES}, "
            f"not {argument[:20]!r}"
        )
    return int(argument)


def modal(samples: Sequence[decide.HalfResult]) -> decide.HalfResult | None:
    """The first sample naming the option most samples name (None when none names one)."""
    counts = Counter(s.choice for s in samples if s.choice is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(s for s in samples if s.choice is not None and counts[s.choice] == top)


def half_of(samples: Sequence[decide.HalfResult]) -> decide.HalfResult:
    """One half from its samples: the modal sample's answer, every sample's cost."""
    half = decide.HalfResult()
    for sample in samples:
        half.tokens += sample.tokens
        half.cost += sample.cost
        half.cost_saved += sample.cost_saved
        half.cached = half.cached and sample.cached
    failed = sorted(
        (s for s in samples if s.error and s.failure_kind != "unparseable"),
        key=lambda s: decide.KIND_RANK[s.failure_kind or "invalid"],
    )
    if failed:
        half.error = f"a sample's call failed: {failed[0].error}"
        half.failure_kind = failed[0].failure_kind or "invalid"
        return half
    winner = modal(samples)
    if winner is None:
        half.error = f"none of the {len(samples)} samples named an option ({samples[0].error})"
        half.failure_kind = "unparseable"
        return half
    half.answer, half.extraction, half.choice = winner.answer, winner.extraction, winner.choice
    return half


def stored_samples(samples: Sequence[decide.HalfResult], first_repeat: int) -> str:
    """The samples as stored and exported: a JSON list, each answer capped as answers are."""
    return dumps(
        [
            {
                "repeat": first_repeat + k,
                "answer": cap_text(s.answer)[0],
                "extraction": s.extraction[:200],
                "choice": s.choice,
                "error": s.error,
            }
            for k, s in enumerate(samples)
        ]
    )


async def decide_half(
    client: LLMClient,
    instance: Instance,
    half: str,
    order: Sequence[int],
    model: str,
    ask: decide.PairAsk,
    n: int,
) -> list[decide.HalfResult]:
    """The n samples of the half `half` of `instance`: sample k of the pair's repeat r is
    asked as repeat r·n + k, with its own draw of the random model."""
    first = ask.repeat * n
    asks = [
        decide.decide_half(
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
    *,
    samples: int = 1,
) -> Decision:
    """Both halves sampled `samples` times and their modal answers scored: one decision
    (with its `control_samples` and `treatment_samples`)."""
    order = metrics.presented_order(instance.n_options, ask.option_order, instance.id, ask.seed)
    asks = [decide_half(client, instance, h, order, model, ask, samples) for h in decide.HALVES]
    outcomes = await decide.ask_all(asks, client.profile(model).prefix_cache)
    halves: dict[str, list[decide.HalfResult]] = {}
    for name, outcome in zip(decide.HALVES, outcomes, strict=True):
        if isinstance(outcome, BaseException):  # the run must stop, or a batch collects
            raise outcome
        halves[name] = outcome
    control, treatment = (half_of(halves[h]) for h in decide.HALVES)
    row = decide.decision_row(instance, model, ask, order, control, treatment)
    row.control_samples = stored_samples(halves["control"], ask.repeat * samples)
    row.treatment_samples = stored_samples(halves["treatment"], ask.repeat * samples)
    return row
