"""What a class run asks: its spec, its units, how each model is asked, and what it costs.

A class run asks models the question a class session's participants answered, exactly as
they read it (`Question.prompts`, with its system message): each model, each condition,
`samples` times at a temperature ("sample"), or once for the option's letter, read as
option probabilities ("probabilities"). Which way, when the spec names none, is the one
rule paired runs use too (`scorers.default_scoring`): option probabilities when every model
that writes text lists its most probable tokens (the local model does) and the question has
options. A unit is one answer: (model, condition, repeat).

Everything is checked before any call, from the model's profile (`max_temperature`,
`top_logprobs`, `grammar`) and `llm.keys` (a key that is not set), and the cost is the
engine's one estimate (`llm.costs.estimate`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cogbias.core import records
from cogbias.core.class_question import Question
from cogbias.core.limits import checked_name
from cogbias.llm import costs, logprobs
from cogbias.llm.errors import LLMError
from cogbias.llm.keys import missing_key, missing_key_message
from cogbias.llm.profiles import ModelProfile, resolve
from cogbias.runs import grammars, scorers
from cogbias.store import Store
from cogbias.studies.condition_summary import PROBABILITIES, SAMPLE

KIND = "class"
SCORINGS = (SAMPLE, PROBABILITIES)
MAX_MODELS = 8
MAX_SAMPLES = 200  # answers per model and condition: plenty for a share, bounded for a class
EST_CHARS_PER_TOKEN = 4  # the usual rule of thumb; the estimate is an upper bound anyway
EST_OVERHEAD_TOKENS = 12  # chat formatting around the messages
LABEL_HINT = "Choose exactly one of the options. Reply with its letter only."
GRAMMAR_TOKENS = 16  # an answer under a grammar: a letter, "Option 7", "9.25"


class ClassAskError(ValueError):
    """What is wrong with asking models a session's question, in plain words."""


@dataclass(frozen=True)
class ClassSpec:
    """Which models answer a session's question, and how. `scoring` "" asks the default way
    for these models (`scorers.default_scoring`); a planned spec names it, and asked for
    probabilities it holds 1 sample at temperature 0 (one call, read at 0)."""

    session: str
    models: tuple[str, ...]
    samples: int = 20
    temperature: float = 0.7
    scoring: str = ""
    api_base: str | None = None

    def canonical(self) -> dict[str, Any]:
        return {"kind": KIND, **asdict(self), "models": list(self.models)}

    @property
    def run_id(self) -> str:
        return records.run_id_of(self.canonical())

    @classmethod
    def from_stored(cls, fields: dict[str, Any]) -> ClassSpec:
        data = {k: v for k, v in fields.items() if k != "kind"}
        return cls(**{**data, "models": tuple(data.get("models") or ())})


@dataclass(frozen=True)
class Unit:
    """One answer: a model's to one condition, the `repeat`-th time."""

    model: str
    condition: str
    repeat: int


@dataclass
class ClassPlan:
    spec: ClassSpec  # resolved: its scoring named
    question: Question
    units: list[Unit]
    profiles: dict[str, ModelProfile]
    notes: list[str] = field(default_factory=list)

    @property
    def planned(self) -> int:
        return len(self.units)

    def asks(self, model: str) -> bool:
        """Whether the model's answers are calls (`random` read as probabilities is none)."""
        return self.profiles[model].writes_text or self.spec.scoring == SAMPLE

    def calls(self) -> int:
        """Model calls when nothing is cached (the `random` model's included)."""
        return sum(1 for unit in self.units if self.asks(unit.model))

    def asked(self) -> list[costs.Calls]:
        """The calls of each size per model, as the one cost estimator takes them."""
        sizes: Counter[tuple[str, int, int]] = Counter()
        for unit in self.units:
            profile = self.profiles[unit.model]
            text = self.question.system + prompt_for(self.question, unit.condition, self.spec)
            prompt = len(text) // EST_CHARS_PER_TOKEN + EST_OVERHEAD_TOKENS
            sizes[(unit.model, prompt, completion_tokens(self.question, self.spec, profile))] += 1
        return [costs.Calls(*size, n) for size, n in sizes.items()]

    def estimated_cost(self, batch: bool = False) -> float | None:
        """USD at most (every answer as long as allowed: `costs.estimate`); None when a
        price is unknown."""
        return costs.estimate(self.asked(), self.spec.api_base, batch)

    def cost_text(self) -> str:
        """The cost before any call, as the page and the command show it."""
        cost = self.estimated_cost()
        calls = f"{self.planned} answers, {self.calls()} calls"
        if cost is None:
            return f"{calls}; cost unknown (a chosen model has no known price)"
        if cost == 0:
            return f"{calls}; free (offline models, no key needed)"
        return f"{calls}; at most {costs.dollars(cost)} (answers already cached are free)"

    def describe(self) -> str:
        spec = self.spec
        how = (
            "option probabilities, one call per condition"
            if spec.scoring == PROBABILITIES
            else f"{spec.samples} sampled answers per condition at temperature {spec.temperature:g}"
        )
        head = (
            f"class run {spec.run_id}: session {spec.session} ({self.question.title}), "
            f"{len(spec.models)} model(s) × {len(self.question.conditions)} conditions, {how}: "
            f"{self.cost_text()}"
        )
        return "\n".join([head, *self.notes])


def has_options(question: Question) -> bool:
    """Whether the question can be read as option probabilities: options, one letter each."""
    return question.kind != "number" and 2 <= len(question.keys) <= len(logprobs.LABELS)


def lettered(question: Question) -> bool:
    """Whether the question's own prompts label the options A, B, … (the classics)."""
    return bool(question.keys) and question.keys == tuple(
        logprobs.LABELS[: len(question.keys)].lower()
    )


def prompt_for(question: Question, condition: str, spec: ClassSpec) -> str:
    """The text a model is asked for one condition: the question's own prompt; for option
    probabilities of a question whose prompt does not letter its options, the participant's
    text with the options lettered A, B, … (a letter is one token, an option number is not)."""
    if spec.scoring != PROBABILITIES or lettered(question):
        return question.prompts[condition]
    marks = logprobs.labels(len(question.options[condition]))
    lines = [question.texts[condition].strip(), "", "Answer options:"]
    lines += [
        f"{mark}: {text}" for mark, text in zip(marks, question.options[condition], strict=True)
    ]
    return "\n".join([*lines, "", LABEL_HINT])


def answer_grammar(question: Question, spec: ClassSpec) -> str | None:
    """The GBNF a model whose profile takes one is asked under: for option probabilities the
    letter alone (its probabilities are read before the grammar applies); for a sampled
    answer one of the options (a letter, or "Option N" for a test case's), or a number
    within the question's bounds."""
    if spec.scoring == PROBABILITIES:
        return logprobs.label_grammar(len(question.keys))
    if question.kind == "number":
        return grammars.grammar(grammars.number_within(question.low, question.high))
    if lettered(question):
        return grammars.grammar(grammars.one_of([k.upper() for k in question.keys]))
    return grammars.grammar('"Option " ' + grammars.one_of(question.keys))


def completion_tokens(question: Question, spec: ClassSpec, profile: ModelProfile) -> int:
    """The most tokens an answer may take: 1 for a letter read as probabilities under a
    grammar, a few under another grammar, else the profile's."""
    if profile.grammar:
        return 1 if spec.scoring == PROBABILITIES else GRAMMAR_TOKENS
    return 1 if spec.scoring == PROBABILITIES else int(profile.answer_tokens)


def stored_question(store: Store, session: str) -> Question:
    """The question session `session` stored; KeyError naming it when there is none."""
    row = store.class_session(session)
    if row is None:
        raise KeyError(
            f"no class session '{session}' in {store.path} (`cogbias class list` lists them)"
        )
    return Question.from_json(row.question)


def _profiles(spec: ClassSpec) -> dict[str, ModelProfile]:
    profiles = {}
    for model in spec.models:
        try:
            checked_name(model, "model")  # a label on the class's pages and its report
            profiles[model] = resolve(model, spec.api_base)
        except (LLMError, ValueError) as exc:
            raise ClassAskError(str(exc)) from None
    return profiles


def resolved(spec: ClassSpec, question: Question, profiles: dict[str, ModelProfile]) -> ClassSpec:
    """The spec with its way of asking named (the default when none is) and, for option
    probabilities, one sample at temperature 0."""
    scoring = spec.scoring
    if not scoring:
        default = scorers.default_scoring(list(profiles.values()), has_options(question))
        scoring = PROBABILITIES if default == scorers.PROBABILITIES else SAMPLE
    if scoring == PROBABILITIES:
        return replace(spec, scoring=scoring, samples=1, temperature=0.0)
    return replace(spec, scoring=scoring, temperature=float(spec.temperature))


def check(spec: ClassSpec, question: Question, profiles: dict[str, ModelProfile]) -> None:
    """Raise `ClassAskError` saying what is wrong before any call: no or too many models, a
    count or temperature out of range (the profile's `max_temperature`), probabilities on
    a model or question that cannot give them, a key that is not set."""
    if not spec.models:
        raise ClassAskError("choose at least one model to answer the class's question")
    if len(spec.models) > MAX_MODELS:
        raise ClassAskError(f"choose at most {MAX_MODELS} models at once")
    if spec.scoring not in SCORINGS:
        raise ClassAskError(f"unknown way of asking {spec.scoring!r}: use {' or '.join(SCORINGS)}")
    if not isinstance(spec.samples, int) or not 1 <= spec.samples <= MAX_SAMPLES:
        raise ClassAskError(f"answers per condition must be between 1 and {MAX_SAMPLES}")
    if not math.isfinite(spec.temperature) or spec.temperature < 0:
        raise ClassAskError("the temperature must be a number of 0 or more")
    if spec.scoring == PROBABILITIES and not has_options(question):
        raise ClassAskError(
            "a number question has no options to read probabilities of: sample answers instead"
            if question.kind == "number"
            else f"probabilities need 2 to {len(logprobs.LABELS)} options"
        )
    for model, profile in profiles.items():
        if spec.scoring == SAMPLE and spec.temperature > profile.max_temperature:
            raise ClassAskError(
                f"{model} accepts temperatures up to {profile.max_temperature:g}, "
                f"not {spec.temperature:g}"
            )
        if spec.scoring == PROBABILITIES and profile.writes_text and not profile.top_logprobs:
            raise ClassAskError(
                f"{model} does not give the probabilities of its most likely answers: "
                "sample its answers instead"
            )
        variable = missing_key(model, spec.api_base)
        if variable:
            raise ClassAskError(missing_key_message(model, variable))


def plan(spec: ClassSpec, store: Store) -> ClassPlan:
    """The units of `spec` (its way of asking resolved), checked before any call; KeyError
    for an unknown session, `ClassAskError` (a ValueError) for anything else wrong."""
    question = stored_question(store, spec.session)
    spec = replace(spec, models=tuple(dict.fromkeys(spec.models)))
    profiles = _profiles(spec)
    spec = resolved(spec, question, profiles)
    check(spec, question, profiles)
    units = [
        Unit(model, condition, repeat)
        for model in spec.models
        for condition in question.conditions
        for repeat in range(spec.samples)
    ]
    return ClassPlan(spec, question, units, profiles, _notes(spec, question, profiles))


def _notes(spec: ClassSpec, question: Question, profiles: dict[str, ModelProfile]) -> list[str]:
    """What the plan chose that the user did not: the default way of asking, and grammars."""
    notes = []
    if spec.scoring == PROBABILITIES:
        notes.append(
            "scored by option probabilities (one call per condition, no answer left unread: "
            "the default for these models on a question with options); choose sampled "
            "answers (--scoring sample) for answers drawn at a temperature"
        )
    constrained = [m for m, p in profiles.items() if p.grammar]
    if constrained and spec.scoring == SAMPLE:
        what = (
            "a number within the question's bounds"
            if question.kind == "number"
            else ("one of the options")
        )
        notes.append(f"{', '.join(constrained)} answer(s) under a grammar admitting only {what}")
    return notes
