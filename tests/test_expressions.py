import pytest

from cogbias.core.expressions import ExpressionError, evaluate, referenced_names


@pytest.mark.parametrize(
    ("expr", "names", "expected"),
    [
        ("anchor // 10", {"anchor": 87}, 8),
        ("round(share * 100, 1)", {"share": 0.9234}, 92.3),
        ("1 if variant == 'positive' else -1", {"variant": "negative"}, -1),
        ("max(a, b) - min(a, b)", {"a": 3, "b": 7}, 4),
        ("['x', 'y'][i]", {"i": 1}, "y"),
        ("str(n) + '%'", {"n": 40}, "40%"),
        ("not (a > 1 and a < 5)", {"a": 3}, False),
        ("1 < a <= 3", {"a": 3}, True),
    ],
)
def test_evaluates_the_allowed_language(expr, names, expected):
    assert evaluate(expr, names) == expected


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "a.__class__",
        "[x for x in range(3)]",
        "lambda: 1",
        "2 ** 100000",
        "f(1, key=2)",
    ],
)
def test_refuses_everything_else(expr):
    with pytest.raises(ExpressionError):
        evaluate(expr, {"a": 1})


def test_reports_unknown_names_and_their_references():
    assert referenced_names("round(a * b) + len(c)") == {"a", "b", "c"}
    with pytest.raises(ExpressionError, match="unknown name 'zzz'"):
        evaluate("zzz + 1", {})


def test_syntax_errors_carry_an_offset():
    with pytest.raises(ExpressionError) as info:
        evaluate("1 + * 2", {})
    assert info.value.offset >= 0
