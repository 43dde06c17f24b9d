"""A participant's answer, read: an option's key, or a number as people type one ("25%",
"40,5", "$7.50", "1,000.5"), stored in one plain spelling the participant is shown back.

A number is read only where its reading is certain: a decimal comma ("40,5" is 40.5), a
comma grouping thousands beside a decimal point ("1,000.5"), spaces grouping thousands
("1 000"), a percent sign after it, a currency sign before it. "1,000" alone could be a
thousand or one, so it is refused with a sentence saying how to write either. Every refusal
says what is wrong, so the form can say it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from cogbias.core.class_question import Question
from cogbias.store import Store

MAX_ANSWER_CHARS = 40  # an option key or a number: anything longer is not an answer
# The bound of a number answer whose question states none (a session stored before every
# number question had bounds): no count, price or estimate a class gives comes near it.
NUMBER_LIMIT = 1e6

_CURRENCY = "$€£¥"
_GROUPED_SPACES = re.compile(r"^[+-]?\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:[.,]\d+)?$")
_PLAIN = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_COMMA_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_POINT_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:\.\d{3})+,\d+$")


@dataclass(frozen=True)
class Reading:
    """An answer as it is stored (None when it is not one) and, if not, why."""

    stored: str | None
    problem: str = ""


def read_answer(question: Question, raw: str) -> Reading:
    """The answer as stored: one of the options' keys, or a finite number within the
    question's bounds in its plain spelling (`number_text`)."""
    answer = raw.strip()
    if question.kind != "number":
        if answer in question.keys:
            return Reading(answer)
        return Reading(None, "Please choose one of the answers.")
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return Reading(None, "Please give a number.")
    value, problem = read_number(answer)
    low, high = number_bounds(question)
    if value is None:
        return Reading(None, problem)
    if not low <= value <= high:
        return Reading(
            None, f"Please give a number from {number_text(low)} to {number_text(high)}."
        )
    return Reading(number_text(value))


def read_number(text: str) -> tuple[float | None, str]:
    """The number `text` spells (a sign, a currency sign before, a percent sign after,
    grouped thousands, a decimal comma), or None and why not."""
    body = text.strip().removesuffix("%").strip()
    sign = ""
    if body[:1] in "+-":
        sign, body = body[0], body[1:].strip()
    body = body.lstrip(_CURRENCY).strip()
    if _GROUPED_SPACES.match(body):
        body = re.sub(r"[ \u00a0\u202f]", "", body)
    whole, _, part = body.partition(",")
    if body.count(",") == 1 and "." not in body:
        if len(part) == 3 and whole.isdigit() and whole != "0":
            return None, (
                f"“{text.strip()}” could be {whole}{part} or {whole}.{part}: please write "
                f"{whole}{part} or {whole}.{part}."
            )
        body = body.replace(",", ".")
    elif _COMMA_THOUSANDS.match(body):
        body = body.replace(",", "")
    elif _POINT_THOUSANDS.match(body):
        body = body.replace(".", "").replace(",", ".")
    if not _PLAIN.match(body):
        return None, "Please give a number (digits, with a decimal point or comma)."
    value = float(sign + body)
    if not math.isfinite(value):
        return None, "Please give a number (digits, with a decimal point or comma)."
    return value, ""


def number_text(value: float) -> str:
    """A number in the spelling it is stored and shown in: whole numbers without a
    decimal point, others to 12 significant digits, never in exponent form."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12f}".rstrip("0").rstrip(".")


def number_bounds(question: Question) -> tuple[float, float]:
    """The range a number answer must lie in: the question's, else +-`NUMBER_LIMIT`."""
    low = -NUMBER_LIMIT if question.low is None else question.low
    high = NUMBER_LIMIT if question.high is None else question.high
    return low, high


def answer_values(question: Question, answers: list[str]) -> list[float]:
    """Stored answers as what the statistics read: option positions (0-based), or numbers
    (each was checked when it was stored: `read_answer`)."""
    if question.kind == "number":
        return [float(a) for a in answers]
    return [float(question.keys.index(a)) for a in answers if a in question.keys]


def answers_by_condition(store: Store, code: str, question: Question) -> dict[str, list[float]]:
    """A session's answers per condition (every condition named), as the statistics read
    them (`answer_values`)."""
    texts: dict[str, list[str]] = {c: [] for c in question.conditions}
    for answer in store.class_answers(code):
        texts.setdefault(answer.condition, []).append(answer.answer)
    return {c: answer_values(question, answers) for c, answers in texts.items()}
