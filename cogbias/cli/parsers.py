"""The flags of the run commands (`run`, `batch`, `resume`, `cancel`, `runs`, `results`,
`cache`); `run` and `results` have modes (cli/run_modes.py). Their handlers live in
cli/runs.py, cli/studies.py and cli/cache.py."""

from __future__ import annotations

from typing import Any

from cogbias.cli import cache, run_modes, runs
from cogbias.cli.options import _add_execution as add_execution
from cogbias.cli.options import add_db


def add_commands(commands: Any) -> None:
    run_modes.add_run(commands)

    p = commands.add_parser("batch", help="hand a run's calls to a batch engine (vLLM run-batch)")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("export", help="write the run's next calls as OpenAI batch JSONL")
    q.add_argument("run_id")
    q.add_argument("--round", choices=["fill", "decide", "extract"], help="only this round")
    q.add_argument("-o", "--output", required=True, help="the requests file (.jsonl)")
    q.add_argument("--force", action="store_true", help="replace an existing output file")
    add_db(q)
    q.set_defaults(handler=runs._batch_export)
    q = actions.add_parser("import", help="put a batch engine's answers into the cache")
    q.add_argument("results", help="the engine's output file (OpenAI batch output JSONL)")
    add_db(q)
    q.set_defaults(handler=runs._batch_import)

    p = commands.add_parser("resume", help="resume a stored run from its own spec")
    p.add_argument("run_id")
    add_db(p)
    add_execution(p)
    p.set_defaults(handler=runs._resume)

    p = commands.add_parser("cancel", help="ask a run's worker to stop (it stops within 2 s)")
    p.add_argument("run_id")
    add_db(p)
    p.set_defaults(handler=runs._cancel)

    p = commands.add_parser("runs", help="list runs with counts, failures, tokens, cost, duration")
    add_db(p)
    p.set_defaults(handler=runs._runs)

    run_modes.add_results(commands)

    p = commands.add_parser("cache", help="see, prune or clear the LLM response cache")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("stats", help="cached answers per model: count, tokens, cost, age")
    add_db(q)
    q.set_defaults(handler=cache._cache_stats)
    q = actions.add_parser("prune", help="delete cached answers older than an age")
    q.add_argument("--older-than", required=True, help="an age like 30d, 12h or 90m")
    q.add_argument("--model", help="only this model's answers")
    add_db(q)
    q.set_defaults(handler=cache._cache_prune)
    q = actions.add_parser("clear", help="delete every cached answer (or one model's)")
    q.add_argument("--model", help="only this model's answers")
    add_db(q)
    q.set_defaults(handler=cache._cache_clear)
