"""The built-in test cases are the paper's tests: each is held to the facts recorded from the
code that produced the published dataset (data/designs/<id>.toml, with its source), and its
metric to scores worked out by hand with the authors' formula at the authors' option positions.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from cogbias.core.metrics import score_pair
from cogbias.library import designs
from cogbias.library import testcases as library
from cogbias.library.parsing import load_test_case

ROOT = Path(__file__).resolve().parent.parent
CASES = library.load_library(include_user=False)
DESIGNS = designs.load_designs()


def test_every_built_in_test_case_has_its_recorded_design_and_source() -> None:
    assert len(CASES) == 30
    assert set(DESIGNS) == set(CASES)
    for design in DESIGNS.values():
        assert design.source.startswith("simonmalberg/cognitive-biases-in-llms@a3d2465: tests/")


@pytest.mark.parametrize("bias", sorted(CASES))
def test_options_have_the_authors_count_order_and_poles(bias: str) -> None:
    case, design = CASES[bias], DESIGNS[bias]
    for half, template in case.templates().items():
        scale = design.scale(half)
        options = [option.lower() for option in template.options]
        assert len(options) == scale["count"], f"{bias} {half}: {len(options)} options"
        first, last = options[0], options[-1]
        for pole, other, words, others in (
            (first, last, scale["first_words"], scale["last_words"]),
            (last, first, scale["last_words"], scale["first_words"]),
        ):
            for word in words:
                assert _has(pole, word), f"{bias} {half}: {pole!r} lacks {word!r}"
                assert word in others or not _has(other, word), f"{bias} {half}: {other!r}"


# The 11-point percentage scale σ_2, every point in order: Malberg et al. (2024), §4.5, and
# Appendix B's anchoring test ("Option 1: 0% Option 2: 10% ... Option 11: 100%").
PAPER_PERCENT_SCALE = ["0%", "10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "100%"]
_PERCENT = re.compile(r"[+-]?\d+%")


def _percent_halves() -> list[tuple[str, str]]:
    """(bias, half) of every half the authors ask on eleven percentage points."""
    return [
        (bias, half)
        for bias, design in sorted(DESIGNS.items())
        for half in ("control", "treatment")
        if design.scale(half)["count"] == 11
        and all(_PERCENT.fullmatch(design.scale(half)[pole]) for pole in ("first", "last"))
    ]


def _evenly_spaced(first: str, last: str) -> list[str]:
    """The eleven points from `first` to `last` in equal steps, written as the authors write
    a signed scale (-50% ... 0% ... +50%)."""
    low, high = int(first.rstrip("%")), int(last.rstrip("%"))
    points = [low + (high - low) * i // 10 for i in range(11)]
    return [f"{p:+d}%" if low < 0 and p else f"{p}%" for p in points]


def test_the_percentage_scale_cases_include_the_papers_zero_to_hundred_ones() -> None:
    halves = _percent_halves()
    assert ("anchoring", "treatment") in halves and len({b for b, _ in halves}) >= 8
    assert _evenly_spaced("0%", "100%") == PAPER_PERCENT_SCALE


@pytest.mark.parametrize(("bias", "half"), _percent_halves())
def test_a_percentage_scale_has_every_point_in_the_authors_order(bias: str, half: str) -> None:
    """The count and the poles alone would let two middle points trade places."""
    scale = DESIGNS[bias].scale(half)
    options = list(CASES[bias].templates()[half].options)
    assert options == _evenly_spaced(scale["first"], scale["last"]), f"{bias} {half}"


def _has(text: str, word: str) -> bool:
    """`word` stands in `text` as a word of its own ("0%" is not in "100%")."""
    return re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text) is not None


@pytest.mark.parametrize("bias", sorted(CASES))
def test_values_are_drawn_from_the_authors_ranges(bias: str) -> None:
    case, design = CASES[bias], DESIGNS[bias]
    for name, fact in design.values.items():
        if name == "variant":  # the authors' one random design choice per instance
            assert fact["type"] == "choice", bias
            assert sorted(case.variants) == sorted(fact["options"]), bias
            continue
        spec = case.values.get(name)
        assert spec is not None, f"{bias}: no value generator '{name}' ({fact['authors']})"
        if spec.type == "derived":  # a range that depends on earlier draws: all it can take
            rng = random.Random(5)
            drawn = {case.sample_values(rng)[name] for _ in range(5000)}
            assert drawn == set(range(fact["min"], fact["max"] + 1, fact.get("step", 1))), bias
            continue
        assert spec.type == fact["type"], (bias, name)
        if fact["type"] == "int":
            got = (spec.params["min"], spec.params["max"], spec.params.get("step", 1))
            assert got == (fact["min"], fact["max"], fact.get("step", 1)), (bias, name)
        elif fact["type"] == "float":
            got_range = (spec.params["min"], spec.params["max"])
            assert got_range == (fact["min"], fact["max"]), (bias, name)
        else:
            assert sorted(map(str, spec.params["options"])) == sorted(map(str, fact["options"]))


@pytest.mark.parametrize("bias", sorted(CASES))
def test_scores_match_the_authors_formula_worked_by_hand(bias: str) -> None:
    """Answers at the authors' option positions (ours are in their order) score as the
    authors' metric scores them; the expected numbers are hand arithmetic, not our output."""
    case, design = CASES[bias], DESIGNS[bias]
    assert len(design.worked) >= 2 and any(w["score"] != 0 for w in design.worked), bias
    for worked in design.worked:
        values = case.sample_values(random.Random(0), fixed=worked["values"])
        params = case.metric_params(values)
        got = score_pair(worked["control"], worked["treatment"], params, case.n_options)
        assert got == pytest.approx(worked["score"], abs=1e-5), (bias, worked)


def test_the_design_table_in_the_docs_is_generated_from_the_facts() -> None:
    expected = designs.design_table(CASES, DESIGNS) + "\n"
    assert (ROOT / "docs" / "designs.md").read_text(encoding="utf-8") == expected, (
        "docs/designs.md is stale: cogbias library designs -o docs/designs.md --force"
    )


def test_each_description_says_what_a_positive_score_means() -> None:
    for case in CASES.values():
        assert "positive" in case.description.lower(), case.id


def test_each_recorded_wording_difference_says_what_differs_and_why() -> None:
    """docs/designs.md says "None: the design is the authors'." only where it is true: the
    wording differences named in issue 43 are changed back to the authors' meaning or listed."""
    listed = {bias for bias, design in DESIGNS.items() if design.wording}
    assert {"confirmation_bias", "in_group_bias", "negativity_bias"} <= listed
    for bias in listed:
        for difference in DESIGNS[bias].wording:
            assert set(difference) == {"what", "why"}, bias
            assert all(len(text.split()) >= 8 for text in difference.values()), bias
    docs = (ROOT / "docs" / "designs.md").read_text(encoding="utf-8")
    for bias in listed:
        section = docs.split(f"### {CASES[bias].name}\n", 1)[1].split("\n### ", 1)[0]
        assert "None: the design is the authors'." not in section, bias
        assert section.count("*Wording:*") == len(DESIGNS[bias].wording), bias


def test_a_built_in_shows_its_wording_differences_and_a_users_copy_does_not(
    tmp_path: Path,
) -> None:
    """Learn and the report's methods list `designs.differences`: a built-in's departures,
    then its recorded wording differences; a user's file of the same id is its own wording."""
    case = CASES["status_quo_bias"]
    built_in = designs.differences(case)
    wording = [f"Wording: {w['what'].strip()}" for w in DESIGNS["framing_effect"].wording]
    assert [what for what, _ in designs.differences(CASES["framing_effect"])] == wording
    assert built_in == [(d.what.strip(), d.why.strip()) for d in case.departures] and built_in
    copy = tmp_path / "framing_effect.toml"
    copy.write_text(CASES["framing_effect"].path.read_text(encoding="utf-8"), encoding="utf-8")
    assert designs.differences(load_test_case(copy)) == []


def test_the_named_wordings_carry_the_authors_meaning() -> None:
    """Issue 43: the scales and messages that had drifted from the authors' design."""
    reactance = CASES["reactance"]
    for half in ("control", "treatment"):  # the message itself is quoted, not described
        assert reactance.templates()[half].situation.count('"') == 2, half
    assert "You must give it up completely" in reactance.treatment.situation
    assert "could be worth a try" in reactance.control.situation
    bandwagon = CASES["bandwagon_effect"].control.options
    assert [o.split(" opinion")[0] for o in bandwagon[:3]] == [
        "Very likely",
        "Likely",
        "Somewhat likely",
    ]
    assert "equally likely" in bandwagon[3]
    conservatism = CASES["conservatism"]
    for half, template in conservatism.templates().items():
        evidence = [g for g in template.llm_gaps() if "piece of evidence" in g.instruction]
        assert len(evidence) == 6, half  # three for each alternative, each its own gap
