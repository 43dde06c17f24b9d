"""Turning a study's tests into questions, and answers into numbers for the metrics.

`question` composes what a decision model is asked (persona, condition prompt with the
variant's numbers, answer hint); `option_list` and `sequence_turns` lay out options tests and
sequential tests for one presentation order; `read_answer` and `code_answer` read an answer in
the test's format and code it for the metric. `study_from_prompts` turns imported thesis
prompts into a study that runs like a built-in one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import tomlkit

from cogbias.core.answers import (
    Answer,
    parse_admit_reject,
    parse_letter,
    parse_number,
    parse_yes_no,
)
from cogbias.core.limits import MAX_NAME_CHARS
from cogbias.core.safetext import shown
from cogbias.library.testcases import LibraryError
from cogbias.studies.definitions import (
    MAX_NUMBER,
    MAX_TESTS,
    MAX_TEXT_CHARS,
    Condition,
    Study,
    StudyTest,
    Variant,
    bounded,
    render,
    scaled_values,
)
from cogbias.studies.study_files import parse_study
from cogbias.studies.thesis_coding import ThesisTemplate, thesis_template


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
    if variant.persona and study.prompts.get("persona") and not study.system:
        parts.append(study.prompts["persona"])  # with a system message, it joins that
    parts.append(render(condition.prompt, filled))
    if study.prompts.get("answer_hint"):
        parts.append(study.prompts["answer_hint"])
    return bounded("\n\n".join(parts), "the question (persona, prompt and answer hint)")


def system_message(study: Study, test: StudyTest, variant: Variant | None = None) -> str:
    """The system message of a question: the test's own, else the study's; a study with a
    system message puts the variant's persona there, after one space, as the Mohr thesis did
    (Appendix C), instead of at the top of the question."""
    if test.system is not None:
        return test.system
    persona = study.prompts.get("persona", "")
    if study.system and persona and variant is not None and variant.persona:
        return f"{study.system} {persona}"
    return study.system


def option_list(
    test: StudyTest, condition: Condition, items: list[str], order: list[int]
) -> tuple[str, int | None]:
    """The lettered option list for `order` (original item indices in presented order), and
    the presented position of the status-quo item (None when the condition has none)."""
    if len(items) != test.k or sorted(order) != list(range(test.k)):
        raise ValueError(f"test '{test.id}' shows {test.k} items in a permutation of them")
    lines, status_quo_at = [], None
    for position, item in enumerate(order):
        head = option_name(test, position) if test.option_name else ""
        if condition.status_quo == item:
            status_quo_at = position
            head = f"{condition.status_quo_label} {head}".strip()
        text = f"{head}: {items[item]}" if head else items[item]
        lines.append(f"{test.letters[position]}) {text}")
    return "\n".join(lines), status_quo_at


def option_name(test: StudyTest, position: int) -> str:
    """What the option at `position` is called: the test's `option_name` and the position's
    capital letter ("Student C"), or the letter alone. The status-quo prompt's
    `{{status_quo}}` gap is filled with it, so the text names the option it favours."""
    letter = test.letters[position].upper()
    return f"{test.option_name} {letter}" if test.option_name else letter


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
    answer = parse_number(text, test.min, test.max, strict)
    if answer.ok and not abs(answer.value) <= MAX_NUMBER:  # 10**400 reads as inf
        return Answer(text, error=f"the number is too large to be an answer: {text[:40]!r}")
    return answer


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


def _unique(name: str, used: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, ... when taken: "a b" and "a_b" slug alike but must stay
    two tests (two values), not silently merge."""
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}_{n}"
    used.add(candidate)
    return candidate


# Texts of an imported prompt that the template language would read as gaps: they enter the
# study as values, which are inserted as written and never read again.
_LITERALS = {"{{": "text_open_braces", "[[": "text_open_brackets"}


def _gapped(text: str, slots: Mapping[str, str]) -> str:
    """`text` with every bare variable name (longest first, in one pass, so `a` never
    matches inside `a.b` and a filled gap is never matched again) and every literal `{{`/`[[`
    replaced by a gap."""
    keys = sorted(slots, key=len, reverse=True)
    # one lookbehind for all names: inside a word no name is tried at all
    variable = r"(?<!\w)(?:" + "|".join(re.escape(k) for k in keys) + r")(?!\w)"
    literal = "|".join(re.escape(k) for k in _LITERALS)
    pattern = re.compile(f"{variable}|{literal}" if keys else literal)

    def gap(match: re.Match[str]) -> str:
        found = match.group(0)
        return "{{" + (slots[found] if found in slots else _LITERALS[found]) + "}}"

    return pattern.sub(gap, text)


def _answer_format(first: Mapping[str, Any], where: str) -> dict[str, str]:
    """How a prompt's answers are read and coded for Cohen's d (the target answer is 1)."""
    target = (first.get("target_response") or "").strip().lower()
    if first["response_type"] == "numerical":
        return {"answer": "number"}
    if target in ("yes", "no"):
        return {"answer": "yes_no", "target": target}
    letter = target.strip("().: ")
    if re.fullmatch("[a-z]", letter):
        letters = "abcdefghijklmnopqrstuvwxyz"[: max(2, ord(letter) - ord("a") + 1)]
        return {"answer": "letter", "letters": letters, "target": letter}
    raise ValueError(
        f"{where}: target_response {target[:40]!r} is neither yes, no nor one letter, so "
        "the choice answers cannot be coded for Cohen's d"
    )


def study_from_prompts(
    rows: list[Mapping[str, Any]], name: str, prompt_file: str = "experiments.csv"
) -> Study:
    """A runnable study from imported thesis prompts (`study_prompts` rows of one dataset).

    One test per bias × scenario, asked and coded as the thesis did (`thesis_coding`): the
    thesis' system message, with its persona in every scenario but the one without it; the
    question framed by its user message and output line; the part its Table 6 calls the
    treatment group as the treatment, and the answer §3.4.1 codes 1 as the target (framing
    undirected, Eq. 2). For a bias the coding table does not list, part 1 is the control,
    part 2 the treatment (with more parts, one test per further part against part 1, named
    `…__part3`) and the control's `target_response` is coded 1. Variable names that stand
    bare in the text (`anchor_value`) become `{{…}}` gaps filled with their published values
    as text, so the prompt sent is the released `content` byte for byte with each variable
    replaced by its value as `variables` writes it (833332, never 833,332); `__`
    stays where the answer goes, as in the thesis. Numerical prompts read a number; choice
    prompts read yes/no when the target is yes or no, otherwise a letter. The generated
    definition goes through the same validation as a study file; a problem is reported with
    the `prompt_file` rows it comes from.
    """
    template = thesis_template()
    doc = tomlkit.document()
    doc["id"] = _slug(name)
    # names made of imported ones: shown escaped and cut to a name's length (a study's names
    # follow `core.limits.name_problem`; an older database may hold names that do not)
    doc["name"] = shown(f"Prompts of dataset {name}", MAX_NAME_CHARS)
    doc["description"] = "The published prompts of an imported dataset, run as they are."
    values, tests = tomlkit.table(), tomlkit.table()
    used = set(_LITERALS.values())
    for literal, slot in _LITERALS.items():
        values[slot] = {"type": "choice", "options": [literal]}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["bias"], r["scenario"], r["part"])):
        groups.setdefault((row["bias"], row["scenario"]), []).append(row)
    n_tests = sum(len(parts) - 1 for parts in groups.values())
    if n_tests > MAX_TESTS:  # before building: tomlkit takes seconds per thousand tests
        raise ValueError(
            f"dataset {name}: its prompts make {n_tests:,} tests (one per part after the "
            f"first); a study has at most {MAX_TESTS}"
        )
    origins: dict[str, str] = {}  # test id → where its rows are, for messages
    for (bias, scenario), parts in groups.items():
        where = (
            f"dataset {name}, {prompt_file} rows "
            f"{', '.join(str(p.get('source_row', '?')) for p in parts)} "
            f"(bias {bias[:40]!r}, scenario {scenario[:40]!r})"
        )
        if len(parts) < 2:
            raise ValueError(f"{where}: a test needs a control part and a treatment part")
        base = f"{_slug(bias)}__{_slug(scenario)}"
        texts = _part_texts(parts, base, where, template, values, used)
        coding = template.coding(bias)
        control, treatments = parts[0], parts[1:]
        chosen = [p for p in parts if p["part"] == coding.treatment_part]
        if len(parts) == 2 and chosen:
            treatments = chosen
            control = next(p for p in parts if p is not chosen[0])
        for treatment in treatments:
            suffix = "" if len(parts) == 2 else f"__part{treatment['part']}"
            test_id = _unique(base + suffix, used)
            origins[test_id] = where
            label = f"{control['bias_name']} ({scenario})" + (
                f", part {treatment['part']}" if suffix else ""
            )
            label = shown(label, MAX_NAME_CHARS)
            test = _thesis_test(template, coding, label, scenario, control, where)
            test["conditions"] = {
                "control": {"prompt": texts[control["part"]]},
                "treatment": {"prompt": texts[treatment["part"]]},
            }
            tests[test_id] = test
    doc["values"] = values
    doc["tests"] = tests
    try:
        return parse_study(tomlkit.dumps(doc), f"<dataset {name}>")
    except LibraryError as exc:
        raise ValueError(_located(exc, tomlkit.dumps(doc), origins, name)) from None


def _thesis_test(
    template: Any,
    coding: Any,
    label: str,
    scenario: str,
    control: Mapping[str, Any],
    where: str,
) -> Any:
    """One test's table without its prompts: bias, name, design, metric, the thesis' system
    message for `scenario` and the answer format as §3.4.1 codes it."""
    test = tomlkit.table()
    test["bias"] = control["bias"]
    test["name"] = label
    test["design"] = "conditions"
    test["metric"] = "cohens_d"
    test["system"] = template.system_for(scenario)
    coded = dict(control)
    lettered = re.fullmatch("[a-z]", (control.get("target_response") or "").strip("().: ").lower())
    if coding.coded_1 and control["response_type"] == "choice" and lettered:
        coded["target_response"] = coding.coded_1
    for key, value in _answer_format(coded, where).items():
        test[key] = value
    if coding.undirected:
        test["undirected"] = True
    return test


def _part_texts(
    parts: list[Mapping[str, Any]],
    base: str,
    where: str,
    template: ThesisTemplate,
    values: tomlkit.items.Table,
    used: set[str],
) -> dict[Any, str]:
    """Each part's user message, its variables turned into `{{…}}` gaps whose values (added to
    `values`) are the published ones as text: a number reaches the prompt as the column
    writes it (833332), not as a study shows its numbers (833,332), which the thesis never
    sent."""
    texts = {}
    for part in parts:
        variables = part["variables"]
        if isinstance(variables, str):
            variables = json.loads(variables or "{}")
        # the import bounds these; a database filled before it did may hold a 10 MB prompt,
        # which TOML-escaping below would spend minutes on before rendering refused it
        size = len(part["content"]) + sum(len(str(v)) for v in variables.values())
        if size > MAX_TEXT_CHARS:
            raise ValueError(
                f"{where}: the text with its values filled in is longer than "
                f"{MAX_TEXT_CHARS:,} characters ({size:,})"
            )
        for key, value in variables.items():
            if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN, 1e999
                raise ValueError(f"{where}: variable {key[:40]!r} is {value}, not a number")
        slots = {key: _unique(f"{_slug(base)}_{_slug(key)}_{part['part']}", used)
                 for key in variables}  # fmt: skip
        for key, slot in slots.items():
            values[slot] = {"type": "choice", "options": [str(variables[key])]}
        texts[part["part"]] = template.user_message(
            _gapped(part["content"], slots), part["response_type"]
        )
    return texts


def _located(exc: LibraryError, source: str, origins: Mapping[str, str], name: str) -> str:
    """The problems of a generated study, each named by the dataset rows it comes from (the
    generated TOML's line numbers mean nothing to the person who imported the CSV)."""
    lines = source.splitlines()
    out = []
    for problem in exc.problems[:10]:
        where = f"dataset {name}"
        for line in reversed(lines[: problem.line]):
            found = re.match(r"\[tests\.([a-z0-9_]+)", line)
            if found and found.group(1) in origins:
                where = origins[found.group(1)]
                break
        out.append(f"{where}: {problem.message}")
    if len(exc.problems) > 10:
        out.append(f"... and {len(exc.problems) - 10} more problems")
    return "\n".join(out)
