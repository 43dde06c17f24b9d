"""Working on a planned run from the command line, of any kind: `run`, `resume` and a study's
`run study` all end here, with one summary of how the run ended."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cogbias.cli.options import execution_options
from cogbias.core.run_record import ResultsPage, RunStatus
from cogbias.llm import costs
from cogbias.views.unread_answers import run_note

# what to do next once a run shown on a page has ended (a run of another kind: nothing)
NEXT_STEP = {ResultsPage.STUDIES: "see the figures with `cogbias results run {id} --by mitigation`"}


def execute(
    plan: Any, store: Any, args: argparse.Namespace, name: str = "", kind: Any = None
) -> int:
    """Work on `plan` (of `kind`, when the caller has resolved it) and say how it ended."""
    from cogbias.runs import executor, kinds, summaries

    kind = kind or kinds.kind_of(plan.spec)
    if getattr(args, "batch", False) and not kind.batchable:
        raise ValueError(
            f"--batch hands the calls of paired, dataset and token-bias runs to a batch "
            f"engine; a {kind.name} run is asked directly: leave --batch out"
        )
    if getattr(args, "batch", False) and getattr(args, "max_cost", None) is not None:
        raise ValueError(
            "--max-cost stops a run before a call that could pass it; a batch is charged when "
            "its results come back, all at once: leave one of them out (--dry-run shows the "
            "estimate with --batch)"
        )
    args.exit_at_once = True  # see cli._exit_at_once
    options = execution_options(args, name)
    try:
        if getattr(args, "batch", False):
            from cogbias.runs import batch_provider

            options.pop("max_cost")
            outcome = batch_provider.execute(
                plan,
                store,
                poll_seconds=args.poll_seconds,
                fallback=args.batch_fallback,
                **options,
            )
        else:
            outcome = executor.execute(plan, store, kind=kind, **options)
    except executor.RunBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    saved = outcome.cost_saved or 0.0
    print(
        f"run {outcome.id}: {outcome.status} — {outcome.done} of {outcome.planned} "
        f"{kind.unit_name}, {outcome.failed} {kind.failed_noun}; cost "
        f"{summaries.cost_text(outcome)}"
        + (f" ({costs.dollars(saved)} saved by the cache)" if saved else ""),
        file=sys.stderr,
    )
    if unread := run_note(store, outcome, flags=True):  # how many, why, and the fix
        print(f"note: {unread}", file=sys.stderr)
    if outcome.status in (RunStatus.FAILED, RunStatus.INCOMPLETE):
        print(
            f"{'error' if outcome.status == RunStatus.FAILED else 'note'}: {outcome.error}",
            file=sys.stderr,
        )
        return 1
    if kind.page in NEXT_STEP:
        print(NEXT_STEP[kind.page].format(id=outcome.id))
    return 0
