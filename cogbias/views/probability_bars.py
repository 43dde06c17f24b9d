"""A probability-scored pair as a person reads it: each half's options with the model's
probability of each (bars), and one sentence comparing the halves.

Only pairs of `--scoring probabilities` runs carry distributions (`decisions.*_distribution`);
for the others every function here returns nothing, so a page can call them for any pair.
Option texts are untrusted: pages show them as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogbias.core.probabilities import Distribution
from cogbias.core.run_record import Run
from cogbias.llm.logprobs import LABELS
from cogbias.runs import scorers
from cogbias.views.numbers import percent
from cogbias.views.shown_pairs import ShownHalf, ShownPair


def scoring_labels() -> dict[str, str]:
    """The scorers as the Run and Learn pages offer them (name -> label), default first: a
    sampled spelling of another (`consistency:N`) is that scorer with a number of samples."""
    return {s.spelling: s.label for s in scorers.offered()}


@dataclass(frozen=True)
class OptionBar:
    """One option as the model saw it: its letter, its text, its probability."""

    label: str
    option: str
    p: float

    def text(self) -> str:
        return f"{self.label}: {self.option} — {percent(self.p)}"


def half_bars(half: ShownHalf) -> list[OptionBar] | None:
    """The half's options in presented order with their probabilities, or None when the pair
    was not probability-scored (or its distribution does not fit the options)."""
    try:
        dist = Distribution.from_json(half.distribution)
    except (ValueError, KeyError, TypeError):
        return None
    if dist is None or len(dist.p) != len(half.canonical_options):
        return None
    return [
        OptionBar(
            LABELS[k] if k < len(LABELS) else str(k + 1), half.canonical_options[j], dist.p[j]
        )
        for k, j in enumerate(half.order)
    ]


def outside_note(half: ShownHalf) -> str | None:
    """How much probability went to no option (renormalised away), when any did."""
    try:
        dist = Distribution.from_json(half.distribution)
    except (ValueError, KeyError, TypeError):
        return None
    if dist is None or dist.outside < 0.005:
        return None
    return (
        f"{percent(dist.outside)} of the model's probability went to tokens that are no option "
        f"(of it, up to {percent(dist.unlisted)} unlisted); the bars share the rest."
    )


def compare_sentence(pair: ShownPair) -> str | None:
    """'62% on “Save 200 people” in the control, 31% in the treatment', for the option the
    control favours most, and what the score is; None without distributions."""
    control, treatment = half_bars(pair.control), half_bars(pair.treatment)
    if control is None or treatment is None:
        return None
    top = max(range(len(control)), key=lambda i: control[i].p)
    option = control[top].option
    in_treatment = next((b.p for b in treatment if b.option == option), None)
    later = "" if in_treatment is None else f", {percent(in_treatment)} in the treatment"
    score = pair.score
    scored = (
        ""
        if score is None
        else f" The score {float(score):+.2f} is the expected score over both distributions "
        "(no sampling)."
    )
    return f"{percent(control[top].p)} on “{option}” in the control{later}.{scored}"


def scored_by_probabilities(spec: Mapping[str, Any]) -> bool:
    """Whether a run's (parsed) spec asks for scoring by option probabilities."""
    name = spec.get("scoring")
    return (
        isinstance(name, str)
        and scorers.unknown(name) is None
        and scorers.get(name).needs == scorers.OPTION_PROBABILITIES
    )


PROBABILITY_SCORES = (
    "each pair's score is the exact expected score over the model's probabilities of the "
    "options in both halves (no extraction), and the random baseline's is the metric's exact "
    "null"
)


def heatmap_note(runs: Sequence[Run]) -> str | None:
    """What a heatmap over `runs` says about how they were scored; None when none of them was
    probability-scored. "All results" mixes runs, so a teacher showing the demo (scored by
    probabilities) learns it as one who picked its run does."""
    scored = [r for r in runs if scored_by_probabilities(r.spec)]
    if not scored:
        return None
    if len(scored) == len(runs) == 1:
        return f"This run is scored by option probabilities: {PROBABILITY_SCORES}."
    if len(scored) == len(runs):
        return f"These runs are all scored by option probabilities: {PROBABILITY_SCORES}."
    named = ", ".join(r.id for r in scored)
    return (
        f"{len(scored)} of the {len(runs)} runs shown are scored by option probabilities "
        f"({named}): {PROBABILITY_SCORES}. The others' scores are read from sampled answers."
    )
