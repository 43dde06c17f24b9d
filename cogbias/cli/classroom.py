"""`cogbias class ...`: run a question, or a lesson of several, on the room from the command
line (docs/teaching.md).

`open` stores a session (one question) or a lesson (several, one code) and prints its code,
`serve` serves participants and prints the join address, `ask` asks models the question
(a class run: `cogbias runs`, `cancel` and `resume` work on it), `results` prints the class
beside the humans, the models and your other classes (`cli/class_results.py`), and `start`,
`timer`, `lock` (or `close`), `reveal`, `next`, `list`, `export` and `delete` do what the
teacher's page does. A lesson's code means its question on screen; `CODE-2` names its second.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from cogbias.cli.options import API_BASE_HELP, add_calls, add_db, run_label, temperature, whole


def add_commands(commands: Any) -> None:
    from cogbias.cli.class_results import add_results

    p = commands.add_parser("class", help="run a question on a class: sessions and their server")
    actions = p.add_subparsers(metavar="ACTION")
    _add_open(actions)
    q = actions.add_parser("serve", help="serve participants (stop with Ctrl-C)")
    q.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to let the room reach it")
    q.add_argument("--port", type=int, default=8765, help="0 lets the system pick one")
    q.add_argument("--public-url", help="the address participants use, behind a proxy")
    add_db(q)
    q.set_defaults(handler=_serve)
    _add_ask(actions)
    add_results(actions)
    for name, text in (
        ("start", "open answers to the question waiting in its lobby"),
        ("lock", "stop taking answers to the question on screen"),
        ("close", "the same as lock"),
        ("reveal", "show the result to the room and to those who answered (locks first)"),
        ("next", "lock the question on screen and open the lesson's next one"),
    ):
        q = actions.add_parser(name, help=text)
        q.add_argument("code")
        add_db(q)
        q.set_defaults(handler=_change, change=name)
    q = actions.add_parser("timer", help="give the question a countdown that locks it")
    q.add_argument("code")
    q.add_argument("seconds", type=whole(0), help="the countdown's length (0: none)")
    add_db(q)
    q.set_defaults(handler=_change, change="timer")
    q = actions.add_parser("delete", help="delete a session or lesson and its answers (asks)")
    q.add_argument("code")
    q.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    add_db(q)
    q.set_defaults(handler=_delete)
    q = actions.add_parser("list", help="the lessons and sessions, newest first")
    add_db(q)
    q.set_defaults(handler=_list)
    q = actions.add_parser("export", help="write a session's answers as CSV")
    q.add_argument("code")
    q.add_argument("-o", "--output", required=True, help="the CSV file")
    q.add_argument("--force", action="store_true", help="replace an existing file")
    add_db(q)
    q.set_defaults(handler=_export)


def _add_open(actions: Any) -> None:
    q = actions.add_parser(
        "open",
        help="open a session (one question) or a lesson (several); prints its code",
        description="One --test (or --test-case) opens a session taking answers at once; "
        "several open a lesson under one code, waiting in its lobby until `cogbias class "
        "start CODE`, each question revealed in turn (`next`).",
    )
    q.add_argument("--study", help="a study's id (e.g. classics), with --test")
    q.add_argument(
        "--test", action="append", default=[], help="the study's test (e.g. asian_disease); "
        "repeat it for a lesson, in order",
    )  # fmt: skip
    q.add_argument(
        "--test-case", action="append", default=[],
        help="a test case id instead: one instance, filled offline (repeat for a lesson)",
    )  # fmt: skip
    q.add_argument("--scenario", type=int, default=1, help="the test case's scenario number")
    q.add_argument("--seed", type=int, default=0, help="the test case's fill seed")
    q.add_argument(
        "--timer", type=whole(0), default=0, help="each question's countdown in seconds (0: none)"
    )
    q.add_argument(
        "--lobby", action=argparse.BooleanOptionalAction, default=None,
        help="wait in a lobby until `start` (default: yes for a lesson, no for one question)",
    )  # fmt: skip
    add_db(q)
    q.set_defaults(handler=_open)


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
    from cogbias.classroom import lessons, sessions
    from cogbias.cli.execution import execute
    from cogbias.runs import kinds
    from cogbias.runs.class_plan import PROBABILITIES, ClassSpec
    from cogbias.store import Store

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    with Store(args.db) as store:
        session = lessons.resolve(store, args.code)[1]
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
    from cogbias.classroom import lessons, questions, sessions
    from cogbias.store import Store

    if args.test_case and (args.study or args.test):
        raise ValueError("give either --study with --test, or --test-case, not both")
    if args.test_case:
        asked = [questions.case_question(c, args.scenario, args.seed) for c in args.test_case]
    elif args.study and args.test:
        asked = [questions.classic_question(args.study, test) for test in args.test]
    else:
        raise ValueError("say which question: --study ID --test ID, or --test-case ID")
    with Store(args.db) as store:
        code = lessons.open_lesson(store, asked, args.timer or None, args.lobby)
        lesson = lessons.resolve(store, code)[0]
        base = sessions.join_base(store)
    print(code)
    where = sessions.join_url(base, code) if base else "start `cogbias class serve` to get one"
    print(f"{lesson.title}: participants join at {where}", file=sys.stderr)
    if lesson.session.state == "lobby":
        print(f"In the lobby: `cogbias class start {code}` opens answers.", file=sys.stderr)
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


_DONE = {
    "start": "answers open",
    "lock": "answers locked",
    "close": "answers locked",
    "reveal": "locked and revealed",
    "next": "answers open",
    "timer": "timer set",
}


def _change(args: argparse.Namespace) -> int:
    from cogbias.classroom import lessons
    from cogbias.store import Store

    act = {
        "start": lessons.start,
        "lock": lessons.lock,
        "close": lessons.lock,
        "reveal": lessons.reveal,
        "next": lessons.next_question,
    }
    with Store(args.db) as store:
        if args.change == "timer":
            session = lessons.set_timer(store, args.code, args.seconds or None)
        else:
            session = act[args.change](store, args.code)
        lesson = lessons.resolve(store, session.code)[0]
    where = f" ({lesson.place(session)} of lesson {lesson.code})" if not lesson.single else ""
    left = session.seconds_left()
    timer = f"; {left:.0f} s on its countdown" if left is not None else ""
    if args.change == "timer" and session.state == "lobby" and session.seconds:
        timer = f"; a {session.seconds} s countdown starts with the answers"
    print(f"Session {session.code}{where}: {_DONE[args.change]}{timer}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from cogbias.classroom import lessons, sessions
    from cogbias.cli.delete import _answer
    from cogbias.store import Store

    with Store(args.db) as store:
        lesson, _ = lessons.resolve(store, args.code)
        count = sum(sum(sessions.count_answers(store, q.code).values()) for q in lesson.questions)
        asked = sum(len(store.model_answers(q.code)) for q in lesson.questions)
        what = f"session {lesson.code}" if lesson.single else f"lesson {lesson.code}"
        print(
            f"This deletes {what} ({lesson.title}), its {count} answers and the {asked} "
            "answers of models (with the class runs that asked them)."
        )
        if not args.yes and _answer("Delete? [y/N] ") not in ("y", "yes"):
            print("Nothing deleted (answer y, or pass --yes).", file=sys.stderr)
            return 1
        lessons.delete(store, args.code)
    print(f"Deleted {what}.")
    return 0


def _list(args: argparse.Namespace) -> int:
    from cogbias.classroom import lessons, sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        listed = [
            (lesson, sum(sessions.count_answers(store, lesson.session.code).values()))
            for lesson in lessons.list_lessons(store)
        ]
    if not listed:
        print("No class sessions yet (open one with `cogbias class open`).", file=sys.stderr)
    for lesson, count in listed:
        place = f" ({lesson.place()})" if not lesson.single else ""
        print(
            f"{lesson.code}  {lesson.session.state:9}  {count:4} answers  "
            f"{lesson.created_at[:16]}  {lesson.title}{place}"
        )
    return 0


def _export(args: argparse.Namespace) -> int:
    from cogbias.classroom import lessons, sessions
    from cogbias.store import Store

    with Store(args.db) as store:
        _, session = lessons.resolve(store, args.code)
        path = sessions.export_csv(store, session.code, args.output, force=args.force)
    print(f"Wrote {path}.")
    return 0
