"""How a study's answers are asked for and read: the grammar that admits only an answer in
a test's format, the reading of a decision, a rewrite or a revision, and the `random`
model's answer space (seeded by the turn, so a resumed run draws the same; the model answers
behind the client like any other)."""

from __future__ import annotations

import json
import re

from cogbias.core.answers import Answer
from cogbias.core.records import Turn, TurnStatus
from cogbias.llm.random_provider import AnswerSpace
from cogbias.runs import grammars
from cogbias.runs.study_plan import Script
from cogbias.studies.definitions import MAX_NUMBER, StudyTest
from cogbias.studies.interventions import REWRITE_MARKER, rewrite_problem, rewritten
from cogbias.studies.questions import read_answer

NO_ANSWER = "(no answer)"


def answer_grammar(test: StudyTest, role: str) -> str | None:
    """GBNF that only admits an answer in the test's format (for llama.cpp-served models,
    which otherwise ramble past the answer; the rules are `grammars`', the class's too): a
    number within the test's bounds, as a class is held to; a rewrite is free text."""
    if role == "rewrite":
        return None
    one = {
        "admit_reject": grammars.one_of(("admit", "reject")),
        "yes_no": grammars.one_of(("yes", "no")),
        "letter": grammars.one_of(test.letters[: test.k or None]),
        "number": grammars.number_within(test.min, test.max),
    }[test.answer]
    if role == "revise":
        return "root ::= " + ' "\\n" '.join(["answer"] * test.length) + "\nanswer ::= " + one
    return "root ::= " + one


def _read(test: StudyTest, role: str, text: str, turn: Turn) -> None:
    """Read a turn's answer into it (value, or status 'unparseable' with the reason).
    An answer that raises while it is read (one no reader foresaw) is unparseable too: that
    turn fails, never the run."""
    try:
        answer = _answer(test, role, text)
        value = json.dumps(answer.value, allow_nan=False) if answer.ok else None
    except Exception as exc:
        why = f"the answer could not be read ({type(exc).__name__}: {str(exc)[:200]})"
        answer, value = Answer(text, error=why), None
    if value is not None:
        turn.value = value
    else:
        turn.status, turn.error, turn.failure_kind = (
            TurnStatus.UNPARSEABLE,
            answer.error,
            "unparseable",
        )


def _answer(test: StudyTest, role: str, text: str) -> Answer:
    if role == "rewrite":  # it becomes the next prompt: bounded (`interventions`)
        rewrite = rewritten(text)
        problem = rewrite_problem(rewrite)
        return Answer(text, error=problem) if problem else Answer(text, rewrite)
    if role == "revise":
        return read_revision(test, text)
    answer = read_answer(test, text)
    if answer.ok and test.design == "options" and answer.value >= test.k:
        return Answer(text, error=f"there are only {test.k} options")
    return answer


def read_revision(test: StudyTest, text: str) -> Answer:
    """The revised decisions: one readable line per item of the sequence, in order."""
    lines = [line for line in text.splitlines() if line.strip()]
    values = [read_answer(test, line) for line in lines[: test.length + 1]]
    if len(lines) != test.length:
        return Answer(
            text, error=f"expected {test.length} lines, each one decision; got {len(lines)}"
        )
    bad = next((i for i, v in enumerate(values) if not v.ok), None)
    if bad is not None:
        return Answer(text, error=f"line {bad + 1} of the revision: {values[bad].error}")
    return Answer(text, [v.value for v in values])


def random_space(test: StudyTest, role: str, script: Script, seed: str) -> AnswerSpace:
    """What the `random` model may answer to a turn, in the test's format: the baseline of
    every figure. `seed` (a hex id of the turn) makes a resumed run draw the same."""
    if role == "rewrite":
        return AnswerSpace(fixed=f"{REWRITE_MARKER}\n{script.original}")
    lines = test.length if role == "revise" else None  # a revision: one answer a line
    return _random_space(test, int(seed, 16), lines, script.original)


def _random_space(test: StudyTest, seed: int, lines: int | None, question: str) -> AnswerSpace:
    """The answers a test admits, for the `random` model (a number within the question's
    range: `number_bounds`)."""
    if test.answer in ("admit_reject", "yes_no"):
        pair = ("admit", "reject") if test.answer == "admit_reject" else ("yes", "no")
        return AnswerSpace(choices=pair, lines=lines, seed=seed)
    if test.answer == "letter":
        letters = tuple(test.letters[: test.k or len(test.letters)])
        return AnswerSpace(choices=letters, lines=lines, seed=seed)
    low, high = AnswerSpace.number_range(*number_bounds(test, question), MAX_NUMBER)
    return AnswerSpace(low=low, high=high, lines=lines, seed=seed)


# "between 0 and 100", "from 0 to 100": the range a question asks its answer in
_STATED_RANGE = re.compile(
    r"\b(?:between|from)\s+(-?\d[\d,]*(?:\.\d+)?)\s*%?\s+(?:and|to)\s+(-?\d[\d,]*(?:\.\d+)?)",
    re.IGNORECASE,
)


def number_bounds(test: StudyTest, question: str) -> tuple[float | None, float | None]:
    """The range a number question is answered in, for the `random` model: the test's own
    bounds, and for a bound the test leaves open, the range the question states (its last
    "between A and B" or "from A to B"). An imported thesis prompt declares no bounds but says
    "Answer the percentage between 0 and 100"; without this its random answers ran to 1000.
    A stated range that contradicts the test's bounds is ignored (the reader holds answers to
    the test's bounds, so the random answer must lie inside them)."""
    stated: tuple[float | None, float | None] = (None, None)
    for match in _STATED_RANGE.finditer(question):
        a, b = (float(n.replace(",", "")) for n in match.groups())
        if a < b and max(abs(a), abs(b)) <= MAX_NUMBER:
            stated = (a, b)
    low = test.min if test.min is not None else stated[0]
    high = test.max if test.max is not None else stated[1]
    if low is not None and high is not None and low > high:
        return test.min, test.max
    return low, high
