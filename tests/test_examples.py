"""Offline instances: scenario-filled common gaps, the `examples` generator, the fill checker."""

from __future__ import annotations

import contextlib
import io
import random
import re
from types import SimpleNamespace

import pytest

from cogbias.cli import main as cli
from cogbias.core.templates import render_decision_text
from cogbias.library import examples
from cogbias.library import testcases as library
from cogbias.llm.client import LLMResponse
from cogbias.runs import pipeline

CASES = library.load_library(include_user=False)
SCENARIOS = library.load_scenarios()
PREVIEW_SCENARIOS = (1, 42, 87, 150, 200)
PROMPT_EXAMPLE = "a regional grocery chain"


def _instructions(case: library.TestCase) -> set[str]:
    return {g.instruction for t in (case.control, case.treatment) for g in t.llm_gaps()}


def leaks(text: str, case: library.TestCase) -> list[str]:
    """Template syntax, gap instructions or the generation prompt's example left in a text."""
    found = [token for token in ("[[", "]]", "{{", "}}", "a/an") if token in text]
    found += [i for i in _instructions(case) if len(i) > 12 and i in text]
    if PROMPT_EXAMPLE in text.lower():
        found.append(PROMPT_EXAMPLE)
    return found


def _generate(case: library.TestCase, scenario: str, seed: int = 0, index: int = 0):
    return pipeline.run_sync(
        pipeline.generate(None, case, scenario, examples.EXAMPLES_GENERATOR, seed, index=index)  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- the library


@pytest.mark.parametrize("case", list(CASES.values()), ids=lambda c: c.id)
def test_every_builtin_gap_has_at_least_three_examples_for_any_sampled_value(case):
    rng = random.Random(7)
    named = set(case.named_gaps())
    for _ in range(200):
        values = case.sample_values(rng)
        for template in (case.control, case.treatment):
            for gap in template.llm_gaps():
                if gap.instruction in examples.COMMON_GAPS:
                    continue
                fills = case.examples.get(examples.example_key(gap, values, named))
                assert fills and len(fills) >= 3, (case.id, gap.instruction, values)


def test_the_prompt_example_fills_named_in_the_checker_are_the_generation_prompts():
    for text in examples.PROMPT_EXAMPLE_FILLS:
        assert text in pipeline.GEN_EXAMPLE
    assert examples.FILL_MAX_CHARS == pipeline.FILL_CHARS


def test_examples_survive_a_save_and_load(tmp_path):
    case = CASES["halo_effect"]
    copy = library.TestCase(**{**case.__dict__, "id": "halo_copy", "path": None})
    path = library.save_test_case(copy, tmp_path / "halo_copy.toml")
    again = library.load_test_case(path)
    assert again.examples == case.examples
    assert "[examples]" in path.read_text()


# --------------------------------------------------------------------------- the generator


def test_common_gaps_come_from_the_scenario():
    scenario = SCENARIOS[0]  # a drilling operations manager in Energy
    instance = _generate(CASES["framing_effect"], scenario.text)
    situation = instance.control.situation
    position = scenario.position
    assert situation.startswith(f"You work as a {position} at a ")
    assert f"company in the {scenario.industry_group} industry." in situation
    sources = {i["gap"]: i["source"] for i in instance.insertions}
    assert sources["type"] == sources["organization"] == sources["a/an"] == "scenario"
    article = next(i["text"] for i in instance.insertions if i["gap"] == "a/an")
    assert article == "a"


def test_the_article_follows_the_position():
    scenario = next(s for s in SCENARIOS if s.position[0].lower() in "aeiou")
    instance = _generate(CASES["anchoring"], scenario.text)
    assert f"You work as an {scenario.position} at" in instance.control.situation
    # the insertion (what Preview and Learn mark) has the article the text has, not "a"
    article = next(i["text"] for i in instance.insertions if i["gap"] == "a/an")
    assert article == "an"


def test_example_fills_are_deterministic_and_vary_with_seed_and_scenario():
    case = CASES["framing_effect"]
    first = _generate(case, SCENARIOS[3].text, seed=1)
    again = _generate(case, SCENARIOS[3].text, seed=1)
    assert (first.control, first.treatment, first.id) == (again.control, again.treatment, again.id)
    chosen = {
        _generate(case, s.text, seed=seed).control.situation.split(". ")[1]
        for s in SCENARIOS[:6]
        for seed in range(3)
    }
    assert len(chosen) == len(case.examples[next(iter(case.examples))])  # every set is used


def test_a_set_is_used_together_so_named_gaps_stay_coherent():
    case = CASES["framing_effect"]
    metric_key = next(k for k in case.examples if k.startswith("name a success measure"))
    opposite_key = next(k for k in case.examples if k.startswith("name the exact opposite"))
    for scenario in SCENARIOS[:10]:
        instance = _generate(case, scenario.text)
        k = case.examples[metric_key].index(instance.values["metric"])
        assert case.examples[opposite_key][k] in instance.treatment.situation


def test_example_insertions_say_example_fill():
    instance = _generate(CASES["anchoring"], SCENARIOS[10].text)
    llm_gaps = [i for i in instance.insertions if i["gap"] not in examples.COMMON_GAPS]
    kinds = {i["source"] for i in llm_gaps if i["source"] != "value"}
    assert kinds == {"example"}
    assert examples.SOURCE_LABELS["example"] == "example fill"


def test_value_dependent_gaps_use_the_example_for_that_value():
    case = CASES["halo_effect"]
    tones = {}
    for seed in range(12):
        instance = _generate(case, SCENARIOS[0].text, seed=seed)
        tones[instance.values["tone"]] = instance.treatment.situation
    assert set(tones) == {"very favorable", "very unfavorable"}
    fills = {
        tone: case.examples[
            next(k for k in case.examples if k.endswith(f"make the description {tone}."))
        ]
        for tone in tones
    }
    for tone, situation in tones.items():
        other = next(t for t in tones if t != tone)
        assert any(fill in situation for fill in fills[tone])
        assert not any(fill in situation for fill in fills[other])


def test_a_case_without_examples_cannot_be_generated_offline():
    text = (library.BUILTIN_DIR / "anchoring.toml").read_text()
    text = text[: text.index("[examples]")].replace('id = "anchoring"', 'id = "no_examples"')
    case = library.parse_test_case(text)
    with pytest.raises(pipeline.GenerationError, match="no example fills"):
        _generate(case, SCENARIOS[0].text)


def test_default_generator_is_examples_unless_configured():
    assert examples.default_generator({}) == "examples"
    assert examples.default_generator({"COGBIAS_GENERATOR": "openai/x"}) == "openai/x"
    choices = examples.generator_choices(["random", "local/smollm2", "openai/x"])
    assert choices[0] == examples.default_generator()
    assert "random" not in choices and "local/smollm2" in choices


# --------------------------------------------------------------------------- `cogbias preview`


def _preview(bias: str, scenario: int) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["preview", bias, "--scenario", str(scenario)])
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize("bias", sorted(CASES))
def test_preview_with_the_offline_default_leaves_nothing_unfilled(bias, monkeypatch):
    monkeypatch.delenv(examples.GENERATOR_ENV, raising=False)
    case = CASES[bias]
    for number in PREVIEW_SCENARIOS:
        printed = _preview(bias, number)
        rendered = printed.split("\nInsertions:")[0]  # the pair as the model sees it
        assert "=== CONTROL ===" in rendered and "=== TREATMENT ===" in rendered
        assert leaks(rendered, case) == [], (bias, number, rendered)
        assert "[example]" in printed or not case.examples


def test_the_leak_check_catches_what_the_old_offline_preview_showed():
    case = CASES["anchoring"]
    old = pipeline.generate_offline(case, SCENARIOS[0].text)
    text = render_decision_text(old.control)
    found = leaks(text, case)
    assert "[[" in found and "a/an" in found
    assert leaks("at a regional grocery chain", case) == [PROMPT_EXAMPLE]


# --------------------------------------------------------------------------- the fill checker


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("x" * 200, "longer than"),
        ("[type] manager", "brackets"),
        ("the {{metric}} rate", "template syntax"),
        ("A/An", "template syntax"),
        ("name a positive performance metric for it", "repeats the instruction"),
        ("A regional grocery chain", "copies the prompt's example"),
    ],
)
def test_check_fill_rejects(text, reason):
    instruction = "name a positive performance metric for it that is measured in percent"
    problem = examples.check_fill(instruction, text)
    assert problem is not None and reason in problem


def test_a_fill_that_copies_five_words_of_its_instruction_is_rejected():
    # what the local model wrote for the framing gap: the metric, then the instruction's words
    instruction = 'name the exact opposite of "on-time delivery rate", also measured in percent, so that both add up to 100%'
    fill = "late delivery rate, measured in percent, so that both add up to 100%"
    assert "copies the instruction's words 'measured in percent so that'" in (
        examples.check_fill(instruction, fill) or ""
    )
    assert examples.check_fill(instruction, "late delivery rate") is None
    assert examples.check_fill(instruction, "share of deliveries that are late") is None


@pytest.mark.parametrize("text", ["on-time delivery rate", "share of orders shipped complete"])
def test_check_fill_accepts_real_fills(text):
    assert examples.check_fill("name a positive performance metric in percent", text) is None


class ScriptedGenerator:
    """Answers every fill request with the same scripted JSON (no network)."""

    def __init__(self, fills: dict[str, str]) -> None:
        self.fills = fills
        self.asked: list[str] = []

    def profile(self, model):  # the LLMClient interface the pipeline uses
        return SimpleNamespace(json_schema=False, writes_text=True)

    async def complete(self, request):
        prompt = request.messages[-1][1]
        keys = re.findall(r'^ "(.*)",?$', prompt, flags=re.MULTILINE)
        self.asked += keys
        text = "{" + ", ".join(f'"{k}": "{self._fill(k)}"' for k in keys) + "}"
        return LLMResponse(text, 10, 10, 0.0, 0.0, False)

    def _fill(self, key: str) -> str:
        return next((v for k, v in self.fills.items() if key.startswith(k)), "a sound answer")


def test_rejected_model_fills_fall_back_to_examples_and_say_so():
    case = CASES["anchoring"]
    client = ScriptedGenerator(
        {
            "name one concrete resource": "a regional grocery chain",  # the prompt's example
            "name one specific purpose": "the yearly safety training",  # fine
        }
    )
    instance = pipeline.run_sync(
        pipeline.generate(client, case, SCENARIOS[0].text, "local/smollm2")  # type: ignore[arg-type]
    )
    assert not any(k in examples.COMMON_GAPS for k in client.asked)  # never asked of a model
    by_gap = {i["gap"]: i for i in instance.insertions}
    resource = by_gap[next(k for k in by_gap if k.startswith("name one concrete resource"))]
    purpose = by_gap[next(k for k in by_gap if k.startswith("name one specific purpose"))]
    assert resource["source"] == "example" and "rejected" in resource["note"]
    assert "prompt's example" in resource["note"]
    assert resource["text"] in case.examples[next(k for k in case.examples if "resource" in k)]
    assert purpose == {**purpose, "source": "llm", "text": "the yearly safety training"}
    assert PROMPT_EXAMPLE not in instance.control.situation


def test_preview_marks_example_and_scenario_fills_as_such():
    from cogbias.views import highlight

    case = CASES["framing_effect"]
    instance = _generate(case, SCENARIOS[0].text)
    html = highlight.filled_html(case, instance, "treatment")["situation"]
    assert "[[" not in html and "{{" not in html
    assert 'class="ins-scenario" title="scenario field: type"' in html
    assert 'class="ins-example" title="example fill: name the exact opposite' in html
    halo = CASES["halo_effect"]
    prompt = highlight.filled_html(halo, _generate(halo, SCENARIOS[0].text), "control")["prompt"]
    assert 'title="example fill (named gap &#x27;quality&#x27;)"' in prompt
    frame = highlight.insertions_frame(instance)
    assert {"scenario field", "example fill", "value generator"} <= set(frame["source"])


def test_a_typed_role_that_is_no_manager_reads_as_itself_in_text_and_highlight() -> None:
    # "[[a/an]] [[type]] manager at [[organization]]" once gave "a head teacher manager"
    import re

    from cogbias.library import testcases
    from cogbias.runs import pipeline
    from cogbias.views import highlight

    case = testcases.get_test_case("framing_effect")
    for scenario, expected in (
        ("A head teacher at a secondary school deciding on timetables.", "a head teacher at"),
        ("An operations manager at a bakery deciding on a supplier.", "an operations manager at"),
    ):
        instance = pipeline.run_sync(pipeline.generate(None, case, scenario, "examples", seed=0))
        for half in ("control", "treatment"):
            text = instance.half(half).situation
            shown = re.sub(r"<[^>]+>", "", highlight.filled_html(case, instance, half)["situation"])
            assert expected in text and expected in shown, (text, shown)
            assert "teacher manager" not in text + shown
