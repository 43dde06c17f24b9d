"""Keep secrets out of everything we write: the store, logs and exports.

Provider error messages sometimes echo part of a key; we never trust them to be clean.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})"
)


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets."""
    return [
        value
        for name, value in os.environ.items()
        if _SECRET_NAME_RE.search(name) and len(value) >= 8
    ]


def redact(text: str | None, extra: tuple[str | None, ...] = ()) -> str | None:
    """Replace secret values (env secrets and `extra`) and key-shaped strings with '***'."""
    if not text:
        return text
    for value in [*secret_values(), *(v for v in extra if v and len(v) >= 4)]:
        if value in text:
            text = text.replace(value, "***")
    return _KEY_SHAPES.sub("***", text)
