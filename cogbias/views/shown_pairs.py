"""Decided pairs as the model saw them: presented option order, raw answer, extraction and
the scored choice, plus the sentence that explains a pair's score.

A decision model sees the options in the order the run presented them (by default half of
all pairs reversed, so position bias cancels out; token-bias items as written); the stored
choice is mapped back to the test case's own order for scoring. Pages show both, from these
functions, so the prompt, the raw answer, the extracted option and the scored choice can
never disagree on screen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cogbias.core.reading import read_option
from cogbias.core.records import Decision, DecisionStatus, Instance, Pair, decode_filled
from cogbias.core.redact import Redactor, redactor
from cogbias.core.templates import Filled, render_decision_text
from cogbias.llm.logprobs import LABELS
from cogbias.views.numbers import signed


def parse_order(raw: Any, n_options: int) -> list[int] | None:
    """A stored presented order (JSON list of canonical indices), or None if it is missing
    or not a permutation of the options (then the order the model saw is unknown)."""
    if raw is None or raw == "":
        return None
    try:
        order = json.loads(raw) if isinstance(raw, str) else list(raw)
    except (ValueError, TypeError):
        return None
    if not isinstance(order, list) or sorted(order) != list(range(n_options)):
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in order):
        return None
    return order


@dataclass(frozen=True)
class ShownHalf:
    """One half of a decided pair as the decision model saw it, with what became of it.

    `options` are in presented order and `order[i]` is the test case's (canonical, 0-based)
    index of presented option i. `choice` is the canonical 0-based option the score used.
    `labelled`: the half was scored by option probabilities, so the model saw the options
    lettered A, B, C… and answered with a letter; its score is an expectation, not `choice`.
    `distribution` and `samples` are the decision's stored JSON for this half (probability
    and sampled runs), read by the probability bars and the sample tables.
    Every text is already redacted; it is still untrusted and must be shown as plain text.
    """

    name: str
    situation: str
    prompt: str
    order: tuple[int, ...]
    canonical_options: tuple[str, ...]
    order_known: bool
    answer: str
    extraction: str
    choice: int | None
    labelled: bool = False
    distribution: str | None = None
    samples: str | None = None
    # a reasoning model's trace of this half (read apart from the answer) and, for
    # `--intervention self_help`, the question as the model rewrote it before answering
    reasoning: str = ""
    rewrite: str = ""

    def mark(self, presented: int) -> str:
        """What the model saw before the option at `presented`: "Option 2", or "B"."""
        return LABELS[presented] if self.labelled else f"Option {presented + 1}"

    @property
    def options(self) -> tuple[str, ...]:
        """The options in the order the model saw them."""
        return tuple(self.canonical_options[i] for i in self.order)

    @property
    def reversed(self) -> bool:
        return self.order_known and list(self.order) != sorted(self.order)

    @property
    def presented_choice(self) -> int | None:
        """0-based position of the scored choice in the presented list."""
        if self.choice is None or self.choice not in self.order:
            return None
        return self.order.index(self.choice)

    def option_lines(self) -> list[str]:
        """ "Option N: text" (or "B: text") as the model read them; the choice marked."""
        picked = self.presented_choice
        chosen = "   ◀ sampled" if self.labelled else "   ◀ chosen"
        return [
            f"{self.mark(i)}: {text}" + (chosen if i == picked else "")
            for i, text in enumerate(self.options)
        ]

    def decision_text(self) -> str:
        """The whole prompt half as the model read it (situation, prompt, options)."""
        from cogbias.runs.probabilities import render_labelled

        filled = Filled(self.situation, self.prompt, self.canonical_options)
        if self.labelled:
            return render_labelled(filled, self.order)
        return render_decision_text(filled, self.order)

    def choice_sentence(self) -> str:
        """Which option was extracted, as presented and in the test case's order."""
        picked = self.presented_choice
        if picked is None or self.choice is None:
            return "No option was extracted from this answer, so the pair has no score."
        text = self.canonical_options[self.choice]
        if not self.order_known:
            return (
                f"Chose “{text}”: option {self.choice + 1} in the test case's order (the order "
                "shown to the model was not recorded)."
            )
        where = (
            f"shown to the model as {self.mark(picked)}, which is option {self.choice + 1} in "
            "the test case's order"
            if self.reversed
            else self.mark(picked)
        )
        if self.labelled:
            return (
                f"Sampled “{text}” ({where}); the score is the expected score over the option "
                "probabilities, not this one answer."
            )
        return f"Chose “{text}” ({where}); the score uses this choice."

    def answer_disagreement(self) -> str | None:
        """A note when the stored reading is not what the answer itself names.

        Runs read answers with `core.reading` and accept an extraction only where the answer
        supports it, so this stays silent for them; older runs (and the published datasets)
        stored whatever the extraction step said, and a small extractor read "100%" as
        "Option 10". The same reader that runs use checks the stored choice, so the page and
        the run can never disagree on what an answer names.
        """
        picked = self.presented_choice
        if picked is None or self.labelled:  # a letter read from its token, not from words
            return None
        reading = read_option(self.answer, self.options)
        if reading.confirms(picked):
            return None
        stored = f"the stored reading is Option {picked + 1}, and the score uses it"
        if reading.choice is not None:
            return (
                f"The answer names “{self.options[reading.choice]}” (Option "
                f"{reading.choice + 1} as shown), but {stored}."
            )
        return f"The answer cannot be read on its own: {reading.problem}; {stored}."


def _filled_of(raw: Any) -> Filled | None:
    if isinstance(raw, Filled):
        return raw
    try:
        return decode_filled(raw)
    except (ValueError, KeyError, TypeError):
        return None


def shown_half(filled: Filled, decision: Decision, half: str, clean: Redactor) -> ShownHalf:
    """One half of a decision over its filled text, as the model saw it."""
    n = len(filled.options)
    order = parse_order(getattr(decision, f"{half}_order"), n)
    choice = getattr(decision, f"{half}_choice")
    choice = int(choice) if choice is not None and 0 <= int(choice) < n else None
    distribution = getattr(decision, f"{half}_distribution")
    return ShownHalf(
        name=half,
        situation=clean(filled.situation) or "",
        prompt=clean(filled.prompt) or "",
        order=tuple(order if order is not None else range(n)),
        canonical_options=tuple(clean(o) or "" for o in filled.options),
        order_known=order is not None,
        answer=clean(getattr(decision, f"{half}_answer")) or "",
        extraction=clean(getattr(decision, f"{half}_extraction")) or "",
        choice=choice,
        labelled=bool(distribution),
        distribution=distribution,
        samples=getattr(decision, f"{half}_samples"),
        reasoning=clean(getattr(decision, f"{half}_reasoning")) or "",
        rewrite=clean(getattr(decision, f"{half}_rewrite")) or "",
    )


@dataclass(frozen=True)
class ShownPair:
    """Both halves of a decided pair, as shown on every page that shows a pair."""

    control: ShownHalf
    treatment: ShownHalf
    score: float | None
    status: str
    error: str

    @property
    def halves(self) -> tuple[ShownHalf, ShownHalf]:
        return (self.control, self.treatment)

    def order_note(self) -> str | None:
        """A visible note when the model did not see the options in the test case's order."""
        c, t = self.control, self.treatment
        if not (c.order_known and t.order_known):
            return (
                "The order in which the options were shown to the model was not recorded; "
                "they are listed in the test case's order."
            )
        if c.reversed and t.reversed:
            return (
                "The options were shown to the model in reverse order (both halves alike, as "
                "for half of all pairs, so that a preference for the first or last position "
                "cancels out). They are listed here as the model saw them."
            )
        if c.reversed or t.reversed:
            which = "control" if c.reversed else "treatment"
            return (
                f"The {which}'s options were shown to the model in reverse order; each half "
                "is listed here as the model saw it."
            )
        return None


def shown_pair(
    control: Any, treatment: Any, decision: Decision, clean: Redactor | None = None
) -> ShownPair | None:
    """A pair from its two filled halves (`Filled` or their stored JSON) and its decision.

    None when a half's stored text cannot be read (then there is nothing faithful to show).
    """
    clean = clean or redactor()
    halves = [_filled_of(control), _filled_of(treatment)]
    if halves[0] is None or halves[1] is None:
        return None
    score = decision.score
    return ShownPair(
        control=shown_half(halves[0], decision, "control", clean),
        treatment=shown_half(halves[1], decision, "treatment", clean),
        score=None if score is None else float(score),
        status=str(decision.status or ""),
        error=clean(decision.error) or "",
    )


def shown_stored_pair(pair: Pair, clean: Redactor | None = None) -> ShownPair | None:
    """A stored pair (`Store.pairs`: the halves are stored as JSON with the instance)."""
    return shown_pair(pair.control_half, pair.treatment_half, pair.decision, clean)


# --------------------------------------------------------------------------- scores


def _chose(half: ShownHalf) -> str:
    picked = half.presented_choice
    if picked is None or half.choice is None:
        return "no option"
    text = f"“{half.canonical_options[half.choice]}”"
    if not half.order_known:
        return f"{text} (option {half.choice + 1} in the test case's order)"
    if half.reversed:
        return f"{text} (shown as {half.mark(picked)}; option {half.choice + 1} in the test case)"
    return f"{text} ({half.mark(picked)})"


def explain_score(instance: Instance, decision: Decision) -> str:
    """One sentence saying what the model answered and what the pair's score means.

    Options are named by their text and by the number the model saw; when the options were
    reversed, the test case's own number is given too.
    """
    clean = redactor()
    if decision.status == DecisionStatus.ABSTAINED:
        return (
            "This pair is not scored: the run's reducer left a half's samples undecided (a "
            "tie), so that half abstained. An abstention is a result, counted apart from "
            "failures."
        )
    if decision.status != DecisionStatus.OK or decision.score is None:
        return (
            f"This pair could not be scored: {clean(decision.error) or 'no answer was extracted'}."
        )
    pair = shown_pair(instance.control, instance.treatment, decision, clean)
    assert pair is not None  # both halves are Filled objects
    score = float(decision.score)
    if score > 0:
        meaning = "the answers moved in the direction the bias predicts"
    elif score < 0:
        meaning = "the answers moved against the direction the bias predicts (the opposite effect)"
    else:
        meaning = "the bias-eliciting detail made no difference in this pair"
    if pair.control.labelled:
        return (
            "Scored by option probabilities: without the bias-eliciting detail (control) the "
            f"model sampled {_chose(pair.control)}, with it (treatment) "
            f"{_chose(pair.treatment)}; the score {signed(score)} (from -1 to 1) is the expected "
            f"score over both halves' option probabilities, not over these two answers: "
            f"{meaning.replace('the answers', 'the probabilities')}."
        )
    return (
        f"Without the bias-eliciting detail (control) the model chose {_chose(pair.control)}; "
        f"with it (treatment) it chose {_chose(pair.treatment)}. Score {signed(score)} on a scale "
        f"from -1 to 1: {meaning}."
    )
