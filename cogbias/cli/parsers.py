"""The flags of the run commands (`run`, `batch`, `resume`, `cancel`, `runs`, `results`,
`cache`); their handlers live in cli/runs.py, cli/studies.py and cli/cache.py."""

from __future__ import annotations

from typing import Any

from cogbias.cli import cache, runs
from cogbias.cli.options import _add_execution as add_execution
from cogbias.cli.options import add_db
from cogbias.library import examples


def add_commands(commands: Any) -> None:
    p = commands.add_parser("run", help="run test cases x scenarios x models (resumable)")
    p.add_argument("--biases", help="comma-separated test case ids (default: all)")
    p.add_argument("--scenarios", type=int, default=1, help="number of scenarios (first N)")
    p.add_argument("--instances", type=int, default=1, help="instances per bias and scenario")
    p.add_argument("--models", required=True, help="comma-separated decision models")
    p.add_argument(
        "--generator",
        default=examples.default_generator(),
        help="what fills [[gaps]]: 'examples' (offline, the default) or a model id",
    )
    add_db(p)
    p.add_argument("--temperature", type=float, default=0.0, help="decision temperature")
    p.add_argument("--generator-temperature", type=float, default=0.7)
    p.add_argument(
        "--repeats",
        type=int,
        help="answers per pair (default 1); with a study: valid answers wanted per condition "
        "(default: the study's, 2 on the local model)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--api-base", help="OpenAI-compatible base URL for openai/<name> models")
    p.add_argument("--dataset", help="run the instances of an imported dataset instead")
    p.add_argument("--per-bias", type=int, help="with --dataset: at most N instances per bias")
    p.add_argument(
        "--study",
        help="run a study: biasbuster, mohr8, your own, or an imported thesis dataset's "
        "prompts (docs/studies.md); tokenbias stores its pairs like a dataset, then runs them",
    )
    p.add_argument("--mitigations", help="with a study: none,awareness,contrastive,...")
    p.add_argument("--temperatures", help="with a study: a sweep, e.g. 0.2,1.0")
    p.add_argument("--variants", help="with a study: prompt scenarios (default: all)")
    p.add_argument("--tests", help="with a study: only these tests (default: all)")
    p.add_argument("--max-attempts", type=int, help="with a study: tries per wanted answer")
    p.add_argument(
        "--prompting",
        default="baseline",
        help="comma-separated prompting methods, one run each: baseline, zs_cot, one_shot, "
        "few_shot, one_shot_cot, few_shot_cot (a name swap: one_shot@Bob)",
    )
    p.add_argument("--name", default="", help="a label for the run")
    p.add_argument("--dry-run", action="store_true", help="print the plan and estimate, do not run")
    p.add_argument(
        "--plan-only",
        action="store_true",
        help="store the run without executing it (for `cogbias batch export`, `resume`)",
    )
    add_execution(p)
    p.set_defaults(handler=runs._run)

    p = commands.add_parser("batch", help="hand a run's calls to a batch engine (vLLM run-batch)")
    actions = p.add_subparsers(metavar="ACTION")
    q = actions.add_parser("export", help="write the run's next calls as OpenAI batch JSONL")
    q.add_argument("run_id")
    q.add_argument("--round", choices=["fill", "decide", "extract"], help="only this round")
    q.add_argument("-o", "--output", required=True, help="the requests file (.jsonl)")
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

    p = commands.add_parser("results", help="bias x model mean scores, n and failures")
    add_db(p)
    p.add_argument("--run", help="only this run")
    p.add_argument("--dataset", help="only decisions on this dataset")
    p.add_argument(
        "--study",
        help="the hypothesis tables of a token-bias study or imported token-bias dataset "
        "(per hypothesis, model and prompting method: n12, n21, n*, z, p, p_BH, reject)",
    )
    p.add_argument("--alpha", type=float, default=0.05, help="with --study: significance level")
    p.add_argument(
        "--normal-above",
        type=int,
        default=10,
        help="with --study: exact binomial test up to this many discordant pairs, normal above",
    )
    p.add_argument(
        "--by",
        choices=["mitigation", "temperature", "variant", "model"],
        help="with a study: one column per mitigation, temperature, ...",
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(handler=runs._results)

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
