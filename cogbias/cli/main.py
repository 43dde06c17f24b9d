"""The `cogbias` command: the same operations as the app, scriptable."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from cogbias.cli.options import (
    API_BASE_HELP,
    add_api_key_env,
    add_db,
    add_reading,
    api_key_env_of,
    seed,
    temperature,
)
from cogbias.core.errors import StoreError, UserError
from cogbias.core.redact import redact, redactor
from cogbias.library import examples
from cogbias.library import testcases as library


def main(argv: Sequence[str] | None = None) -> int:
    """The command; everything it prints goes through `cli.terminal.safe_streams`."""
    from cogbias.cli.terminal import safe_streams

    with safe_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    from cogbias.cli import legacy

    words, deprecated = legacy.rewrite(list(sys.argv[1:] if argv is None else argv))
    if deprecated:
        print(deprecated, file=sys.stderr)
    args = parser.parse_args(words)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    problem = _not_text(args)
    if problem:
        return _fail(problem, 2)
    if getattr(args, "models", None):  # a registry entry the command may use was left out
        from cogbias.llm.registry import registry_problems

        for wrong in registry_problems():
            print(f"warning: {wrong}", file=sys.stderr)
    if getattr(args, "db", "") is None:
        from cogbias.store import default_path

        args.db = default_path()
    try:
        if os.environ.get("COGBIAS_PLUGINS"):  # a plugin that cannot load says so at once
            from cogbias.runs import kinds

            kinds.registry()
        code = args.handler(args) or 0
        # Only a real command line (argv from sys.argv) may end the process: a caller that
        # passes argv (a test, a script) keeps its interpreter.
        if argv is None and getattr(args, "exit_at_once", False):
            _exit_at_once(code)
        return code
    except KeyError as exc:
        return _fail(str(exc.args[0]) if exc.args else "not found", 2)
    except library.LibraryError as exc:
        return _fail(str(exc), 1, prefix="")
    except StoreError as exc:
        return _fail(str(exc), 1)
    except UserError as exc:  # a known condition (missing example fills, a refused key)
        return _fail(str(exc), 1)
    except sqlite3.Error as exc:  # a file that broke after it was opened (truncated, locked)
        from cogbias.store import describe_error

        return _fail(describe_error(getattr(args, "db", None) or "the database", exc), 1)
    except ValueError as exc:  # bad input (e.g. a malformed imported file): say what, no traceback
        return _fail(str(exc), 2)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return _fail(f"{exc.strerror or exc}{where}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, prefix="")
    except Exception as exc:  # a bug: still one line (and no secrets); COGBIAS_DEBUG shows it all
        if os.environ.get("COGBIAS_DEBUG"):
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (set COGBIAS_DEBUG=1 for details)", 1)


def _not_text(args: argparse.Namespace) -> str | None:
    """Bytes in an argument that are not UTF-8 reach Python as lone surrogates, which no
    database or file can hold: refuse them up front, naming the argument."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if not isinstance(item, str | Path):
                continue
            text = str(item)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                flag = name.replace("_", "-")
                shown = text.encode("utf-8", "backslashreplace").decode("utf-8")
                return (
                    f"argument {flag}: {shown[:60]} is not UTF-8 text (a byte at character "
                    f"{exc.start + 1} is not part of a character); give it as UTF-8"
                )
    return None


def _fail(message: str, code: int, prefix: str = "error: ") -> int:
    """Print an error for a person (secrets redacted) and return the exit code."""
    print(prefix + (redact(message) or ""), file=sys.stderr)
    return code


def _exit_at_once(code: int) -> None:
    """Leave without the interpreter's teardown once a run's results are committed and its
    database closed: litellm's exit hooks flush logging we do not use and take seconds,
    which would delay a cancelled worker's exit and every finished run."""
    from cogbias.llm.local import stop_local_servers

    sys.stdout.flush()
    sys.stderr.flush()
    stop_local_servers()
    os._exit(code)


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
    p = lib_commands.add_parser("add", help="validate a test case file and add it to your library")
    p.add_argument("path", type=Path)
    p.add_argument("--force", action="store_true", help="replace your test case with that id")
    p.set_defaults(handler=_library_add)
    p = lib_commands.add_parser(
        "designs", help="the table of the paper's designs beside ours, with every departure"
    )
    p.add_argument("-o", "--output", type=Path, help="write it to this file (default: print)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.set_defaults(handler=_library_designs)

    p = commands.add_parser("preview", help="fill a test case for a scenario and print the pair")
    p.add_argument("id")
    p.add_argument("--scenario", type=int, default=1, help="scenario number (1-200)")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument(
        "--generator",
        help="what fills [[gaps]]: 'examples' (offline, the default unless COGBIAS_GENERATOR "
        "is set), a model id, or 'none' to leave them visible",
    )
    p.add_argument("--temperature", type=temperature, default=0.7)
    p.add_argument("--api-base", help=API_BASE_HELP)
    add_api_key_env(p)
    add_db(p)
    p.set_defaults(handler=_preview)

    p = commands.add_parser(
        "pair", help="fill one pair and have it decided live (what Learn's 'Run it live' does)"
    )
    p.add_argument("id")
    p.add_argument("--scenario", default="1", help="scenario number (1-200), or several: 1,50,120")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--generator", help="what fills [[gaps]] (default: 'examples', offline)")
    p.add_argument("--models", default="local/smollm2", help="comma-separated decision models")
    p.add_argument("--temperature", type=temperature, default=0.0, help="the decision temperature")
    p.add_argument("--api-base", help=API_BASE_HELP)
    add_api_key_env(p)
    add_reading(p)
    add_db(p)
    p.set_defaults(handler=_pair)

    from cogbias.cli import parsers

    parsers.add_commands(commands)
    from cogbias.cli import datasets as cli_datasets

    cli_datasets.add_commands(commands)
    from cogbias.cli import delete as cli_delete

    cli_delete.add_commands(commands)
    from cogbias.cli import classroom as cli_classroom

    cli_classroom.add_commands(commands)
    from cogbias.cli import figures as cli_figures

    cli_figures.add_commands(commands)
    from cogbias.cli import report as cli_report

    cli_report.add_commands(commands)
    return parser


def _library_list(args: argparse.Namespace) -> int:
    """The valid test cases; files with problems are listed after them (exit 1)."""
    report = library.load_library_report()
    for case in report.cases.values():
        origin = "" if case.is_builtin else "  (user)"
        print(f"{case.name:<32} {case.id}{origin}")
    if report.problems:
        files = report.broken_files()
        print(f"\n{len(files)} file(s) skipped because of problems:", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
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
    for departure in case.departures:
        print(
            f"Departs from the paper's design: {departure.what.strip()} ({departure.why.strip()})"
        )
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


def _library_designs(args: argparse.Namespace) -> int:
    from cogbias.core.outputs import replacing
    from cogbias.library import designs

    text = designs.design_table(library.load_library(include_user=False), designs.load_designs())
    if args.output is None:
        print(text)
        return 0
    with replacing(args.output, force=args.force) as temporary:
        temporary.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _library_add(args: argparse.Namespace) -> int:
    """Copy a valid file into the user library; an existing id of the user's needs --force."""
    case = library.load_test_case(args.path)
    builtin = library.load_library(include_user=False)
    if case.id in builtin:
        raise ValueError(
            f"'{case.id}' is a built-in test case; give your copy another id in {args.path}"
        )
    try:
        target = library.save_test_case(case, overwrite=args.force)
    except library.AlreadyExistsError:
        raise ValueError(
            f"you already have a test case '{case.id}' ({library.user_dir() / case.id}.toml); "
            "add --force to replace it"
        ) from None
    print(f"added '{case.id}' to your library: {target}")
    return 0


def _preview(args: argparse.Namespace) -> int:
    from cogbias.runs import pipeline

    case = library.get_test_case(args.id)
    scenario = _scenario(args.scenario)
    generator = args.generator or examples.default_generator()
    if generator == "none":
        instance = pipeline.generate_offline(case, scenario.text, seed=args.seed)
    else:
        with _client(generator, args) as client:
            instance = pipeline.run_sync(
                pipeline.generate(
                    client,
                    case,
                    scenario.text,
                    generator=generator,
                    seed=args.seed,
                    temperature=args.temperature,
                )
            )
    lines = [f"{case.name} — scenario {scenario.id}: {scenario.text}\n"]
    for half in ("control", "treatment"):
        lines += [f"=== {half.upper()} ===", instance.decision_text(half), ""]
    if instance.insertions:
        lines.append("Insertions:")
        for ins in instance.insertions:
            note = f"  ({ins['note']})" if ins.get("note") else ""
            lines.append(f"  [{ins['source']}] {ins['gap']!r} -> {ins['text']!r}{note}")
    # A generator may echo a key it was tricked into revealing: never print one.
    print(redact("\n".join(lines)))
    return 0


def _pair(args: argparse.Namespace) -> int:
    """Fill a pair and have each model answer both halves, per scenario; print the answers,
    the choices, the score and how long the pair took (the first pair pays the start-up);
    then, for a model whose answers could not all be read, how many, why and what to do."""

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
    from cogbias.runs import scorers
    from cogbias.runs.prompting import BASELINE
    from cogbias.runs.refusals import reading_refusal

    chosen = args.scoring is not None
    if not chosen:  # the models decide; a reading flag asks for sampled answers
        from cogbias.core.reading import READ_ANSWER

        read_flags = args.reading != READ_ANSWER or args.extractor
        args.scoring = scorers.DEFAULT if read_flags else _default_scoring(case, models, args)
    args.scoring, args.samples, args.reducer = scorers.spelled(
        args.scoring, args.samples or 1, args.reducer
    )
    problem = (
        reading_refusal(args.reading, args.scoring)
        or scorers.refusal(args.scoring, models, args.api_base, BASELINE, {case.id: case.n_options})
        or scorers.sampling_refusal(args.scoring, args.samples, args.reducer, args.temperature)
    )
    if problem:
        raise ValueError(problem)
    if not chosen and scorers.get(args.scoring).needs == scorers.OPTION_PROBABILITIES:
        print(PAIR_BY_PROBABILITIES)
    decided: dict[str, list[Any]] = {m: [] for m in models}
    with _client(generator, args) as gen_client, _client("", args) as client:
        for scenario in scenarios:
            _pair_scenario(args, case, scenario, generator, decided, gen_client, client)
    for model, decisions in decided.items():
        _say_unread(model, decisions, args)
    return 0


PAIR_BY_PROBABILITIES = (
    "scored by option probabilities; choose sampled answers (--scoring choice) for the "
    "paper's reading"
)


def _default_scoring(case: library.TestCase, models: list[str], args: argparse.Namespace) -> str:
    """`scorers.default_scoring` for `pair`: the test case has options a letter can name."""
    from cogbias.runs import probabilities, scorers

    has_options = probabilities.letterable(case.n_options)
    return scorers.default_for_models(models, args.api_base, has_options)


def _say_unread(model: str, decisions: list[Any], args: argparse.Namespace) -> None:
    """How many of `model`'s answers could not be read and why, and the fix."""
    from cogbias.views.unread_answers import fix_sentence, unread_sentence

    said = unread_sentence(decisions)
    if said is None:
        return
    fix = fix_sentence([model], args.api_base, args.scoring, flags=True)
    print(f"{model}: {said} To read them: {fix}.")


def _pair_scenario(
    args: argparse.Namespace,
    case: library.TestCase,
    scenario: library.Scenario,
    generator: str,
    decided: dict[str, list[Any]],
    gen_client: Any,
    client: Any,
) -> None:
    import time

    from cogbias.runs import pipeline

    clean = redactor()  # a provider may echo the key in its answer: print what `run` stores
    start = time.perf_counter()
    instance = pipeline.run_sync(
        pipeline.generate(gen_client, case, scenario.text, generator, seed=args.seed)
    )
    from cogbias.core.probabilities import Distribution
    from cogbias.core.records import DecisionStatus
    from cogbias.runs import scorers
    from cogbias.views.numbers import percent

    scorer = scorers.get(args.scoring)
    ask = pipeline.PairAsk(
        temperature=args.temperature,
        seed=args.seed,
        extractor=args.extractor,
        reading=args.reading,
        samples=args.samples,
        reducer=args.reducer,
    )
    for model, decisions in decided.items():
        decision = pipeline.run_sync(scorer.decide(client, instance, model, ask))
        decisions.append(decision)
        row = decision.to_row()
        print(f"--- {model} ({case.name}, scenario {scenario.id}, generator {generator})")
        for half in ("control", "treatment"):
            choice = row[f"{half}_choice"]
            options = instance.half(half).options
            none = "abstained" if row["status"] == DecisionStatus.ABSTAINED else "none"
            shown = none if choice is None else f"{choice + 1} {clean(options[choice])!r}"
            print(f"{half}: answer {clean(row[f'{half}_answer'])!r} -> {shown}")
            if "(extracted by " in row[f"{half}_extraction"]:  # an extraction call read it
                print(f"{half}: extraction {clean(row[f'{half}_extraction'])!r}")
            dist = Distribution.from_json(row.get(f"{half}_distribution"))
            if dist is not None:
                listed = ", ".join(f"{i + 1}: {percent(p)}" for i, p in enumerate(dist.p))
                print(f"{half}: option probabilities {listed}")
            if row.get(f"{half}_samples"):
                named = [s["choice"] for s in json.loads(row[f"{half}_samples"])]
                said = ", ".join("none" if c is None else str(c + 1) for c in named)
                print(f"{half}: the samples chose {said}")
        error = f"  error: {clean(row['error'])}" if row["error"] else ""
        status = " (abstained: a half's samples were left undecided)" * (
            row["status"] == DecisionStatus.ABSTAINED
        )
        print(f"score: {row['score']}{status}{error}")
    print(f"pair time: {time.perf_counter() - start:.1f} s (scenario {scenario.id})")


def _client(generator: str, args: argparse.Namespace) -> AbstractContextManager[Any]:
    """A client over the database's response cache, as Learn's (the same question asked from
    the page and here is paid for once); the offline `examples` generator needs none."""
    if generator == examples.EXAMPLES_GENERATOR:
        return nullcontext(None)
    from cogbias.runs import live
    from cogbias.store import Store

    key_env = api_key_env_of(args)
    return _closing_store(Store(args.db), live, args.api_base, key_env)


@contextmanager
def _closing_store(
    store: Any, live: Any, api_base: str | None, api_key_env: str | None
) -> Iterator[Any]:
    with store, live.cached_client(store, api_base=api_base, api_key_env=api_key_env) as client:
        yield client


def _scenario(number: int) -> library.Scenario:
    scenarios = library.load_scenarios()
    if not 1 <= number <= len(scenarios):
        raise KeyError(f"scenario {number} does not exist; choose 1 to {len(scenarios)}")
    return scenarios[number - 1]


if __name__ == "__main__":
    raise SystemExit(main())
