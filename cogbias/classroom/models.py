"""The models beside the class: their stored answers to a session's question, summarised per
model, way of asking and condition as the class's answers are.

The answers are asked by the class run kind (`cogbias.runs.class_answers`: `cogbias class
ask`, the Class page's "Ask the models"); each is a row of the run that asked it. Runs with
the same settings ask the same answers (the `random` baseline draws the same, a model's
come from the response cache), so an answer asked by two runs counts once: the newest row of
each (model, way, temperature, condition, repeat). The summaries are the statistics layer's
(`studies.condition_summary`), the same functions the class and the humans get.
"""

from __future__ import annotations

from collections.abc import Sequence

from cogbias.core.answers import parse_number
from cogbias.core.class_question import Question
from cogbias.core.run_record import ResultsPage, Run
from cogbias.store import Store
from cogbias.store.class_models import ModelAnswer
from cogbias.studies import condition_summary as summary
from cogbias.studies.condition_summary import ConditionSummary

Group = tuple[str, str, float]  # (model, mode, temperature): one way a model was asked


def answers_by_group(store: Store, code: str) -> dict[Group, dict[str, list[ModelAnswer]]]:
    """Per (model, mode, temperature), per condition: the session's answers, each repeat
    once (its newest row, whichever run stored it)."""
    newest: dict[tuple[str, str, float, str, int], ModelAnswer] = {}
    for answer in store.model_answers(code):  # oldest first: a later row replaces
        newest[(answer.model, answer.mode, answer.temperature, answer.condition, answer.repeat)] = (
            answer
        )
    groups: dict[Group, dict[str, list[ModelAnswer]]] = {}
    for (model, mode, temperature, condition, _), answer in newest.items():
        groups.setdefault((model, mode, temperature), {}).setdefault(condition, []).append(answer)
    return groups


def model_summaries(store: Store, code: str, question: Question) -> list[ConditionSummary]:
    """Per model, way of asking and condition (in the question's order): the summary of the
    session's model answers (empty when no model answered)."""
    out = []
    for (model, mode, temperature), by_condition in sorted(answers_by_group(store, code).items()):
        used = temperature if uses_temperature(model) else None  # the baseline: none
        for condition in question.conditions:
            answers = by_condition.get(condition)
            if answers:
                out.append(_summary(question, condition, answers, model, mode, used))
    return out


def _summary(
    question: Question,
    condition: str,
    answers: Sequence[ModelAnswer],
    model: str,
    mode: str,
    temperature: float | None,
) -> ConditionSummary:
    """One model's answers to one condition, asked one way; every answer without a reading
    is counted with its reason (a failed call's reason too). `temperature` None: the model
    uses none."""
    who = summary.model_who(model, mode, temperature)
    about = {"model": model, "mode": mode, "temperature": temperature}
    unreadable = [a.error or "no reading" for a in answers if a.error is not None]
    good = [a for a in answers if a.error is None]
    if question.kind == "number":
        values = []
        for answer in good:
            number = parse_number(answer.answer, question.low, question.high)
            if number.ok and number.value is not None:
                values.append(float(number.value))
            else:
                unreadable.append(number.error or "found no number")
        return summary.of_numbers(question, condition, who, values, unreadable, **about)
    if mode == summary.PROBABILITIES:
        distributions = [a.probabilities for a in good if a.probabilities]
        return summary.of_probabilities(
            question, condition, who, distributions, unreadable, **about
        )
    n_options = len(question.keys)
    chosen = [a.option for a in good if a.option is not None and 0 <= a.option < n_options]
    unreadable += ["no option"] * (len(good) - len(chosen))
    return summary.of_choices(question, condition, who, chosen, unreadable, **about)


def uses_temperature(model: str) -> bool:
    """Whether the model's answers depend on a temperature: not the `random` baseline's,
    which draws uniformly (asked of its profile, never of its name)."""
    from cogbias.llm.errors import LLMError
    from cogbias.llm.profiles import resolve

    try:
        return resolve(model).writes_text
    except (LLMError, KeyError, ValueError):  # a model no longer known: as it was asked
        return True


def class_runs(store: Store, code: str) -> list[Run]:
    """The class runs that asked session `code`'s question (the runs whose kind the Class
    page shows), newest first."""
    from cogbias.runs import kinds  # the model stack: not for a participant's page

    return [
        run
        for run in kinds.records(store)
        if run.page is ResultsPage.CLASS and run.spec.get("session") == code
    ]
