"""What the run commands share: the `--db` and execution flags, how they become executor
options, which flags belong to studies only, and the plain-text table. Both cli/runs.py and
cli/studies.py import from here, so neither imports the other for these pieces."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=None,
        help="SQLite file (default: $COGBIAS_DB, else $COGBIAS_HOME/cogbias.db, "
        "else ~/.cogbias/cogbias.db — the app's database)",
    )


MAX_SEED = 2**63 - 1  # a seed is stored as an SQLite INTEGER (signed 64 bits)
MAX_SECONDS = 7 * 24 * 3600.0  # a timeout, deadline or poll interval longer than a week is a typo


def add_reading(p: argparse.ArgumentParser) -> None:
    """How decisions are read: `run`'s paired modes and `pair` offer the same flags."""
    from cogbias.core.reading import READ_ANSWER, READINGS

    p.add_argument(
        "--reading",
        choices=READINGS,
        default=READ_ANSWER,
        help="answer (the default): cogbias reads each answer itself and asks the extraction "
        "call only where the answer can confirm its reply; extraction: the Malberg paper's "
        "reading, the extraction call for every half, its first 'Option N' the choice, "
        "unchecked (docs/runs.md, 'How answers are read')",
    )
    p.add_argument(
        "--extractor",
        metavar="MODEL",
        help="the model that makes the extraction call (default: the decision model itself, "
        "as in the paper); with --reading answer its reading counts only where the answer "
        "confirms it",
    )
    add_scoring(p)


def add_scoring(p: argparse.ArgumentParser) -> None:
    """`--scoring`, `--samples` and `--reducer`, offering the scorers and reducers registered
    when the parser is built (`runs.scorers`, `runs.reducers`); study modes take them too, to
    refuse them by name rather than as unknown. `--scoring` defaults to None: the models
    asked choose (`scorers.default_for_models`; a run's `paired_scoring.scoring_by_models`)."""
    from cogbias.runs import reducers, sampling, scorers

    def scoring(text: str) -> str:
        if problem := scorers.unknown(text):
            raise argparse.ArgumentTypeError(problem)
        return text

    def samples(text: str) -> int:
        try:
            return sampling.sample_count(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def reducer(text: str) -> str:
        if problem := reducers.unknown(text):
            raise argparse.ArgumentTypeError(problem)
        return text

    p.add_argument(
        "--scoring",
        type=scoring,
        metavar="{" + ",".join(scorers.names()) + "}",
        default=None,
        help="; ".join(f"{s.spelling}: {s.help}" for s in scorers.all_scorers())
        + " (default: probabilities where every model gives them and every test case has "
        "2 to 11 options, asked plainly and read by cogbias; else choice)",
    )
    p.add_argument(
        "--samples",
        type=samples,
        metavar="N",
        help=f"answers asked of each half (1 to {sampling.MAX_SAMPLES}, default 1; above 1 "
        "at a --temperature above 0), made into the half's answer by --reducer; every sample "
        "is stored (docs/runs.md, 'Samples and reducers')",
    )
    p.add_argument(
        "--reducer",
        type=reducer,
        metavar="{" + ",".join(reducers.names()) + "}",
        help="how a half's samples become its answer (default: the scorer's own, mode; "
        "mean_probability for --scoring probabilities): "
        + "; ".join(f"{r.name}: {r.help}" for r in reducers.all_reducers()),
    )


def add_factors(p: argparse.ArgumentParser) -> None:
    """A paired run's factors beside `--prompting` (`runs.factors`): a reasoning model's
    effort and budget, and the debiasing intervention; a list of efforts or interventions
    makes one run each."""
    from cogbias.core.reasoning import EFFORTS
    from cogbias.llm import thinking
    from cogbias.studies.interventions import INTERVENTIONS

    p.add_argument(
        "--reasoning-effort",
        metavar="EFFORTS",
        help=f"comma-separated reasoning efforts, one run each: {', '.join(EFFORTS)} (models "
        "that reason only, as the model registry or litellm's map says; default: each "
        "model's own); sent as each provider takes it (docs/runs.md, 'Reasoning models')",
    )
    p.add_argument(
        "--thinking-budget",
        type=whole(thinking.MIN_BUDGET, thinking.MAX_BUDGET),
        metavar="TOKENS",
        help="the tokens a reasoning model may think: sent as the budget where a provider "
        "takes one (Anthropic, Gemini), and the room an answer gets for its thinking on every "
        "provider (raise it when answers stop while reasoning)",
    )
    p.add_argument(
        "--intervention",
        default="none",
        metavar="INTERVENTIONS",
        help=f"comma-separated debiasing interventions, one run each: {', '.join(INTERVENTIONS)} "
        "(after BiasBuster, in our words; self_help: the model rewrites each half's question, "
        "then answers its rewrite; docs/runs.md, 'Interventions')",
    )


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, refused with a message naming
    the bound (argparse prefixes the flag), so no run stores a value it cannot use."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {_shown(value)}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:,}, not {_shown(value)}")
        return value

    return parse


def real(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` (or above it, with `above`) to `high`;
    nan and inf are refused like any other number out of range."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a number") from None
        if not (low < value if above else low <= value) or not value <= high:
            bound = f"above {low:g} and at most" if above else f"from {low:g} to"
            raise argparse.ArgumentTypeError(
                f"must be a number {bound} {high:g}, not {_shown(value)}"
            )
        return value

    return parse


def _shown(value: float) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"a {len(str(int(value)))}-digit number"


_at_least_one = whole(1, 100_000)  # `--concurrency 0` would wait forever for a free slot
temperature = real(0.0, 2.0)  # the widest range any provider accepts
seconds = real(0.0, MAX_SECONDS, above=True)
seed = whole(-MAX_SEED - 1, MAX_SEED)


def _add_execution(p: argparse.ArgumentParser) -> None:
    """Every execution flag (`resume` takes them all: it does not know the run's kind yet)."""
    add_calls(p)
    add_batch(p)


def add_calls(p: argparse.ArgumentParser) -> None:
    """How calls are made: flags every kind of run takes."""
    p.add_argument(
        "--concurrency", type=_at_least_one, default=16, help="LLM requests in flight at once"
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="also retry pairs whose answers could not be read or were refused (asked afresh, "
        "not from the cache); transient failures are always retried",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="ask every model afresh instead of reading cached answers (new answers are cached)",
    )
    p.add_argument("--timeout", type=seconds, help="seconds per attempt (default: per model)")
    p.add_argument(
        "--max-retries", type=whole(0, 100), default=6, help="retries of a transiently failing call"
    )
    p.add_argument(
        "--deadline", type=seconds, help="seconds per call, retries included (default: per model)"
    )
    p.add_argument(
        "--max-cost",
        type=real(0.0, 1e6, above=True),
        metavar="USD",
        help="spend at most this much (USD) on calls in this execution: the run stops before "
        "the call that could pass it and ends resumable (`cogbias resume RUN --max-cost USD` "
        "goes on); a call whose price is unknown is refused under a cap",
    )
    add_api_key_env(p)


API_BASE_HELP = (
    "OpenAI-compatible base URL for openai/<name> models; it is sent no key unless "
    "--api-key-env names one"
)


def add_api_key_env(p: argparse.ArgumentParser) -> None:
    """`--api-key-env`: the only way a key reaches `--api-base`'s endpoint from the command
    line (a provider's key goes only to the provider's hosts; see `cogbias.llm.keys`)."""
    p.add_argument(
        "--api-key-env",
        metavar="VAR",
        type=_key_variable,
        help="the environment variable holding the key of the --api-base endpoint (its name "
        "must contain KEY, TOKEN, SECRET or PASSWORD); without it that endpoint is sent no "
        "key: OPENAI_API_KEY and the other providers' keys go only to their own hosts",
    )


_SURROGATE = re.compile("[\ud800-\udfff]")  # bytes that are not UTF-8, named by main._not_text


def run_label(text: str) -> str:
    """An argparse type: a run's label, one line of visible text (`core.limits.name_problem`);
    an empty label is no label."""
    from cogbias.core.limits import name_problem

    problem = name_problem(text) if text and not _SURROGATE.search(text) else None
    if problem:
        raise argparse.ArgumentTypeError(f"the label {problem}")
    return text


def _key_variable(text: str) -> str:
    from cogbias.llm.registry import check_key_variable

    try:
        return check_key_variable(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def api_key_env_of(args: argparse.Namespace) -> str | None:
    """The checked `--api-key-env`: refused without an endpoint to send it to, and for an
    endpoint that would receive it over plain http from another machine."""
    import os

    from cogbias.llm.keys import key_refusal

    variable = getattr(args, "api_key_env", None)
    if not variable or not hasattr(args, "api_base"):  # `resume`: the stored run's endpoint
        return variable
    base = args.api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    if not base:
        raise ValueError(
            f"--api-key-env {variable} names the key of the --api-base endpoint, and none is "
            "given: add --api-base URL, or name a registry endpoint's key with api_key_env in "
            "its models.toml entry"
        )
    refusal = key_refusal(base, variable)
    if refusal:
        raise ValueError(refusal)
    return variable


def add_batch(p: argparse.ArgumentParser) -> None:
    """The provider Batch API: paired and dataset runs only (a study converses directly)."""
    p.add_argument(
        "--batch",
        action="store_true",
        help="send the calls through the provider's Batch API (half price; OpenAI, "
        "OpenAI-compatible servers and Anthropic's Message Batches), then score from the cache",
    )
    p.add_argument(
        "--batch-fallback",
        choices=["round", "interactive"],
        default="round",
        help="requests a batch failed: retry them in the next batch round, or interactively",
    )
    p.add_argument("--poll-seconds", type=seconds, default=30.0, help="how often to poll batches")


def execution_options(args: argparse.Namespace, name: str = "") -> dict[str, Any]:
    """How to execute a run, from the flags `_add_execution` defines (paired and study runs)."""
    from cogbias.cli.progress import TerminalProgress

    return dict(
        concurrency=args.concurrency,
        progress=TerminalProgress(),
        name=name,
        retry_failed=args.retry_failed,
        read_cache=not args.no_cache,
        timeout=args.timeout,
        deadline=args.deadline,
        max_retries=args.max_retries,
        api_key_env=api_key_env_of(args),
        max_cost=getattr(args, "max_cost", None),
    )


STUDY_OPTIONS = ("mitigations", "temperatures", "variants", "tests", "max_attempts")


def is_token_bias(study: str, store: Any) -> bool:
    from cogbias.studies import tokenbias

    return study == "tokenbias" or study in tokenbias.token_bias_datasets(store)


def refuse_pair_options(args: argparse.Namespace) -> None:
    """Study options on a paired run would be silently ignored: say so instead."""
    given = [f"--{o.replace('_', '-')}" for o in STUDY_OPTIONS if getattr(args, o, None)]
    if given:
        raise ValueError(f"{', '.join(given)} only apply to studies (`cogbias run study NAME`)")


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    from cogbias.cli.terminal import print_rows

    print_rows(rows, columns)
