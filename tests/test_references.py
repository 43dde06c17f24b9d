"""Human reference results: each number held to its file, each classic question held to its
original's conditions, the files validated like study files, and the statistics that set a
model beside the humans checked against known values."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from cogbias.library.testcases import LibraryError
from cogbias.studies import reference_stats as rs
from cogbias.studies.definitions import Variant
from cogbias.studies.questions import question
from cogbias.studies.references import (
    load_references,
    load_references_report,
    parse_reference,
    references_for,
)
from cogbias.studies.study_catalog import get_study
from cogbias.studies.study_files import parse_study

# The published figures (docs/references.md says where each was checked): reference id →
# condition → (n, option, share) or (None, "median", median).
PUBLISHED = {
    "asian_disease": {"lives_saved": (152, "a", 0.72), "lives_lost": (155, "a", 0.22)},
    "theatre_ticket": {"lost_ticket": (200, "a", 0.46), "lost_bill": (183, "a", 0.88)},
    "calculator": {"cheap_item": (93, "a", 0.68), "dear_item": (88, "a", 0.29)},
    "bonus": {"gain": (126, "a", 0.72), "loss": (128, "b", 0.64)},
    "ski_trip": {"ski_trip": (61, "a", 33 / 61)},
    "mug": {
        "sellers": (None, "median", 7.12),
        "buyers": (None, "median", 2.87),
        "choosers": (None, "median", 3.12),
    },
    "un_anchor": {"low_anchor": (None, "median", 25), "high_anchor": (None, "median", 45)},
    "linda": {"linda": (142, "b", 0.85)},
}
CITED = {  # year and page or table each citation must name
    "asian_disease": ("1981", "Science, 211", "p. 453"),
    "theatre_ticket": ("1981", "Science, 211", "p. 457"),
    "calculator": ("1981", "Science, 211", "p. 457"),
    "bonus": ("1986", "Journal of Business, 59", "S258"),
    "ski_trip": ("1985", "35(1)", "Experiment 1"),
    "mug": ("1990", "98(6)", "Experiment 7"),
    "un_anchor": ("1974", "185", "p. 1128"),
    "linda": ("1983", "90(4)", "p. 299"),
}
# The original's conditions each classic question must state: study condition → facts.
ORIGINAL = {
    ("asian_disease", "lives_saved"): ["600 people", "200 people will be saved", "1/3", "2/3"],
    ("asian_disease", "lives_lost"): ["600 people", "400 people will die", "1/3", "2/3"],
    ("theatre_ticket", "lost_ticket"): ["paid $10", "ticket", "$10 for another ticket"],
    ("theatre_ticket", "lost_bill"): ["$10 at the door", "lost a $10 bill"],
    ("calculator", "cheap_item"): ["jacket for $125", "calculator for $15", "$10", "20-minute"],
    ("calculator", "dear_item"): ["jacket for $15", "calculator for $125", "$120", "20-minute"],
    ("bonus", "gain"): ["$300 richer", "sure gain of $100", "50% chance to gain $200"],
    ("bonus", "loss"): ["$500 richer", "sure loss of $100", "50% chance to lose $200"],
    ("ski_trip", "ski_trip"): [
        "$100",
        "Michigan",
        "$50",
        "Wisconsin",
        "enjoy more",
        "same weekend",
    ],
    ("mug", "sellers"): ["given a coffee mug", "$0.25 to $9.25", "lowest", "sell"],
    ("mug", "buyers"): ["you have none", "$0.25 to $9.25", "highest", "buy"],
    ("un_anchor", "low_anchor"): ["wheel of fortune", "stops at 10", "Africa", "United Nations"],
    ("un_anchor", "high_anchor"): ["wheel of fortune", "stops at 65", "Africa", "United Nations"],
    ("linda", "linda"): ["31", "philosophy", "bank teller", "feminist movement"],
}


def test_each_published_number_is_held_to_its_file() -> None:
    references = load_references()
    assert set(references) == set(PUBLISHED)
    for ref_id, conditions in PUBLISHED.items():
        reference = references[ref_id]
        assert set(reference.conditions) == set(conditions), ref_id
        for name, (n, option, value) in conditions.items():
            human = reference.conditions[name]
            assert human.n == n, (ref_id, name)
            got = human.median if option == "median" else human.shares[option]
            assert got == pytest.approx(value), (ref_id, name)
            if option != "median":
                assert sum(human.shares.values()) == pytest.approx(1, abs=0.011)
        for part in CITED[ref_id]:
            assert part in reference.cited, (ref_id, part)


def test_each_classic_question_states_its_originals_conditions() -> None:
    study = get_study("classics")
    references = load_references()
    asked = set()
    for test in study.tests.values():
        matched = references_for(references, "classics", test.id)
        assert matched, f"classics test {test.id} has no human reference"
        for condition in test.conditions:
            text = question(study, test, condition, {}, Variant("default", persona=False))
            for fact in ORIGINAL[(test.id, condition.name)]:
                assert fact in text, (test.id, condition.name, fact)
            asked.add((test.id, condition.name))
        for reference, use in matched:  # the reference's conditions are this test's
            named = {use.study_condition(c) for c in reference.conditions} - {None}
            assert named & {c.name for c in test.conditions}, reference.id
    assert asked == set(ORIGINAL)


def test_every_use_names_a_test_condition_and_variant_that_exist() -> None:
    for reference in load_references().values():
        for use in reference.uses:
            study = get_study(use.study)
            test = study.tests[use.test]
            names = {c.name for c in test.conditions}
            for condition in reference.conditions:
                mapped = use.study_condition(condition)
                if use.conditions:
                    assert mapped is None or mapped in names, (reference.id, condition)
            assert set(use.variants) <= set(study.variants), reference.id
        for difference in reference.differs:
            assert difference.test in get_study(difference.study).tests


def test_mohr8_references_only_its_originals_and_notes_the_rest() -> None:
    references = load_references()
    with_reference = {t for t in get_study("mohr8").tests if references_for(references, "mohr8", t)}
    assert with_reference == {"anchoring", "framing", "endowment", "loss_aversion", "sunk_cost"}
    tv = [d for r in references.values() for d in r.differs if d.test == "transaction_utility"]
    assert tv and "$650 TV" in tv[0].note
    for reference, use in (
        m for t in with_reference for m in references_for(references, "mohr8", t)
    ):
        assert use.variants == ("0_normal", "1_persona"), reference.id  # not the odd/large ones


GOOD = """id = "mine"
experiment = "Our class, 2025"
citation = "Class of 2025."
where = "lesson 3"
measure = "share"
[conditions.one]
label = "the only version"
n = 20
shares = { a = 0.6, b = 0.4 }
[[uses]]
study = "classics"
test = "linda"
conditions = { one = "linda" }
"""


def write_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> Path:
    folder = tmp_path / "references"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.setenv("COGBIAS_HOME", str(tmp_path))
    return folder


def test_a_users_reference_is_loaded_beside_the_built_in_ones(tmp_path, monkeypatch) -> None:
    write_home(tmp_path, monkeypatch, {"mine.toml": GOOD})
    references, problems = load_references_report()
    assert problems == []
    assert references["mine"].builtin is False and references["asian_disease"].builtin
    assert [r.id for r, _ in references_for(references, "classics", "linda")] == ["linda", "mine"]


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (("n = 20", "n = 0"), (8, 1), "n must be between 1 and 10,000,000"),
        (("0.4 }", "0.1 }"), (9, 1), "the shares add up to 0.7, not 1"),
        (("shares = { a = 0.6, b = 0.4 }", "counts = { a = 3, b = 4 }"), (9, 1),
         "the counts add up to 7, not n = 20"),
        (('measure = "share"', 'measure = "mean"'), (5, 1), "measure must be one of share, median"),
        (("label =", "lable ="), (7, 1), "unknown field 'lable' in conditions.one; did you mean 'label'?"),
        (("one = \"linda\"", "two = \"linda\""), (10, 1), "'two' is not a condition of this file"),
        (("a = 0.6", "a = 1.6"), (9, 1), "shares.a should be a share between 0 and 1"),
    ],
)  # fmt: skip
def test_a_broken_reference_says_which_file_and_field(
    tmp_path, monkeypatch, change, where, message
) -> None:
    folder = write_home(tmp_path, monkeypatch, {"mine.toml": GOOD.replace(*change)})
    references, problems = load_references_report()
    assert "mine" not in references and "asian_disease" in references  # the others still load
    assert problems and {p.file for p in problems} == {str(folder / "mine.toml")}
    problem = next(p for p in problems if message in p.message)
    assert problem.file == str(folder / "mine.toml")
    assert message in problem.message
    assert (problem.line, problem.col) >= (1, 1)
    if change[0] != 'one = "linda"':
        assert problem.line == where[0], str(problem)


def test_a_reference_cannot_replace_a_built_in_one_or_be_huge(tmp_path, monkeypatch) -> None:
    shadow = GOOD.replace('id = "mine"', 'id = "linda"')
    huge = GOOD.replace('where = "lesson 3"', f'where = "{"x" * 250_000}"')
    write_home(tmp_path, monkeypatch, {"linda.toml": shadow, "huge.toml": huge})
    references, problems = load_references_report()
    messages = sorted(str(p) for p in problems)
    assert references["linda"].builtin  # the built-in stays
    assert any(
        "a reference file may be at most 200,000" in m and "huge.toml" in m for m in messages
    )
    assert any("a built-in reference has the id 'linda'" in m for m in messages)


def test_a_long_text_and_a_wrong_file_name_are_refused() -> None:
    with pytest.raises(LibraryError, match="at most 2,000"):
        parse_reference(GOOD.replace("Class of 2025.", "x" * 2001))
    with pytest.raises(LibraryError, match="needs exactly one of shares or counts"):
        parse_reference(GOOD.replace("shares = { a = 0.6, b = 0.4 }", "median = 3"))


# --------------------------------------------------------------------------- statistics


def test_wilson_newcombe_and_h_match_published_values() -> None:
    low, high = rs.wilson_interval(0.5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert rs.wilson_interval(0.0, 20)[0] == 0.0 and rs.wilson_interval(0.0, 20)[1] > 0.1
    # Newcombe (1998), Table II, example (a): 56/70 vs 48/80 → 0.0524 to 0.3339
    low, high = rs.newcombe_interval(56 / 70, 70, 48 / 80, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    assert rs.cohens_h(0.72, 0.22) == pytest.approx(1.04998, abs=1e-4)
    assert rs.h_interval(0.0, 100, 100) == pytest.approx((-0.2772, 0.2772), abs=1e-4)
    assert rs.median([3, 1, 2, 10]) == 2.5
    low, high = rs.median_interval(list(range(1, 101)))
    assert low < 50.5 < high and (low, high) == (41.0, 61.0)


def test_compare_sets_the_model_beside_the_humans_in_the_originals_unit() -> None:
    references = load_references()
    reference, use = references_for(references, "classics", "asian_disease")[0]
    answers = {"lives_saved": [0] * 15 + [1] * 5, "lives_lost": [0] * 5 + [1] * 15}
    rows = rs.compare(reference, use, answers, "ab", ["lives_saved", "lives_lost"])
    saved, lost, effect = rows
    assert (saved["humans"], saved["humans_n"], saved["model_value"], saved["model_n"]) == (
        0.72, 152, 0.75, 20,
    )  # fmt: skip
    assert saved["difference"] == pytest.approx(0.03)
    assert saved["h"] == pytest.approx(rs.cohens_h(0.75, 0.72))
    assert lost["model_value"] == 0.25
    assert effect["kind"] == "effect"
    assert effect["humans"] == pytest.approx(0.50) and effect["model_value"] == pytest.approx(0.5)
    assert effect["humans_h"] == pytest.approx(rs.cohens_h(0.72, 0.22))
    assert effect["difference_low"] < 0 < effect["difference_high"]
    # one condition: shares, no effect row
    linda, use = references_for(references, "classics", "linda")[0]
    rows = rs.compare(linda, use, {"linda": [1, 1, 0, 1]}, "ab", ["linda"])
    assert [r["kind"] for r in rows] == ["condition"]
    assert rows[0]["option"].endswith("feminist movement") and rows[0]["model_value"] == 0.75
    # medians: per condition and their difference, the study's conditions only
    mug, use = references_for(references, "classics", "mug")[0]
    rows = rs.compare(
        mug, use, {"sellers": [6, 7, 8], "buyers": [2, 3, 4]}, "", ["sellers", "buyers"]
    )
    assert [(r["condition"], r["humans"], r["model_value"]) for r in rows] == [
        ("sellers", 7.12, 7.0), ("buyers", 2.87, 3.0), ("sellers − buyers", pytest.approx(4.25), 4.0),
    ]  # fmt: skip
    assert not any(math.isnan(v) for v in (rows[2]["model_low"], rows[2]["model_high"]))


def test_the_share_metric_reads_exactly_one_condition_with_a_target() -> None:
    base = """id = "one"
name = "One"
description = "d"
[tests.t]
bias = "b"
design = "conditions"
answer = "letter"
letters = "ab"
metric = "share"
[tests.t.conditions.only]
prompt = "Q"
"""
    with pytest.raises(LibraryError, match="a share on letter answers needs target"):
        parse_study(base)
    two = base.replace('metric = "share"', 'metric = "share"\ntarget = "a"') + (
        '[tests.t.conditions.other]\nprompt = "R"\n'
    )
    with pytest.raises(LibraryError, match="metric 'share' reads exactly 1 condition, found 2"):
        parse_study(two)
    from cogbias.studies.scores import score_conditions

    test = parse_study(base.replace('metric = "share"', 'metric = "share"\ntarget = "b"')).tests[
        "t"
    ]
    figures = score_conditions(test, {"only": [1, 1, 1, 0]})
    assert (figures["share"], figures["expected"], figures["excess"], figures["n"]) == (
        0.75,
        0.5,
        0.25,
        4,
    )


# --------------------------------------------------------------------------- the Studies page


def test_the_studies_page_shows_humans_beside_a_run_and_a_users_text_as_text(
    tmp_path, monkeypatch, downloaded
) -> None:
    from cogbias.runs.study_plan import StudySpec
    from tests.study_helpers import HOSTILE, study_run
    from tests.test_app_pages import assert_clean, open_page, texts

    db = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DB", str(db))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    hostile = GOOD.replace("Class of 2025.", f"Class {HOSTILE}").replace(
        "Our class, 2025", f"Ours {HOSTILE}"
    )
    folder = write_home(tmp_path, monkeypatch, {"mine.toml": hostile, "bad.toml": "id = [\n"})
    study_run(db, StudySpec("classics", ["random"], tests=["linda", "mug"], repeats=3))
    at = open_page("studies")
    assert_clean(at)
    assert "Beside the humans" in [s.value for s in at.subheader]
    assert any("problem(s) in reference files" in w.value for w in at.warning)
    assert str(folder / "bad.toml") in at.code[-1].value  # named, as text
    shown = at.dataframe[-1].value
    assert f"Ours {HOSTILE}" in set(shown["Experiment"])  # a cell of the grid: text
    assert "85% [78%, 90%], n = 142" in set(shown["Humans"])
    assert "$7.12" in set(shown["Humans"]) and "n = 3" in " ".join(shown["Model"])
    assert f"Ours {HOSTILE}: Class {HOSTILE} lesson 3." in [t.value for t in at.text]
    assert "<script>" not in texts(at)  # never in Markdown
    # every cell beside the humans downloads from its own Download menu, a button per format
    (menu,) = [p for p in at.get("popover") if "beside the humans" in p.proto.popover.label]
    buttons = {b.label: b for b in menu.get("download_button")}
    assert list(buttons) == ["CSV", "JSONL", "Parquet"]
    rows = list(csv.DictReader(io.StringIO(downloaded(buttons["CSV"]).decode("utf-8"))))
    assert f"Ours {HOSTILE}" in {r["experiment"] for r in rows}  # the user's text, as written
    assert "7.12" in {r["humans"] for r in rows}


def test_the_studies_form_lists_the_human_results_before_a_run(tmp_path, monkeypatch) -> None:
    from tests.test_app_pages import assert_clean, open_page

    monkeypatch.setenv("COGBIAS_DB", str(tmp_path / "app.db"))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    monkeypatch.setenv("COGBIAS_HOME", str(tmp_path))
    at = open_page("studies")
    assert not any("original experiments" in e.label for e in at.expander)  # biasbuster: none
    at.selectbox(key="study_name").set_value("classics").run()
    assert_clean(at)
    assert any(e.label.startswith("What people answered in the original") for e in at.expander)
    table = at.dataframe[0].value
    assert "72%, n = 152" in set(table["Humans"]) and "$7.12" in set(table["Humans"])
    assert any("p. 453, Problems 1 and 2." in source for source in table["Source"])
    at.selectbox(key="study_name").set_value("mohr8").run()
    tests = set(at.dataframe[0].value["Test"])
    assert tests == {"anchoring", "endowment", "framing", "loss_aversion", "sunk_cost"}
