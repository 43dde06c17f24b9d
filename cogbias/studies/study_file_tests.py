"""The `[tests.ID]` tables of a study file, each checked and read into a `StudyTest`.

A test is where most of a study file's rules meet (its design, answer and metric must fit
each other; its conditions, items and gaps must fit the design), so its checks live apart
from the file's other tables (`study_files`), each in a short function naming one rule.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from cogbias.core.limits import name_problem
from cogbias.library.testcases import NAME_RE, _Checker, _clip
from cogbias.studies.definitions import (
    ANSWERS,
    DESIGNS,
    GAP,
    MAX_CONDITIONS,
    MAX_LENGTH,
    MAX_NUMBER,
    METRICS,
    Condition,
    StudyTest,
)
from cogbias.studies.study_variants import ID_RE as _ID_RE

_TEST = {
    "bias": (str, True),
    "name": (str, False),
    "design": (str, True),
    "answer": (str, True),
    "metric": (str, True),
    "letters": (str, False),
    "min": ((int, float), False),
    "max": ((int, float), False),
    "target": (str, False),
    "undirected": (bool, False),
    "scaled": (list, False),
    "item": (str, False),
    "k": (int, False),
    "length": (int, False),
    "orders": (int, False),
    "turn": (str, False),
    "system": (str, False),
    "option_name": (str, False),
    "conditions": (dict, True),
    "examples": (dict, False),
}
METRIC_WORDS = {"cohens_d": "Cohen's d", "share": "a share"}
_CONDITION = {"prompt": (str, True), "status_quo": (int, False), "status_quo_label": (str, False)}
_EXAMPLES = {"contrastive": (str, False), "counterfactual": (str, False)}


def parse_test(
    test_id: str,
    table: Any,
    check: _Checker,
    value_names: set[str],
    mitigations: tuple[str, ...],
) -> StudyTest | None:
    """One `[tests.ID]` table as a `StudyTest`; None where it is too broken to check further
    (every problem found so far is in `check`)."""
    path = ("tests", test_id)
    if not isinstance(table, dict):
        check.add(path, f"test '{test_id}' should be a table [tests.{test_id}]")
        return None
    if not check.fields(table, _TEST, path) or not _kinds_known(test_id, table, path, check):
        return None
    if not _answer_fits(table, path, check):
        return None
    conditions = _test_conditions(table, path, check)
    if table["design"] == "options":
        _check_options(test_id, table, path, conditions, check)
    if table["design"] == "sequence":
        _check_sequence(test_id, table, path, check)
    _check_examples(test_id, table, path, check, mitigations)
    if "name" in table and (problem := name_problem(table["name"])):  # a heatmap's row label
        check.add((*path, "name"), f"name {problem}")
    for i, name in enumerate(table.get("scaled", [])):
        if name not in value_names:
            check.add(
                (*path, "scaled"), f"scaled value '{name}' is not defined under [values]", index=i
            )
    _check_gaps(table, path, check, value_names)
    return _study_test(test_id, table, conditions)


def _kinds_known(
    test_id: str, table: dict[str, Any], path: tuple[str, ...], check: _Checker
) -> bool:
    """The test's id is well formed and its design, answer and metric are ones cogbias knows
    (the checks after this one look them up)."""
    problems = len(check.problems)
    if not _ID_RE.fullmatch(test_id):
        check.add(path, f"test id {_clip(test_id)!r} must be lower-case letters, digits, '_'")
    for key, allowed in (("design", DESIGNS), ("answer", ANSWERS), ("metric", tuple(METRICS))):
        if table[key] not in allowed:
            hint = difflib.get_close_matches(table[key], list(allowed), n=1)
            extra = f" (did you mean '{hint[0]}'?)" if hint else ""
            check.add(
                (*path, key),
                f"unknown {key} {_clip(table[key])!r}{extra}; use {', '.join(allowed)}",
            )
    return len(check.problems) == problems


def _answer_fits(table: dict[str, Any], path: tuple[str, ...], check: _Checker) -> bool:
    """The metric fits the design and the answer, and the answer's letters, bounds and target
    are sound; False where a bound is not even a usable number."""
    design, answer, metric = table["design"], table["answer"], table["metric"]
    designs, answers = METRICS[metric]
    if design not in designs:
        check.add(
            (*path, "metric"),
            f"metric '{metric}' needs design {' or '.join(designs)}, not '{design}'",
        )
    if answer not in answers:
        check.add(
            (*path, "answer"),
            f"metric '{metric}' reads {', '.join(answers)} answers, not '{answer}'",
        )
    letters = table.get("letters", "abcd")
    if answer == "letter" and (
        len(set(letters)) != len(letters) or not re.fullmatch("[a-z]{2,26}", letters)
    ):
        check.add(
            (*path, "letters"),
            f"letters {_clip(letters)!r} must be 2 or more distinct letters a-z",
        )
    for key in ("min", "max"):
        if key in table and not abs(table[key]) <= MAX_NUMBER:
            check.add((*path, key), f"{key} must be a number between -1e15 and 1e15")
            return False
    if "min" in table and "max" in table and table["min"] > table["max"]:
        check.add((*path, "min"), f"min ({table['min']}) is greater than max ({table['max']})")
    _check_target(table, path, check)
    return True


def _check_target(table: dict[str, Any], path: tuple[str, ...], check: _Checker) -> None:
    """A share or Cohen's d on a choice answer needs to know which answer is coded 1."""
    answer, metric, target = table["answer"], table["metric"], table.get("target")
    if metric in ("cohens_d", "share") and answer != "number":
        choices = {
            "letter": list(table.get("letters", "abcd")),
            "yes_no": ["yes", "no"],
            "admit_reject": ["admit", "reject"],
        }[answer]
        if target not in choices:
            check.add(
                (*path, "target" if target else "metric"),
                f"{METRIC_WORDS.get(metric, metric)} on {answer} answers needs target = one "
                f"of {', '.join(choices)} (the answer coded 1)",
            )


def _test_conditions(
    table: dict[str, Any], path: tuple[str, ...], check: _Checker
) -> list[Condition]:
    """The test's conditions, as many as its metric compares."""
    metric = table["metric"]
    conditions = _conditions(table["conditions"], (*path, "conditions"), check)
    pairwise = ("framing_difference", "group_attribution_difference", "cohens_d")
    if metric in pairwise and len(conditions) != 2:
        check.add(
            (*path, "conditions"),
            f"metric '{metric}' compares exactly 2 conditions, found {len(conditions)}",
        )
    elif metric == "share" and len(conditions) != 1:
        check.add(
            (*path, "conditions"),
            f"metric 'share' reads exactly 1 condition, found {len(conditions)}",
        )
    elif not table["conditions"]:
        check.add((*path, "conditions"), "a test needs at least one condition")
    return conditions


def _check_options(
    test_id: str,
    table: dict[str, Any],
    path: tuple[str, ...],
    conditions: list[Condition],
    check: _Checker,
) -> None:
    """An options test shows `k` items, one per letter; a status quo is one of them."""
    k, letters = table.get("k", 0), table.get("letters", "abcd")
    if "item" not in table:
        check.add(path, f"test '{test_id}' with design 'options' needs 'item' (one option's text)")
    if not 2 <= k <= len(letters):
        check.add(
            (*path, "k"),
            f"k = {k}: an options test shows between 2 and {len(letters)} items (one per letter)",
        )
    for c in conditions:
        if c.status_quo is not None and not 0 <= c.status_quo < max(k, 1):
            check.add(
                (*path, "conditions", c.name, "status_quo"),
                f"status_quo = {c.status_quo} is not an item between 0 and {k - 1}",
            )
    if table["metric"] == "status_quo_share" and not any(
        c.status_quo is not None for c in conditions
    ):
        check.add(
            (*path, "conditions"), "status_quo_share needs a condition with status_quo = <item>"
        )


def _check_sequence(
    test_id: str, table: dict[str, Any], path: tuple[str, ...], check: _Checker
) -> None:
    """A sequence test shows `length` items, one a turn, in `orders` presentation orders."""
    for key in ("item", "turn"):
        if key not in table:
            check.add(path, f"test '{test_id}' with design 'sequence' needs '{key}'")
    length = table.get("length", 0)
    if not 2 <= length <= MAX_LENGTH:
        check.add(
            (*path, "length"), f"a sequence has between 2 and {MAX_LENGTH} items, not {length}"
        )
    if not 2 <= table.get("orders", 0) <= 2 * max(length, 2):
        check.add(
            (*path, "orders"),
            f"a sequence needs between 2 and {2 * max(length, 2)} presentation orders (its "
            f"balanced (Williams) orders, then the reversed ones), not {table.get('orders', 0)}",
        )


def _check_examples(
    test_id: str,
    table: dict[str, Any],
    path: tuple[str, ...],
    check: _Checker,
    mitigations: tuple[str, ...],
) -> None:
    """A mitigation that shows examples needs this test's examples."""
    examples = table.get("examples", {})
    check.fields(examples, _EXAMPLES, (*path, "examples"))
    for mitigation in ("contrastive", "counterfactual"):
        if mitigation in mitigations and mitigation not in examples:
            check.add(
                (*path, "examples"),
                f"the study offers '{mitigation}' but test '{test_id}' has no examples.{mitigation}",
            )


def _study_test(test_id: str, table: dict[str, Any], conditions: list[Condition]) -> StudyTest:
    """The checked table as a `StudyTest`, with the defaults of the fields left out."""
    return StudyTest(
        id=test_id,
        bias=table["bias"],
        name=table.get("name", test_id.replace("_", " ").capitalize()),
        design=table["design"],
        answer=table["answer"],
        metric=table["metric"],
        conditions=tuple(conditions),
        letters=table.get("letters", "abcd"),
        min=table.get("min"),
        max=table.get("max"),
        target=table.get("target"),
        undirected=table.get("undirected", False),
        scaled=tuple(table.get("scaled", [])),
        item=table.get("item", ""),
        k=table.get("k", 0),
        length=table.get("length", 0),
        orders=table.get("orders", 0),
        turn=table.get("turn", ""),
        examples=dict(table.get("examples", {})),
        system=table.get("system"),
        option_name=table.get("option_name", ""),
    )


def _conditions(table: Any, path: tuple[str, ...], check: _Checker) -> list[Condition]:
    out: list[Condition] = []
    if len(table) > MAX_CONDITIONS:
        check.add(path, f"a test has at most {MAX_CONDITIONS} conditions, not {len(table)}")
        return out
    for name, spec in table.items():
        if not isinstance(spec, dict):
            check.add((*path, name), f"condition '{name}' should be a table with a prompt")
            continue
        if not _ID_RE.fullmatch(name):
            check.add(
                (*path, name),
                f"condition name {_clip(name)!r} must be lower-case letters, digits, '_'",
            )
        if check.fields(spec, _CONDITION, (*path, name)):
            out.append(
                Condition(
                    name, spec["prompt"], spec.get("status_quo"), spec.get("status_quo_label", "")
                )
            )
    return out


def _check_gaps(
    table: dict[str, Any], path: tuple[str, ...], check: _Checker, known: set[str]
) -> None:
    """Every `{{name}}` must be a value, or a text the run supplies where it belongs."""
    texts: list[tuple[tuple[str, ...], str, set[str]]] = []
    design = table["design"]
    run_gap = {"options": {"options"}, "sequence": {"item"}}.get(design, set())
    optional: dict[tuple[str, ...], set[str]] = {}  # run gaps a text may have, not must
    for name, spec in table["conditions"].items():
        if isinstance(spec, dict) and isinstance(spec.get("prompt"), str):
            where = (*path, "conditions", name, "prompt")
            texts.append((where, spec["prompt"], run_gap if design == "options" else set()))
            if design == "options" and "status_quo" in spec:
                optional[where] = {"status_quo"}
    if isinstance(table.get("item"), str):
        texts.append(((*path, "item"), table["item"], set()))
    if isinstance(table.get("turn"), str):
        texts.append(((*path, "turn"), table["turn"], {"item"}))
    for field_path, text, extra in texts:
        allowed = extra | optional.get(field_path, set())
        if "[[" in text:
            check.add(
                field_path,
                "study prompts have no [[generator gaps]]; use {{values}}",
                offset=text.find("[["),
            )
        for match in GAP.finditer(text):
            name = match.group(1)
            if name not in known | allowed:
                hint = difflib.get_close_matches(name, sorted(known | allowed), n=1)
                extra_hint = f"; did you mean '{hint[0]}'?" if hint else ""
                check.add(
                    field_path,
                    f"'{{{{{name}}}}}' is not a value of this study{extra_hint}",
                    offset=match.start(),
                )
            elif not NAME_RE.fullmatch(name):
                check.add(field_path, f"'{{{{{name}}}}}' is not a valid name", offset=match.start())
        for required in extra:
            if "{{" + required + "}}" not in text.replace(" ", ""):
                check.add(
                    field_path,
                    f"this text needs the gap {{{{{required}}}}} where the run puts the {required}",
                )
