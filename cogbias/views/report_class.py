"""A class session's report: the question each condition read, the reveal chart, the numbers
behind it (the class, the original humans, the models) and how the session ran.

The chart and its numbers come from the teacher's page (`views/classroom.py`), so the report
shows what the room saw at the reveal. Nothing of a participant is in it: the store keeps a
hash of each one's cookie token, and this report reads only answers and their conditions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pandas as pd

from cogbias.classroom import models as class_models
from cogbias.classroom import sessions
from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import ClassResults, Session
from cogbias.llm.costs import dollars
from cogbias.store import Store
from cogbias.views import classroom, figures
from cogbias.views.report_methods import models_table, software
from cogbias.views.report_parts import Report, ReportError, Section, Table
from cogbias.views.svg import chart_svg

REVEAL_NOTE = (
    "Per condition, the original study's people (where the question is one of theirs), this "
    "class and each model asked the same words, each with its 95% interval: Wilson's for a "
    "share, a t-interval for a mean position, a distribution-free one for a median. A model's "
    "option probabilities (one call) have no interval."
)
ASSIGNED = (
    "Each participant was given one condition when they first opened the question: the "
    "condition with the fewest participants so far, ties drawn at random, so the room stays "
    "balanced; a reload kept it. One answer per participant; no name or address was stored."
)
MODELS_NOTE = (
    "Each model was asked each condition's question as the class read it (with the study's "
    "system message where it has one): sampled n times at a temperature, or asked once for "
    "the option's letter and read as option probabilities. The cost is what the answers cost "
    "when first asked, from the response cache (answers asked again are free)."
)


def _question_sections(question: Question) -> list[Section]:
    """Each condition's text as a participant read it, and its options, as text."""
    out = []
    for condition in question.conditions:
        lines = [line for line in question.texts[condition].splitlines() if line.strip()]
        options = question.options.get(condition, ())
        if not options and question.kind == "number":
            options = (f"{question.number_label or 'Answer'} ____ (a number)",)
        label = question.labels.get(condition, condition)
        out.append(Section(f"The question: {label}", paragraphs=tuple(lines), items=tuple(options)))
    return out


def _numbers(frame: pd.DataFrame, question: Question) -> Table:
    """The chart's rows: condition, option, who, the value and its interval, n."""
    measure = classroom.measure_of(question)
    table = frame.rename(columns={"value": measure, "low": "95% low", "high": "95% high"})
    counts = [None if pd.isna(n) else int(n) for n in table["n"]]
    table["n"] = pd.Series(counts, index=table.index, dtype=object)  # whole numbers, or –
    return Table("The numbers behind the chart", table, "reveal")


def _class_answers(results: ClassResults) -> Table:
    """The class's count and share of every option per condition (the chart may show one)."""
    question = results.question
    rows = []
    for row in results.conditions:
        options = question.options.get(row.condition) or question.keys
        for i, count in enumerate(row.counts):
            rows.append(
                {
                    "condition": row.label,
                    "option": options[i] if i < len(options) else question.keys[i],
                    "answers": count,
                    "share": row.shares[i],
                }
            )
        if question.kind == "number":
            rows.append({"condition": row.label, "option": "median", "answers": row.n,
                         "share": None, "median": row.median, "mean": row.mean})  # fmt: skip
    return Table("The class's answers per option", pd.DataFrame(rows), "class-answers")


def _state(session: Session) -> str:
    return "revealed" if session.revealed else "open" if session.open else "closed"


def _when(stamp: str | None, none: str = "–") -> str:
    """A stored UTC time to the second ("2026-05-04 09:12:03 UTC")."""
    return f"{stamp[:19].replace('T', ' ')} UTC" if stamp else none


def _session_items(session: Session, results: ClassResults) -> tuple[str, ...]:
    n = ", ".join(f"{r.label} {r.n}" for r in results.conditions)
    return (
        f"Session {session.code}, {_state(session)}",
        f"Opened {_when(session.created_at)}, closed {_when(session.closed_at, '– (still open)')}"
        f", revealed {_when(session.revealed_at)}",
        f"Answers per condition: {n} (total {sum(r.n for r in results.conditions)})",
        ASSIGNED,
    )


def _source_items(question: Question, citation: str) -> tuple[str, ...]:
    """Where the question came from, with the version of its source as the library holds it
    now, and a hash of the question as the session stored it (what the class read)."""
    stored = hashlib.sha256(question.to_json().encode("utf-8")).hexdigest()
    if question.source == "classic":
        items = [f"Study {question.study}, test {question.test}{_study_version(question.study)}"]
    else:
        items = [
            f"Test case {question.test_case}{_case_version(question.test_case)}, scenario "
            f"{question.scenario}, fill seed {question.seed} (the offline example fills), "
            f"instance {question.instance_id}"
        ]
    if question.reference:
        items.append(f"Humans: reference {question.reference}: {citation}")
    else:
        items.append("Humans: no original study asked this question (none shown)")
    items.append(f"SHA-256 of the question as the session stored it: {stored}")
    return tuple(items)


def _study_version(study: str) -> str:
    from cogbias.core import records
    from cogbias.studies.study_catalog import get_study

    try:
        return f" (study file version {records.stable_id(get_study(study).source)} now)"
    except (KeyError, ValueError):
        return " (the study file is no longer in the catalog)"


def _case_version(case_id: str) -> str:
    from cogbias.library.testcases import get_test_case

    try:
        return f" (content hash {get_test_case(case_id).content_hash} now)"
    except (KeyError, ValueError):
        return " (no longer in the library)"


def _models_sections(
    store: Store, code: str, rows: Sequence[class_models.ModelResult], system: str
) -> list[Section]:
    if not rows:
        return [Section("Models", paragraphs=("No model answered this session's question.",))]
    spent = class_models.spent(store, code)
    groups: dict[tuple[str, str, float], list[class_models.ModelResult]] = {}
    for row in rows:
        groups.setdefault((row.model, row.mode, row.temperature), []).append(row)
    asked = [
        {
            "model": model,
            "asked": _how(mode, temperature),
            "conditions": len(group),
            "readable answers": sum(r.n for r in group),
            "unreadable or failed": sum(r.n_failed for r in group),
            "cost": _cost(spent.get((model, mode, temperature))),
        }
        for (model, mode, temperature), group in groups.items()
    ]
    names = list(dict.fromkeys(row.model for row in rows))
    temperatures = ", ".join(dict.fromkeys(f"{t:g}" for _, _, t in groups))
    return [
        Section(
            "Models",
            paragraphs=(MODELS_NOTE,)
            + ((f"The system message they were given: {system}",) if system else ()),
            tables=(
                Table("How each model was asked", pd.DataFrame(asked), "asked"),
                models_table(names, None, temperatures),
            ),
        )
    ]


def _how(mode: str, temperature: float) -> str:
    if mode == class_models.PROBABILITIES:
        return "option probabilities (one call per condition, temperature 0)"
    return f"sampled at temperature {temperature:g}"


def _cost(cost: float | None) -> str:
    return "unknown" if cost is None else dollars(cost)


def class_report(store: Store, code: str) -> Report:
    """A class session: its question, the reveal beside the humans and models, and methods."""
    try:
        session = sessions.require_session(store, code)
    except KeyError as exc:
        raise ReportError(str(exc).strip("'\"")) from None
    results = sessions.results(store, session.code)
    rows = class_models.model_results(store, session.code)
    question = session.question
    frame = classroom.reveal_frame(results, rows)
    chart = classroom.reveal_chart(frame, question)
    if chart is None or not (rows or any(r.n for r in results.conditions)):
        raise ReportError(
            f"class session {session.code} has no answers from the class or the models yet; "
            "nothing to report"
        )
    reveal = Section(
        "The class beside the humans and the models",
        paragraphs=(REVEAL_NOTE,) + ((f"Humans: {results.citation}",) if results.citation else ()),
        charts=(chart_svg(figures.printed(chart)),),
        tables=(_numbers(frame, question), _class_answers(results)),
    )
    methods = (
        software(),
        Section("The session", items=_session_items(session, results)),
        Section("The question's source", items=_source_items(question, results.citation)),
        *_models_sections(store, session.code, rows, question.system),
    )
    total = sum(r.n for r in results.conditions)
    summary = (
        f"Class session {session.code}: {question.title}",
        f"{total:,} answers in {len(question.conditions)} conditions; {_state(session)}",
        f"Opened {_when(session.created_at)}",
    )
    return Report(
        "class",
        f"cogbias report: class session {session.code} ({question.title})",
        summary,
        (*_question_sections(question), reveal),
        methods,
    )
