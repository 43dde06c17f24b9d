"""The `cogbias` command: the same operations as the app, scriptable."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import examples, library


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    if getattr(args, "db", "") is None:
        from .store import default_path

        args.db = default_path()
    try:
        return args.handler(args) or 0
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    except library.LibraryError as exc:
        print(exc, file=sys.stderr)
        return 1
    except ValueError as exc:  # bad input (e.g. a malformed imported file): say what, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cogbias", description=__doc__)
    commands = parser.add_subparsers(metavar="COMMAND")

    lib = commands.add_parser("library", help="list, show and check test cases")
    lib_commands = lib.add_subparsers(metavar="ACTION")
    p = lib_commands.add_parser("list", help="the test cases, by display name")
    p.set_defaults(handler=_library_list)
    p = lib_commands.add_parser("show", help="one test case: description, control and treatment")
    p.add_argument("id")
    p.set_defaults(handler=_library_show)
    p = lib_commands.add_parser("check", help="validate test case files (exit 1 on any problem)")
    p.add_argument("paths", nargs="+", type=Path)
    p.set_defaults(handler=_library_check)

    p = commands.add_parser("preview", help="fill a test case for a scenario and print the pair")
    p.add_argument("id")
    p.add_argument("--scenario", type=int, default=1, help="scenario number (1-200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--generator",
        help="what fills [[gaps]]: 'examples' (offline, the default unless COGBIAS_GENERATOR "
        "is set), a model id, or 'none' to leave them visible",
    )
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--api-base", help="OpenAI-compatible base URL for openai/<name> models")
    p.set_defaults(handler=_preview)

    p = commands.add_parser(
        "pair", help="fill one pair and have it decided live (what Learn's 'Run it live' does)"
    )
    p.add_argument("id")
    p.add_argument("--scenario", default="1", help="scenario number (1-200), or several: 1,50,120")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--generator", help="what fills [[gaps]] (default: 'examples', offline)")
    p.add_argument("--models", default="local/smollm2", help="comma-separated decision models")
    p.add_argument("--api-base", help="OpenAI-compatible base URL for openai/<name> models")
    p.set_defaults(handler=_pair)

    from . import cli_runs

    cli_runs.add_commands(commands)
    from . import cli_datasets

    cli_datasets.add_commands(commands)
    return parser


def _library_list(args: argparse.Namespace) -> int:
    for case in library.load_library().values():
        origin = "" if case.is_builtin else "  (user)"
        print(f"{case.name:<32} {case.id}{origin}")
    return 0


def _library_show(args: argparse.Namespace) -> int:
    case = library.get_test_case(args.id)
    print(f"{case.name} ({case.id})\n")
    print(case.description.strip(), "\n")
    for half, template in case.templates().items():
        print(f"--- {half} ---")
        print(f"Situation: {template.situation.strip()}")
        print(f"Prompt: {template.prompt.strip()}")
        for i, option in enumerate(template.options, start=1):
            print(f"  Option {i}: {option}")
        print()
    if case.values:
        print("Values: " + ", ".join(f"{v.name} ({v.type})" for v in case.values.values()))
    print(f"Metric: {case.metric}")
    return 0


def _library_check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.paths:
        try:
            library.load_test_case(path)
        except library.LibraryError as exc:
            failed += 1
            print(exc, file=sys.stderr)
        else:
            print(f"{path}: ok")
    if failed:
        print(f"{failed} of {len(args.paths)} file(s) have problems", file=sys.stderr)
    return 1 if failed else 0


def _preview(args: argparse.Namespace) -> int:
    from . import pipeline

    case = library.get_test_case(args.id)
    scenario = _scenario(args.scenario)
    generator = args.generator or examples.default_generator()
    if generator == "none":
        instance = pipeline.generate_offline(case, scenario.text, seed=args.seed)
    else:
        instance = pipeline.run_sync(
            pipeline.generate(
                _client(generator, args.api_base),
                case,
                scenario.text,
                generator=generator,
                seed=args.seed,
                temperature=args.temperature,
            )
        )
    print(f"{case.name} — scenario {scenario.id}: {scenario.text}\n")
    for half in ("control", "treatment"):
        print(f"=== {half.upper()} ===")
        print(instance.decision_text(half))
        print()
    if instance.insertions:
        print("Insertions:")
        for ins in instance.insertions:
            note = f"  ({ins['note']})" if ins.get("note") else ""
            print(f"  [{ins['source']}] {ins['gap']!r} -> {ins['text']!r}{note}")
    return 0


def _pair(args: argparse.Namespace) -> int:
    """Fill a pair and have each model answer both halves, per scenario; print the answers,
    the choices, the score and how long the pair took (the first pair pays the start-up)."""
    import time

    from . import pipeline

    case = library.get_test_case(args.id)
    try:
        numbers = [int(n) for n in str(args.scenario).split(",") if n.strip()]
    except ValueError:
        raise ValueError(
            f"--scenario expects numbers like 1 or 1,50,120, not {args.scenario!r}"
        ) from None
    scenarios = [_scenario(n) for n in numbers]
    generator = args.generator or examples.default_generator()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    gen_client = _client(generator, args.api_base)
    client = None
    for scenario in scenarios:
        start = time.perf_counter()
        instance = pipeline.run_sync(
            pipeline.generate(gen_client, case, scenario.text, generator, seed=args.seed)
        )
        for model in models:
            if model != pipeline.RANDOM_MODEL and client is None:
                from .llm import LLMClient

                client = LLMClient(api_base=args.api_base)
            row = pipeline.run_sync(pipeline.decide_pair(client, instance, model, seed=args.seed))
            print(f"--- {model} ({case.name}, scenario {scenario.id}, generator {generator})")
            for half in ("control", "treatment"):
                choice = row[f"{half}_choice"]
                options = instance.half(half).options
                shown = "none" if choice is None else f"{choice + 1} {options[choice]!r}"
                print(f"{half}: answer {row[f'{half}_answer']!r} -> {shown}")
            error = f"  error: {row['error']}" if row["error"] else ""
            print(f"score: {row['score']}{error}")
        print(f"pair time: {time.perf_counter() - start:.1f} s (scenario {scenario.id})")
    return 0


def _client(generator: str, api_base: str | None) -> Any:
    """An LLM client for a model generator; the offline `examples` generator needs none."""
    if generator == examples.EXAMPLES_GENERATOR:
        return None
    from .llm import LLMClient

    return LLMClient(api_base=api_base)


def _scenario(number: int) -> library.Scenario:
    scenarios = library.load_scenarios()
    if not 1 <= number <= len(scenarios):
        raise KeyError(f"scenario {number} does not exist; choose 1 to {len(scenarios)}")
    return scenarios[number - 1]


if __name__ == "__main__":
    raise SystemExit(main())
