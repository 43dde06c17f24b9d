"""Answer parsers (strict and lenient) and option-position permutations."""

import itertools

import pytest

from cogbias.core.answers import (
    Answer,
    parse_admit_reject,
    parse_letter,
    parse_number,
    parse_yes_no,
    permuted_orders,
    position_of,
)
from cogbias.core.metrics import to_original


@pytest.mark.parametrize(
    "text, value",
    [
        ("admit", True),
        ("Reject", False),
        ("**Admit**", True),
        ("'reject'.", False),
        ("Admit. The GRE scores are strong.", True),
        ("Reject - although I considered whether to admit.", False),
        ("I would admit this student.", True),
        ("Decision: rejected", False),
    ],
)
def test_admit_reject_lenient(text, value):
    answer = parse_admit_reject(text)
    assert answer.ok and answer.value is value and answer.raw == text


@pytest.mark.parametrize(
    "text, message",
    [
        ("I would not admit this student", "negates 'admit'"),
        ("Hard to say whether to admit or reject", "both 'admit' and 'reject'"),
        ("The student has a GPA of 3.5", "neither 'admit' nor 'reject'"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_admit_reject_failures_say_why(text, message):
    answer = parse_admit_reject(text)
    assert not answer.ok and answer.value is None
    assert message in answer.error


def test_strict_mode_wants_the_token_alone():
    assert parse_admit_reject(" Admit. ", strict=True).value is True
    failed = parse_admit_reject("I would admit", strict=True)
    assert failed.error == "expected exactly 'admit' or 'reject': 'I would admit'"
    assert parse_yes_no("YES", strict=True).value is True
    assert not parse_yes_no("yes, clearly", strict=True).ok
    assert parse_letter("(c)", strict=True).value == 2
    assert not parse_letter("I pick c)", strict=True).ok
    assert parse_number("$ 1,250.50", strict=True).value == 1250.5
    assert parse_number("45%", strict=True).value == 45
    assert parse_number("150.", strict=True).value == 150
    assert parse_number("**12.5**", strict=True).value == 12.5
    assert not parse_number("about 45", strict=True).ok


def test_yes_no():
    assert parse_yes_no("Yes. The quantitative score is 169.").value is True
    assert parse_yes_no("No, not based on this.").value is False
    assert parse_yes_no("I think yes").value is True
    assert "both 'yes' and 'no'" in parse_yes_no("Maybe yes, maybe no").error
    # a "no" inside a sentence that also says "yes" is not read as either
    assert not parse_yes_no("There is no way to say yes").ok


@pytest.mark.parametrize(
    "text, index",
    [
        ("a", 0),
        ("B", 1),
        ("c)", 2),
        ("(d)", 3),
        ("Option B", 1),
        ("b) Student B: has published extensively ...", 1),
        ("C. Student C, because of the mentoring.", 2),
        ("I choose (c) since Student C has strong skills.", 2),
        ("My answer: d", 3),
        ("The answer is b.", 1),
        ("I would go with a) Student A, as a researcher.", 0),
    ],
)
def test_letters(text, index):
    answer = parse_letter(text)
    assert answer.ok, answer.error
    assert answer.value == index


def test_letters_refuse_guesses():
    assert "several options (a, c)" in parse_letter("Either a) or c)").error
    assert "expected one of the letters a/b/c/d" in parse_letter("Student A is a good fit").error
    assert "'e' is not one of the options" in parse_letter("(e)").error
    assert parse_letter("(e)", letters="abcde").value == 4


@pytest.mark.parametrize(
    "text, value",
    [
        ("42", 42),
        ("$ 150", 150),
        ("I would pay $1,200 for it.", 1200),
        ("50%", 50),
        ("Probability: 6.67", 6.67),
        ("-3", -3),
        ("25 — and again, 25.", 25),
    ],
)
def test_numbers(text, value):
    answer = parse_number(text)
    assert answer.ok, answer.error
    assert answer.value == pytest.approx(value)


def test_number_failures():
    assert "several numbers (150, 900)" in parse_number("I'd pay 150, it was listed at 900").error
    assert "found no number" in parse_number("fifty").error
    out = parse_number("120", low=0, high=100)
    assert out.error == "120 is outside the allowed range 0..100: '120'"
    assert parse_number("100", low=0, high=100).value == 100
    assert parse_number("GPT-4 says 30").error.startswith("the answer holds several numbers")


def test_long_answers_are_quoted_short():
    answer = parse_admit_reject("x" * 500)
    assert len(answer.error) < 120 and answer.error.endswith("...'")
    assert isinstance(answer, Answer)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("balanced", [False, True])
def test_every_item_appears_at_every_position(n, balanced):
    orders = permuted_orders(n, balanced=balanced)
    assert len(orders) == (2 * n if balanced and n % 2 else n)
    for order in orders:
        assert sorted(order) == list(range(n))
    for position in range(n):
        column = [order[position] for order in orders]
        per_item = {item: column.count(item) for item in range(n)}
        assert set(per_item.values()) == {len(orders) // n}


@pytest.mark.parametrize("n", [2, 4, 6])
def test_balanced_orders_let_every_item_follow_every_other_once(n):
    orders = permuted_orders(n, balanced=True)
    pairs = [(o[i], o[i + 1]) for o in orders for i in range(n - 1)]
    assert sorted(pairs) == sorted(itertools.permutations(range(n), 2))


def test_orders_use_the_presented_to_original_convention():
    order = permuted_orders(4)[1]  # [1, 2, 3, 0]: item 1 first
    assert order == [1, 2, 3, 0]
    assert to_original(0, order) == 1
    assert position_of(order, 0) == 3
    with pytest.raises(ValueError, match="not in the order"):
        position_of(order, 7)
    with pytest.raises(ValueError):
        permuted_orders(0)
