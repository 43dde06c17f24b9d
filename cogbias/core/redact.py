"""Keep secrets out of everything we write: the store, logs and exports.

Provider error messages sometimes echo part of a key; we never trust them to be clean. A
provider that echoes a key may also disguise it, so for every secret of at least
`DISGUISE_MIN` characters its common encodings are caught too: upper, lower or mixed case,
reversed, spaced out (whitespace such as a line break, zero-width characters or one of
`. , : ; | / - _` between its characters, up to three of them) and base64 (standard or
URL-safe, at any alignment inside a longer base64 text). Key-shaped strings (`sk-…`) are
caught without being known, in lower or upper case and reversed. docs/runs.md lists what is
not caught.

What counts as a secret (`secret_values`): the value of an environment variable whose name
says it is one (KEY, TOKEN, SECRET, PASSWORD), of 8 characters or more; a value made only of
digits and the signs of numbers (a PIN, a port, a date) counts from 16 characters, since a
shorter number would match numbers in ordinary text and in log-probabilities (a variable
that names an endpoint's key must say it is one: docs/runs.md, "Which key goes where").

Texts that are JSON (a cached request, a log-probability answer, an instance's insertions, a
turn's value) are redacted with `redact_json`: inside their strings only, never their syntax,
so a secret that happens to match a number cannot turn them into invalid JSON.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"\b(?:sk|pk|gsk|xai|hf)[-_][A-Za-z0-9_\-.]{6,}|\bAIza[0-9A-Za-z_\-]{20,}"
    # upper-cased and reversed, with a digit (so that HF_HUB_OFFLINE or task_force-ks stay); a
    # reversed shape starts where its run of key characters starts (no quadratic search)
    r"|\b(?:SK|PK|GSK|XAI|HF)[-_](?=[A-Z_\-.]*[0-9])[A-Z0-9_\-.]{6,}"
    r"|(?<![A-Za-z0-9_\-.])(?=[A-Za-z_\-.]*[0-9])[A-Za-z0-9_\-.]{6,}[-_](?:ks|kp|ksg|iax|fh)\b"
    r"|(?<![0-9A-Za-z_\-])[0-9A-Za-z_\-]{20,}azIA\b"
)
# what a text holding a key shape holds, in lower case: the pattern runs only then
_SHAPE_MARKERS = (
    *(f"{p}{s}" for p in ("sk", "pk", "hf", "xai") for s in "-_"),
    *(f"{s}{p}" for p in ("ks", "kp", "fh", "iax") for s in "-_"),
    "aiza",
    "azia",
)

Redactor = Callable[[str | None], str | None]

MIN_SECRET = 8  # shorter values (flags, small numbers) are not secrets worth the false matches
MIN_NUMERIC_SECRET = 16  # a value of digits only must be longer to be told from numbers
DISGUISE_MIN = 12  # shorter secrets would make their disguises match ordinary text
_SEPARATORS = r"\s\u200b-\u200d\u2060\ufeff.,:;|/_-"
_GAP = f"[{_SEPARATORS}]{{0,3}}"
# every character `_GAP` matches: its `\s` is what str.isspace says, all of it below U+3001
_DROP_SEPARATORS = dict.fromkeys(
    [c for c in range(0x3001) if chr(c).isspace()]
    + [ord(c) for c in "\u200b\u200c\u200d\u2060\ufeff.,:;|/_-"]
)
_NUMERIC = re.compile(r"[\d\s.,:;+\-/_]+")


def is_secret_value(value: str) -> bool:
    """Whether an environment value is long enough, and unlike a number enough, to redact."""
    if len(value) < MIN_SECRET:
        return False
    return len(value) >= MIN_NUMERIC_SECRET or not _NUMERIC.fullmatch(value)


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets (`is_secret_value`)."""
    return [
        value
        for name, value in os.environ.items()
        if _SECRET_NAME_RE.search(name) and is_secret_value(value)
    ]


def redactor(extra: tuple[str | None, ...] = ()) -> Redactor:
    """A function that replaces secret values and key-shaped strings with '***'.

    The environment is read once, when the redactor is made, so a batch of rows pays for
    one scan of it rather than one per text. Each pattern runs only when a test made of
    plain substring searches finds what it looks for, so a clean text costs a few passes
    in C rather than a regular expression at each of its characters.
    """
    values = sorted({*secret_values(), *(v for v in extra if v and len(v) >= 4)})
    # Longest first, so a secret that contains another is replaced whole.
    known = (
        re.compile("|".join(map(re.escape, sorted(values, key=len, reverse=True))))
        if values
        else None
    )
    disguised = _Disguises([v for v in values if len(v) >= DISGUISE_MIN])

    def clean(text: str | None) -> str | None:
        if not text:
            return text
        if known is not None and any(v in text for v in values):
            text = known.sub("***", text)
        text = disguised.sub(text)
        lowered = text.lower()
        if ("-" in text or "_" in text or "aiza" in lowered or "azia" in lowered) and any(
            marker in lowered for marker in _SHAPE_MARKERS
        ):
            text = _KEY_SHAPES.sub("***", text)
        return text

    return clean


class _Disguises:
    """The secrets' disguised forms: spaced, any case, forward or reversed (one pattern),
    then their base64 (case matters there), each tried only where its secret may be: in
    the text without separators and in lower case, or its base64 as it is."""

    def __init__(self, values: list[str]) -> None:
        self.spelled: re.Pattern[str] | None = None
        self.cores: re.Pattern[str] | None = None
        self.squeezed: list[str] | None = []  # None: a secret that is not ASCII, always tried
        self.core_list: list[str] = []
        if not values:
            return
        spelled = {_GAP.join(map(_any_case, form)) for v in values for form in (v, v[::-1])}
        self.spelled = re.compile("|".join(sorted(spelled, key=len, reverse=True)))
        if all(v.isascii() for v in values):
            self.squeezed = [
                form for v in values for form in (_squeeze(v), _squeeze(v)[::-1]) if form
            ]
        else:
            self.squeezed = None
        self.core_list = sorted(
            {core for v in values for core in _base64_cores(v.encode("utf-8"))},
            key=len,
            reverse=True,
        )
        if self.core_list:
            self.cores = re.compile("|".join(map(re.escape, self.core_list)))

    def sub(self, text: str) -> str:
        if self.spelled is not None and self._may_spell(text):
            text = self.spelled.sub("***", text)
        if self.cores is not None and any(core in text for core in self.core_list):
            text = self.cores.sub("***", text)
        return text

    def _may_spell(self, text: str) -> bool:
        if self.squeezed is None:
            return True
        plain = _squeeze(text)
        return any(form in plain for form in self.squeezed)


def _squeeze(text: str) -> str:
    """The text without any character a disguise may put between a secret's, in lower case:
    a spelled-out secret, in any case, becomes the secret itself."""
    return text.translate(_DROP_SEPARATORS).lower()


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


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def redact_json(text: str | None, clean: Redactor) -> str | None:
    """A JSON text with its strings redacted (keys and values, as decoded: an escaped line
    break or zero-width space hides nothing) and everything else byte for byte as it was, so
    the result is JSON again. A text that is not a JSON object, array or string is redacted as
    a text."""
    if not text or text.lstrip()[:1] not in ("{", "[", '"'):
        return clean(text)
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return clean(text)
    # In valid JSON every quote outside a string opens one: these are exactly its strings.
    spans = [m.span() for m in _JSON_STRING.finditer(text)]
    decoded: list[str] = json.loads("[" + ",".join(text[a:b] for a, b in spans) + "]")
    cleaned = _clean_all(decoded, clean)
    if cleaned == decoded:
        return text
    out, at = [], 0
    for (start, end), before, after in zip(spans, decoded, cleaned, strict=True):
        if after != before:
            out += [text[at:start], _literal(after)]
            at = end
    return "".join(out) + text[at:]


def redact_row(
    row: Mapping[str, Any], clean: Redactor, texts: Iterable[str], json_texts: Iterable[str] = ()
) -> dict[str, Any]:
    """The row with its `texts` redacted and its `json_texts` redacted inside their strings
    (`redact_json`); a column the row lacks stays absent."""
    out = dict(row)
    for name in texts:
        if name in out:
            out[name] = clean(out[name])
    for name in json_texts:
        if name in out:
            out[name] = redact_json(out[name], clean)
    return out


def _clean_all(texts: list[str], clean: Redactor) -> list[str]:
    """Every text redacted, in one pass when they can be joined: NUL separates them, and no
    secret, separator or key shape contains it, so no match spans two texts."""
    if not texts:
        return []
    if any("\x00" in t for t in texts):
        return [clean(t) or "" for t in texts]
    parts = (clean("\x00".join(texts)) or "").split("\x00")
    return parts if len(parts) == len(texts) else [clean(t) or "" for t in texts]


def _literal(text: str) -> str:
    """A JSON string literal, readable where the text allows (a lone surrogate is escaped)."""
    literal = json.dumps(text, ensure_ascii=False)
    try:
        literal.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return literal
