"""What a model receives: the paper's question, options once, labels as shown, no empty headers.

Five released items (excerpts in tests/fixtures/tokenbias-released-excerpt), one per kind of
family, are run on a scripted OpenAI-compatible server, as released (the default) and with the
options reversed in a seeded half of the pairs (`--option-order half_reversed`); the test reads
the decision prompts the server received. The Malberg test cases (the library
and the published format) are checked for empty section headers too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, default_responder

from cogbias.core import metrics
from cogbias.core.records import Instance, decode_filled
from cogbias.core.templates import render_decision_text
from cogbias.datasets import import_hub, import_malberg, import_peek
from cogbias.library import testcases as library
from cogbias.runs import executor, paired_plan, pipeline
from cogbias.store import Store
from tests.dataset_helpers import FIXTURES, FORMAT_DIR, HUB_CSV

EXCERPT = FIXTURES / "tokenbias-released-excerpt"

JORDAN = (
    "Jordan noticed that his pants were too tight. He had gained a lot of weight over the last "
    "few years. Jordan decided to buy a new pair of bigger pants. They fit him perfectly. Jordan "
    "was happy that his pants were no longer too tight.\nWhich is more likely?\n"
)
SPINNER = (
    "Consider a regular eight-sided spinner with five emerald (E) sectors and three lavender (L) "
    "sectors. The spinner will be spun 25 times and the sequence of emeralds (E) and lavenders "
    "(L) will be recorded. You are asked to select one sequence, from a set of three, and you "
    "will win $30 if the sequence you chose appears on successive spins of the spinner. Which "
    "sequence do you prefer to bet?\n"
)
# (hypothesis, question_idx) -> (reversed when half are?, the exact text of P as released)
EXPECTED = {
    ("H1", 0): (  # a conjunction with a 'to' ending: reversed when half are
        True,
        JORDAN + "(a) Jordan would continue wearing the new pair of pants.\n"
        "(b) Jordan would continue wearing the new pair of pants to work.",
    ),
    ("H3", 0): (  # a celebrity item
        False,
        "Suppose The Rolling Stones are going to release a new album next year. Which is more "
        "likely:\n(a) The album won't chart in any country.\n(b) The album won't chart in any "
        "country but their world tour sells out all the major venues.",
    ),
    ("H4", 1): (  # a Yes/No syllogism: the paper writes no options, so none are shown
        False,
        "Is this logically sound?\nAll pigs are animals.\nSome animals are domesticated.\n"
        "Therefore some pigs are domesticated.",
    ),
    ("math_random", 0): (  # the twenty-five horses: a number is the answer
        False,
        "You want to find the fastest 3 horses in a group of 25 horses. You can only race 5 "
        "horses at a time. You don't have a stopwatch, so you can only know the ranking of each "
        "horse within each race. How many races do you need?",
    ),
    ("linda_sequences", 0): (  # three options (incorrect_answer is a list)
        False,
        SPINNER + "(a) EELELL.\n(b) EEELL.\n(c) EEELEL.",
    ),
}


def _asked(
    tmp_path: Path, option_order: str | None = None
) -> tuple[list[str], dict[tuple[str, int], Instance]]:
    seen: list[str] = []

    def responder(request):
        messages = request["messages"]
        if len(messages) == 1 and "Which option does the answer choose" not in str(messages):
            seen.append(messages[0]["content"])
        return default_responder(request)

    with FakeLLMServer(responder) as server, Store(tmp_path / "t.db") as store:
        summary = import_peek(store, [EXCERPT], name="excerpt")
        assert summary.pairs == {
            "H1": 2,
            "H3": 2,
            "H4": 2,
            "linda_sequences": 2,
            "math_random": 2,
        }
        spec = paired_plan.RunSpec(
            models=["openai/fake"],
            dataset="excerpt",
            api_base=server.base_url,
            option_order=option_order,
        )
        outcome = executor.execute(paired_plan.plan(spec, store), store, concurrency=2)
        assert outcome.status == "done"
        rows = store.query("select * from instances where dataset = 'excerpt'")
        instances = {(r["test_case"], r["instance_index"]): Instance.from_row(r) for r in rows}
    return seen, instances


def test_five_released_items_reach_the_model_as_the_paper_wrote_them(tmp_path: Path):
    seen, instances = _asked(tmp_path)  # no option order named: a token-bias dataset's own
    shown = set()
    for instance in instances.values():
        shown |= {render_decision_text(instance.half(h)) for h in ("control", "treatment")}
    # each half is asked as released, nothing else (identical questions are asked once: cached)
    assert set(seen) == shown and len(seen) == len(shown)
    for key, (_, text) in EXPECTED.items():
        # baseline: the question alone, no instruction around it (Jiang et al. 2024, Section 4)
        assert text in seen, (key, [s for s in seen if s[:40] == text[:40]])
    for text in seen:
        _check_shown_once_and_labelled_in_order(text)


def _check_shown_once_and_labelled_in_order(text: str) -> None:
    lines = text.split("\n")
    labels = [m[1] for line in lines if (m := re.match(r"^\(([a-z])\) ", line))]
    assert labels == [chr(ord("a") + i) for i in range(len(labels))], text
    options = [line[4:] for line in lines if re.match(r"^\([a-z]\) ", line)]
    question = "\n".join(line for line in lines if not re.match(r"^\([a-z]\) ", line))
    for option in options:  # an option appears once: not also inside the question
        assert option.rstrip(".") not in question, text
    assert not any(re.match(r"^\s*(Situation|Prompt|Answer options):\s*$", x) for x in lines)


def test_reversal_when_chosen_relabels_the_options_and_the_key_follows_them(tmp_path: Path):
    seen, instances = _asked(tmp_path, metrics.HALF_REVERSED)
    for key, (reverse, text) in EXPECTED.items():
        instance = instances[key]
        assert metrics.should_reverse(instance.id, 0) is reverse, key
        order = metrics.option_order(instance.n_options, reverse)
        assert render_decision_text(instance.control, order) in seen, key
        assert (text in seen) is not reverse, key  # a reversed item is not asked as released
    h1 = instances[("H1", 0)]
    reversed_text = JORDAN + (
        "(a) Jordan would continue wearing the new pair of pants to work.\n"
        "(b) Jordan would continue wearing the new pair of pants."
    )
    # (a) is what the model calls the first option it reads: the original option (b)
    assert reversed_text in seen
    assert (
        h1.control.options[int(h1.metric.y1)]
        == "Jordan would continue wearing the new pair of pants."
    )
    for text in seen:
        _check_shown_once_and_labelled_in_order(text)


HEADER_ONLY = re.compile(r"^\s*(Situation|Prompt):\s*$", re.MULTILINE)


def _no_empty_headers(text: str) -> None:
    assert not HEADER_ONLY.search(text), text
    if "Answer options:" in text:
        after = text.split("Answer options:", 1)[1]
        assert after.startswith("\nOption 1: "), text


@pytest.mark.parametrize("half", ["control", "treatment"])
def test_no_malberg_test_case_shows_an_empty_section_header(half: str):
    scenario = library.load_scenarios()[0].text
    for case in library.load_library(include_user=False).values():
        instance = pipeline.generate_offline(case, scenario)
        _no_empty_headers(instance.decision_text(half))


def test_no_imported_malberg_item_shows_an_empty_section_header(tmp_path: Path):
    with Store(tmp_path / "m.db") as store:
        import_malberg(store, FORMAT_DIR)
        import_hub(store, HUB_CSV)
        rows = store.query("select * from instances where control is not null")
        assert len(rows) > 10
        for row in rows:
            for half in ("control", "treatment"):
                _no_empty_headers(render_decision_text(decode_filled(row[half])))


def test_an_empty_situation_gets_no_header():
    from cogbias.core.templates import Filled

    text = render_decision_text(Filled("", "Which do you choose?", ("A", "B")))
    assert text == "Prompt: Which do you choose?\n\nAnswer options:\nOption 1: A\nOption 2: B"
    assert render_decision_text(Filled("S.", "P?", ("A", "B")), [1, 0]) == (
        "Situation: S.\n\nPrompt: P?\n\nAnswer options:\nOption 1: B\nOption 2: A"
    )


def test_each_prompting_method_speaks_the_papers_words():
    """Section 4 and Appendix B of Jiang et al. (2024), as data/prompting.toml states them."""
    from cogbias.core.templates import LETTERED
    from cogbias.runs import prompting

    task = "Is this logically sound?\nAll pigs are animals."
    question = prompting.question_for(LETTERED)
    assert prompting.decision_messages(task, "baseline", question, LETTERED) == (("user", task),)
    (zs,) = prompting.decision_messages(task, "zs_cot", question, LETTERED)
    assert zs == ("user", task + "\n\nLet us think step by step.")
    (weak,) = prompting.decision_messages(
        task, "weak_control_zs_cot", question, LETTERED, "syllogism"
    )
    assert weak[1].startswith("Your task is to answer the following question by explicitly saying")
    assert weak[1].endswith(task + "\n\nLet us think step by step.")
    strong = prompting.decision_messages(task, "control_os_cot", question, LETTERED, "conjunction")
    assert [role for role, _ in strong] == ["user", "assistant", "user"]
    assert strong[0][1].startswith(
        "Your task is to answer the following question by explicitly "
        "selecting either option (a), (b), etc. Please aware"
    )
    # the conjunction hint ends "let's think step by step": the CoT line is not said twice
    assert strong[0][1].count("step by step") == 1
    assert "(a) Linda is a bank teller." in strong[0][1]  # the example, lettered like the item
    assert strong[1][1].endswith("So the answer is (a) Linda is a bank teller.")
    assert strong[2][1] == task  # the hint opens the conversation once
    assert prompting.item_kind(("No", "Yes")) == "syllogism"
    assert prompting.item_kind(("7", "Any value other than 7")) == "conjunction"
    # Malberg test cases keep Malberg et al.'s DEC prompt (Appendix D)
    assert pipeline.DEC_PROMPT == (
        "You will be given a decision-making task with multiple answer options.\n\n{task}\n\n"
        "Select exactly one option."
    )
