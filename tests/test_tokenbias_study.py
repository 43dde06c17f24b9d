"""The built-in token-bias study: items with a correctness key, perturbations, materialising."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cogbias.datasets import tokenbias_study
from cogbias.runs import paired_plan, pipeline
from cogbias.store import Store
from cogbias.studies import tokenbias
from cogbias.studies import tokenbias_items as items
from cogbias.studies.tokenbias_items import Context, PerturbationError, ReasoningItem


def _ctx(values=None, lists=None, seed=0) -> Context:
    return Context(
        values or {},
        lists or {"names": ["Ana", "Ben"], "sources": ["Reuters", "MIT"]},
        {"All ": "", "Some ": "A subset of ", "some ": "a subset of "},
        ("According to {{source}}, {{claim}}",),
        random.Random(seed),
    )


SYLLOGISM = ReasoningItem(
    "All roses are flowers.\nSome flowers fade quickly.\nTherefore, some roses fade quickly.",
    "Is this argument logically sound?",
    ("Yes", "No"),
    1,
)


def test_make_item_shuffles_options_and_the_key_follows():
    seen = set()
    for seed in range(20):
        item = items.make_item(
            "{{who}} likes {{thing}}.",
            "Which?",
            "{{who}} is a clerk.",
            "{{who}} is a clerk and sings.",
            {"who": "Ana", "thing": "music"},
            random.Random(seed),
        )
        assert item.options[item.correct] == "Ana is a clerk."
        assert item.options[1 - item.correct] == "Ana is a clerk and sings."
        seen.add(item.correct)
    assert seen == {0, 1}


def test_quantifier_rephrasing_and_source_framing_chain():
    rephrased, notes = items.apply(SYLLOGISM, [{"op": "quantifiers"}], _ctx())
    assert rephrased.situation == (
        "Roses are flowers.\nA subset of flowers fade quickly.\n"
        "Therefore, a subset of roses fade quickly."
    )
    assert rephrased.options == SYLLOGISM.options and rephrased.correct == 1
    framed, _ = items.apply(rephrased, [{"op": "frame_source", "lines": [0, 1]}], _ctx())
    lines = framed.situation.split("\n")
    assert {lines[0], lines[1]} <= {
        f"According to {s}, {c}"
        for s in ("Reuters", "MIT")
        for c in ("roses are flowers.", "a subset of flowers fade quickly.")
    }
    assert lines[0].split(",")[0] != lines[1].split(",")[0]  # distinct sources
    assert lines[2] == "Therefore, a subset of roses fade quickly."
    assert notes[0].startswith("quantifiers: 'All ' -> ''")


def test_replace_token_lists_swap_names_and_hints():
    item = ReasoningItem("Lin met Linda.", "Who?", ("Linda is a clerk.", "Linda sings."), 0)
    swapped, notes = items.apply(
        item, [{"op": "swap_name", "old": "Linda", "list": "names"}], _ctx()
    )
    new = notes[0].split("-> ")[1].strip("'")
    assert new in ("Ana", "Ben")
    assert swapped.situation == f"Lin met {new}."  # whole words only: "Lin" stays
    assert swapped.options == (f"{new} is a clerk.", f"{new} sings.")
    replaced, _ = items.apply(
        item,
        [{"op": "replace", "old": ["clerk", "sings"], "new": ["{{job}}", "dances"]}],
        _ctx({"job": "pilot"}),
    )
    assert replaced.options == ("Linda is a pilot.", "Linda dances.")
    hinted, _ = items.apply(item, [{"op": "hint", "text": "Careful."}], _ctx())
    assert hinted.prompt == "Careful. Who?"
    after, _ = items.apply(item, [{"op": "hint", "text": "Careful.", "position": "after"}], _ctx())
    assert after.prompt == "Who? Careful."


def test_a_perturbation_that_changes_nothing_is_an_error():
    with pytest.raises(PerturbationError, match=r"perturbation 1 \(replace\) changed nothing"):
        items.apply(SYLLOGISM, [{"op": "replace", "old": "tulips", "new": "daisies"}], _ctx())
    # nor is a change the model does not read (issue 28: a pair is what the model is shown)
    trailing = {"op": "replace", "old": SYLLOGISM.prompt, "new": SYLLOGISM.prompt + "\n"}
    with pytest.raises(PerturbationError, match=r"perturbation 1 \(replace\) changed nothing"):
        items.apply(SYLLOGISM, [{**trailing, "fields": ["prompt"]}], _ctx())


def test_every_hypothesis_builds_pairs_with_a_correctness_key():
    study = tokenbias.load_study()
    assert set(study.hypotheses) == {
        "tb_h1_misleading_option",
        "tb_h2_exemplar_name",
        "tb_h3_celebrity_name",
        "tb_h4_quantifiers",
        "tb_h5_authority",
        "tb_h6_hint",
    }
    built = list(tokenbias.build_instances(study))
    assert len(built) == study.items * len(study.hypotheses)
    assert len({i.id for i in built}) == len(built)
    for instance in built:
        c, t = instance.values["correct"]
        assert (instance.metric.y1, instance.metric.y2, instance.metric.k) == (c, t, 1.0)
        assert instance.n_options == 2 and len(instance.treatment.options) == 2
        assert instance.control != instance.treatment  # the perturbation changed something
        right, wrong = instance.control.options[c], instance.control.options[1 - c]
        if instance.variant == "syllogism":
            assert (right, wrong) == ("No", "Yes")
        else:  # conjunction: the correct single event is the start of the conjunction
            assert wrong.startswith(right.rstrip(".")) and len(wrong) > len(right)
    # the engine's own score of a pair is (P' correct) - (P correct)
    pair = built[0]
    c, t = pair.values["correct"]
    assert pipeline.score_instance(pair, c, t) == 0
    assert pipeline.score_instance(pair, 1 - c, t) == 1
    assert pipeline.score_instance(pair, c, 1 - t) == -1
    assert pipeline.score_instance(pair, 1 - c, 1 - t) == 0


def test_pairs_are_seeded_and_chained():
    study = tokenbias.load_study()
    again = tokenbias.load_study()
    h4, h5 = study.hypotheses["tb_h4_quantifiers"], study.hypotheses["tb_h5_authority"]
    for index in range(4):
        first = tokenbias.build_pair(study, h5, index)
        assert first.to_row() == tokenbias.build_pair(again, h5, index).to_row()
        # H5 starts where H4 ends: its P is H4's P'
        assert first.control == tokenbias.build_pair(study, h4, index).treatment
        framed = first.treatment.situation.split("\n")[:2]
        assert all(any(src in line for src in study.lists["sources"]) for line in framed)
    h3 = study.hypotheses["tb_h3_celebrity_name"]
    pair = tokenbias.build_pair(study, h3, 0)
    celebrity = pair.values["sampled"]["celebrity"]
    assert celebrity in pair.control.situation and celebrity not in pair.treatment.situation


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('op = "hint"', 'op = "shout"'), r"hypotheses\[5\].perturb\[0\].op: use one of replace"),
        (
            ('list = "names" }]', 'list = "nobody" }]'),
            r"hypotheses\[1\].perturb\[0\].list: no entity list 'nobody'",
        ),
        (
            ('alternative = "two_sided"', 'alternative = "sideways"'),
            r"hypotheses\[4\].alternative: use one of",
        ),
        (
            ('base = "tb_h4_quantifiers"', 'base = "tb_h9"'),
            r"hypotheses\[4\].base: no earlier hypothesis 'tb_h9'",
        ),
        (
            ('distractor = "hobbies"', 'distractor = "pastimes"'),
            r"families\[0\].sample.distractor: no entity list 'pastimes'",
        ),
        (("items = 12", 'items = "many"'), r"items: a whole number, at least 1"),
        (
            ('old = "Linda"', 'old = "Lindy"'),
            r"hypothesis tb_h2_exemplar_name, item 0: .*changed nothing",
        ),
    ],
)
def test_study_file_problems_name_the_file_and_the_entry(tmp_path: Path, edit, message):
    text = tokenbias.STUDY_FILE.read_text(encoding="utf-8")
    assert edit[0] in text
    bad = tmp_path / "study.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    with pytest.raises(tokenbias.StudyError, match=f"^study.toml: {message}"):
        list(tokenbias.build_instances(tokenbias.load_study(bad)))


def test_materialise_is_one_idempotent_dataset_the_runner_can_plan(tmp_path: Path):
    with Store(tmp_path / "r.db") as store:
        summary = tokenbias_study.materialise(store)
        assert summary.instances == 72 and not summary.unchanged
        assert tokenbias_study.materialise(store).unchanged
        meta = store.datasets()[0]["meta"]
        assert meta["alternatives"]["tb_h4_quantifiers"] == "original_better"
        plan = paired_plan.plan(
            paired_plan.RunSpec(models=["random"], dataset="tokenbias", per_bias=2), store
        )
        assert len(plan.instance_ids) == 12


def test_h3_name_swaps_keep_the_celebritys_gender():
    """P' never reads "Hana ... His team": a woman's name replaces a woman, a man's a man."""
    study = tokenbias.load_study()
    h3 = study.hypotheses["tb_h3_celebrity_name"]
    genders = {e["celebrity"]: e["gender"] for e in study.lists["celebrity_events"]}
    assert set(genders.values()) == {"woman", "man"}
    seen = set()
    for index in range(40):
        pair = tokenbias.build_pair(study, h3, index)
        celebrity = pair.values["sampled"]["celebrity"]
        gender = genders[celebrity]
        new = next(n for n in study.lists[f"names_{gender}"] if n in pair.treatment.situation)
        other = "man" if gender == "woman" else "woman"
        assert not any(n in pair.treatment.situation for n in study.lists[f"names_{other}"])
        assert celebrity not in pair.treatment.situation and new not in pair.control.situation
        seen.add(gender)
    assert seen == {"woman", "man"}
