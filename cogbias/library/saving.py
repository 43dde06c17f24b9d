"""Writing a test case: atomically, to the user's library, never over a built-in or unasked."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cogbias.library.cases import BUILTIN_DIR, TestCase, to_toml, user_dir
from cogbias.library.parsing import parse_test_case


class AlreadyExistsError(FileExistsError):
    """Saving would replace an existing file; the caller must ask and pass overwrite=True."""


def save_test_case(case: TestCase, path: str | Path | None = None, overwrite: bool = False) -> Path:
    """Write atomically to the user library (never over a built-in file).

    An existing file is only replaced with `overwrite=True`: the app asks first and the CLI
    needs `--force`, so a user's work is never replaced without a word.
    """
    target = Path(path) if path is not None else user_dir() / f"{case.id}.toml"
    if target.resolve().parent == BUILTIN_DIR.resolve() and target.exists():
        raise PermissionError(
            f"{target} is a built-in test case; save a copy under a new id in {user_dir()}"
        )
    if target.exists() and not overwrite:
        raise AlreadyExistsError(
            f"you already have a test case '{case.id}' ({target}); replacing it needs "
            "confirmation (overwrite=True, or --force on the command line)"
        )
    text = to_toml(case)
    parse_test_case(text, str(target))  # never write a file that would not load back
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, target)
    return target
