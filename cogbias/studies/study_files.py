"""A study file's text read into a `Study`, fully validated.

A study file is untrusted input (a user's own file, or an imported thesis dataset turned into
a study): every field is checked for type and bounds, every problem is reported as
`file:line:col: message` like test case files, and each test is sampled a few times (a dry
run) so that a template referring to a value that does not exist is caught when the file is
loaded, not in the middle of a run.
"""

from __future__ import annotations

import random
from typing import Any

from cogbias.core.limits import name_problem
from cogbias.library.testcases import (
    LibraryError,
    _build_values,
    _Checker,
    _clip,
    read_toml,
)
from cogbias.studies.definitions import (
    GAP,
    MAX_ATTEMPTS,
    MAX_REPEATS,
    MAX_TESTS,
    MITIGATIONS,
    RUN_GAPS,
    Study,
    Variant,
    bounded,
    render,
    scaled_values,
)
from cogbias.studies.study_file_tests import parse_test
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
    if problem := name_problem(data["name"]):  # a label on the pages and in reports
        check.add(("name",), f"name {problem}")
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
        test = parse_test(test_id, table, check, set(values), mitigations)
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
