"""The formats `cogbias import` reads, in the order the command lists them, and one way to
run any of them: `run_import`, which the Datasets page uses too.

To add an importer: write its module in `cogbias/datasets/` with an import function and a
`FORMAT` (`common.Format`: its name, its arguments, how to run it), and add it here; say in
`FOLDERS` whether a path to it may be a folder. The command and the page then both offer it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cogbias.datasets import generic, hub, malberg_format, mohr_format, peek_format
from cogbias.datasets.common import DatasetError, Format, ImportSummary

FORMATS: tuple[Format, ...] = (
    hub.FORMAT,
    malberg_format.FORMAT,
    mohr_format.FORMAT,
    peek_format.FORMAT,
    generic.FORMAT,
)
# Formats whose path is (or may be) a folder: the page asks for a path, not an upload.
FOLDERS = ("malberg2024", "mohr2025", "peek2024")


def results_page(kind: str) -> str:
    """The page that shows a dataset of `kind` (a format's name; a built-in token-bias study
    is read on the Token bias page like the paper's files)."""
    # imported here: that module brings pandas, and the CLI starts without it
    from cogbias.studies.tokenbias import KIND as TOKENBIAS_STUDY_KIND

    if kind == TOKENBIAS_STUDY_KIND:
        return "tokenbias"
    return next((f.results_page for f in FORMATS if f.name == kind), "explore")


def holds(kind: str, counts: Mapping[str, int]) -> str:
    """What a dataset of `kind` holds, in its own units (`counts` from
    `Store.dataset_contents`): a thesis dataset's effect sizes and prompts, a token-bias
    dataset's item pairs, a paired dataset's test cases and published decisions. One
    sentence for every kind, so no kind is shown as zero of something it never has."""
    page = results_page(kind)
    if page == "datasets":
        parts = [f"{counts.get('effects', 0):,} effect sizes"]
        if counts.get("prompts"):
            parts.append(f"{counts['prompts']:,} prompts")
    elif page == "tokenbias":
        parts = [f"{counts.get('instances', 0):,} item pairs"]
    else:
        parts = [f"{counts.get('instances', 0):,} test cases"]
        if counts.get("decisions"):
            parts.append(f"{counts['decisions']:,} published decisions")
    return ", ".join(parts)


def format_named(name: str) -> Format:
    """The registered format `name`; an unknown name is a DatasetError listing the known."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    known = ", ".join(f.name for f in FORMATS)
    raise DatasetError(name, f"is not a format cogbias imports (known: {known})")


def run_import(
    store: object,
    format_name: str,
    inputs: Sequence[str | Path],
    name: str | None = None,
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    options: Sequence[str] = (),
) -> ImportSummary:
    """Import as `cogbias import FORMAT INPUTS... OPTIONS --name NAME [--replace]` does: the
    format's own arguments parse `inputs` and `options`, and its own `run` imports them, so
    the command and the page cannot drift apart. Arguments the format refuses are a
    DatasetError naming the format."""
    fmt = format_named(format_name)
    parser = argparse.ArgumentParser(prog=f"import {fmt.name}", add_help=False, exit_on_error=False)
    fmt.add_arguments(parser)
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stderr(quiet):
            args = parser.parse_args([str(i) for i in inputs] + list(options))
    except (argparse.ArgumentError, SystemExit) as exc:
        said = str(exc) if isinstance(exc, argparse.ArgumentError) else quiet.getvalue().strip()
        raise DatasetError(fmt.name, f"cannot read these inputs: {said.splitlines()[-1]}") from None
    stem = Path(str(inputs[0])).stem if inputs else ""
    args.name = name or fmt.default_name or stem
    args.replace = replace
    return fmt.run(store, args, progress or (lambda label, done, total: None))
