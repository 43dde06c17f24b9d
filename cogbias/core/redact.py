"""Keep secrets out of everything we write: the store, logs and exports.

Provider error messages sometimes echo part of a key; we never trust them to be clean. A
provider that echoes a key may also disguise it, so for every secret of at least
`DISGUISE_MIN` characters its common encodings are caught too: upper, lower or mixed case,
reversed, spaced out (whitespace, zero-width characters or one of `. , : ; | / - _` between
its characters, up to three of them) and base64 (standard or URL-safe, at any alignment
inside a longer base64 text). docs/runs.md lists what is not caught.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable

_SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(?:sk|pk|gsk|xai|hf)[-_][A-Za-z0-9_\-.]{6,}|\bAIza[0-9A-Za-z_\-]{20,}")

Redactor = Callable[[str | None], str | None]

DISGUISE_MIN = 12  # shorter secrets would make their disguises match ordinary text
_GAP = r"[\s\u200b-\u200d\u2060\ufeff.,:;|/_-]{0,3}"


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

    disguised = _disguises([v for v in values if len(v) >= DISGUISE_MIN])

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        if known is not None:
            text = known.sub("***", text)
        for pattern in disguised:
            text = pattern.sub("***", text)
        return _KEY_SHAPES.sub("***", text)

    return clean


def _disguises(values: list[str]) -> list[re.Pattern[str]]:
    """Patterns for the secrets' disguised forms: spaced, any case, forward or reversed (one
    pattern), then their base64 (case matters there)."""
    if not values:
        return []
    spelled = {_GAP.join(map(_any_case, form)) for v in values for form in (v, v[::-1])}
    cores = {core for v in values for core in _base64_cores(v.encode("utf-8"))}
    patterns = [re.compile("|".join(sorted(spelled, key=len, reverse=True)))]
    if cores:
        patterns.append(re.compile("|".join(map(re.escape, sorted(cores, key=len, reverse=True)))))
    return patterns


def _any_case(char: str) -> str:
    """One character in either case (a class is faster than re.IGNORECASE here)."""
    lower, upper = char.lower(), char.upper()
    if lower == upper or len(lower) != 1 or len(upper) != 1:
        return re.escape(char)
    return f"[{re.escape(lower)}{re.escape(upper)}]"


def _base64_cores(secret: bytes) -> Iterable[str]:
    """What the base64 of any text containing `secret` always contains, for each of the three
    alignments the secret can have, in both alphabets: the characters that encode the secret's
    bytes alone (the first and last few depend on the bytes around it, so they are left out)."""
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + secret + bytes(3)).decode("ascii")
        start = -(-offset * 4 // 3)  # the first character made of the secret's bits only
        end = (offset + len(secret)) * 4 // 3  # past the last one
        core = encoded[start:end]
        if len(core) >= 8:
            yield core
            yield core.replace("+", "-").replace("/", "_")


def redact(text: str | None, extra: tuple[str | None, ...] = ()) -> str | None:
    """Redact one text (see `redactor` for many)."""
    return redactor(extra)(text)
