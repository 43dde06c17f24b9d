"""Prompt scenarios of a study file (`[variants.NAME]`), parsed and checked.

A variant adds the persona or not, multiplies a test's `scaled` values by `scale`, and may set
values outright (`[variants.NAME.values]`): the Mohr thesis' odd and large scenarios changed
anchors, ball counts and flips as well as prices, each rounded its own way, which one factor
cannot say.
"""

from __future__ import annotations

import math
import re
from typing import Any

from cogbias.library.testcases import _Checker, _clip
from cogbias.studies.definitions import MAX_NUMBER, MAX_VARIANTS, Variant

ID_RE = re.compile(r"[a-z0-9][a-z0-9_]*")  # ids of studies, tests and variants

_VARIANT = {
    "description": (str, False),
    "persona": (bool, False),
    "scale": ((int, float), False),
    "values": (dict, False),
}


def parse_variants(
    table: dict[str, Any], check: _Checker, value_names: set[str]
) -> dict[str, Variant]:
    """The study's [variants]: persona, scale and own values of each, every problem named."""
    variants: dict[str, Variant] = {}
    if len(table) > MAX_VARIANTS:
        check.add(
            ("variants", next(iter(table))),
            f"a study has at most {MAX_VARIANTS} variants, not {len(table)}",
        )
        return variants
    for name, spec in table.items():
        path = ("variants", name)
        if not isinstance(spec, dict):
            check.add(path, f"variant '{name}' should be a table [variants.{name}]")
            continue
        if not ID_RE.fullmatch(name):
            check.add(path, f"variant name {_clip(name)!r} must be lower-case letters, digits, '_'")
        if not check.fields(spec, _VARIANT, path):
            continue
        scale = float(spec.get("scale", 1.0))
        if not (math.isfinite(scale) and 0 < scale <= 1e12):
            check.add(
                (*path, "scale"), f"variant '{name}': scale must be a positive number up to 1e12"
            )
        variants[name] = Variant(
            name,
            spec.get("persona", True),
            scale,
            spec.get("description", ""),
            _variant_values(spec.get("values", {}), (*path, "values"), check, value_names),
        )
    return variants


def _variant_values(
    table: dict[str, Any], path: tuple[str, ...], check: _Checker, value_names: set[str]
) -> dict[str, int | float]:
    """A variant's own numbers: each names a value under [values] and is a finite number."""
    out: dict[str, int | float] = {}
    for name, number in table.items():
        if name not in value_names:
            check.add((*path, name), f"variant value '{name}' is not defined under [values]")
        elif (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not abs(number) <= MAX_NUMBER
        ):
            check.add((*path, name), f"variant value '{name}' must be a number up to ±1e15")
        else:
            out[name] = number
    return out
