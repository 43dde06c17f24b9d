"""A class session's report: the question each condition read, the reveal chart, the numbers
behind it (the class, the original humans, the models) and how the session ran.

The chart and its numbers come from the teacher's page (`views/classroom.py`), so the report
shows what the room saw at the reveal. Nothing of a participant is in it: the store keeps a
hash of each one's cookie token, and this report reads only answers and their conditions.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from cogbias.classroom import lessons, sessions
from cogbias.classroom import models as class_models
from cogbias.classroom.questions import Question
from cogbias.classroom.reveal import REPORT_NOTE
from cogbias.classroom.sessions import ClassResults, Session
from cogbias.core.run_record import Run
from cogbias.llm.costs import dollars
from cogbias.runs import class_answers
from cogbias.store import Store
from cogbias.store.class_models import ModelAnswer
from cogbias.studies.condition_summary import PROBABILITIES
from cogbias.views import classroom, figures
from cogbias.views.report_methods import models_table, software
from cogbias.views.report_parts import Report, ReportError, Section, Table
from cogbias.views.svg import chart_svg

ASSIGNED = (
    "Each participant was given one condition when they first opened the question: the next "
    "place in the session's own balanced order (blocks holding each condition once, each "
    "block shuffled with a seed drawn when the session opened), so any stretch of the room is "
    "split evenly; a reload kept it. One answer per participant; no name or address was stored."
)
POOL_NOTE = (
    "Every session of this question with answers, pooled as one group (each answer counted "
    "once); sessions are named by their code and opening date only."
)
MODELS_NOTE = (
    "Each model was asked each condition's question as the class read it (with the study's "
    "system message where it has one), by a class run: sampled n times at a temperature, or "
    "asked once for the option's letter and read as option probabilities. Structured output "
    "is the grammar the answers were asked under, as the run stored it with each answer "
    "(none: the answer was free text). The cost is what the answers cost when first asked, "
    "from the response cache (answers asked again are free)."
)
LEGACY = "– (asked before class runs)"


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
    return session.state


def _when(stamp: str | None, none: str = "–") -> str:
    """A stored UTC time to the second ("2026-05-04 09:12:03 UTC")."""
    return f"{stamp[:19].replace('T', ' ')} UTC" if stamp else none


def _session_items(session: Session, results: ClassResults) -> tuple[str, ...]:
    n = ", ".join(f"{r.label} {r.n}" for r in results.conditions)
    lesson = (f"Question {session.position} of lesson {session.lesson}",) if session.lesson else ()
    timer = (
        (f"Countdown: {session.seconds} s from the start of answers",) if session.seconds else ()
    )
    return (
        f"Session {session.code}, {_state(session)}",
        *lesson,
        f"Opened {_when(session.created_at)}, answers from {_when(session.started_at)}, "
        f"locked {_when(session.locked_at, '– (not locked)')}, "
        f"revealed {_when(session.revealed_at)}",
        *timer,
        f"Answers per condition: {n} (total {sum(r.n for r in results.conditions)})",
        ASSIGNED,
    )


def _pool_table(results: ClassResults) -> tuple[Table, ...]:
    """The pooled sessions: code, opening date and n per condition (nothing of anyone)."""
    if not results.pooled_others:
        return ()
    labels = {c: results.question.label(c) for c in results.question.conditions}
    rows = [
        {"session": part.code, "opened": part.opened[:10]}
        | {labels[c]: n for c, n in part.n.items()}
        | {"total": part.total}
        for part in results.pool_parts
    ]
    return (Table(f"Your classes: {POOL_NOTE}", pd.DataFrame(rows), "pool"),)


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


def _asked_rows(store: Store, code: str) -> list[dict[str, object]]:
    """One row per class run and model (and per way, for answers asked before runs): how
    it was asked, the grammar really sent, its answers read and not, and what it cost."""
    groups: dict[tuple[str, str, str, float], list[ModelAnswer]] = {}
    for answer in store.model_answers(code):
        key = (answer.run_id, answer.model, answer.mode, answer.temperature)
        groups.setdefault(key, []).append(answer)
    runs = {run.id: run for run in class_models.class_runs(store, code)}
    costs = {run_id: _spent(store, run) for run_id, run in runs.items()}
    rows = []
    for (run_id, model, mode, temperature), answers in groups.items():
        grammars = sorted({a.grammar for a in answers if a.grammar})
        samples = runs[run_id].spec.get("samples") if run_id in runs else None
        rows.append(
            {
                "run": run_id or LEGACY,
                "model": model,
                "asked": _how(mode, temperature, samples, class_models.uses_temperature(model)),
                "structured output": f"grammar: {' / '.join(grammars)}" if grammars else "none",
                "conditions": len({a.condition for a in answers}),
                "readable answers": sum(a.error is None for a in answers),
                "unreadable or failed": sum(a.error is not None for a in answers),
                "cost": _cost(costs.get(run_id, {}).get(model)),
            }
        )
    return rows


def _spent(store: Store, run: Run) -> dict[str, float | None]:
    try:
        return class_answers.spent(store, run)
    except (KeyError, ValueError):  # its session or spec no longer read: cost unknown
        return {}


def _models_sections(store: Store, results: ClassResults) -> list[Section]:
    if not results.models:
        return [Section("Models", paragraphs=("No model answered this session's question.",))]
    asked = _asked_rows(store, results.code)
    names = list(dict.fromkeys(row.model for row in results.models))
    structured = {
        name: "grammar"
        if any(r["model"] == name and r["structured output"] != "none" for r in asked)
        else "none"
        for name in names
    }
    temperatures = (
        ", ".join(
            dict.fromkeys(f"{r.temperature:g}" for r in results.models if r.temperature is not None)
        )
        or "none (the random baseline draws at random)"
    )
    system = results.question.system
    return [
        Section(
            "Models",
            paragraphs=(MODELS_NOTE,)
            + ((f"The system message they were given: {system}",) if system else ())
            + tuple(classroom.unreadable_notes(results)),
            tables=(
                Table("How each model was asked", pd.DataFrame(asked), "asked"),
                models_table(names, None, temperatures, structured),
            ),
        )
    ]


def _how(mode: str, temperature: float, samples: object = None, uses: bool = True) -> str:
    if mode == PROBABILITIES:
        return "option probabilities (one call per condition, temperature 0)"
    how = f"sampled at temperature {temperature:g}" if uses else "drawn at random (no temperature)"
    return how + (f", {samples} per condition" if samples else "")


def _cost(cost: float | None) -> str:
    return "unknown" if cost is None else dollars(cost)


def class_report(store: Store, code: str) -> Report:
    """A class session: its question, the reveal beside the humans and models, and methods."""
    try:
        session = lessons.resolve(store, code)[1]
    except KeyError as exc:
        raise ReportError(str(exc).strip("'\"")) from None
    results = sessions.results(store, session.code, pool=True)
    question = session.question
    frame = classroom.reveal_frame(results)
    chart = classroom.reveal_chart(frame, question)
    if chart is None or not (results.models or any(r.n for r in results.conditions)):
        raise ReportError(
            f"class session {session.code} has no answers from the class or the models yet; "
            "nothing to report"
        )
    reveal = Section(
        "The class beside the humans and the models",
        paragraphs=(REPORT_NOTE,) + ((f"Humans: {results.citation}",) if results.citation else ()),
        charts=(chart_svg(figures.printed(chart)),),
        tables=(_numbers(frame, question), _class_answers(results), *_pool_table(results)),
    )
    methods = (
        software(),
        Section("The session", items=_session_items(session, results)),
        Section("The question's source", items=_source_items(question, results.citation)),
        *_models_sections(store, results),
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
