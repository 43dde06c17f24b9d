"""Authoring helpers for the Templates page: a blank test case to start from, a free id
for a copy."""

from __future__ import annotations

from collections.abc import Iterable

BLANK_TEST_CASE = '''id = "my_bias"
name = "My Bias"
description = """Say in two to four sentences what the bias is and how this test elicits it."""
references = [
  "Author, A. (Year). Title. Journal.",
]

[scale]
kind = "likert7"
options = ["Strongly disagree", "Disagree", "Somewhat disagree", "Neutral", "Somewhat agree", "Agree", "Strongly agree"]

[values.amount]
type = "int"
min = 10
max = 90
step = 10

[control]
situation = """Suppose you are [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]."""
prompt = "Do you agree that this is a good decision?"

[treatment]
situation = """Suppose you are [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]. {{amount}}% of your peers have already made this decision."""
prompt = "Do you agree that this is a good decision?"

[metric]
# m = k (|a1 - y1| - |a2 - y2|) / max(|a1 - y1|, |a2 - y2|); a1, a2: 0-based answers
k = 1
y1 = 6
y2 = 6
'''


def copy_id(case_id: str, taken: Iterable[str]) -> str:
    """A free id for a copy of `case_id` (`x_copy`, `x_copy2`, ...)."""
    taken = set(taken)
    base = f"{case_id}_copy"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}{n}"
    return candidate
