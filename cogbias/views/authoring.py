"""Authoring helpers for the Templates page: a blank test case to start from, a free id
for a copy, a draft's problems as the editor marks and lists them, and the unsaved draft
filled in place."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cogbias.library import examples
from cogbias.library.testcases import Problem, TestCase
from cogbias.runs import pipeline
from cogbias.views import highlight, safe_text

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
situation = """You work as [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]."""
prompt = "Do you agree that this is a good decision?"

[treatment]
situation = """You work as [[a/an]] [[type]] manager at [[organization]]. You must decide whether to [[describe one decision you face in your role]]. {{amount}}% of your peers have already made this decision."""
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


@dataclass(frozen=True)
class EditorMarks:
    """A draft's problems as the editor (Ace) shows them: a margin mark whose tooltip is the
    message (`annotations`) and a red background over the line (`markers`); rows and
    columns 0-based, as Ace counts them."""

    annotations: list[dict[str, Any]]
    markers: list[dict[str, Any]]


def editor_marks(problems: Sequence[Problem]) -> EditorMarks:
    """Each problem marked at its own line: one message per problem, one red line per line."""
    annotations = [
        {"row": p.line - 1, "column": p.col - 1, "text": p.message, "type": "error"}
        for p in problems
    ]
    markers = [
        {"startRow": line - 1, "startCol": 0, "endRow": line - 1, "endCol": 1,
         "className": "ace_error-marker", "type": "fullLine"}
        for line in sorted({p.line for p in problems})
    ]  # fmt: skip
    return EditorMarks(annotations, markers)


def problem_list(problems: Sequence[Problem]) -> str:
    """The problems as a Markdown list in line order, each message escaped (it may quote the
    draft's own text)."""
    return "\n".join(
        f"- **Line {p.line}, column {p.col}:** {safe_text.escape_markdown(p.message)}"
        for p in sorted(problems, key=lambda p: (p.line, p.col))
    )


@dataclass(frozen=True)
class DraftPreview:
    """An unsaved draft filled offline: each half as escaped HTML with every insertion marked
    (`highlight.filled_html`), the legend naming who filled the gaps, and `note`, the reason
    when its [[gaps]] stay as written ('' when every gap is filled)."""

    scenario: str
    halves: dict[str, dict[str, str]]
    legend: str
    note: str


def preview_draft(case: TestCase, scenario: str, seed: int = 0) -> DraftPreview:
    """The draft's control and treatment filled with its own example fills, as Learn and
    Preview fill a saved test case offline (`pipeline.generate` with the `examples`
    generator: no model, no key, instant), so an author sees an edit before saving it.

    A draft without example fills for one of its gaps gets its values filled and its
    [[gaps]] left visible, with the reason in `note`.
    """
    try:
        instance = pipeline.run_sync(
            pipeline.generate(None, case, scenario, examples.EXAMPLES_GENERATOR, seed=seed)  # type: ignore[arg-type]
        )
        note = ""
    except pipeline.GenerationError as exc:
        instance = pipeline.generate_offline(case, scenario, seed=seed)
        filler = examples.ExampleFiller(case, scenario, seed, 0)
        missing = filler.prefill(dict(instance.values), {}, everything=True)
        what = f"[[{missing[0].instruction}]]" if missing else str(exc)
        note = (
            f"No example fills for {what} yet, so the [[gaps]] stay as written: add them under "
            "[examples] (docs/format.md), or save it to your library and let a model fill it on "
            "Preview."
        )
    halves = highlight.filled_halves_html(case, instance)
    return DraftPreview(scenario, halves, highlight.legend_html(instance), note)
