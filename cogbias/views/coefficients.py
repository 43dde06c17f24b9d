"""Regression coefficients as a reader sees them: every number with the digits it needs.

A fixed "%+.3f" prints a per-day coefficient such as release_days (≈ 0.0002 per day) as
"+0.000, SE 0.000, CI -0.000 … +0.000", which reads as "no effect, measured exactly". Here
each number keeps `digits` significant digits: fixed-point while that stays short, scientific
notation for very small or very large magnitudes. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math

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


def coefficient_table(table: pd.DataFrame, digits: int = DIGITS) -> pd.DataFrame:
    """An `OlsResult.table` (term, coef, std_err, t, p, ci_low, ci_high) as display text."""
    return pd.DataFrame(
        {
            "term": table["term"].astype(str),
            "coefficient": [significant(v, digits) for v in table["coef"]],
            "std. error": [significant(v, digits, sign=False) for v in table["std_err"]],
            "t": [significant(v, digits) for v in table["t"]],
            "p": [significant(v, digits, sign=False) for v in table["p"]],
            "95% CI": [
                f"{significant(lo, digits)} … {significant(hi, digits)}"
                for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
            ],
        }
    )
