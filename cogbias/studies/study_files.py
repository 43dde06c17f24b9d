"""A study file's text read into a `Study`, fully validated.

A study file is untrusted input (a user's own file, or an imported thesis dataset turned into
a study): every field is checked for type and bounds, every problem is reported as
`file:line:col: message` like test case files, and each test is sampled a few times (a dry
run) so that a template referring to a value that does not exist is caught when the file is
loaded, not in the middle of a run.
"""

from __future__ import annotations

import difflib
import random
import re
from typing import Any

from cogbias.library.testcases import (
    NAME_RE,
    LibraryError,
    _build_values,
    _Checker,
    _clip,
    read_toml,
)
from cogbias.studies.definitions import (
    ANSWERS,
    DESIGNS,
    GAP,
    MAX_ATTEMPTS,
    MAX_CONDITIONS,
    MAX_LENGTH,
    MAX_NUMBER,
    MAX_REPEATS,
    MAX_TESTS,
    METRICS,
    MITIGATIONS,
    RUN_GAPS,
    Condition,
    Study,
    StudyTest,
    Variant,
    bounded,
    render,
    scaled_values,
)
from cogbias.studies.study_variants import ID_RE as _ID_RE
from cogbias.studies.study_variants import parse_variants

_TOP = {
    "id": (str, True),
    "name": (str, True),
    "description": (str, True),
    "references": (list, False),
    "system": (str, False),
    "temperatures": (list, False),
    "repeats": (int, False),
    "max_attempts": (int, False),
    "mitigations": (list, False),
    "prompts": (dict, False),
    "variants": (dict, False),
    "values": (dict, False),
    "tests": (dict, True),
}
_PROMPTS = {
    "awareness": (str, False),
    "selfhelp": (str, False),
    "revise": (str, False),
    "persona": (str, False),
    "answer_hint": (str, False),
}
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


# --------------------------------------------------------------------------- parsing


def parse_study(text: str, file: str = "<string>") -> Study:
    """Parse and fully validate a study; raises LibraryError listing every problem."""
    text, data = read_toml(text, file)
    check = _Checker(text, file)
    if not check.fields(data, _TOP, ()):
        raise LibraryError(check.problems)
    study = _build(data, check)
    if not check.problems:
        _dry_run(study, check)
    if check.problems:
        raise LibraryError(check.problems)
    return Study(**{**study.__dict__, "source": text})


def _build(data: dict[str, Any], check: _Checker) -> Study:
    if not _ID_RE.fullmatch(data["id"]):
        check.add(
            ("id",), f"id {_clip(data['id'])!r} must be snake_case: lower-case letters, digits, '_'"
        )
    for key in ("references", "mitigations", "temperatures"):
        for i, item in enumerate(data.get(key, [])):
            kinds = (int, float) if key == "temperatures" else str
            if not isinstance(item, kinds) or isinstance(item, bool):
                check.add(
                    (key,),
                    f"{key} item {i + 1} should be a {'number' if key == 'temperatures' else 'string'}",
                )
    for temperature in data.get("temperatures", []):
        if isinstance(temperature, int | float) and not 0 <= temperature <= 2:
            check.add(("temperatures",), f"temperature {temperature} is outside 0..2")
    for i, name in enumerate(data.get("mitigations", [])):
        if isinstance(name, str) and name not in MITIGATIONS:
            check.add(
                ("mitigations",),
                f"unknown mitigation '{name}'; use {', '.join(MITIGATIONS)}",
                index=i,
            )
    for key, most in (("repeats", MAX_REPEATS), ("max_attempts", MAX_ATTEMPTS)):
        if key in data and not 1 <= data[key] <= most:
            check.add((key,), f"{key} must be between 1 and {most:,}, not {data[key]:,}")
    prompts = data.get("prompts", {})
    if check.fields(prompts, _PROMPTS, ("prompts",)):
        _check_prompt_gaps(prompts, check)
    mitigations = tuple(data.get("mitigations", ["none"]))
    for mitigation in ("awareness", "selfhelp"):
        if mitigation in mitigations and mitigation not in prompts:
            check.add(("mitigations",), f"mitigation '{mitigation}' needs prompts.{mitigation}")
    values = _build_values(data.get("values", {}), (), check)
    variants = parse_variants(data.get("variants", {}), check, set(values))
    if any(v.persona for v in variants.values()) and "persona" not in prompts:
        check.add(("variants",), "a variant with persona = true needs prompts.persona")
    tests = {}
    for test_id, table in data["tests"].items():
        test = _test(test_id, table, check, set(values), mitigations)
        if test is not None:
            tests[test_id] = test
    if not data["tests"]:
        check.add(("tests",), "a study needs at least one test")
    if len(data["tests"]) > MAX_TESTS:
        check.add(("tests",), f"a study has at most {MAX_TESTS} tests, not {len(data['tests']):,}")
    if check.problems:
        return Study(data["id"], "", "", (), tests, values, variants, {})
    return Study(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        references=tuple(data.get("references", [])),
        tests=tests,
        values=values,
        variants=variants,
        prompts=dict(prompts),
        system=data.get("system", ""),
        temperatures=tuple(float(t) for t in data.get("temperatures", [0.7])),
        repeats=data.get("repeats", 1),
        max_attempts=data.get("max_attempts", 3),
        mitigations=mitigations,
    )


def _check_prompt_gaps(prompts: dict[str, Any], check: _Checker) -> None:
    """The self-help prompt has exactly the gap {{prompt}}; the other prompts are used as
    written, so a gap in them would reach the model as literal braces."""
    for key, text in prompts.items():
        allowed = {"prompt"} if key == "selfhelp" else set()
        for match in GAP.finditer(text):
            if match.group(1) not in allowed:
                what = "only {{prompt}}" if allowed else "no {{gaps}}: it is used as written"
                check.add(
                    ("prompts", key),
                    f"prompts.{key} has '{match.group(0)}'; it takes {what}",
                    offset=match.start(),
                )
    selfhelp = prompts.get("selfhelp")
    if isinstance(selfhelp, str) and "{{prompt}}" not in selfhelp.replace(" ", ""):
        check.add(
            ("prompts", "selfhelp"),
            "the self-help prompt needs {{prompt}} where the prompt to rewrite goes",
        )


def _test(
    test_id: str,
    table: Any,
    check: _Checker,
    value_names: set[str],
    mitigations: tuple[str, ...],
) -> StudyTest | None:
    path = ("tests", test_id)
    if not isinstance(table, dict):
        check.add(path, f"test '{test_id}' should be a table [tests.{test_id}]")
        return None
    if not check.fields(table, _TEST, path):
        return None
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
    if len(check.problems) > problems:
        return None
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
            return None
    if "min" in table and "max" in table and table["min"] > table["max"]:
        check.add((*path, "min"), f"min ({table['min']}) is greater than max ({table['max']})")
    target = table.get("target")
    if metric in ("cohens_d", "share") and answer != "number":
        choices = {
            "letter": list(letters),
            "yes_no": ["yes", "no"],
            "admit_reject": ["admit", "reject"],
        }[answer]
        if target not in choices:
            check.add(
                (*path, "target" if target else "metric"),
                f"{METRIC_WORDS.get(metric, metric)} on {answer} answers needs target = one "
                f"of {', '.join(choices)} (the answer coded 1)",
            )
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
    k = table.get("k", 0)
    if design == "options":
        if "item" not in table:
            check.add(
                path, f"test '{test_id}' with design 'options' needs 'item' (one option's text)"
            )
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
        if metric == "status_quo_share" and not any(c.status_quo is not None for c in conditions):
            check.add(
                (*path, "conditions"), "status_quo_share needs a condition with status_quo = <item>"
            )
    if design == "sequence":
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
    examples = table.get("examples", {})
    check.fields(examples, _EXAMPLES, (*path, "examples"))
    for mitigation in ("contrastive", "counterfactual"):
        if mitigation in mitigations and mitigation not in examples:
            check.add(
                (*path, "examples"),
                f"the study offers '{mitigation}' but test '{test_id}' has no examples.{mitigation}",
            )
    scaled = table.get("scaled", [])
    for i, name in enumerate(scaled):
        if name not in value_names:
            check.add(
                (*path, "scaled"), f"scaled value '{name}' is not defined under [values]", index=i
            )
    _check_gaps(table, path, check, value_names)
    return StudyTest(
        id=test_id,
        bias=table["bias"],
        name=table.get("name", test_id.replace("_", " ").capitalize()),
        design=design,
        answer=answer,
        metric=metric,
        conditions=tuple(conditions),
        letters=letters,
        min=table.get("min"),
        max=table.get("max"),
        target=target,
        undirected=table.get("undirected", False),
        scaled=tuple(scaled),
        item=table.get("item", ""),
        k=k,
        length=table.get("length", 0),
        orders=table.get("orders", 0),
        turn=table.get("turn", ""),
        examples=dict(examples),
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


def _dry_run(study: Study, check: _Checker, samples: int = 10) -> None:
    """Sample and render every test so a failing expression or gap, or a text that renders
    too long, shows up at load time with where it is."""
    rng = random.Random(0)
    variants = list(study.variants.values()) or [Variant("default")]
    # one variant per draw, each at least once: the work stays tests × draws, not × variants
    for draw in range(max(samples, len(variants))):
        try:
            values = study.sample_values(rng)
        except Exception as exc:  # noqa: BLE001 - the expression module's errors are ValueErrors
            check.add(("values",), f"a value fails when sampled: {exc}")
            return
        for test in study.tests.values():
            for variant in (variants[draw % len(variants)],):
                try:
                    filled = scaled_values(test, values, variant)
                except (TypeError, ArithmeticError):
                    check.add(
                        ("tests", test.id, "scaled"),
                        "only numbers can be scaled by a variant, to a finite number",
                    )
                    return
                filled |= {gap: "" for gap in RUN_GAPS}
                texts = [(("conditions", c.name, "prompt"), c.prompt) for c in test.conditions]
                texts += [(("item",), test.item), (("turn",), test.turn)]
                for where, text in texts:
                    try:
                        rendered = render(text, filled)
                        if where[0] == "conditions":  # sent with the persona and answer hint
                            persona = variant.persona and study.prompts.get("persona")
                            hint = study.prompts.get("answer_hint")
                            parts = [t for t in (persona, rendered, hint) if t]
                            what = "the question (persona, prompt and answer hint)"
                            bounded("\n\n".join(parts), what)
                    except (ArithmeticError, ValueError) as exc:  # RenderError, show() overflow
                        check.add(("tests", test.id, *where), str(exc))
                        return
