"""How the Mohr (2025) thesis asked and coded its prompts (`data/thesis_prompts.toml`).

A study built from an imported thesis folder (`questions.study_from_prompts`) asks each
prompt in the thesis' own template (Appendix C: a system message, the persona in every
scenario but the one without it, the user message framed by `----` lines) and codes the
answers as §3.4.1 does: which part is the treatment group, which answer is 1, and whether
the effect is undirected (framing, Eq. 2). The table is data a user can read and extend; a
bias it does not list keeps the generic rule (part 1 control, its target coded 1).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from cogbias.library.testcases import DATA_DIR

CODING_FILE = DATA_DIR / "thesis_prompts.toml"


@dataclass(frozen=True)
class BiasCoding:
    treatment_part: int | None = None  # None: the generic rule (the part after the first)
    coded_1: str | None = None  # the answer letter coded 1; None: the control's target
    undirected: bool = False


@dataclass(frozen=True)
class ThesisTemplate:
    system: str
    persona: str
    user: str
    separator: str
    output: dict[str, str]
    without_persona: frozenset[str]
    biases: dict[str, BiasCoding]
    repeats: int = 100  # answers asked per prompt (§3.3.1)
    max_attempts: int = 5  # attempts per answer before it counts as unreadable

    def system_for(self, scenario: str) -> str:
        """The system message of a scenario: with the persona unless it is left out there."""
        if scenario in self.without_persona or not self.persona:
            return self.system
        return f"{self.system} {self.persona}"

    def user_message(self, question: str, response_type: str) -> str:
        """The question inside the thesis' user message (Appendix C, lines 35-41)."""
        return self.separator.join([self.user, question, self.output.get(response_type, "")])

    def coding(self, bias: str) -> BiasCoding:
        return self.biases.get(bias, BiasCoding())


@cache
def thesis_template() -> ThesisTemplate:
    """The thesis' template and coding, read once (a broken file is a clear ValueError)."""
    try:
        data: dict[str, Any] = tomllib.loads(CODING_FILE.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{CODING_FILE}: cannot be read ({exc})") from None
    biases = {}
    for name, spec in data.get("biases", {}).items():
        part = spec.get("treatment_part")
        if part is not None and (not isinstance(part, int) or part < 1):
            raise ValueError(f"{CODING_FILE}: biases.{name}.treatment_part must be 1, 2, ...")
        letter = spec.get("coded_1")
        if letter is not None and not (isinstance(letter, str) and len(letter) == 1):
            raise ValueError(f"{CODING_FILE}: biases.{name}.coded_1 must be one letter")
        biases[name] = BiasCoding(
            part, letter.lower() if letter else None, bool(spec.get("undirected", False))
        )
    return ThesisTemplate(
        system=data.get("system", ""),
        persona=data.get("persona", ""),
        user=data.get("user", ""),
        separator=data.get("separator", "\n----\n"),
        output=dict(data.get("output", {})),
        without_persona=frozenset(data.get("without_persona", [])),
        biases=biases,
        repeats=_count(data, "repeats", 100),
        max_attempts=_count(data, "max_attempts", 5),
    )


def _count(data: dict[str, Any], key: str, default: int) -> int:
    """A positive whole number of the file, or its default when the file leaves it out."""
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{CODING_FILE}: {key} must be a whole number of at least 1")
    return value
