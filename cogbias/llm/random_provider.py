"""The `random` model: the baseline of every figure, answered behind the client like any model.

It writes no text; it picks uniformly from the answers a question admits. A caller says what
those are with an `AnswerSpace` (carried by `LLMRequest.answer_space`, which real models
ignore: for them the grammar or JSON schema says the same). The space also carries the seed,
so a random answer is reproducible from the question alone and a resumed run gets the same.

The client answers it (never from the cache: it is free) with the seed the request's space
carries. The paired pipeline seeds each half of each decision on its own (run, instance,
half, repeat: `runs.decide.random_draw`), so identical questions get independent answers; the
study runner seeds each turn by its conversation. `random.Random` treats a string seed and an
integer seed differently; both are kept as they are.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class AnswerSpace:
    """What one random answer may be.

    `fixed` is answered as is (nothing to choose); else one of `choices`; else a number in
    [low, high] (an integer when the range is at least 1 wide). `lines` asks for that many
    answers, one a line, from one seeded sequence. `seed` is given to `random.Random` as is.
    """

    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    lines: int | None = None
    fixed: str | None = None
    seed: int | str = 0

    @staticmethod
    def number_range(
        minimum: float | None, maximum: float | None, cap: float
    ) -> tuple[float, float]:
        """(low, high) for a number answer whichever bound is given: an upper bound alone
        reaches 1000 below it (0 when it is positive); no upper bound reaches 1000 above the
        lower one, never beyond `cap`."""
        low = minimum if minimum is not None else 0.0
        if minimum is None and maximum is not None:
            low = 0.0 if maximum >= 0 else maximum - 1000.0
        high = maximum if maximum is not None else min(low + 1000.0, cap)
        return low, high


def answer(space: AnswerSpace) -> str:
    """A random answer from `space` (the same space and seed give the same answer)."""
    if space.fixed is not None:
        return space.fixed
    rng = random.Random(space.seed)
    if space.lines is not None:
        return "\n".join(_one(space, rng) for _ in range(space.lines))
    return _one(space, rng)


def choose_option(n_options: int, seed: int | str) -> int:
    """The paper's Random baseline: one of `n_options` uniformly (0-based), seeded by `seed`."""
    return random.Random(seed).randrange(n_options)


def option_space(n_options: int, seed: int | str) -> AnswerSpace:
    """ "Option 1" .. "Option n", as a decision's extraction step answers; `answer` picks the
    same option as `choose_option` with the same seed."""
    return AnswerSpace(choices=tuple(f"Option {i + 1}" for i in range(n_options)), seed=seed)


def _one(space: AnswerSpace, rng: random.Random) -> str:
    if space.choices:
        return rng.choice(list(space.choices))
    if space.low is None or space.high is None:
        raise ValueError("an answer space needs choices, a number range or a fixed text")
    low, high = space.low, space.high
    value = rng.uniform(low, high)
    return str(
        min(max(round(value), math.ceil(low)), math.floor(high)) if high - low >= 1 else value
    )
