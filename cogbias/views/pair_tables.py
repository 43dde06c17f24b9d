"""Paired responses as flat tables, for reading on a page and for CSV export, and Compare's
paired differences as a page shows them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from cogbias.core.records import Pair, decode_filled
from cogbias.core.redact import Redactor, redactor
from cogbias.core.templates import render_decision_text
from cogbias.views.numbers import MISSING, interval, missing, p_text, signed_or_dash, text_or_blank

# Headers of the table a page shows: a choice is the option's number in the test case's own
# order (the order of its file), which is not always the order the model saw the options in.
CONTROL_CHOICE = "control: chosen option (test case's numbering)"
TREATMENT_CHOICE = "treatment: chosen option (test case's numbering)"
SHOWN_COLUMNS = ["score", "status", CONTROL_CHOICE, TREATMENT_CHOICE, "error", "scenario"]
CHOICE_NOTE = (
    "Chosen options are numbered in the test case's own order, with the option's text; the "
    "model may have seen them in reverse order (each pair below lists them as it saw them)."
)
PROBABILITY_CHOICE_NOTE = (
    " In a pair scored by option probabilities the chosen option is the one the model sampled, "
    "while the score is the expected score over both halves' probabilities: two halves that "
    "chose the same option can still score above or below 0."
)


def choice_note(pairs: Sequence[Pair]) -> str:
    """The caption under a table of pairs: whose numbering its choices use, and, where some
    pairs were scored by option probabilities, what their choice and score each mean."""
    scored = any(p.decision.control_distribution for p in pairs)
    return CHOICE_NOTE + (PROBABILITY_CHOICE_NOTE if scored else "")


def half_text(raw: str | None) -> str:
    """The decision text of a stored half (JSON of situation, prompt, options)."""
    if not raw:
        return ""
    try:
        filled = decode_filled(raw)  # the one codec: keeps the item's layout
    except (ValueError, KeyError, TypeError):
        return str(raw)
    return render_decision_text(filled)


def _options(raw: str | None) -> tuple[str, ...]:
    try:
        return tuple(decode_filled(raw).options) if raw else ()
    except (ValueError, KeyError, TypeError):
        return ()


def _choice_text(choice: Any, options: tuple[str, ...], clean: Redactor) -> str:
    """ "3 · Sell the shares": the option's number in the test case's order and its text."""
    if choice is None:
        return MISSING
    number = int(choice)
    text = options[number] if 0 <= number < len(options) else ""
    return f"{number + 1} · {clean(text)}" if text else str(number + 1)


def shown_frame(
    pairs: Sequence[Pair], clean: Redactor | None = None, with_cell: bool = False
) -> pd.DataFrame:
    """Stored pairs (as `Store.pairs` returns them) as a page's table shows them.

    Every cell is text a reader can take at face value: scores with two decimals and no sign
    on zero, "–" for a pair without a score or a choice, nothing for a pair without an error
    (never "None"), and each choice as its number in the test case's order beside its text.
    Texts are redacted (a provider may echo a key in an error) and still untrusted: a page
    shows them in a table, never as Markdown. `with_cell` leads with each pair's model and
    bias (for a table that mixes cells).
    """
    clean = clean or redactor()
    records = []
    for pair in pairs:
        d = pair.decision
        records.append(
            {
                "score": signed_or_dash(d.score),
                "status": text_or_blank(d.status),
                CONTROL_CHOICE: _choice_text(d.control_choice, _options(pair.control_half), clean),
                TREATMENT_CHOICE: _choice_text(
                    d.treatment_choice, _options(pair.treatment_half), clean
                ),
                "scenario": clean(text_or_blank(pair.scenario)) or "",
                "error": clean(text_or_blank(d.error)) or "",
            }
        )
    frame = pd.DataFrame(records, columns=SHOWN_COLUMNS)
    if with_cell:
        frame.insert(0, "bias", [text_or_blank(p.decision.test_case) for p in pairs])
        frame.insert(0, "model", [text_or_blank(p.decision.model) for p in pairs])
    return frame


def compare_numbers(
    table: pd.DataFrame, model_a: str, model_b: str, names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Compare's per-bias table (`analysis.compare_models`) as a page shows it: scores with
    three decimals and no sign on zero, a dash where an interval or a test needs more paired
    instances (a table would otherwise print "None")."""
    names = names or {}
    return pd.DataFrame(
        {
            "bias": [names.get(b, b) for b in table["bias"]],
            "n": table["n"].astype(int),
            f"mean {model_a}": [signed_or_dash(v, 3) for v in table["mean_a"]],
            f"mean {model_b}": [signed_or_dash(v, 3) for v in table["mean_b"]],
            "mean difference A − B": [signed_or_dash(v, 3) for v in table["mean_diff"]],
            **tested_columns(table, "95% CI (t, cut to [-2, 2])", "p (BH-adjusted)"),
        }
    )


def tested_columns(table: pd.DataFrame, ci: str, adjusted: str) -> dict[str, Any]:
    """A paired comparison's interval, Wilcoxon statistic and p, BH-adjusted p and verdict
    as a page shows them (`analysis.paired_difference`'s columns): Compare's two models and a
    factor's levels (`views.factor_view`) alike; `ci` and `adjusted` title two of them."""
    return {
        ci: [interval(lo, hi) for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)],
        "Wilcoxon W": [MISSING if missing(w) else f"{float(w):g}" for w in table["statistic"]],
        "p (Wilcoxon)": [p_text(p) for p in table["p_value"]],
        adjusted: [p_text(p) for p in table["p_adjusted"]],
        "significant after BH": table["significant"].fillna(False).astype(bool),
    }
