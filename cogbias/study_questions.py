"""Turning a study's tests into questions, and answers into numbers for the metrics.

`question` composes what a decision model is asked (persona, condition prompt with the
variant's numbers, answer hint); `option_list` and `sequence_turns` lay out options tests and
sequential tests for one presentation order; `read_answer` and `code_answer` read an answer in
the test's format and code it for the metric. `study_from_prompts` turns imported thesis
prompts into a study that runs like a built-in one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import tomlkit

from .answers import Answer, parse_admit_reject, parse_letter, parse_number, parse_yes_no
from .studies import Condition, Study, StudyTest, Variant, parse_study, render, scaled_values


def question(
    study: Study,
    test: StudyTest,
    condition: Condition,
    values: Mapping[str, Any],
    variant: Variant | None = None,
    **run_gaps: str,
) -> str:
    """The full question of one condition: persona (if the variant has it), the condition's
    prompt with the variant's scaled numbers, and the study's answer hint.

    `run_gaps` fills the texts a run supplies (`options` for an options test).
    """
    variant = variant or Variant("default", persona=False)
    filled = scaled_values(test, values, variant) | run_gaps
    parts = []
    if variant.persona and study.prompts.get("persona"):
        parts.append(study.prompts["persona"])
    parts.append(render(condition.prompt, filled))
    if study.prompts.get("answer_hint"):
        parts.append(study.prompts["answer_hint"])
    return "\n\n".join(parts)


def option_list(
    test: StudyTest, condition: Condition, items: list[str], order: list[int]
) -> tuple[str, int | None]:
    """The lettered option list for `order` (original item indices in presented order), and
    the presented position of the status-quo item (None when the condition has none)."""
    if len(items) != test.k or sorted(order) != list(range(test.k)):
        raise ValueError(f"test '{test.id}' shows {test.k} items in a permutation of them")
    lines, status_quo_at = [], None
    for position, item in enumerate(order):
        text = items[item]
        if condition.status_quo == item:
            status_quo_at = position
            if condition.status_quo_label:
                text = f"{condition.status_quo_label}: {text}"
        lines.append(f"{test.letters[position]}) {text}")
    return "\n".join(lines), status_quo_at


def sequence_turns(test: StudyTest, items: list[str], order: list[int]) -> list[str]:
    """The user turns of one presentation order of a sequential test (after the opening)."""
    if sorted(order) != list(range(len(items))):
        raise ValueError("the order must be a permutation of the items")
    return [render(test.turn, {"item": items[i]}) for i in order]


def read_answer(test: StudyTest, text: str, strict: bool = False) -> Answer:
    """Parse an answer with the test's format (and range, letters)."""
    if test.answer == "admit_reject":
        return parse_admit_reject(text, strict)
    if test.answer == "yes_no":
        return parse_yes_no(text, strict)
    if test.answer == "letter":
        return parse_letter(text, test.letters, strict)
    return parse_number(text, test.min, test.max, strict)


def code_answer(test: StudyTest, value: Any) -> float:
    """An answer as the number that enters the metric: numbers as they are; choices as 1 for
    the `target` answer (the one the bias predicts) and 0 otherwise; admit/yes as 1."""
    if test.answer == "number":
        return float(value)
    if test.answer == "letter":
        if test.target is None:
            return float(value)  # the 0-based option position
        return 1.0 if test.letters[value] == test.target else 0.0
    if test.target in ("no", "reject"):
        return 0.0 if value else 1.0
    return 1.0 if value else 0.0


# --------------------------------------------------------------------------- imported prompts


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def study_from_prompts(rows: list[Mapping[str, Any]], name: str) -> Study:
    """A runnable study from imported thesis prompts (`study_prompts` rows of one dataset).

    One test per bias × scenario; part 1 is the control, part 2 the treatment. Variable names
    that stand bare in the text (`anchor_value`) become `{{anchor_value}}` gaps with their
    published values; `__` stays where the answer goes. Numerical prompts read a number;
    choice prompts read yes/no when the target is yes or no, otherwise a letter, and Cohen's d
    codes the `target_response` as 1. The generated definition goes through the same
    validation as a study file.
    """
    doc = tomlkit.document()
    doc["id"] = _slug(name)
    doc["name"] = f"Prompts of dataset {name}"
    doc["description"] = "The published prompts of an imported dataset, run as they are."
    values, tests = tomlkit.table(), tomlkit.table()
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["bias"], r["scenario"], r["part"])):
        groups.setdefault(f"{_slug(row['bias'])}__{_slug(row['scenario'])}", []).append(row)
    for test_id, parts in groups.items():
        first = parts[0]
        test = tomlkit.table()
        test["bias"] = first["bias"]
        test["name"] = f"{first['bias_name']} ({first['scenario']})"
        test["design"] = "conditions"
        test["metric"] = "cohens_d"
        target = (first.get("target_response") or "").strip().lower()
        if first["response_type"] == "numerical":
            test["answer"] = "number"
        elif target in ("yes", "no"):
            test["answer"], test["target"] = "yes_no", target
        else:
            letters = "abcdefgh"[: max(2, "abcdefgh".find(target[:1]) + 1 if target else 2)]
            test["answer"], test["letters"] = "letter", letters
            test["target"] = target[:1] or "b"
        conditions = tomlkit.table()
        for part in parts:
            text = part["content"]
            variables = part["variables"]
            if isinstance(variables, str):
                variables = json.loads(variables or "{}")
            for key, value in variables.items():
                slot = f"{test_id}_{_slug(key)}_{part['part']}"
                text = re.sub(rf"(?<![\w{{]){re.escape(key)}(?![\w}}])", "{{" + slot + "}}", text)
                values[slot] = {"type": "choice", "options": [value]}
            label = "control" if part["part"] == 1 else f"treatment_{part['part']}"
            if part["part"] == 2 and len(parts) == 2:
                label = "treatment"
            conditions[label] = {"prompt": text}
        test["conditions"] = conditions
        tests[test_id] = test
    if values:
        doc["values"] = values
    doc["tests"] = tests
    return parse_study(tomlkit.dumps(doc), f"<dataset {name}>")
