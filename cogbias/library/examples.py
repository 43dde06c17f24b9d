"""Gap fills without a generator model: scenario fields, author-written examples, a fill checker.

A tiny local model fills gaps badly ("Suppose you are a type-specific manager at A/An"),
and a teaching demo with no API key must still read like a real decision task. So:

- The common gaps every built-in template opens with (`[[a/an]] [[type]] manager at
  [[organization]]`) come from the scenario's own fields, for every generator.
- Each built-in test case carries author-written example fills for its other gaps
  (`[examples]` in the test case file, see docs/format.md). The offline generator
  `examples` fills every gap from them: one example *set* per instance, chosen by seed,
  scenario and instance index, so fills that refer to each other stay coherent.
- A model's fills are checked (`check_fill`); a rejected fill falls back to an example fill
  and the insertion says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cogbias.core.templates import Filled, LLMGap, substitute
from cogbias.library.example_fills import (  # noqa: F401 (also read as examples.X)
    ARTICLE_GAP,
    COMMON_GAPS,
    MAX_EXAMPLE_CHARS,
    MIN_EXAMPLES,
    example_key,
)

if TYPE_CHECKING:
    from cogbias.library.cases import TestCase

EXAMPLES_GENERATOR = "examples"
GENERATOR_ENV = "COGBIAS_GENERATOR"
SOURCE_LABELS = {
    "llm": "generator LLM",
    "example": "example fill",
    "scenario": "scenario field",
    "value": "value generator",
}
_ARTICLE_MARK = "\x00a/an\x00"
_ARTICLE_RE = re.compile(re.escape(_ARTICLE_MARK) + r"(\s*)(\W*)(\w)")
_SCENARIO_RE = re.compile(
    r"^An? (?P<position>.+?) at a company from the (?P<industry>.+?) industry group "
    r"deciding (?P<decision>.+?)\.?$"
)
# a scenario typed by a user: "A head teacher at a secondary school deciding on ..."
_TYPED_RE = re.compile(
    r"^(?:an?|the)\s+(?P<position>[^,.;]+?)\s+(?:at|in|for|of)\s+(?P<organization>[^,.;]+?)"
    r"(?:\s+(?:deciding|choosing|planning|weighing|who|which|that)\b.*|[,.;].*)?$",
    re.IGNORECASE | re.DOTALL,
)
_ORG_SIZES = ("a mid-sized", "a large", "a fast-growing", "a family-owned", "a listed")
_TEMPLATE_SYNTAX_RE = re.compile(r"\[|\]|\{\{|\}\}|<[a-z/]|\bN/A\b|\ba/an\b", re.IGNORECASE)


def default_generator(environ: Mapping[str, str] | None = None) -> str:
    """The generator used when none is chosen: `COGBIAS_GENERATOR`, else the offline examples.

    One place decides this for the CLI (`preview`, `run`, `pair`) and the app's pages. The
    offline `examples` needs no key, no network and no CPU-heavy model, so a first start
    shows coherent instances at once; set `COGBIAS_GENERATOR` (e.g. to a keyed model such as
    `openai/gpt-4o-mini`) to have a model write the gaps by default.
    """
    env = os.environ if environ is None else environ
    return env.get(GENERATOR_ENV, "").strip() or EXAMPLES_GENERATOR


def generator_choices(model_ids: list[str]) -> list[str]:
    """Generators to offer in a picker: the default first, then the models (never `random`)."""
    first = default_generator()
    rest = [m for m in [EXAMPLES_GENERATOR, *model_ids] if m not in (first, "random")]
    return [first, *dict.fromkeys(rest)]


def article(word: str) -> str:
    """'an' before a vowel sound as spelled (good enough for job titles), else 'a'."""
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass(frozen=True)
class ScenarioFields:
    position: str
    industry: str
    decision: str
    organization: str | None = None  # named in a typed scenario; else built from the industry


def scenario_fields(text: str) -> ScenarioFields | None:
    """Parse a scenario sentence as `library.Scenario.text` writes it, or one a user typed in
    the same shape ("A head teacher at a secondary school deciding ..."); None otherwise."""
    match = _SCENARIO_RE.match(text.strip())
    if match is not None:
        return ScenarioFields(match["position"], match["industry"], match["decision"])
    typed = _TYPED_RE.match(text.strip())
    if typed is None:
        return None
    organization = typed["organization"].strip()
    if not re.match(r"(?:an?|the|my|our)\s", organization, re.IGNORECASE):
        organization = f"{article(organization)} {organization}"
    return ScenarioFields(typed["position"].strip(), "", "", organization)


def reads_scenario(text: str) -> bool:
    """Whether the offline fills can take role and organisation from `text` (else they use a
    default, and a page should say so)."""
    return scenario_fields(text) is not None


def scenario_fill(instruction: str, scenario: str, seed: int) -> str | None:
    """The text of a common gap from the scenario's fields; None for other gaps.

    `a/an` becomes a marker that `fix_articles` replaces once the next word is known.
    """
    if instruction == ARTICLE_GAP:
        return _ARTICLE_MARK
    if instruction not in COMMON_GAPS:
        return None
    fields = scenario_fields(scenario)
    if instruction == ROLE_GAP:
        position = fields.position if fields else "operations manager"
        return re.sub(r"\s+manager$", "", position) if position.endswith(" manager") else position
    if fields and fields.organization:
        return fields.organization
    industry = fields.industry if fields else "services"
    size = _ORG_SIZES[_index(seed, scenario) % len(_ORG_SIZES)]
    return f"{size} company in the {industry} industry"


ROLE_GAP = "type"  # the common gap that names the role, "operations" in "operations manager"
ROLE_NOUN = " manager"  # what the built-in templates write after it


def drops_role_noun(scenario: str) -> bool:
    """Whether the " manager" after the `type` gap goes: the built-in templates say "[[a/an]]
    [[type]] manager at [[organization]]", which fits every built-in scenario's position
    ("operations manager" fills `type` with "operations"), but a typed role that is not a
    manager ("A head teacher at a secondary school …") would read "a head teacher manager"."""
    fields = scenario_fields(scenario)
    return bool(fields and fields.organization and not fields.position.endswith("manager"))


def fix_role(filled: Filled, scenario: str) -> Filled:
    """`filled` without the template's " manager" after a typed role that is no manager."""
    if not drops_role_noun(scenario):
        return filled
    role = scenario_fields(scenario).position  # type: ignore[union-attr]

    def fix(text: str) -> str:
        return text.replace(role + ROLE_NOUN, role)

    return Filled(fix(filled.situation), fix(filled.prompt), tuple(fix(o) for o in filled.options))


def fix_articles(filled: Filled) -> Filled:
    """Replace each `a/an` marker by the article that fits the word after it."""

    def fix(text: str) -> str:
        return _ARTICLE_RE.sub(lambda m: article(m[3]) + m[1] + m[2] + m[3], text).replace(
            _ARTICLE_MARK, "a"
        )

    return Filled(fix(filled.situation), fix(filled.prompt), tuple(fix(o) for o in filled.options))


def first_article(filled: Filled) -> str | None:
    """The article chosen for the first `a/an` gap (for the insertions table)."""
    match = _ARTICLE_RE.search(filled.situation)
    return article(match[3]) if match else None


def _index(*parts: Any) -> int:
    """A stable integer from the parts (the same seed and scenario pick the same fills)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return int(digest[:12], 16)


class ExampleFiller:
    """Fills a test case's gaps for one instance: common gaps from the scenario, others from
    the example set chosen for (seed, scenario, instance index)."""

    def __init__(self, case: TestCase, scenario: str, seed: int, index: int) -> None:
        self.case = case
        self.scenario = scenario
        self.seed = seed
        self.named = set(case.named_gaps())
        sizes = {len(v) for v in case.examples.values()}
        self.set_index = _index("examples", case.id, scenario, seed, index) % min(sizes, default=1)
        self.sources: dict[str, dict[str, str]] = {}  # fill key -> extra insertion fields

    def example(self, gap: LLMGap, values: Mapping[str, Any]) -> str | None:
        """The chosen example fill of a gap, with its `{{refs}}` filled; None if it has none."""
        common = scenario_fill(gap.instruction, self.scenario, self.seed)
        if common is not None:
            return common
        options = self.case.examples.get(example_key(gap, values, self.named))
        if not options:
            return None
        return substitute(options[self.set_index % len(options)], values)

    def prefill(
        self, values: dict[str, Any], fills: dict[str, str], everything: bool
    ) -> list[LLMGap]:
        """Fill common gaps (and, if `everything`, all gaps) in reading order; named fills go
        into `values`. Returns the gaps with no example when `everything` is asked."""
        gaps = self.case.control.llm_gaps() + self.case.treatment.llm_gaps()
        missing: list[LLMGap] = []
        progress = True
        while progress:
            progress = False
            for gap in gaps:
                if any(r.name not in values for r in gap.refs):
                    continue
                key = gap.resolve(values)
                if key in fills:
                    continue
                common = gap.instruction in COMMON_GAPS
                if not (common or everything):
                    continue
                text = self.example(gap, values)
                if text is None:
                    if gap not in missing:
                        missing.append(gap)
                    continue
                fills[key] = text
                self.sources[key] = {"source": "scenario" if common else "example"}
                if gap.name:
                    values[gap.name] = text
                progress = True
        return missing

    def vet(
        self,
        gaps: list[LLMGap],
        answer: dict[str, str],
        values: Mapping[str, Any],
        refused: Mapping[str, str] | None = None,
    ) -> None:
        """Check a model's fills for `gaps` (keyed as asked); replace rejected ones in place.

        `refused` names fills refused before they were read, with why (a reply cut off at its
        token limit; the text it had reached, if any, is in `answer`). A refused fill with no
        example fill to take its place is dropped from `answer`; a fill that only fails
        `check_fill` is kept then (nothing better to offer)."""
        refused = refused or {}
        by_key = {gap.resolve(values): gap for gap in reversed(gaps)}  # the first gap per key
        for key, gap in by_key.items():
            text = answer.get(key)
            problem = refused.get(key)
            if problem is None and text is not None:
                problem = check_fill(key, text, scenario=self.scenario)
            if problem is None:
                continue
            fallback = self.example(gap, values)
            if fallback is None:
                if key in refused:
                    answer.pop(key, None)
                continue
            answer[key] = fallback
            said = (
                f"the model's fill {_clip(text)!r} was rejected"
                if text
                else "the model gave no fill"
            )
            self.sources[key] = {"source": "example", "note": f"{said} ({problem})"}


def _clip(text: str | None, width: int = 80) -> str:
    """A rejected fill as a note shows it: whole up to `width` characters, else its start and
    its end (where a cut fill shows that it was cut)."""
    text = text or ""
    half = (width - 3) // 2
    return text if len(text) <= width else f"{text[:half]} … {text[-half:]}"


# --------------------------------------------------------------------------- checking fills

PROMPT_EXAMPLE_FILLS = ("a regional grocery chain", "store manager")  # see pipeline.GEN_EXAMPLE
FILL_MAX_CHARS = 160  # pipeline.FILL_CHARS: a model's fill is a phrase or two
# Words that cannot end a phrase or a sentence: a fill ending on one (a full stop after it or
# not: "… transporting a maximum of.") stopped in the middle.
DANGLING_WORDS = frozenset(
    "a an the of to for with from into onto than and or but nor which whose per via my our "
    "your their its".split()
)
_OPEN_END_RE = re.compile(r"(?:[,;:(\[/&–—-]|\.\.\.|…)$")
SCENARIO_WORDS = 10  # a run this long shared with the scenario sentence is the scenario copied


def check_fill(
    instruction: str, text: str, max_chars: int = FILL_MAX_CHARS, scenario: str = ""
) -> str | None:
    """Why a model's fill cannot be used, or None when it looks like a real fill.

    Catches what small models do: answer nothing, repeat the instruction (or a run of five of
    its words), leave brackets or template syntax, copy the generation prompt's worked
    example or the scenario sentence, run on until the length limit cuts them (a JSON schema's
    `maxLength` closes the text at `max_chars`, mid-word), or stop mid-sentence.
    """
    stripped = text.strip()
    if not stripped:
        return "empty"
    if len(stripped) > max_chars:
        return f"longer than {max_chars} characters"
    if len(stripped) == max_chars:
        return f"it was cut off at the {max_chars}-character limit"
    if _TEMPLATE_SYNTAX_RE.search(stripped):
        return "brackets or template syntax left in it"
    norm_text, norm_instr = _normal(stripped), _normal(instruction)
    if norm_instr and (
        norm_instr in norm_text or (len(norm_text) > 12 and norm_text in norm_instr)
    ):
        return "it repeats the instruction"
    copied_run = shared_words(norm_text, norm_instr, COPIED_WORDS)
    if copied_run:
        return f"it copies the instruction's words '{copied_run}'"
    for copied in PROMPT_EXAMPLE_FILLS:
        if copied in norm_text:
            return f"it copies the prompt's example '{copied}'"
    if scenario and shared_words(norm_text, _normal(scenario), SCENARIO_WORDS):
        return "it copies the scenario sentence"
    return _unfinished(stripped)


def _unfinished(text: str) -> str | None:
    """Why `text` stops mid-sentence, or None: it ends on a comma, colon, dash or ellipsis, or
    on a word that needs more after it ("of", "the", "and")."""
    if _OPEN_END_RE.search(text):
        return f"it ends mid-sentence, on '{text[-3:].strip()}'"
    words = _normal(text).split()
    if words and words[-1] in DANGLING_WORDS:
        return f"it ends mid-sentence, on '{words[-1]}'"
    return None


COPIED_WORDS = 5  # a run this long shared with the instruction is copied, not written


def shared_words(text: str, other: str, n: int) -> str:
    """The first run of `n` consecutive words of `text` that also occurs in `other` ('' if
    none); both are already normalised to lower-case words."""
    words, theirs = text.split(), other.split()
    runs = {tuple(theirs[i : i + n]) for i in range(len(theirs) - n + 1)}
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) in runs:
            return " ".join(words[i : i + n])
    return ""


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
