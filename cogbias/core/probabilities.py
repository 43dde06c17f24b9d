"""Option probabilities and the exact expected score of a pair (the `probabilities` scorer,
`runs/probabilities.py`).

In that scoring mode a half is not one sampled answer but a distribution over the options,
read from the model's token log-probabilities (`cogbias.llm.logprobs`). A pair's score is then
the expectation of the test case's metric over both distributions, control × treatment:
no sampling noise. Pure functions; the stored JSON form is documented in docs/datasets.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from cogbias.core.metrics import MetricParams, score_pair

EXPECTATION_DIGITS = 12
# Below this share of the model's probability on the options, the renormalised distribution
# would be noise blown up to a certainty (a letter at 0.25% next to "Hello" at 99% read as
# 100% on that letter): the half is unreadable instead (docs/runs.md).
MIN_OPTION_MASS = 0.1
# Servers round their log-probabilities: listed probabilities may add up to a little above 1.
SUM_TOLERANCE = 1e-3


class NotADistribution(ValueError):
    """What a server listed cannot be read as a distribution over the options; the message
    says why, and the half is unreadable with it (never a one-hot presented as a measurement)."""


@dataclass(frozen=True)
class Distribution:
    """A half's probabilities over its options (0-based, original order), summing to 1.

    `outside` is the probability the model gave to anything that is not an option label
    (other tokens, listed or not) before renormalising; `unlisted` the part of it the server
    did not list at all (beyond its `top_logprobs`), an upper bound on what any option not in
    the list could have had, never read as zero.
    """

    p: tuple[float, ...]
    outside: float = 0.0
    unlisted: float = 0.0

    def __post_init__(self) -> None:
        # Checked here, so no NaN, infinity or stray mass is ever stored, scored or drawn.
        shares = (*self.p, self.outside, self.unlisted)
        if not self.p or not all(math.isfinite(x) and 0.0 <= x <= 1.0 for x in shares):
            raise ValueError(f"not a distribution: {self.p}, {self.outside}, {self.unlisted}")
        if abs(math.fsum(self.p) - 1.0) > 1e-6:
            raise ValueError(f"probabilities {self.p} add up to {math.fsum(self.p)}, not 1")

    def to_json(self) -> str:
        """The stored and exported form: {"p": [...], "outside": x, "unlisted": y}."""
        return json.dumps(
            {
                "p": [round(x, 12) for x in self.p],
                "outside": round(self.outside, 12),
                "unlisted": round(self.unlisted, 12),
            },
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str | None) -> Distribution | None:
        """The stored form read back; ValueError (or KeyError, TypeError) when it is not one,
        e.g. a `NaN` an older version stored."""
        if not text:
            return None
        data = json.loads(text)
        return cls(
            tuple(float(x) for x in data["p"]),
            float(data.get("outside", 0.0)),
            float(data.get("unlisted", 0.0)),
        )


def uniform(n_options: int) -> Distribution:
    """The random baseline's distribution: every option equally likely."""
    return Distribution(tuple(1.0 / n_options for _ in range(n_options)))


def from_masses(masses: Sequence[float], listed_total: float) -> Distribution:
    """Renormalise the probability read for each option into a distribution.

    `listed_total` is the probability of every token the server listed at that position
    (options or not), so 1 - listed_total was not listed at all. Raises `NotADistribution`
    when no option has any, when the options have less than `MIN_OPTION_MASS` of it all,
    or when the probabilities are no probabilities (not finite, negative, above 1 together).
    """
    if not all(math.isfinite(m) and m >= 0.0 for m in (*masses, listed_total)):
        raise NotADistribution(f"the probabilities read are not numbers in [0, 1]: {masses}")
    total = math.fsum(masses)
    if total <= 0.0:
        raise NotADistribution("no option is among the tokens listed where the answer begins")
    if max(total, listed_total) > 1.0 + SUM_TOLERANCE:
        raise NotADistribution(
            f"the listed probabilities add up to {max(total, listed_total):.1%}, more than 100%"
        )
    if total < MIN_OPTION_MASS:
        raise NotADistribution(
            f"the model put {total:.2%} of its probability on the options (at least "
            f"{MIN_OPTION_MASS:.0%} is needed to read a distribution over them)"
        )
    listed = min(1.0, max(listed_total, total))
    return Distribution(
        tuple(m / total for m in masses),
        outside=max(0.0, 1.0 - total),
        unlisted=max(0.0, 1.0 - listed),
    )


def expected_score(
    control: Distribution, treatment: Distribution, params: MetricParams, n_options: int
) -> float:
    """E[score] with the control and treatment answers drawn independently from their
    distributions: sum over i, j of p_c(i) p_t(j) score(i, j)."""
    if len(control.p) != n_options or len(treatment.p) != n_options:
        raise ValueError(
            f"distributions over {len(control.p)} and {len(treatment.p)} options "
            f"for a test case with {n_options}"
        )
    total = math.fsum(
        pc * pt * score_pair(i, j, params, n_options)
        for i, pc in enumerate(control.p)
        if pc
        for j, pt in enumerate(treatment.p)
        if pt
    )
    # Rounded far below any meaningful difference, so an exact null stays exactly 0: the
    # random baseline's uniform halves would otherwise score ±1e-17, a constant that a
    # t-test against 0 calls significant.
    return round(total, EXPECTATION_DIGITS) + 0.0


def mean(distributions: Sequence[Distribution]) -> Distribution:
    """The mean of a half's per-sample distributions over the same options (the
    `mean_probability` reducer): each option's probability, and `outside` and `unlisted`,
    averaged. N identical distributions (a server whose probabilities do not vary between
    calls) have that one distribution as their mean."""
    if not distributions or len({len(d.p) for d in distributions}) != 1:
        raise ValueError("a mean needs distributions over the same options")
    if all(d == distributions[0] for d in distributions):
        return distributions[0]  # exactly, not up to the rounding of a sum
    n = len(distributions)
    p = [math.fsum(d.p[i] for d in distributions) / n for i in range(len(distributions[0].p))]
    total = math.fsum(p)  # 1 up to rounding: renormalised so the check in Distribution holds
    return Distribution(
        tuple(x / total for x in p),
        math.fsum(d.outside for d in distributions) / n,
        math.fsum(d.unlisted for d in distributions) / n,
    )
