"""The one question a class answers, built: a classic experiment, a study's test, or a test
case filled once, with each condition's text as a participant sees it and as a model is asked.

The `Question` record itself is `cogbias.core.class_question` (the class run kind and the
statistics read it too); a session stores it as JSON when it opens.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from cogbias.core.class_question import KINDS, Question
from cogbias.core.errors import UserError
from cogbias.core.templates import Filled
from cogbias.library import examples
from cogbias.library.testcases import get_test_case, load_scenarios
from cogbias.studies.definitions import Study, StudyTest, Variant, render, scaled_values
from cogbias.studies.questions import question, system_message
from cogbias.studies.references import Reference, Use, load_references, references_for
from cogbias.studies.study_catalog import get_study, load_studies

__all__ = ["KINDS", "Question", "case_question", "classic_choices", "classic_question"]

_OPTION_LINE = re.compile(r"^\s*\(?([A-Za-z])\)\s+(.+?)\s*$")
_BLANK_LINE = re.compile(r"^(.*?)_{2,}\s*$")  # "Percentage: __": where a number is written
_SHOWN_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
# A number question whose study states no upper bound (mohr8's endowment test: "What is the
# most you would pay?" for a mug that sold for $4) takes at most this many times the largest
# number its text shows, and at least 100. The mug's original study (Kahneman, Knetsch &
# Thaler 1990) elicited values between $0.25 and $9.25 for a mug that sold for $6, so 25
# times the price leaves every honest valuation room, while one answer of 1e308 would
# otherwise make the class's mean infinite.
PLAUSIBLE_FACTOR = 25


def classic_choices() -> list[tuple[str, str, str]]:
    """(study, test, title) of every study test a class can answer as asked."""
    return [
        (study.id, test.id, test.name)
        for study in load_studies().values()
        for test in study.tests.values()
        if _askable(test)
    ]


def _askable(test: StudyTest) -> bool:
    return test.design == "conditions" and test.answer in ("letter", "number")


def classic_question(study_id: str, test_id: str) -> Question:
    """A study's test as its conditions ask it, with the human reference whose question it
    is (asked with the variant that reference names, so the numbers are the original's)."""
    study = get_study(study_id)
    test = study.tests.get(test_id)
    if test is None:
        known = ", ".join(study.tests)
        raise KeyError(f"study '{study_id}' has no test '{test_id}'; its tests: {known}")
    if not _askable(test):
        raise UserError(
            f"test '{test_id}' of study '{study_id}' is not one question per condition with a "
            "letter or number answer, so a class cannot answer it; choose another test"
        )
    found = references_for(load_references(), study_id, test_id)
    reference, use = found[0] if found else (None, None)
    variant = _variant(study, use)
    values = study.sample_values(random.Random(0))
    texts, options, prompts, label = {}, {}, {}, ""
    for condition in test.conditions:
        shown = render(condition.prompt, scaled_values(test, values, variant)).strip()
        texts[condition.name], options[condition.name], label = _split(shown, test)
        prompts[condition.name] = question(study, test, condition, values, variant)
    names = tuple(c.name for c in test.conditions)
    return Question(
        source="classic",
        title=test.name,
        conditions=names,
        labels=_labels(names, reference, use),
        texts=texts,
        prompts=prompts,
        system=system_message(study, test, variant),
        options=options,
        keys=() if test.answer == "number" else tuple(test.letters[: len(options[names[0]])]),
        kind="number" if test.answer == "number" else "choice",
        **_number_bounds(test, texts.values()),
        number_label=label,
        reference=reference.id if reference else None,
        reference_conditions=_reference_conditions(names, reference, use),
        study=study_id,
        test=test_id,
    )


def _number_bounds(test: StudyTest, texts: Iterable[str]) -> dict[str, float | None]:
    """A number question's bounds: the test's, and where it states no upper one, 25 times the
    largest number the question shows (`PLAUSIBLE_FACTOR`), with no lower one the negative of
    that; an option question has none."""
    if test.answer != "number":
        return {"low": test.min, "high": test.max}
    high = test.max
    if high is None:
        shown = [float(n.replace(",", "")) for t in texts for n in _SHOWN_NUMBER.findall(t)]
        high = max([100.0, *(PLAUSIBLE_FACTOR * n for n in shown)])
    return {"low": -high if test.min is None else test.min, "high": high}


def _variant(study: Study, use: Use | None) -> Variant:
    default = Variant("default", persona=False)
    if use is None or not use.variants:
        return default
    return study.variants.get(use.variants[0], default)


def _split(text: str, test: StudyTest) -> tuple[str, tuple[str, ...], str]:
    """The stem a participant reads, the option labels (a letter test's "A) ..." lines, in
    the test's letter order) and the words before a number's blank."""
    if test.answer == "number":
        lines = text.splitlines()
        blank = next((m for m in map(_BLANK_LINE.match, lines) if m), None)
        stem = [line for line in lines if not _BLANK_LINE.match(line)]
        return "\n".join(stem).strip(), (), blank.group(1).strip() if blank else ""
    found: dict[str, str] = {}
    stem = []
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if match and match.group(1).lower() in test.letters:
            found[match.group(1).lower()] = match.group(2)
        else:
            stem.append(line)
    letters = [letter for letter in test.letters if letter in found]
    if len(letters) < 2 or letters != list(test.letters[: len(letters)]):
        # the options are not listed line by line: the participant picks the letter
        return text, tuple(letter.upper() for letter in test.letters), ""
    options = tuple(f"{letter.upper()}) {found[letter]}" for letter in letters)
    return "\n".join(stem).strip(), options, ""


def _labels(names: tuple[str, ...], reference: Reference | None, use: Use | None) -> dict[str, str]:
    mapped = _reference_conditions(names, reference, use)
    if reference is None:
        return {name: name.replace("_", " ") for name in names}
    return {
        name: reference.conditions[mapped[name]].label if name in mapped else name for name in names
    }


def _reference_conditions(
    names: tuple[str, ...], reference: Reference | None, use: Use | None
) -> dict[str, str]:
    """Our condition -> the reference's condition that answered the same question."""
    if reference is None or use is None:
        return {}
    if use.conditions:
        return {ours: theirs for theirs, ours in use.conditions.items() if ours in names}
    return {name: name for name in names if name in reference.conditions}


def case_question(case_id: str, scenario: int = 1, seed: int = 0) -> Question:
    """One instance of a test case, filled offline with its own example fills (no model, no
    key), its control and treatment the two conditions."""
    from cogbias.runs import pipeline  # the model stack: only when a test case is filled
    from cogbias.runs.prompting import question_for

    case = get_test_case(case_id)
    scenarios = load_scenarios()
    if not 1 <= scenario <= len(scenarios):
        raise KeyError(f"scenario {scenario} does not exist; choose 1 to {len(scenarios)}")
    try:
        instance = pipeline.run_sync(
            pipeline.generate(
                None,  # type: ignore[arg-type]  # the examples generator asks no model
                case,
                scenarios[scenario - 1].text,
                examples.EXAMPLES_GENERATOR,
                seed=seed,
            )
        )
    except pipeline.GenerationError as exc:
        raise UserError(
            f"test case '{case_id}' cannot be filled without a model ({exc}); give it "
            "example fills (docs/format.md) or choose another test case"
        ) from None
    halves = {"control": instance.control, "treatment": instance.treatment}
    n = instance.n_options
    return Question(
        source="testcase",
        title=case.name,
        conditions=tuple(halves),
        labels={"control": "control", "treatment": "treatment"},
        texts={half: _stem(filled) for half, filled in halves.items()},
        prompts={
            half: question_for(filled.layout).format(task=instance.decision_text(half))
            for half, filled in halves.items()
        },
        system="",
        options={half: tuple(filled.options) for half, filled in halves.items()},
        keys=tuple(str(i + 1) for i in range(n)),
        kind="scale" if case.scale_kind in ("likert7", "percent11") else "choice",
        test_case=case_id,
        instance_id=instance.id,
        scenario=scenario,
        seed=seed,
    )


def _stem(filled: Filled) -> str:
    return "\n\n".join(text for text in (filled.situation.strip(), filled.prompt.strip()) if text)
