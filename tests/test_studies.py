"""Built-in study definitions (biasbuster, mohr8): loading, validation, presenting, answers."""

import random
import re

import pytest

from cogbias.core.answers import permuted_orders
from cogbias.library.testcases import LibraryError
from cogbias.studies.definitions import STUDY_DIR, render, show
from cogbias.studies.questions import (
    code_answer,
    option_list,
    option_name,
    question,
    read_answer,
    sequence_turns,
    study_from_prompts,
    system_message,
)
from cogbias.studies.study_catalog import get_study, load_studies
from cogbias.studies.study_files import parse_study

MINIMAL = """\
id = "mini"
name = "Mini"
description = "A small study."

[values.price]
type = "int"
min = 10
max = 10

[tests.endowment]
bias = "endowment_effect"
design = "conditions"
answer = "number"
metric = "cohens_d"
scaled = ["price"]
[tests.endowment.conditions.control]
prompt = "Buy it for at most $ __? It cost ${{price}}."
[tests.endowment.conditions.treatment]
prompt = "Sell it for at least $ __? It cost ${{price}}."
"""


def problems(text: str) -> list[str]:
    with pytest.raises(LibraryError) as err:
        parse_study(text, "s.toml")
    return [str(p) for p in err.value.problems]


def test_builtin_studies_load():
    studies = load_studies()
    assert {"biasbuster", "mohr8"} <= set(studies)
    bb = studies["biasbuster"]
    assert list(bb.tests) == ["framing", "group_attribution", "status_quo", "primacy", "anchoring"]
    assert bb.mitigations == ("none", "awareness", "contrastive", "counterfactual", "selfhelp")
    mohr = studies["mohr8"]
    assert sorted(t.bias for t in mohr.tests.values()) == [
        "anchoring",
        "category_size_bias",
        "endowment_effect",
        "framing_effect",
        "gamblers_fallacy",
        "loss_aversion",
        "sunk_cost_fallacy",
        "transaction_utility",
    ]
    assert mohr.temperatures == (0.2, 0.7, 1.0, 1.3, 1.8) and mohr.repeats == 100
    # the released data's scenario names (issue 19): 0_normal without the persona, 1_persona base
    assert list(mohr.variants) == ["0_normal", "1_persona", "2_odd_numbers", "3_large_numbers"]
    assert [v.persona for v in mohr.variants.values()] == [False, True, True, True]
    assert [t.id for t in mohr.tests.values() if t.undirected] == ["framing"]
    assert get_study("mohr8") is not None
    with pytest.raises(KeyError, match="did you mean mohr8"):
        get_study("mohr9")


def test_every_builtin_question_renders_without_leftover_gaps():
    for study in load_studies().values():
        values = study.sample_values(random.Random(1))
        for test in study.tests.values():
            for condition in test.conditions:
                for variant in list(study.variants.values()) or [None]:
                    options, named = "", ""
                    if test.design == "options":
                        items = [
                            render(test.item, study.sample_values(random.Random(i)))
                            for i in range(test.k)
                        ]
                        options, at = option_list(test, condition, items, list(range(test.k)))
                        # the run names the status-quo option in the text (runs.study_plan)
                        named = "" if at is None else option_name(test, at)
                    text = question(
                        study, test, condition, values, variant, options=options, status_quo=named
                    )
                    assert "{{" not in text and "[[" not in text
            assert (
                set(test.examples) == {"contrastive", "counterfactual"}
                or "contrastive" not in study.mitigations
            )


def test_variants_add_the_persona_and_show_the_thesis_numbers():
    mohr = get_study("mohr8")
    test = mohr.tests["endowment"]
    values = mohr.sample_values(random.Random(0))
    base = question(mohr, test, test.conditions[0], values, mohr.variants["1_persona"])
    assert "$4," in base and base.endswith(mohr.prompts["answer_hint"])
    # the persona joins the thesis' system message (Appendix C), not the question
    assert mohr.prompts["persona"] not in base
    with_persona = system_message(mohr, test, mohr.variants["1_persona"])
    assert with_persona == f"{mohr.system} {mohr.prompts['persona']}"
    bare = question(mohr, test, test.conditions[0], values, mohr.variants["0_normal"])
    assert bare == base  # 0_normal differs only by the system message: no persona
    assert system_message(mohr, test, mohr.variants["0_normal"]) == mohr.system

    def asked(test_id: str, condition: int, variant: str) -> str:
        test = mohr.tests[test_id]
        return question(mohr, test, test.conditions[condition], values, mohr.variants[variant])

    # Issue 19 point 10: the odd and large scenarios change what the thesis changed, with the
    # numbers of its released prompts (biases.csv), not only money amounts.
    assert "$39," in asked("endowment", 0, "2_odd_numbers")  # the thesis' 4 × 9.7, rounded
    assert "$222,222," in asked("endowment", 0, "3_large_numbers")
    # anchors: 10 / 65 % in the base, 12 / 76 % odd, 0 / 100 % large
    for variant, low, high in (
        ("1_persona", 10, 65),
        ("2_odd_numbers", 12, 76),
        ("3_large_numbers", 0, 100),
    ):
        assert f"above or below {low}%?" in asked("anchoring", 0, variant)
        assert f"above or below {high}%?" in asked("anchoring", 1, variant)
    # the urn: ball counts, colour ranges and the ball asked about
    assert "holds 15 numbered balls. Balls 1-5 are red, balls 6-10 are blue and balls 11-15" in (
        asked("category_size", 0, "1_persona")
    )
    odd_urn = asked("category_size", 1, "2_odd_numbers")
    assert "holds 146 numbered balls. Balls 1-19 are red, balls 29-126 are blue" in odd_urn
    assert "balls 136-146 are yellow" in odd_urn and "ball number 78 is drawn" in odd_urn
    large_urn = asked("category_size", 0, "3_large_numbers")
    assert "holds 833,332 numbered balls. Balls 1-277,778 are red" in large_urn
    assert "ball number 444,444 is drawn" in large_urn
    # the coin: 6 flips, 58 odd, 333,333 large
    assert "tossed 6 times and landed heads every time" in asked("gamblers_fallacy", 1, "1_persona")
    assert "tossed 58 times" in asked("gamblers_fallacy", 0, "2_odd_numbers")
    assert "tossed 333,333 times" in asked("gamblers_fallacy", 1, "3_large_numbers")
    # money as the thesis rounded it: the radio $340 / $242 (35 and 25 × 9.7)
    assert "radio for $340." in asked("transaction_utility", 1, "2_odd_numbers")
    assert "radio for $242." in asked("transaction_utility", 1, "2_odd_numbers")


def test_a_variant_sets_values_and_names_a_wrong_one():
    variant = "[variants.odd]\npersona = false\nscale = 2\n[variants.odd.values]\n"
    study = parse_study(MINIMAL.replace("[values.price]", variant + "[values.price]"))
    assert study.variants["odd"].values == {}
    scaled = study.tests["endowment"]
    drawn = study.sample_values(random.Random(0))
    odd = study.variants["odd"]
    assert "$20." in question(study, scaled, scaled.conditions[0], drawn, odd)  # 10 × 2
    fixed = parse_study(MINIMAL.replace("[values.price]", variant + "price = 7\n[values.price]"))
    test = fixed.tests["endowment"]
    values = fixed.sample_values(random.Random(0))
    # the variant's own number is shown as it is, not scaled by the variant's factor
    assert "$7." in question(fixed, test, test.conditions[0], values, fixed.variants["odd"])
    for bad, message in (
        ("prize = 7", "variant value 'prize' is not defined under [values]"),
        ('price = "7"', "variant value 'price' must be a number"),
    ):
        with pytest.raises(LibraryError) as err:
            parse_study(MINIMAL.replace("[values.price]", f"{variant}{bad}\n[values.price]"))
        assert any(message in str(p) for p in err.value.problems), err.value.problems


def test_options_show_every_item_at_every_position_with_the_status_quo_tracked():
    bb = get_study("biasbuster")
    test = bb.tests["status_quo"]
    status_quo = test.conditions[0]
    items = [f"item {i}" for i in range(4)]
    positions = []
    for order in permuted_orders(4):
        text, at = option_list(test, status_quo, items, order)
        lines = text.split("\n")
        assert [line[:2] for line in lines] == ["a)", "b)", "c)", "d)"]
        # the intern is named as the paper names it: "Retain Student A" (at its position)
        letter = "abcd"[at]
        assert lines[at] == f"{letter}) Retain Student {letter.upper()}: item 0"
        others = [line for i, line in enumerate(lines) if i != at]
        assert all(") Student " in line for line in others)
        positions.append(at)
    assert sorted(positions) == [0, 1, 2, 3]
    _, none = option_list(test, test.conditions[1], items, [0, 1, 2, 3])
    assert none is None
    with pytest.raises(ValueError):
        option_list(test, status_quo, items[:3], [0, 1, 2])


def test_sequence_turns_follow_the_order():
    test = get_study("biasbuster").tests["anchoring"]
    turns = sequence_turns(test, ["A", "B", "C"], [2, 0, 1])
    assert [t.split(": ")[1].split(" ")[0] for t in turns] == ["C", "A", "B"]
    assert all(t.endswith("Admit or reject?") for t in turns)


def test_answers_are_read_and_coded_per_test():
    mohr = get_study("mohr8")
    loss = mohr.tests["loss_aversion"]
    answer = read_answer(loss, "B")
    assert answer.value == 1 and code_answer(loss, answer.value) == 1.0
    assert code_answer(loss, read_answer(loss, "A").value) == 0.0
    anchoring = mohr.tests["anchoring"]
    assert read_answer(anchoring, "28").value == 28
    assert "outside the allowed range 0..100" in read_answer(anchoring, "280").error
    framing = get_study("biasbuster").tests["framing"]
    assert code_answer(framing, read_answer(framing, "Reject.").value) == 0.0
    assert read_answer(framing, "I would admit", strict=True).error


def test_minimal_study_and_show():
    study = parse_study(MINIMAL)
    assert study.temperatures == (0.7,) and study.repeats == 1 and study.mitigations == ("none",)
    assert show(9.7 * 10) == "97" and show(55555.5 * 4) == "222,222" and show(3.14159) == "3.14"
    assert show(12000) == "12,000" and show(95) == "95"


@pytest.mark.parametrize(
    "edit, where, message",
    [
        (
            ('design = "conditions"', 'design = "condition"'),
            "12:10",
            "unknown design 'condition' (did you mean 'conditions'?)",
        ),
        (
            ('answer = "number"', 'answer = "letter"\ntarget = "z"'),
            "14:10",
            "needs target = one of a, b, c, d",
        ),
        (
            ('metric = "cohens_d"', 'metric = "primacy"'),
            "14:10",
            "metric 'primacy' needs design options",
        ),
        (
            (
                'It cost ${{price}}."\n[tests.endowment.conditions.treatment]',
                'It cost ${{prize}}."\n[tests.endowment.conditions.treatment]',
            ),
            "17:45",
            "'{{prize}}' is not a value of this study; did you mean 'price'?",
        ),
        (
            ('scaled = ["price"]', 'scaled = ["cost"]'),
            "15:12",
            "scaled value 'cost' is not defined",
        ),
        (("min = 10\n", "min = 20\n"), "7:", "min (20) is greater than max (10)"),
        (
            ('name = "Mini"', 'name = "Mini"\nmitigations = ["selfhelp"]'),
            "3:",
            "mitigation 'selfhelp' needs prompts.selfhelp",
        ),
        (
            ('name = "Mini"', 'name = "Mini"\ntemperatures = [0.2, 3.0]'),
            "3:16",
            "temperature 3.0 is outside 0..2",
        ),
        (
            ('bias = "endowment_effect"', 'bias = "endowment_effect"\ncolour = 1'),
            "12:10",
            "unknown field 'colour'",
        ),
    ],
)
def test_problems_are_located(edit, where, message):
    text = MINIMAL.replace(*edit)
    assert text != MINIMAL
    found = problems(text)
    assert any(message in p for p in found), found
    hit = next(p for p in found if message in p)
    assert hit.startswith(f"s.toml:{where}"), hit


def test_invalid_toml_and_missing_condition():
    assert problems("id = ")[0].startswith("s.toml:1:")
    text = re.sub(r"\[tests.endowment.conditions.treatment\]\n.*\n", "", MINIMAL)
    assert any("compares exactly 2 conditions, found 1" in p for p in problems(text))


def test_options_design_needs_its_gap_and_items():
    text = (
        MINIMAL.replace('design = "conditions"', 'design = "options"')
        .replace('answer = "number"', 'answer = "letter"')
        .replace('metric = "cohens_d"', 'metric = "primacy"')
    )
    found = "\n".join(problems(text))
    assert "needs 'item'" in found
    assert "k = 0" in found
    assert "needs the gap {{options}}" in found


def test_builtin_files_are_named_by_id():
    files = {p.stem: p for p in STUDY_DIR.glob("*.toml")}
    assert {"biasbuster", "classics", "mohr8"} <= set(files)  # the papers' studies are there
    for stem, path in files.items():  # and any built-in added later is named by its id
        assert parse_study(path.read_text(encoding="utf-8")).id == stem, path


def test_imported_thesis_prompts_become_a_runnable_study(tmp_path):
    import shutil

    from cogbias.datasets.mohr_format import import_mohr
    from cogbias.store import Store
    from tests.dataset_helpers import MOHR_DIR

    shutil.copytree(MOHR_DIR, tmp_path / "m")
    with Store(tmp_path / "r.db") as store:
        import_mohr(store, tmp_path / "m")
        rows = store.query("select * from study_prompts where dataset = 'mohr2025'")
    study = study_from_prompts(rows, "mohr2025")
    assert list(study.tests) == ["anchoring__0_normal", "framing_effect__0_normal"]
    anchoring = study.tests["anchoring__0_normal"]
    assert anchoring.answer == "number" and [c.name for c in anchoring.conditions] == [
        "control",
        "treatment",
    ]
    values = study.sample_values(random.Random(0))
    control = question(study, anchoring, anchoring.conditions[0], values)
    treatment = question(study, anchoring, anchoring.conditions[1], values)
    # the thesis' user message (Appendix C): instruction, question, output line, ---- between
    assert control == (
        "You are forced to choose! Answer the experiment by only giving the letter of the "
        "answer options (e.g. A, B, C, ...) or a numerical value (80, 100, 1000, ...). Do not "
        "state anything else! Do not hallucinate.\n----\n"
        "A used bicycle was first listed at $ 900. How much would you pay for it? $ __"
        "\n----\nYour output should only be a NUMBER (9, 80, 100, 1000, ...)."
    )
    assert "$ 150." in treatment
    # 0_normal is the scenario without the persona: the thesis' system message alone
    assert anchoring.system.endswith("The only valid answer is A SINGLE LETTER OR NUMBER.")
    framing = study.tests["framing_effect__0_normal"]
    assert framing.answer == "yes_no" and framing.target == "yes" and framing.undirected
    assert code_answer(framing, read_answer(framing, "yes").value) == 1.0
    assert code_answer(framing, read_answer(framing, "No.").value) == 0.0


def test_biasbuster_mitigations_use_the_papers_words_and_worked_examples():
    """§4.1-4.3 and Table 6: awareness and self-help as the paper words them; contrastive and
    counterfactual as worked examples (EXAMPLE, then "Your answer was")."""
    bb = get_study("biasbuster")
    assert bb.prompts["awareness"] == "Be mindful to not be biased by cognitive bias."
    assert bb.prompts["selfhelp"] == (
        "Rewrite the following prompt such that a reviewer would not be biased by cognitive "
        "bias.\n[start of prompt]\n{{prompt}}\n[end of prompt]\n"
        "Start your answer with [start of revised prompt]"
    )
    for test in bb.tests.values():
        contrastive, counterfactual = test.examples["contrastive"], test.examples["counterfactual"]
        for text in (contrastive, counterfactual):
            assert "EXAMPLE: " in text and ("Your answer was: " in text or "decision" in text)
        # counterfactual shows an incorrect and a correct example; contrastive one of them
        assert "incorrect behavior" in counterfactual and "of correct behavior" in counterfactual
        assert ("incorrect behavior" in contrastive) != ("of correct behavior" in contrastive)
    from cogbias.studies.interventions import rewritten

    assert rewritten("[start of revised prompt]\nDecide.\n[end of revised prompt]") == "Decide."
