"""A spend cap (`--max-cost USD`): a run stops before the call that could take it past the cap.

What a call will cost is known only once it is answered, so each call is charged in advance
at the most it can cost: every byte of its prompt as a token (a token is at least one byte;
each message adds a few of the template's), and its whole `max_tokens` as output (thinking
included: a reasoning model's room is in `max_tokens`, `llm.thinking`), at the model's
price. A call is sent only if what was spent, plus what the calls in flight may still cost,
plus its own bound stays within the cap; when it is answered its bound is released and its
real cost counted. So a run never spends past the cap, and stops somewhat before it.

Cached answers cost nothing and are always read. A call whose price is unknown cannot be
bounded, so under a cap it is refused. The cap covers one execution of a run (one worker,
both of its clients): a resumed run is given its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cogbias.llm.costs import dollars
from cogbias.llm.errors import FatalLLMError
from cogbias.llm.profiles import ModelProfile
from cogbias.llm.request import LLMRequest

TOKENS_PER_MESSAGE = 16  # the chat template's tokens around each message, generously
UNBOUNDED_OUTPUT = 4_096  # the output a request without `max_tokens` is charged in advance


class SpendCapReached(FatalLLMError):
    """The next call could pass the run's spend cap: the run stops, resumable."""


@dataclass
class SpendCap:
    """What one execution may spend (USD) and what it has spent and holds for calls in flight."""

    limit: float
    spent: float = 0.0
    held: float = field(default=0.0, repr=False)

    def hold(self, req: LLMRequest, profile: ModelProfile) -> float:
        """Hold the most `req` can cost; SpendCapReached when that could pass the cap."""
        bound = most_it_costs(req, profile)
        if bound is None:
            raise SpendCapReached(
                f"{req.model}'s price is unknown, so a spend cap cannot be kept: run it "
                "without --max-cost, or state its price in the model registry",
                kind="other",
                model=req.model,
            )
        if self.spent + self.held + bound > self.limit + 1e-12:
            raise SpendCapReached(self.reached(bound), kind="other", model=req.model)
        self.held += bound
        return bound

    def release(self, bound: float, cost: float | None) -> None:
        """A held call is over: its bound released, what it cost (if anything) spent."""
        self.held = max(0.0, self.held - bound)
        self.spent += cost or 0.0

    def reached(self, bound: float) -> str:
        return (
            f"stopped at the spend cap: {dollars(self.spent)} spent of {dollars(self.limit)}, "
            f"and the next call could cost up to {dollars(bound)}"
        )


def most_it_costs(req: LLMRequest, profile: ModelProfile) -> float | None:
    """The most `req` can cost at `profile`'s price (None when the price is unknown)."""
    prompt = sum(len(content.encode()) + TOKENS_PER_MESSAGE for _, content in req.messages)
    output = req.max_tokens if req.max_tokens is not None else UNBOUNDED_OUTPUT
    return profile.price_per_call(prompt + TOKENS_PER_MESSAGE, output)
