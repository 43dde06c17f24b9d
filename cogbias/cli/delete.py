"""`cogbias delete run RUN_ID` and `cogbias delete dataset NAME`: with a prompt or `--yes`."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_commands(commands: Any) -> None:
    p = commands.add_parser("delete", help="delete a run or an imported dataset (asks first)")
    kinds = p.add_subparsers(metavar="WHAT")
    for kind, what in (("run", "RUN_ID"), ("dataset", "NAME")):
        q = kinds.add_parser(kind, help=f"delete one {kind} and what only it uses")
        q.add_argument("name", metavar=what)
        q.add_argument("--db", required=True)
        q.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        q.set_defaults(handler=_delete, kind=kind)


def _delete(args: argparse.Namespace) -> int:
    from cogbias.runs import deletion
    from cogbias.store import Store

    with Store(args.db) as store:
        plan = (deletion.plan_run if args.kind == "run" else deletion.plan_dataset)(
            store, args.name
        )
        print(f"This deletes {plan.describe()}. Nothing else is changed.")
        if not args.yes and _answer("Delete? [y/N] ") not in ("y", "yes"):
            print("Nothing deleted (answer y, or pass --yes).", file=sys.stderr)
            return 1
        deletion.apply(store, plan)
    print(f"Deleted {args.kind} {args.name}.")
    return 0


def _answer(question: str) -> str:
    try:
        return input(question).strip().lower()
    except EOFError:  # no one to ask (stdin closed): not confirmed
        return ""
