"""`cogbias run pairs|dataset|study` and `cogbias results pairs|dataset|run|study|hypotheses|
compare`.

One parser per mode, the flags every run takes in a parent parser, so a flag that does not
apply to a mode is an argparse error instead of being ignored. The handlers in cli/runs.py and
cli/studies.py still take the namespace of the single `run`/`results` they were written for:
each mode fills in the flags it does not have with their old defaults, so the handlers cannot
tell (and need not know) which spelling was used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cogbias.cli import runs
from cogbias.cli.options import (
    API_BASE_HELP,
    add_batch,
    add_calls,
    add_db,
    add_factors,
    add_reading,
    add_scoring,
    is_token_bias,
    real,
    run_label,
    seed,
    temperature,
    whole,
)
from cogbias.core.metrics import OPTION_ORDERS
from cogbias.core.reading import READ_ANSWER
from cogbias.library import examples

RUN_MODES = ("pairs", "dataset", "study")
RESULTS_MODES = ("pairs", "dataset", "run", "study", "hypotheses", "compare")
TOKEN_BIAS_STUDY = "tokenbias"  # a study by name, a dataset run by nature (docs/tokenbias.md)

# The flags of the single `run` and `results`, with their defaults: what a mode lacks.
_RUN_DEFAULTS: dict[str, Any] = dict(
    biases=None,
    scenarios=1,
    instances=1,
    temperature=0.0,
    generator_temperature=0.7,
    repeats=None,
    dataset=None,
    per_bias=None,
    study=None,
    mitigations=None,
    temperatures=None,
    variants=None,
    tests=None,
    max_attempts=None,
    prompting="baseline",
    scoring=None,  # the models choose (`paired_scoring.scoring_by_models`)
    samples=None,
    reducer=None,
    reasoning_effort=None,
    thinking_budget=None,
    intervention="none",
    extractor=None,
    option_order=None,
    reading=READ_ANSWER,
    batch=False,
    batch_fallback="round",
    poll_seconds=30.0,
)
_RESULTS_DEFAULTS: dict[str, Any] = dict(
    run=None,
    dataset=None,
    study=None,
    by=None,
    alpha=0.05,
    normal_above=24,
    format="table",
    humans=False,
)


class ModeParser(argparse.ArgumentParser):
    """The parser of one mode. It refuses a flag it does not know itself, naming the modes
    that do take it (argparse would leave that to the top parser, which knows neither)."""

    where: dict[str, list[str]] | None = None  # flag -> the modes that take it
    token_bias: argparse.ArgumentParser | None = None  # `run study tokenbias` parses alone

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: `--temperature` would silently mean a study's `--temperatures`
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        if self.token_bias is not None:
            name = _first_positional(words, (self, self.token_bias))
            if name == TOKEN_BIAS_STUDY:  # a dataset run by nature: the dataset flags
                return self.token_bias.parse_known_args(words, namespace)
        parsed, extras = super().parse_known_args(words, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._hint(extras)}")
        return parsed, extras

    def _hint(self, extras: list[str]) -> str:
        """Where the unknown flags do apply, grouped: '--tests, --variants only apply to ...'."""
        groups: dict[str, list[str]] = {}
        for word in extras:
            flag = word.split("=", 1)[0]
            modes = (self.where or {}).get(flag)
            if flag.startswith("--") and modes and flag not in sum(groups.values(), []):
                groups.setdefault(", ".join(modes), []).append(flag)
        notes = [f"{', '.join(flags)} only apply to {modes}" for modes, flags in groups.items()]
        return "".join(f"; {note}" for note in notes)


def _first_positional(words: list[str], parsers: Sequence[argparse.ArgumentParser]) -> str | None:
    """The first word that is neither a flag nor a flag's value (the study's NAME)."""
    takes_value = {
        flag
        for parser in parsers
        for flag, action in parser._option_string_actions.items()
        if action.nargs != 0
    }
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in takes_value
        else:
            return word
    return None


def _register(parsers: dict[str, Any]) -> None:
    """Tell each mode's parser which modes take which flag, for its error messages."""
    where: dict[str, list[str]] = {}
    for label, parser in parsers.items():
        for flag in parser._option_string_actions:
            if flag.startswith("--") and flag != "--help":
                where.setdefault(flag, []).append(label)
    for parser in parsers.values():
        parser.where = where


def _shared() -> argparse.ArgumentParser:
    """The flags every kind of run takes."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--models", required=True, help="comma-separated decision models")
    add_db(p)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--api-base", help=API_BASE_HELP)
    p.add_argument("--name", type=run_label, default="", help="a label for the run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, do not run")
    p.add_argument(
        "--plan-only",
        action="store_true",
        help="store the run without executing it (for `cogbias batch export`, `resume`)",
    )
    add_calls(p)
    return p


def _batch() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    add_batch(p)
    return p


def _answers(p: argparse.ArgumentParser, biases: str) -> None:
    """The flags of paired decisions (library pairs, a dataset's pairs, token-bias pairs)."""
    p.add_argument("--biases", help=biases)
    p.add_argument("--temperature", type=temperature, default=0.0, help="decision temperature")
    p.add_argument("--repeats", type=whole(1, 1000), help="answers per pair (default 1)")
    p.add_argument(
        "--prompting",
        default="baseline",
        help="comma-separated prompting methods, one run each: baseline, zs_cot, one_shot, "
        "few_shot, one_shot_cot, few_shot_cot (a name swap: one_shot@Bob)",
    )
    add_factors(p)
    p.add_argument(
        "--option-order",
        choices=OPTION_ORDERS,
        help="as_written: each pair's options in the order its test case or dataset writes "
        "them (the default for token-bias datasets: the paper asked its items so); "
        "half_reversed: reversed in a seeded half of the pairs, so a preference for a "
        "position cancels out (the default otherwise)",
    )
    add_reading(p)


def _dataset_flags(p: argparse.ArgumentParser, biases: str) -> None:
    _answers(p, biases)
    p.add_argument("--per-bias", type=whole(1), help="at most N instances per bias")


def add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run library test cases, an imported dataset or a study on models (resumable)",
        description="Run models on one kind of work; each mode takes only its own flags "
        "(`cogbias run MODE --help`).",
    )
    modes = run.add_subparsers(metavar="MODE", dest="mode", required=True, parser_class=ModeParser)
    shared, batch = _shared(), _batch()
    pairs = modes.add_parser(
        "pairs",
        parents=[shared, batch],
        help="library test cases x scenarios x models",
        description="Fill library test cases for scenarios and have models decide each pair.",
    )
    pairs.add_argument(
        "--scenarios", type=whole(1), default=1, help="number of scenarios (first N)"
    )
    pairs.add_argument(
        "--instances", type=whole(1, 10_000), default=1, help="instances per bias and scenario"
    )
    pairs.add_argument(
        "--generator",
        default=examples.default_generator(),
        help="what fills [[gaps]]: 'examples' (offline, the default) or a model id",
    )
    pairs.add_argument("--generator-temperature", type=temperature, default=0.7)
    _answers(pairs, "comma-separated test case ids (default: all)")
    pairs.set_defaults(handler=_run_mode)

    dataset = modes.add_parser(
        "dataset",
        parents=[shared, batch],
        help="the instances of an imported dataset (token-bias imports included)",
        description="Have models decide the pairs of an imported dataset (`cogbias datasets`).",
    )
    dataset.add_argument("dataset", metavar="NAME", help="the imported dataset")
    _dataset_flags(dataset, "only these biases of the dataset (default: all)")
    dataset.set_defaults(handler=_run_mode)

    study = modes.add_parser(
        "study",
        parents=[shared],
        help="a study: biasbuster, mohr8, tokenbias, your own or an imported thesis' prompts",
        description="Run a study's conversations (docs/studies.md). `tokenbias` stores its "
        "pairs like a dataset and runs them: it takes the flags of `cogbias run dataset` "
        "instead (`cogbias run study tokenbias --help`).",
    )
    study.add_argument("study", metavar="NAME", help="the study")
    study.add_argument("--tests", help="only these tests (default: all)")
    study.add_argument("--mitigations", help="none,awareness,contrastive,...")
    study.add_argument("--temperatures", help="a sweep, e.g. 0.2,1.0")
    study.add_argument("--variants", help="prompt scenarios (default: all)")
    study.add_argument(
        "--repeats",
        type=int,
        help="valid answers wanted per condition (default: the study's, 2 on the local model)",
    )
    study.add_argument("--max-attempts", type=int, help="tries per wanted answer")
    add_scoring(study)  # refused by name: a study's answers are numbers or conversations
    study.set_defaults(handler=_run_mode)

    token_bias = ModeParser(
        prog="cogbias run study tokenbias",
        parents=[shared, batch],
        description="The token-bias study: its pairs are stored like an imported dataset "
        "(a no-op when unchanged), then run like `cogbias run dataset tokenbias`.",
    )
    token_bias.add_argument("study", metavar="tokenbias", help="the token-bias study")
    _dataset_flags(token_bias, "only these hypotheses (default: all)")
    token_bias.set_defaults(handler=_run_mode, mode="study")
    study.token_bias = token_bias
    _register(
        {
            "`cogbias run pairs`": pairs,
            "`cogbias run dataset NAME`": dataset,
            "studies (`cogbias run study NAME`)": study,
            "`cogbias run study tokenbias`": token_bias,
        }
    )


def _run_mode(args: argparse.Namespace) -> int:
    """A mode's flags, filled up to the old `run`'s, handed to its handler."""
    filled = argparse.Namespace(
        **{**_RUN_DEFAULTS, "generator": examples.default_generator(), **vars(args)}
    )
    try:
        return runs._run(filled)
    finally:
        if getattr(filled, "exit_at_once", False):  # see cli.main._exit_at_once
            args.exit_at_once = True


def add_results(commands: Any) -> None:
    results = commands.add_parser(
        "results",
        help="the figures of paired runs, a dataset, one run, a study or token-bias hypotheses",
        description="Show results; each mode takes only its own flags "
        "(`cogbias results MODE --help`).",
    )
    modes = results.add_subparsers(
        metavar="MODE", dest="mode", required=True, parser_class=ModeParser
    )
    common = argparse.ArgumentParser(add_help=False)
    add_db(common)
    common.add_argument("--format", choices=["table", "csv", "json"], default="table")
    by = argparse.ArgumentParser(add_help=False)
    by.add_argument(
        "--by",
        choices=["mitigation", "temperature", "variant", "model"],
        help="study runs: one column per mitigation, temperature, ...",
    )
    by.add_argument(
        "--humans",
        action="store_true",
        help="study runs: only the cells beside the original experiments' human results "
        "(share or median per condition, difference, Cohen's h, 95%% intervals, citation)",
    )
    parsers = {}
    p = modes.add_parser(
        "pairs", parents=[common], help="bias x model mean scores, n and failures of every pair"
    )
    parsers["`cogbias results pairs`"] = p
    p = modes.add_parser(
        "dataset", parents=[common], help="bias x model mean scores on an imported dataset"
    )
    p.add_argument("dataset", metavar="NAME")
    p.add_argument("--run", help="only this run's decisions on it")
    parsers["`cogbias results dataset NAME`"] = p
    p = modes.add_parser(
        "run", parents=[common, by], help="one run: a paired run's scores or a study run's figures"
    )
    p.add_argument("run", metavar="RUN_ID")
    parsers["`cogbias results run RUN_ID`"] = p
    p = modes.add_parser(
        "study", parents=[common, by], help="the headline figures of a study's runs"
    )
    p.add_argument("study", metavar="NAME")
    parsers["`cogbias results study NAME`"] = p
    p = modes.add_parser(
        "hypotheses",
        parents=[common],
        help="the hypothesis tables of a token-bias study or imported token-bias dataset "
        "(per hypothesis, model and prompting method: n12, n21, n*, z, p, p_BH, reject)",
    )
    p.add_argument("study", metavar="NAME", help="tokenbias, or an imported token-bias dataset")
    p.add_argument(
        "--alpha", type=real(0.0, 1.0, above=True), default=0.05, help="significance level"
    )
    p.add_argument(
        "--normal-above",
        type=whole(0),
        default=24,  # studies.analysis.NORMAL_ABOVE (the CLI starts without SciPy)
        help="exact binomial test up to this many discordant pairs, normal above",
    )
    parsers["`cogbias results hypotheses NAME`"] = p
    for p in parsers.values():
        p.set_defaults(handler=_results_mode)
    from cogbias.cli import factors

    parsers["`cogbias results compare`"] = factors.add_compare(modes, common)
    _register(parsers)


def _results_mode(args: argparse.Namespace) -> int:
    filled = argparse.Namespace(**{**_RESULTS_DEFAULTS, **vars(args)})
    if args.mode in ("study", "hypotheses"):
        _check_kind(filled.study, filled.db, hypotheses=args.mode == "hypotheses")
    return runs._results(filled)


def _check_kind(name: str, db: str, hypotheses: bool) -> None:
    """`results study` is for studies, `results hypotheses` for token-bias ones: a name of the
    other kind is pointed to its own spelling (the old `results --study` meant both)."""
    from cogbias.store import Store

    with Store(db) as store:
        token_bias = is_token_bias(name, store)
        if token_bias and not hypotheses:
            raise ValueError(
                f"'{name}' is a token-bias study: see its tables with "
                f"`cogbias results hypotheses {name}`"
            )
        if hypotheses and not token_bias:
            from cogbias.runs.study_plan import load_study

            load_study(name, store)  # an unknown name: its error says what exists
            raise ValueError(
                f"'{name}' is not a token-bias study: see its figures with "
                f"`cogbias results study {name}`"
            )
