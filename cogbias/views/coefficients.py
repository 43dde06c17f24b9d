"""Regression coefficients as a reader sees them: every number with the digits it needs.

A fixed "%+.3f" prints a per-day coefficient such as release_days (≈ 0.0002 per day) as
"+0.000, SE 0.000, CI -0.000 … +0.000", which reads as "no effect, measured exactly". Here
each number keeps `digits` significant digits: fixed-point while that stays short, scientific
notation for very small or very large magnitudes. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import pandas as pd

DIGITS = 3
# Below 1e-4 (or from 1e6 on) fixed-point needs too many zeros to read: use scientific.
SCIENTIFIC_BELOW = -4
SCIENTIFIC_FROM = 6


def significant(value: float, digits: int = DIGITS, sign: bool = True) -> str:
    """`value` to `digits` significant digits, with its sign when `sign`; "–" if unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    value = float(value)
    plus = "+" if sign else ""
    if math.isinf(value):
        return ("+∞" if sign else "∞") if value > 0 else "−∞"
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    if exponent < SCIENTIFIC_BELOW or exponent >= SCIENTIFIC_FROM:
        return f"{value:{plus}.{digits - 1}e}"
    return f"{value:{plus}.{max(0, digits - 1 - exponent)}f}"


# A formula's fixed-effect term: C(variable)[T.level], its level against the reference level.
_LEVEL = re.compile(r"C\((?P<variable>[^)]+)\)\[T\.(?P<level>.*)\]")
# The published model features as a reader says them (`regression.feature_frame`).
FEATURE_WORDS = {
    "temperature": "temperature (per 1.0 higher)",
    "release_days": "release date (per day later)",
    "number_parameters": "parameters (per billion more)",
    "capability": "capability score (per point higher)",
}


def plain_term(term: str, reference: Mapping[str, str] | None = None) -> str:
    """A regression term in words: "bias: category_size_bias (against anchoring)" for
    C(bias)[T.category_size_bias], the intercept as the reference levels' effect, a
    number's change per unit; the term itself stays in the table's last column."""
    reference = reference or {}
    if term == "Intercept":
        base = ", ".join(f"{k} {v}" for k, v in reference.items())
        return f"baseline ({base})" if base else "baseline"
    match = _LEVEL.fullmatch(term)
    if match:
        variable, level = match["variable"], match["level"]
        against = f" (against {reference[variable]})" if variable in reference else ""
        return f"{variable}: {level}{against}"
    return FEATURE_WORDS.get(term, term)


def coefficient_table(
    table: pd.DataFrame, digits: int = DIGITS, reference: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """An `OlsResult.table` (term, coef, std_err, t, p, ci_low, ci_high) as display text:
    what each coefficient is the effect of, in words (`plain_term`, against the fit's
    `reference` levels) first, the formula's own term last."""
    return pd.DataFrame(
        {
            "effect of": [plain_term(str(t), reference) for t in table["term"]],
            "coefficient": [significant(v, digits) for v in table["coef"]],
            "std. error": [significant(v, digits, sign=False) for v in table["std_err"]],
            "t": [significant(v, digits) for v in table["t"]],
            "p": [significant(v, digits, sign=False) for v in table["p"]],
            "95% CI": [
                f"{significant(lo, digits)} … {significant(hi, digits)}"
                for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
            ],
            "term": table["term"].astype(str),
        }
    )
