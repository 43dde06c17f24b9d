"""Keep secrets out of everything we write: the store, logs and exports.

Provider error messages sometimes echo part of a key; we never trust them to be clean.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

_SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(?:sk|pk|gsk|xai|hf)[-_][A-Za-z0-9_\-.]{6,}|\bAIza[0-9A-Za-z_\-]{20,}")

Redactor = Callable[[str | None], str | None]


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets."""
    return [
        value
        for name, value in os.environ.items()
        if _SECRET_NAME_RE.search(name) and len(value) >= 8
    ]


def redactor(extra: tuple[str | None, ...] = ()) -> Redactor:
    """A function that replaces secret values and key-shaped strings with '***'.

    The environment is read once, when the redactor is made, so a batch of rows pays for
    one scan of it rather than one per text.
    """
    values = [*secret_values(), *(v for v in extra if v and len(v) >= 4)]
    # Longest first, so a secret that contains another is replaced whole.
    known = (
        re.compile("|".join(map(re.escape, sorted(values, key=len, reverse=True))))
        if values
        else None
    )

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        if known is not None:
            text = known.sub("***", text)
        return _KEY_SHAPES.sub("***", text)

    return clean


def redact(text: str | None, extra: tuple[str | None, ...] = ()) -> str | None:
    """Redact one text (see `redactor` for many)."""
    return redactor(extra)(text)
