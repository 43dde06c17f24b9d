"""The spellings of `run` and `results` from before they had modes, kept for one release.

An old command line is rewritten into the new one (`run --study X ...` → `run study X ...`)
and parsed by the mode's own parser, so a flag the mode does not take is refused by name
(argparse, exit 2) where the old `run` ignored it. One line on stderr names the new spelling.
"""

from __future__ import annotations

from cogbias.cli.run_modes import RESULTS_MODES, RUN_MODES, TOKEN_BIAS_STUDY

_HELP = ("-h", "--help")


def rewrite(argv: list[str]) -> tuple[list[str], str | None]:
    """The command line in the new spelling, and the deprecation line (None when it was new)."""
    if not argv:
        return argv, None
    command, rest = argv[0], argv[1:]
    if command == "run" and rest and rest[0] not in (*RUN_MODES, *_HELP):
        old, new = _run(rest)
    elif command == "results" and (not rest or rest[0] not in (*RESULTS_MODES, *_HELP)):
        old, new = _results(rest)
    else:
        return argv, None
    head = new[:1] if new[0] == "pairs" else new[:2]
    note = (
        f"deprecated: `cogbias {command}{old}`{'' if old else ' without a mode'} is now "
        f"`cogbias {' '.join([command, *head])}`; "
        "the old spelling goes in the next release"
    )
    return [command, *new], note


def _run(words: list[str]) -> tuple[str, list[str]]:
    """`--study X` and `--dataset X` become modes; anything else was a paired run."""
    study, rest = _take(words, "--study")
    if study:  # a --dataset beside it stays, and the study mode refuses it by name
        return f" --study {study}", ["study", study, *rest]
    dataset, rest = _take(words, "--dataset")
    if dataset:
        return f" --dataset {dataset}", ["dataset", dataset, *rest]
    return "", ["pairs", *rest]


def _results(words: list[str]) -> tuple[str, list[str]]:
    """`--study X` meant two things: a token-bias study's hypothesis tables, or a study's
    figures; the database decides, as it did. Then `--dataset`, then `--run`."""
    study, rest = _take(words, "--study")
    if study:
        mode = "hypotheses" if _token_bias(study, rest) else "study"
        return f" --study {study}", [mode, study, *rest]
    dataset, rest = _take(words, "--dataset")
    if dataset:  # a --run beside it filters the dataset's decisions, as it did
        return f" --dataset {dataset}", ["dataset", dataset, *rest]
    run, rest = _take(words, "--run")
    if run:
        return f" --run {run}", ["run", run, *rest]
    return "", ["pairs", *words]


def _take(words: list[str], flag: str) -> tuple[str | None, list[str]]:
    """The last value of `flag` (`--flag V` or `--flag=V`) and the words without it."""
    value, rest, i = None, [], 0
    while i < len(words):
        word = words[i]
        if word == flag and i + 1 < len(words):
            value, i = words[i + 1], i + 2
            continue
        if word.startswith(flag + "="):
            value = word[len(flag) + 1 :]
        else:
            rest.append(word)
        i += 1
    return value, rest


def _token_bias(name: str, words: list[str]) -> bool:
    """Whether the old `results --study NAME` meant the hypothesis tables (tokenbias, or an
    imported token-bias dataset in the database the command names)."""
    if name == TOKEN_BIAS_STUDY:
        return True
    import sqlite3

    from cogbias.cli.options import is_token_bias
    from cogbias.core.errors import StoreError
    from cogbias.store import Store, default_path

    db, _ = _take(words, "--db")
    try:
        with Store(db or default_path()) as store:
            return is_token_bias(name, store)
    except (StoreError, sqlite3.Error, OSError, ValueError):
        return False  # a database that cannot be read: the handler says so, by name
