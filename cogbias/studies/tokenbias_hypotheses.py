"""The token-bias paper's hypothesis table: which released files are P, which P', which way.

Appendix D does not always pair a family's gold file with its own random file (Table 6
compares sets-original-random with sets-original-framing-gold; math_original_gold has three
perturbed twins), so the pairing is data a user can read and extend
(`data/tokenbias_hypotheses.toml`), not a rule about file names. Pure: reading and checking.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cogbias.core.limits import name_problem
from cogbias.library.testcases import DATA_DIR

HYPOTHESES_FILE = DATA_DIR / "tokenbias_hypotheses.toml"
# the paper's H_a spellings (kept here so this module needs neither pandas nor SciPy)
ALTERNATIVES = ("perturbed_better", "original_better", "two_sided")


def holds_token_bias_pairs(meta: Mapping[str, Any]) -> bool:
    """Whether a stored dataset's metadata is a token-bias dataset's: the built-in study and
    the paper's imports record their hypotheses' alternatives, which nothing else does."""
    return "alternatives" in meta


class HypothesisTableError(ValueError):
    """A problem in the hypothesis table, located by file and entry."""


@dataclass(frozen=True)
class PaperHypothesis:
    """One row of the table: P files, P' files (pairwise), H_a, and what the paper calls it."""

    id: str
    title: str
    paper: str
    original: tuple[str, ...]
    perturbed: tuple[str, ...]
    alternative: str
    prompting: tuple[tuple[str, str], ...] = ()  # (P method, P' method) pairs

    @property
    def file_pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.original, self.perturbed, strict=True))

    @property
    def compares_prompting(self) -> bool:
        """True when P and P' are the same items asked two ways (not imported as pairs)."""
        return bool(self.prompting)

    @property
    def direction(self) -> str:
        return describe_alternative(self.alternative)


def describe_alternative(alternative: str) -> str:
    """The one-sided direction in words, as the paper states it."""
    return {
        "perturbed_better": "one-sided: n12 < n21 (P' answered correctly more often)",
        "original_better": "one-sided: n12 > n21 (the perturbation hurts)",
        "two_sided": "two-sided: n12 != n21",
    }.get(alternative, alternative)


def load_hypotheses(path: str | Path | None = None) -> dict[str, PaperHypothesis]:
    """Read and check the table; every problem names the file and the entry."""
    path = Path(path or HYPOTHESES_FILE)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HypothesisTableError(f"{path.name}: cannot be read ({exc})") from None
    entries = data.get("hypotheses")
    if not isinstance(entries, list) or not entries:
        raise HypothesisTableError(f"{path.name}: needs a non-empty [[hypotheses]] array")
    out: dict[str, PaperHypothesis] = {}
    for i, entry in enumerate(entries):
        where = f"{path.name}: hypotheses[{i}]"
        hypothesis = _hypothesis(where, entry)
        if hypothesis.id in out:
            raise HypothesisTableError(f"{where}.id: {hypothesis.id!r} appears twice")
        out[hypothesis.id] = hypothesis
    return out


def _hypothesis(where: str, entry: Any) -> PaperHypothesis:
    if not isinstance(entry, dict):
        raise HypothesisTableError(f"{where}: must be a table")

    def text(key: str) -> str:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise HypothesisTableError(f"{where}.{key}: a non-empty text is required")
        return value.strip()

    def files(key: str) -> tuple[str, ...]:
        value = entry.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise HypothesisTableError(f"{where}.{key}: a non-empty list of file names is required")
        return tuple(value)

    original, perturbed = files("original"), files("perturbed")
    if len(original) != len(perturbed):
        raise HypothesisTableError(
            f"{where}: 'original' lists {len(original)} files and 'perturbed' {len(perturbed)}; "
            "they pair one to one"
        )
    alternative = text("alternative")
    if alternative not in ALTERNATIVES:
        raise HypothesisTableError(f"{where}.alternative: use one of {', '.join(ALTERNATIVES)}")
    prompting = entry.get("prompting", [])
    if prompting and all(isinstance(p, str) for p in prompting):
        prompting = [prompting]  # one pair written flat
    if not isinstance(prompting, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(m, str) for m in p)
        for p in prompting
    ):
        raise HypothesisTableError(
            f"{where}.prompting: a list of [P method, P' method] pairs, e.g. "
            '[["one_shot", "one_shot@Bob"]]'
        )
    problem = name_problem(text("id"))
    if problem:  # the id is a row of every table and a test case's id
        raise HypothesisTableError(f"{where}.id: {problem}")
    return PaperHypothesis(
        id=text("id"),
        title=text("title"),
        paper=str(entry.get("paper", "")),
        original=original,
        perturbed=perturbed,
        alternative=alternative,
        prompting=tuple((str(a), str(b)) for a, b in prompting),
    )
