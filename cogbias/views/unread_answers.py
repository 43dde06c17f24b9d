"""How many answers of live pairs could not be read, and why, in plain words.

`cogbias pair` and Learn ask a model now and show what it said. When a sampled answer names
two options, or none, the pair is not scored (docs/runs.md, "What is unreadable"), and the
stored reason is exact but technical ("control: no option could be extracted from the answer:
the answer names several options (Option 4, Option 7)"). This says how many halves that was
and why as a reader would, with one answer as it was written; each face adds its own fix
(a flag, a radio), since only it knows how the choice is made there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from cogbias.core.records import Decision
from cogbias.core.redact import redactor

# What `core.reading` and `runs.decide` say (their first words decide), as a reader says it.
PLAIN_REASONS = (
    ("the answer names several options", "named more than one option"),
    ("the answer names no option", "named no option"),
    ("the answer negates", "only ruled options out"),
    ("the answer names Option", "named an option number that does not exist"),
    ("the extraction by", "got no option from the extraction call"),
    ("the answer could not be read", "could not be read at all"),
)
_UNREAD = "no option could be extracted from the answer: "
_HALF_RE = re.compile(r"(?:^|; )(control|treatment): ")


def half_errors(decision: Decision) -> dict[str, str]:
    """Each failed half's reason, from the decision's `error` ("control: …; treatment: …")."""
    error = decision.error or ""
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
