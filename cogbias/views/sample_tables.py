"""What the pages show of a sampled pair (`--samples N`, `--scoring consistency:N`): each
half's samples as the model answered them, and how many named the option the score used.

Only such pairs carry samples (`decisions.*_samples`); for the others every function here
returns None, so a page can ask any pair. Stored samples are read defensively: a list that
is not one, or a choice outside the options, is shown as no choice, never raised.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cogbias.views.shown_pairs import ShownHalf

if TYPE_CHECKING:
    import pandas as pd

ANSWER_SHOWN = 300  # characters of each sample's answer in the table (the export has all)


def samples_of(half: ShownHalf) -> list[dict[str, Any]] | None:
    """The half's stored samples (dicts with "answer", "choice", "error"), or None."""
    try:
        data = json.loads(half.samples or "null")
    except (TypeError, ValueError):
        return None
    if not isinstance(data, list) or not data:
        return None
    samples = [s for s in data if isinstance(s, dict)]
    for s in samples:
        choice = s.get("choice")
        ok = isinstance(choice, int) and 0 <= choice < len(half.canonical_options)
        s["choice"] = choice if ok else None
    return samples or None


def _named(half: ShownHalf, choice: int | None) -> str:
    """The option as the model saw it ("Option 2: Keep it"), or what stands for none."""
    if choice is None:
        return "(no option)"
    presented = half.order.index(choice) if choice in half.order else choice
    return f"{half.mark(presented)}: {half.canonical_options[choice]}"


def sample_table(half: ShownHalf) -> pd.DataFrame | None:
    """One line per sample: its number, the option it named, the start of its answer."""
    # pandas is imported on use: Learn's first page imports this module and shows no table
    # until a pair is run, and pandas takes ~0.3 s to import.
    import pandas as pd

    samples = samples_of(half)
    if samples is None:
        return None
    return pd.DataFrame(
        {
            "sample": range(1, len(samples) + 1),
            "chose": [_named(half, s["choice"]) for s in samples],
            "answer": [
                str(s.get("answer") or s.get("error") or "")[:ANSWER_SHOWN] for s in samples
            ],
        }
    )


def tally_sentence(half: ShownHalf) -> str | None:
    """How the samples split and what the run's reducer made of them: the option scored (the
    modal one, or another), the mean of their probabilities, or an abstention."""
    samples = samples_of(half)
    if samples is None:
        return None
    named = [s["choice"] for s in samples if s["choice"] is not None]
    n = len(samples)
    unnamed = f"; {n - len(named)} named no option" if len(named) < n else ""
    if half.labelled and half.distribution:
        return f"The score uses the mean of the {n} samples' option probabilities{unnamed}."
    if not named:
        return f"None of the {n} samples named an option."
    counts = {c: named.count(c) for c in dict.fromkeys(named)}
    if half.choice is None:
        split = ", ".join(f"{k} chose {_named(half, c)}" for c, k in counts.items())
        return (
            f"The run's reducer left the {n} samples undecided ({split}{unnamed}): this half "
            "abstained, so the pair is not scored."
        )
    top = max(counts.values())
    mine = counts.get(half.choice, 0)
    said = f"{mine} of {n} samples chose {_named(half, half.choice)}, the "
    said += "modal answer the score uses" if mine == top else "answer the run's reducer scored"
    if mine == top and sum(1 for k in counts.values() if k == top) > 1:
        said += " (a tie, which the run's reducer settled: mode gives it to the option named first)"
    return said + unnamed + "."
