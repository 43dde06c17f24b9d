"""`cogbias run study`, `resume` and `results study` for studies (BiasBuster, the Mohr
thesis' problems, an imported thesis dataset's own prompts): the CLI side of the study run
kind (`cogbias.runs.study`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cogbias.cli.options import is_token_bias
from cogbias.cli.terminal import print_data


def _split(text: str | None, flag: str = "") -> list[str]:
    """A comma-separated option; given but empty (`--models ""`) is an error, not "all"."""
    parts = [part.strip() for part in (text or "").split(",") if part.strip()]
    if text is not None and not parts and flag:
        raise ValueError(f"{flag} is empty: give a comma-separated list, or leave it out")
    return list(dict.fromkeys(parts))  # a name given twice is asked once


def _count(value: int | None, flag: str) -> int:
    """A count option; 0 means the study's own default only when the option is left out."""
    if value is not None and value < 1:
        raise ValueError(f"{flag} must be at least 1, not {value}")
    return value or 0


def _temperatures(text: str | None) -> list[float]:
    out = []
    for part in _split(text, "--temperatures"):
        try:
            out.append(float(part))
        except ValueError:
            raise ValueError(f"--temperatures: '{part}' is not a number") from None
    return out


def run(args: argparse.Namespace) -> int:
    from cogbias.runs import study_plan
    from cogbias.store import Store

    with Store(args.db) as store:
        if is_token_bias(args.study, store):
            raise ValueError(
                f"'{args.study}' is a token-bias dataset, not a study: run it with "
                f"`cogbias run dataset {args.study} --models ...`"
            )
        study = study_plan.load_study(args.study, store)
        for problem in study_plan.shadowing_problems(args.study):
            print(f"note: {problem}", file=sys.stderr)
        asked = study_plan.StudySpec(
            study=args.study,
            models=_split(args.models, "--models"),
            tests=_split(args.tests, "--tests"),
            temperatures=_temperatures(args.temperatures),
            variants=_split(args.variants, "--variants"),
            mitigations=_split(args.mitigations, "--mitigations") or ["none"],
            repeats=_count(args.repeats, "--repeats"),
            max_attempts=_count(args.max_attempts, "--max-attempts"),
            seed=args.seed,
            api_base=args.api_base,
        )
        plan = study_plan.plan(study_plan.resolve(asked, study), study)
        print(plan.describe(), file=sys.stderr)
        if args.dry_run:
            return 0
        if args.plan_only:
            from cogbias.runs import executor

            print(executor.create(plan, store, args.name))
            return 0
        from cogbias.cli.execution import execute

        return execute(plan, store, args, args.name)


def results(args: argparse.Namespace, store: Any) -> int:
    """Headline figures per test × cell of study runs; `--by` pivots them."""
    import pandas as pd

    from cogbias.cli.terminal import shown_frame
    from cogbias.runs import study_results
    from cogbias.studies import study_tables

    if args.run:
        run_ids = [args.run]
    else:
        from cogbias.runs.study_plan import load_study

        # Stored runs are scored with the study source they kept, so they show even when
        # the study file has since been broken; without runs, an unknown or broken name is
        # an error, not "no runs yet".
        run_ids = [r.id for r in study_results.study_runs(store, args.study)]
        if not run_ids:
            load_study(args.study, store)
            print(
                f"no runs of study '{args.study}' yet: start one with "
                f"`cogbias run study {args.study} --models random`",
                file=sys.stderr,
            )
            return 0
    if getattr(args, "humans", False):
        return humans(args, store, run_ids)
    table = pd.concat([study_results.results(store, r) for r in run_ids], ignore_index=True)
    if print_data(table, args.format):
        return 0
    if table.empty:
        print("no answers stored yet", file=sys.stderr)
        return 0
    if args.by:
        shown = study_tables.pivot(table, args.by).round(4)
        print(f"headline value per test, one column per {args.by} (cogbias.studies.study_tables):")
        print(shown_frame(shown).to_string())
        print_humans(store, run_ids)
        return 0
    columns = ["test", "model", "temperature", "variant", "mitigation", "metric", "value", "n"]
    columns += ["a", "b", "neutral_share", "p_value", "degenerate", "unreadable", "failed"]
    columns += ["change_rate", "note"]
    if table["run_id"].nunique() > 1:  # several runs: each row says which run it is
        columns.insert(0, "run_id")
    print(shown_frame(table[columns].round(4)).to_string(index=False))
    print_humans(store, run_ids)
    return 0


def comparisons(store: Any, run_ids: list[str]) -> Any:
    """The runs' cells beside the original experiments' human results."""
    import pandas as pd

    from cogbias.runs import study_results

    frames = [study_results.comparison(store, r) for r in run_ids]
    return pd.concat([f for f in frames if not f.empty] or frames[:1], ignore_index=True)


def print_humans(store: Any, run_ids: list[str]) -> None:
    """Below a study run's figures: the humans of the original experiments beside the model,
    where the study asks an original's question (nothing otherwise)."""
    from cogbias.cli.terminal import shown_frame
    from cogbias.studies.references import load_references_report
    from cogbias.views import references_view

    for problem in load_references_report()[1]:  # a broken file of the user's is named
        print(f"note: reference file left out: {problem}", file=sys.stderr)
    frame = comparisons(store, run_ids)
    if frame.empty:
        return
    print()
    print(
        "beside the humans: the original experiments' results (share of the option named, or "
        "the median), 95% intervals in brackets, Cohen's h of the model against the humans "
        "(docs/references.md):"
    )
    print(shown_frame(references_view.shown_comparison(frame)).to_string(index=False))
    print("sources:")
    for line in references_view.citations(frame):
        print(f"  {line}")


def humans(args: argparse.Namespace, store: Any, run_ids: list[str]) -> int:
    """`--humans`: only the comparison with the humans, as a table, CSV or JSON."""
    frame = comparisons(store, run_ids)
    if print_data(frame, args.format):
        return 0
    if frame.empty:
        print(
            "no test of this study asks an original experiment's question, or no answers are "
            "stored yet (references: docs/references.md)",
            file=sys.stderr,
        )
    else:
        print_humans(store, run_ids)
    return 0
