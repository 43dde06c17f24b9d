import pytest

from cogbias.core.templates import (
    Filled,
    LLMGap,
    Template,
    TemplateSyntaxError,
    ValueGap,
    diff,
    fill,
    parse,
    render_decision_text,
)


def test_parse_splits_text_llm_gaps_and_value_gaps():
    segments = parse("You are [[a/an]] manager; anchor {{anchor}}.")
    assert segments[0] == "You are "
    assert isinstance(segments[1], LLMGap) and segments[1].instruction == "a/an"
    assert isinstance(segments[3], ValueGap) and segments[3].name == "anchor"


def test_named_gap_and_reference_inside_an_instruction():
    named, ref = parse("[[metric: name a metric]] and [[give the opposite of {{metric}}]]")[::2]
    assert named.name == "metric" and named.instruction == "name a metric"
    assert [r.name for r in ref.refs] == ["metric"]
    assert ref.resolve({"metric": "uptime"}) == "give the opposite of uptime"
    assert ref.resolve({}) == "give the opposite of {{metric}}"


@pytest.mark.parametrize(
    ("text", "offset", "fragment"),
    [
        ("a [[b", 2, "never closed"),
        ("a ]] b", 2, "never opened"),
        ("x {{name", 2, "never closed"),
        ("[[  ]]", 0, "empty gap"),
        ("{{Not A Name}}", 0, "not a value name"),
        ("[[a [[b]] c]]", 0, "cannot contain"),
        ("ok }} no", 3, "never opened"),
    ],
)
def test_syntax_errors_say_what_and_where(text, offset, fragment):
    with pytest.raises(TemplateSyntaxError) as info:
        parse(text)
    assert info.value.offset == offset
    assert fragment in info.value.message


def test_fill_and_render_show_numbered_options_in_presented_order():
    template = Template("You are [[role]].", "Pick {{n}}.", ("low", "mid", "high"))
    filled = fill(template, {"n": 2}, lambda gap: "a buyer")
    assert filled == Filled("You are a buyer.", "Pick 2.", ("low", "mid", "high"))
    text = render_decision_text(filled, order=[2, 1, 0])
    assert "Option 1: high" in text and "Option 3: low" in text
    assert text.startswith("Situation: You are a buyer.")


def test_unfilled_llm_gaps_stay_visible():
    template = Template("You are [[role]] with {{x}}.", "Q?", ("a", "b"))
    assert fill(template, {"x": 5}, lambda gap: None).situation == "You are [[role]] with 5."


def test_diff_marks_the_words_that_differ():
    ops = diff("Its success rate is 75%.", "Its failure rate is 25%.")
    changed = {(op, text) for op, text in ops if op != "equal"}
    assert ("control", "success") in changed and ("treatment", "failure") in changed
    assert ("control", "75") in changed and ("treatment", "25") in changed
    assert "".join(t for op, t in ops if op != "treatment") == "Its success rate is 75%."
    assert "".join(t for op, t in ops if op != "control") == "Its failure rate is 25%."
