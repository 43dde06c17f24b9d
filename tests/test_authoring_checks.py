"""What an author is told about a draft's example fills (issue 43, point 4): each mistake once,
at the line that holds it, and every problem of the draft at once, in words."""

from __future__ import annotations

import pytest

from cogbias.library import testcases as library
from cogbias.library.testcases import LibraryError, parse_test_case

FRAMING = (library.BUILTIN_DIR / "framing_effect.toml").read_text(encoding="utf-8")
SHORTENED = '    "the newly hired purchasing assistant",\n'  # the third fill of the first gap
FIRST_KEY = '"name in a few words an employee, a team or a contractor whose work you oversee"'
NEW_GAP = "name a time of day"


def _problems(text: str) -> list[library.Problem]:
    with pytest.raises(LibraryError) as info:
        parse_test_case(text, "draft.toml")
    return info.value.problems


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_a_list_of_two_fills_among_lists_of_three_is_one_message_at_that_list() -> None:
    text = FRAMING.replace(SHORTENED, "", 1)
    problems = _problems(text)
    assert len(problems) == 1, [str(p) for p in problems]
    assert problems[0].line == _line(text, FIRST_KEY)
    assert "has 2 example fill(s); write at least 3" in problems[0].message


def test_a_list_longer_than_the_others_is_the_one_blamed() -> None:
    text = FRAMING.replace(SHORTENED, SHORTENED + '    "the night shift",\n', 1)
    problems = _problems(text)
    assert len(problems) == 1, [str(p) for p in problems]
    assert problems[0].line == _line(text, FIRST_KEY)
    assert "has 4 examples but the other gaps have 3" in problems[0].message


def test_a_gap_without_example_fills_is_listed_with_the_other_problems_in_words() -> None:
    text = FRAMING.replace("It is time to assess", f"It is [[{NEW_GAP}]] and time to assess")
    text = text.replace('id = "framing_effect"', 'id = "Framing"', 1)
    problems = _problems(text)
    messages = [p.message for p in problems]
    assert len(problems) == 2, messages  # the id, and the gap: both at once
    assert "must be snake_case" in messages[0]
    missing = problems[1]
    assert missing.line == _line(text, NEW_GAP)  # where the gap is written (the control)
    assert missing.message == (
        f"no example fills for the gap '{NEW_GAP}'; add a list of them under [examples] "
        "with that text as its key"
    )


def test_a_missing_key_for_one_value_names_the_key_and_the_value_not_a_dict() -> None:
    text = FRAMING.replace(
        "It is time to assess",
        "It is time to assess, {{share}}% done, [[say in a word why {{share}}% is the figure]]",
    )
    problems = _problems(text)
    assert len(problems) == 1, [str(p) for p in problems]
    message = problems[0].message
    assert message.startswith("no example fills for the gap 'say in a word why ")
    assert "% is the figure' (when share is " in message
    assert "{" not in message  # no Python dict of values, no {{share}} left in the key


def test_a_misspelt_key_is_one_problem_naming_the_gap_not_two() -> None:
    text = FRAMING.replace(
        '"name a success measure of their work that is expressed in percent" = [',
        '"name a success measure of their work" = [',
        1,
    )
    problems = _problems(text)
    assert len(problems) == 1, [str(p) for p in problems]
    assert "did you mean 'name a success measure of their work that is" in problems[0].message


def test_a_key_with_escaped_quotes_is_located_at_its_own_line() -> None:
    key = '"name the exact opposite of \\"{{metric}}\\", also measured in percent'
    text = FRAMING.replace(f'{key}, so that both add up to 100%" = [', f'{key}" = [', 1)
    problems = _problems(text)
    assert problems, "the shortened key must be reported"
    assert problems[0].line == _line(text, key)


def test_a_draft_whose_broken_value_a_gap_uses_is_reported_not_crashed() -> None:
    """The example check runs beside other problems, so it meets values the parser refused
    (a step of 0 cannot even be walked): those are listed, and nothing else breaks."""
    text = FRAMING.replace(
        "[values.opposite]",
        '[values.n]\ntype = "int"\nmin = 1\nmax = 5\nstep = 0\n\n[values.opposite]',
    )
    text = text.replace("It is time to assess", "It is time to assess, [[say why {{n}} matters]],")
    messages = [p.message for p in _problems(text)]
    assert "value 'n': step must be at least 1" in messages, messages
