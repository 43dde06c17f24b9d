"""How many answers could not be read, why, and what would read them, in plain words.

When a sampled answer names two options, or none, the pair is not scored (docs/runs.md, "What
is unreadable"), and the stored reason is exact but technical ("control: no option could be
extracted from the answer: the answer names several options (Option 4, Option 7)"). This
says how many that was and why as a teacher would: for live pairs (`cogbias pair`, Learn)
by half, with one answer as it was written (`unread_sentence`); for stored pairs (an
Explore cell, the end of a run, `cogbias runs`, the Run page, a report) by pair
(`count_sentence`, `run_note`), with the fix (`fix_sentence`: option probabilities where
the models give them, a stronger model, the extraction step), spelled as flags for the
command and in words for the pages and reports.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cogbias.core.records import Decision
from cogbias.core.redact import redactor

if TYPE_CHECKING:
    from cogbias.core.run_record import Run
    from cogbias.store import Store

# What `core.reading` and `runs.decide` say (their first words decide), as a reader says it.
PLAIN_REASONS = (
    ("the answer names several options", "named more than one option"),
    ("the answer names no option", "named no option"),
    ("the answer negates", "only ruled options out"),
    ("the answer names Option", "named an option number that does not exist"),
    ("the extraction by", "got no option from the extraction call"),
    ("the answer could not be read", "could not be read at all"),
    ("the log-probabilities are no distribution", "gave no usable option probabilities"),
)
UNKNOWN_REASON = "wrote an answer that could not be read"  # a reason no rule above knows
_UNREAD = "no option could be extracted from the answer: "
_HALF_RE = re.compile(r"(?:^|; )(control|treatment): ")


def half_errors(decision: Decision) -> dict[str, str]:
    """Each failed half's reason, from the decision's `error` ("control: …; treatment: …")."""
    return _halves(decision.error or "")


def _halves(error: str) -> dict[str, str]:
    marks = list(_HALF_RE.finditer(error))
    ends = [m.start() for m in marks[1:]] + [len(error)] * bool(marks)
    return {m[1]: error[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def plain_reason(error: str) -> str | None:
    """Why a half's answer could not be read, in plain words; None when the half failed for
    another reason (a call that failed, a key missing)."""
    text = error.removeprefix(_UNREAD)
    for start, plain in PLAIN_REASONS:
        if text.startswith(start):
            return plain
    return None


def unread_halves(decisions: Sequence[Decision]) -> list[tuple[str, str]]:
    """(plain reason, the answer as written) of every half whose answer could not be read."""
    found = []
    for decision in decisions:
        for half, error in half_errors(decision).items():
            reason = plain_reason(error)
            if reason is not None:
                found.append((reason, getattr(decision, f"{half}_answer") or ""))
    return found


def unread_sentence(decisions: Sequence[Decision]) -> str | None:
    """ "The answers to 2 of 2 halves could not be read: 2 named more than one option (such as
    'I would choose Option 4: Very bad')." — or None when every answer was read. Plain text,
    redacted (an answer may echo a key), for a page to escape."""
    unread = unread_halves(decisions)
    if not unread:
        return None
    clean = redactor()
    counts = Counter(reason for reason, _ in unread)
    parts = []
    for reason, n in counts.most_common():
        example = next(answer for why, answer in unread if why == reason)
        shown = " ".join(clean(example).split())
        shown = shown if len(shown) <= 80 else shown[:77] + "…"
        parts.append(f"{n} {reason}" + (f" (such as {shown!r})" if shown else ""))
    halves = 2 * len(decisions)
    return f"The answers to {len(unread)} of {halves} halves could not be read: " + (
        "; ".join(parts) + "."
    )


def reason_of(error: str) -> str:
    """Why a pair whose answers could not be read (its stored `error`) was not scored, in
    plain words: the reason of its first half that has one."""
    for text in [*_halves(error).values(), error]:
        if (reason := plain_reason(text)) is not None:
            return reason
    return UNKNOWN_REASON


def count_sentence(errors: Sequence[str], total: int, noun: str = "pairs") -> str | None:
    """ "3 of 20 pairs could not be read: the model named more than one option (2), named no
    option (1)" from the stored reasons of the unread ones (`Store.unreadable_errors`, a
    kind's `unreadable`) — or None when every one was read."""
    if not errors:
        return None
    counts = Counter(reason_of(error) for error in errors).most_common()
    why = (
        counts[0][0] if len(counts) == 1 else ", ".join(f"{reason} ({n:,})" for reason, n in counts)
    )
    return (
        f"{len(errors):,} of {max(total, len(errors)):,} {noun} could not be read: the model {why}"
    )


def fix_sentence(
    models: Sequence[str], api_base: str | None, scoring: str | None, flags: bool = False
) -> str:
    """What would read them: option probabilities where every model gives them and the run
    did not use them (`scorers.gives_probabilities`), a stronger model,
    and, for sampled answers, the extraction step; `flags` spells each as the command's flag,
    else in words (a page, a report)."""
    from cogbias.runs import scorers

    scorer = scorers.get(scoring) if scoring and scorers.unknown(scoring) is None else None
    sampled = scorer is None or scorer.reads_answers
    gives = scorers.gives_probabilities(models, api_base)
    fixes = []
    if sampled and gives:
        fixes.append(
            "score by option probabilities"
            + (" (--scoring probabilities)" if flags else "")
            + ", which need no answer to be read"
        )
    fixes.append("use a stronger model")
    if sampled:
        how = " (--extractor MODEL)" if flags else " (the extraction step)"
        fixes.append("have a stronger model read the unclear answers" + how)
    return ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1]


def run_note(store: Store, run: Run, flags: bool = False) -> str | None:
    """ "3 of 60 pairs could not be read: the model named more than one option. To read
    them: score by option probabilities, …" for a stored run of any kind (its read side's
    `unreadable`), or None when its rows say of none."""
    from cogbias.runs import kinds

    kind = kinds.of(run)
    said = count_sentence(kind.unreadable(store, run), run.done, kind.unit_name)
    if said is None:
        return None
    models = [str(m) for m in run.spec.get("models") or []]
    fix = fix_sentence(models, run.spec.get("api_base"), run.spec.get("scoring"), flags)
    return f"{said}. To read them: {fix}."
