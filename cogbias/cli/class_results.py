"""`cogbias class results CODE`: the class per condition beside the humans, the models and,
with `--pool`, every class that answered the same question, as text, JSON or CSV.

The words and the option labels are the reveal's (`classroom.reveal`): each condition's own
option (or the original's neutral name for it), a model's temperature only where it uses one.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cogbias.cli.options import add_db


def add_results(actions: Any) -> None:
    q = actions.add_parser(
        "results",
        help="the class per condition, humans and models beside (--pool: every class)",
        description="The question on screen of a lesson (or the question CODE-N names): the "
        "class per condition beside the original study's people and the models; --pool adds "
        "every session of the same question pooled, with each session's n.",
    )
    q.add_argument("code")
    q.add_argument("--format", choices=["text", "json", "csv"], default="text")
    q.add_argument("--pool", action="store_true", help="add your classes of this question")
    add_db(q)
    q.set_defaults(handler=_results)


def _results(args: argparse.Namespace) -> int:
    from cogbias.classroom import lessons, sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        lesson, session = lessons.resolve(store, args.code)
        result = sessions.results(store, session.code, pool=args.pool)
    if not lesson.single and sessions.normal_code(args.code) == lesson.code:
        print(f"lesson {lesson.code}: {lesson.place(session)}, {session.code}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(sessions.results_json(result), indent=2, ensure_ascii=False))
    elif args.format == "csv":
        from cogbias.views.classroom import reveal_csv

        sys.stdout.write(reveal_csv(result))
    else:
        for line in text_lines(result):
            print(line)
    return 0


def text_lines(result: Any) -> list[str]:
    from cogbias.classroom import reveal

    question = result.question
    labels = reveal.option_labels(question)
    lines = [f"{result.code}  {question.title}"]
    humans = {h.condition: h for h in result.humans}
    pooled = {p.condition: p for p in result.pool}
    for row in result.conditions:
        lines.append(f"\n{row.label} ({row.condition}): {row.n} answered")
        human, pool = humans.get(row.condition), pooled.get(row.condition)
        if question.kind == "number":
            lines.append(f"  class: median {_num(row.median)}, mean {_num(row.mean)}")
            if human is not None and human.median is not None:
                lines.append(f"  humans: median {_num(human.median)}{_n(human.n)}")
            if pool is not None:
                lines.append(f"  your classes: median {_num(pool.median)}{_parts(pool)}")
        else:
            for i, option in enumerate(labels[row.condition]):
                said = f"  {option[:60]}: class {_share(row.shares[i])}"
                if human is not None and human.shares[i] is not None:
                    said += f", humans {_share(human.shares[i])}{_n(human.n)}"
                if pool is not None:
                    said += f", your classes {_share(pool.shares[i])}{_parts(pool)}"
                lines.append(said)
            if row.mean is not None:
                lines.append(f"  class mean position {row.mean:.2f} of {len(question.keys)}")
        for model in (m for m in result.models if m.condition == row.condition):
            lines.append(f"  {model.who}: {_model_text(question, model)}")
            if model.n_unreadable:
                lines.append(f"    {model.unreadable_text()}")
    if result.pool_parts:
        sessions = ", ".join(f"{p.code} ({p.opened[:10]}, n {p.total})" for p in result.pool_parts)
        lines.append(f"\nyour classes: {sessions}")
    if result.citation:
        lines.append(f"\nhumans: {result.citation}")
    return lines


def _model_text(question: Any, model: Any) -> str:
    how = f"n {model.n}" + (f", {model.n_unreadable} unreadable" if model.n_unreadable else "")
    if question.kind == "number":
        return f"median {_num(model.median)}, mean {_num(model.mean)} ({how})"
    shares = ", ".join(_share(s) for s in model.shares)
    mean = f", mean position {model.mean:.2f}" if model.mean is not None else ""
    return f"{shares}{mean} ({how})"


def _n(n: int | None) -> str:
    return f" (n {n})" if n else ""


def _parts(pool: Any) -> str:
    return f" (n {pool.n} in {len(pool.parts)} sessions)"


def _share(value: float | None) -> str:
    from cogbias.classroom.reveal import SHARE, readable

    return readable(value, SHARE)


def _num(value: float | None) -> str:
    from cogbias.classroom.reveal import MEDIAN, readable

    return readable(value, MEDIAN)
