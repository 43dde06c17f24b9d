"""Study definitions: several bias tests run together under one design, as data.

A *study* (`data/studies/<id>.toml`) bundles tests that share value generators, prompts and
run settings — BiasBuster's admissions tests, the Mohr thesis' eight classic problems. Where a
test case (`library`) is one control/treatment pair scored pair by pair, a study test says
how its answers are read (`answer`), how its prompts are laid out (`design`) and which
aggregate metric turns many answers into a figure (`metric`):

- design `conditions`: each condition's prompt is asked on its own (framing: admit vs reject
  frame; Mohr's control vs treatment groups);
- design `options`: k items drawn from the generators are listed as options a, b, c, …, in
  every order of `answers.permuted_orders`, so each item appears at each position (status quo,
  primacy);
- design `sequence`: `length` items are decided one after another in one conversation, every
  turn seeing the earlier items and answers; the same items are presented in `orders`
  different orders (anchoring).

This module holds what a study *is* (its dataclasses, the bounds a file may ask for) and how
its texts are rendered. Reading a file's text into a `Study`, with validation:
`study_files`; finding and loading the built-in and user study files: `study_catalog`.
Format: `docs/studies.md`; presenting tests and reading answers: `questions`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.library.testcases import DATA_DIR, ValueSpec

STUDY_DIR = DATA_DIR / "studies"
DESIGNS = ("conditions", "options", "sequence")
ANSWERS = ("admit_reject", "yes_no", "letter", "number")
MITIGATIONS = ("none", "awareness", "contrastive", "counterfactual", "selfhelp")
# metric → (designs it fits, answer formats it reads)
METRICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "framing_difference": (("conditions",), ("admit_reject", "yes_no")),
    "group_attribution_difference": (("conditions",), ("admit_reject", "yes_no")),
    "cohens_d": (("conditions",), ("number", "letter", "yes_no", "admit_reject")),
    # one condition (the Linda problem, the ski trip): the share of the target answer
    "share": (("conditions",), ("letter", "yes_no", "admit_reject")),
    "status_quo_share": (("options",), ("letter",)),
    "primacy": (("options",), ("letter",)),
    "anchoring_distance": (("sequence",), ("admit_reject", "yes_no")),
}
# Texts a run fills in itself: the option list, the item of a turn, the prompt to rewrite,
# the name of the status-quo option as shown ("Student C").
RUN_GAPS = {"options", "item", "prompt", "status_quo"}
# Bounds on what a file may ask for: a study file is untrusted input, and each of these
# multiplies the work or memory of a run (a sequence's orders are built in memory, a prompt
# is sent once per turn). Paper scale fits well inside them.
MAX_STUDY_BYTES = 2_000_000
MAX_REPEATS = 100_000
MAX_ATTEMPTS = 20
MAX_TESTS = 500
MAX_CONDITIONS = 20  # per test (the papers use 1 or 2)
MAX_VARIANTS = 20
MAX_NUMBER = 1e15  # bounds of number answers: beyond any price or estimate, squares stay finite
MAX_LENGTH = 50  # items of one sequential conversation (BiasBuster: 6)
MAX_TEXT_CHARS = 50_000  # one rendered prompt, item or turn
# A `{{name}}` gap of a study text (a value, or one of RUN_GAPS).
GAP = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


@dataclass(frozen=True)
class Condition:
    name: str
    prompt: str
    status_quo: int | None = None  # options design: which drawn item is the status quo
    status_quo_label: str = ""


@dataclass(frozen=True)
class Variant:
    """A prompt scenario: with or without the persona, numbers scaled by a factor, and values
    the scenario sets outright (the Mohr thesis changed anchors, ball counts and flips, not
    only prices, and rounded its scaled prices its own way)."""

    id: str
    persona: bool = True
    scale: float = 1.0
    description: str = ""
    values: dict[str, int | float] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyTest:
    id: str
    bias: str
    name: str
    design: str
    answer: str
    metric: str
    conditions: tuple[Condition, ...]
    letters: str = "abcd"
    min: float | None = None
    max: float | None = None
    target: str | None = None  # the answer coded 1 (Cohen's d on choices)
    undirected: bool = False
    scaled: tuple[str, ...] = ()
    item: str = ""
    k: int = 0
    length: int = 0
    orders: int = 0
    turn: str = ""
    examples: dict[str, str] = field(default_factory=dict)
    system: str | None = None  # this test's system message instead of the study's
    option_name: str = ""  # options design: "Student" names the options Student A, B, …


@dataclass(frozen=True)
class Study:
    id: str
    name: str
    description: str
    references: tuple[str, ...]
    tests: dict[str, StudyTest]
    values: dict[str, ValueSpec]
    variants: dict[str, Variant]
    prompts: dict[str, str]
    system: str = ""
    temperatures: tuple[float, ...] = (0.7,)
    repeats: int = 1
    max_attempts: int = 3
    mitigations: tuple[str, ...] = ("none",)
    path: Path | None = None
    source: str = ""  # the TOML it was parsed from: a run stores it, to resume unchanged

    def sample_values(self, rng: random.Random) -> dict[str, Any]:
        """Draw every value generator once, in file order."""
        values: dict[str, Any] = {}
        for spec in self.values.values():
            values[spec.name] = spec.sample(rng, values)
        return values


# --------------------------------------------------------------------------- rendering


def show(value: Any) -> str:
    """How a value reads in a prompt: 9.70 → "9.7", 55555.5 → "55,555.5", lists joined."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        rounded = round(value, 2)
        if rounded == int(rounded):
            return f"{int(rounded):,}"
        return f"{rounded:,.2f}".rstrip("0")
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value)
    return str(value)


class RenderError(ValueError):
    """A rendered text would be longer than MAX_TEXT_CHARS (a hostile or runaway file)."""


def bounded(text: str, what: str = "the text") -> str:
    """`text` itself, or RenderError when it is past MAX_TEXT_CHARS (the documented limit of
    one prompt, item or turn), so a long text is refused at load, not sent."""
    if len(text) > MAX_TEXT_CHARS:
        raise RenderError(
            f"{what} is {len(text):,} characters long; at most {MAX_TEXT_CHARS:,} are allowed"
        )
    return text


def render(text: str, values: Mapping[str, Any]) -> str:
    """Replace each `{{name}}` with its value; a name without a value raises KeyError.

    Filled values are inserted as they are, never rendered again, so a value holding
    `{{prompt}}` stays text. The result is bounded: RenderError past MAX_TEXT_CHARS.
    """
    size = len(bounded(text))

    def fill(match: re.Match[str]) -> str:
        nonlocal size
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        shown = show(values[name])
        size += len(shown) - len(match.group(0))
        if size > MAX_TEXT_CHARS:
            raise RenderError(
                f"the text with its values filled in is longer than {MAX_TEXT_CHARS:,} "
                f"characters (at {{{{{name}}}}})"
            )
        return shown

    return GAP.sub(fill, text)


def scaled_values(test: StudyTest, values: Mapping[str, Any], variant: Variant) -> dict[str, Any]:
    """The values one variant shows: the test's `scaled` numbers multiplied by the variant's
    factor (odd / large numbers), then the variant's own `values`, which replace a drawn or
    scaled value as they are (never scaled again)."""
    out = dict(values)
    for name in test.scaled:
        out[name] = values[name] * variant.scale
    return out | variant.values
