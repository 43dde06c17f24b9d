"""`cogbias class ...`: run a question on the room from the command line (docs/teaching.md).

`open` stores a session and prints its code, `serve` serves participants and prints the join
address, `ask` asks models the session's question (a class run: `cogbias runs`, `cancel` and
`resume` work on it), `results` prints the class beside the humans and the models, and
`close`, `reveal`, `list`, `export` and `delete` do what the teacher's page does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from cogbias.cli.options import API_BASE_HELP, add_calls, add_db, run_label, temperature, whole


def add_commands(commands: Any) -> None:
    p = commands.add_parser("class", help="run a question on a class: sessions and their server")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("open", help="open a session on a question; prints its code")
    q.add_argument("--study", help="a study's id (e.g. classics), with --test")
    q.add_argument("--test", help="the study's test (e.g. theatre_ticket)")
    q.add_argument("--test-case", help="a test case id instead: one instance, filled offline")
    q.add_argument("--scenario", type=int, default=1, help="the test case's scenario number")
    q.add_argument("--seed", type=int, default=0, help="the test case's fill seed")
    add_db(q)
    q.set_defaults(handler=_open)
    q = actions.add_parser("serve", help="serve participants (stop with Ctrl-C)")
    q.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to let the room reach it")
    q.add_argument("--port", type=int, default=8765, help="0 lets the system pick one")
    q.add_argument("--public-url", help="the address participants use, behind a proxy")
    add_db(q)
    q.set_defaults(handler=_serve)
    _add_ask(actions)
    q = actions.add_parser("results", help="the class per condition, humans and models beside")
    q.add_argument("code")
    q.add_argument("--format", choices=["text", "json"], default="text")
    add_db(q)
    q.set_defaults(handler=_results)
    for name, text in (
        ("close", "stop taking answers"),
        ("reveal", "close and show the result to participants"),
    ):
        q = actions.add_parser(name, help=text)
        q.add_argument("code")
        add_db(q)
        q.set_defaults(handler=_change, change=name)
    q = actions.add_parser("delete", help="delete a session and its answers (asks first)")
    q.add_argument("code")
    q.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    add_db(q)
    q.set_defaults(handler=_delete)
    q = actions.add_parser("list", help="the sessions, newest first")
    add_db(q)
    q.set_defaults(handler=_list)
    q = actions.add_parser("export", help="write a session's answers as CSV")
    q.add_argument("code")
    q.add_argument("-o", "--output", required=True, help="the CSV file")
    q.add_argument("--force", action="store_true", help="replace an existing file")
    add_db(q)
    q.set_defaults(handler=_export)


def _add_ask(actions: Any) -> None:
    from cogbias.runs.class_plan import MAX_SAMPLES, SCORINGS

    q = actions.add_parser(
        "ask",
        help="ask models the session's question (a class run); prints the run id",
        description="Ask models exactly what the class read, as a run: its progress shows "
        "here, and `cogbias runs`, `cancel` and `resume` work on it. By default a model that "
        "lists its most probable tokens (the local model) is read as option probabilities on "
        "a question with options; --scoring sample draws --samples answers at --temperature.",
    )
    q.add_argument("code", help="the session's code")
    q.add_argument("--models", required=True, help="comma-separated, e.g. random,local/smollm2")
    q.add_argument(
        "--samples", type=whole(1, MAX_SAMPLES), help="sampled answers per model and condition (20)"
    )
    q.add_argument("--temperature", type=temperature, help="of sampled answers (0.7)")
    q.add_argument(
        "--scoring",
        choices=SCORINGS,
        help="sample: --samples answers at --temperature; probabilities: one call per "
        "condition, read as option probabilities (default: probabilities when every model "
        "gives them and the question has options, else sample)",
    )
    q.add_argument("--api-base", help=API_BASE_HELP)
    q.add_argument("--name", type=run_label, default="", help="a label for the run")
    q.add_argument("--dry-run", action="store_true", help="show the plan and its cost only")
    add_calls(q)
    add_db(q)
    q.set_defaults(handler=_ask)


def _ask(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.cli.execution import execute
    from cogbias.runs import kinds
    from cogbias.runs.class_plan import PROBABILITIES, ClassSpec
    from cogbias.store import Store

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    with Store(args.db) as store:
        session = sessions.require_session(store, args.code)
        spec = ClassSpec(
            session.code,
            tuple(models),
            samples=20 if args.samples is None else args.samples,
            temperature=0.7 if args.temperature is None else args.temperature,
            scoring=args.scoring or "",
            api_base=args.api_base,
        )
        plan = kinds.plan(spec, store)
        print(plan.describe(), file=sys.stderr)
        sampled = args.samples is not None or args.temperature is not None
        if plan.spec.scoring == PROBABILITIES and sampled:
            print("note: --samples and --temperature apply to sampled answers", file=sys.stderr)
        if args.dry_run:
            return 0
        code = execute(plan, store, args, name=args.name)
        result = sessions.results(store, session.code)
    print(plan.spec.run_id)
    for row in result.models:
        if row.n_unreadable:
            print(f"{row.who}, {row.label}: {row.unreadable_text()}", file=sys.stderr)
    return code


def _open(args: argparse.Namespace) -> int:
    from cogbias.classroom import questions, sessions
    from cogbias.store import Store

    if args.test_case and (args.study or args.test):
        raise ValueError("give either --study with --test, or --test-case, not both")
    if args.test_case:
        question = questions.case_question(args.test_case, args.scenario, args.seed)
    elif args.study and args.test:
        question = questions.classic_question(args.study, args.test)
    else:
        raise ValueError("say which question: --study ID --test ID, or --test-case ID")
    with Store(args.db) as store:
        code = sessions.open_session(store, question)
        base = sessions.join_base(store)
    print(code)
    where = sessions.join_url(base, code) if base else "start `cogbias class serve` to get one"
    print(f"{question.title}: participants join at {where}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from cogbias.classroom import server

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port} is not a port; give 1 to 65535 (or 0)")
    url = args.public_url
    if url and (
        not url.startswith(("http://", "https://")) or len(url) > 300 or url.split()[0] != url
    ):
        raise ValueError(
            "--public-url must start with http:// or https:// (one address, no spaces)"
        )

    def started(base: str) -> None:
        print(f"Participants join at {base}  (a session's page: {base}/s/CODE)", flush=True)
        print("Stop with Ctrl-C; answers are stored as they come.", file=sys.stderr, flush=True)

    try:
        asyncio.run(server.serve(args.db, args.host, args.port, args.public_url, started))
    except KeyboardInterrupt:
        print("Stopped.", file=sys.stderr)
    return 0


def _results(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        result = sessions.results(store, args.code)
    if args.format == "json":
        print(json.dumps(sessions.results_json(result), indent=2, ensure_ascii=False))
        return 0
    for line in _text_lines(result):
        print(line)
    return 0


def _text_lines(result: Any) -> list[str]:
    question = result.question
    lines = [f"{result.code}  {question.title}"]
    humans = {h.condition: h for h in result.humans}
    for row in result.conditions:
        lines.append(f"\n{row.label} ({row.condition}): {row.n} answered")
        human = humans.get(row.condition)
        if question.kind == "number":
            lines.append(f"  class: median {_num(row.median)}, mean {_num(row.mean)}")
            if human is not None and human.median is not None:
                lines.append(f"  humans: median {_num(human.median)}{_n(human.n)}")
        else:
            for i, option in enumerate(question.options[row.condition]):
                said = f"  {option[:50]}: class {_share(row.shares[i])}"
                if human is not None and human.shares[i] is not None:
                    said += f", humans {_share(human.shares[i])}{_n(human.n)}"
                lines.append(said)
            if row.mean is not None:
                lines.append(f"  class mean position {row.mean:.2f} of {len(question.keys)}")
        for model in (m for m in result.models if m.condition == row.condition):
            lines.append(f"  model {model.model}: {_model_text(question, model)}")
            if model.n_unreadable:
                lines.append(f"    {model.unreadable_text()}")
    if result.citation:
        lines.append(f"\nhumans: {result.citation}")
    return lines


def _model_text(question: Any, model: Any) -> str:
    how = f"n {model.n}" + (f", {model.n_unreadable} unreadable" if model.n_unreadable else "")
    if question.kind == "number":
        return f"median {_num(model.median)}, mean {_num(model.mean)} ({how})"
    shares = ", ".join(_share(s) for s in model.shares)
    mean = f", mean position {model.mean:.2f}" if model.mean is not None else ""
    return f"{shares}{mean} ({how}, {model.who.removeprefix('model ')})"


def _n(n: int | None) -> str:
    return f" (n {n})" if n else ""


def _share(value: float | None) -> str:
    from cogbias.views.numbers import percent

    return percent(value)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def _change(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        code = sessions.require_session(store, args.code).code
        (sessions.close_session if args.change == "close" else sessions.reveal_session)(store, code)
    print(f"Session {code} {'closed' if args.change == 'close' else 'closed and revealed'}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.cli.delete import _answer
    from cogbias.store import Store

    with Store(args.db) as store:
        session = sessions.require_session(store, args.code)
        count = sum(sessions.count_answers(store, session.code).values())
        asked = len(store.model_answers(session.code))
        print(
            f"This deletes session {session.code} ({session.question.title}), its {count} "
            f"answers and the {asked} answers of models (with the class runs that asked them)."
        )
        if not args.yes and _answer("Delete? [y/N] ") not in ("y", "yes"):
            print("Nothing deleted (answer y, or pass --yes).", file=sys.stderr)
            return 1
        sessions.delete_session(store, session.code)
    print(f"Deleted session {session.code}.")
    return 0


def _list(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        listed = [
            (s, sum(sessions.count_answers(store, s.code).values()))
            for s in sessions.list_sessions(store)
        ]
    if not listed:
        print("No class sessions yet (open one with `cogbias class open`).", file=sys.stderr)
    for session, count in listed:
        state = "revealed" if session.revealed else "open" if session.open else "closed"
        print(
            f"{session.code}  {state:8}  {count:4} answers  {session.created_at[:16]}  {session.question.title}"
        )
    return 0


def _export(args: argparse.Namespace) -> int:
    from cogbias.classroom import sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        path = sessions.export_csv(store, args.code, args.output, force=args.force)
    print(f"Wrote {path}.")
    return 0
