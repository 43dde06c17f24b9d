"""The model registry: `data/models.toml` plus the user's own `COGBIAS_HOME/models.toml`.

It lives in the llm layer because it says how to reach a model (endpoint, JSON schema, the
highest temperature an API takes) and `llm.profiles` resolves every model against it; the
test case library below knows nothing about models. Display facts (name, developer, size,
arena score) ride along for the pages and figures that label models.

An entry overrides only what it states: a capability it leaves out (None here) is the
provider's (`llm.providers`), as `llm.profiles` resolves it.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from cogbias.core.reasoning import EFFORTS
from cogbias.library.testcases import DATA_DIR, user_dir

BUILTIN_MODELS = DATA_DIR / "models.toml"


@dataclass(frozen=True)
class ModelInfo:
    """One registry entry; keys the reader does not know are kept in `extra`."""

    id: str
    name: str
    developer: str = ""
    params_b: float | None = None
    arena_score: float | None = None
    api_base: str | None = None
    api_key_env: str | None = None  # the variable holding `api_base`'s key (llm.keys)
    # Capabilities (see `CAPABILITIES`): None when the entry does not state one, so the
    # profile keeps the provider's.
    json_schema: bool | None = None
    max_temperature: float | None = None
    batchable: bool | None = None
    logprobs: bool | None = None
    top_logprobs: bool | None = None
    probabilities_first: bool | None = None
    grammar: bool | None = None
    prefix_cache: bool | None = None
    writes_text: bool | None = None
    reasoning: bool | None = None  # the model thinks before it answers (`llm.thinking`)
    thinking_temperature: float | None = None  # the only temperature it takes while thinking
    # the effort it thinks at when a run names none (`core.reasoning.EFFORTS`); None: medium
    reasoning_effort: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def stated(self) -> dict[str, Any]:
        """The capabilities this entry states, by name (`llm.profiles` applies them), and the
        reasoning effort it names as the model's default."""
        names = (*CAPABILITIES, "reasoning_effort")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}


# What a profile can do, each of which an entry may state (`ModelProfile` has the same names).
CAPABILITIES = (
    "json_schema",
    "max_temperature",
    "batchable",
    "logprobs",
    "top_logprobs",
    "probabilities_first",
    "grammar",
    "prefix_cache",
    "writes_text",
    "reasoning",
    "thinking_temperature",
)
_NUMBERS = ("params_b", "arena_score", "max_temperature", "thinking_temperature")


# A variable named to hold a key must say it is a secret, so the redactor (core.redact) keeps
# its value out of everything written, as it does for every provider's variable.
_KEY_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_WORD_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def check_key_variable(name: object) -> str:
    """`name` as an environment variable that may hold a key (`api_key_env`,
    `--api-key-env`); refused with what to write instead."""
    text = str(name).strip() if isinstance(name, str) else ""
    if not _KEY_NAME_RE.fullmatch(text) or not _SECRET_WORD_RE.search(text):
        shown = str(name)[:40].encode("unicode_escape").decode("ascii")
        raise ValueError(
            f"'{shown}' cannot name a key: give the name of an environment variable (letters, "
            "digits, _) that contains KEY, TOKEN, SECRET or PASSWORD, e.g. MY_SERVER_KEY, so "
            "its value is kept out of everything cogbias writes"
        )
    return text


def user_models_path() -> Path:
    """The user's own registry (custom endpoints), read after the built-in one."""
    return user_dir().parent / "models.toml"


def load_models(path: Path | None = None) -> list[ModelInfo]:
    """The model registry (data/models.toml) plus the user's own (COGBIAS_HOME/models.toml);
    a user entry with a built-in's id replaces it. `path` reads that one file only. An entry
    that cannot be read is left out (`registry_problems` says which and why), so one typo in
    a hand-edited file never stops every command and page."""
    return _read_all(path)[0]


def registry_problems(path: Path | None = None) -> list[str]:
    """`file: entry N: problem` for every entry `load_models` left out."""
    return _read_all(path)[1]


# What each registry file held when last read, by (size, mtime): a run resolves a model's
# profile many times, and parsing the TOML again each time cost ~10 ms.
_READ: dict[Path, tuple[tuple[int, int], list[ModelInfo], list[str]]] = {}


def _read_all(path: Path | None) -> tuple[list[ModelInfo], list[str]]:
    models: dict[str, ModelInfo] = {}
    problems: list[str] = []
    for p in [path] if path else [BUILTIN_MODELS, user_models_path()]:
        try:
            stat = p.stat()
        except OSError:
            continue
        if not S_ISREG(stat.st_mode):
            continue
        version = (stat.st_size, stat.st_mtime_ns)
        known = _READ.get(p)
        if known is None or known[0] != version:
            known = _READ[p] = (version, *_read_file(p))
        models.update((info.id, info) for info in known[1])
        problems += known[2]
    return list(models.values()), problems


def _read_file(p: Path) -> tuple[list[ModelInfo], list[str]]:
    """One registry file's entries in order (`_read_all` keeps the last of an id) and what
    was wrong in it."""
    models: list[ModelInfo] = []
    problems: list[str] = []
    try:
        entries = tomllib.loads(p.read_text(encoding="utf-8")).get("models", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [], [f"{p}: cannot be read: {exc}"]
    for n, entry in enumerate(entries if isinstance(entries, list) else [entries], 1):
        info, wrong = _entry(entry)
        problems += [f"{p}: entry {n}: {w}" for w in wrong]
        if info is not None:
            models.append(info)
    return models, problems


def _entry(entry: object) -> tuple[ModelInfo | None, list[str]]:
    """One `[[models]]` table as a ModelInfo and what was wrong in it. Without a usable id
    the entry is left out; any other field that is wrong is left unstated (a label falls
    back to the id, a capability to the provider's), so the model keeps its endpoint and is
    never sent elsewhere."""
    from cogbias.core.limits import name_problem

    if not isinstance(entry, dict):
        return None, ["is not a table"]
    model_id = entry.get("id")
    problem = name_problem(model_id) if isinstance(model_id, str) else "is missing or no text"
    if problem:
        return None, [f"'id' {problem}; the entry is left out"]
    wrong: list[str] = []
    fields = {k: v for k, v in entry.items() if k in ModelInfo.__dataclass_fields__}
    fields.pop("extra", None)
    for key in ("name", "developer", "api_base"):
        value = fields.get(key)
        if value is not None and (not isinstance(value, str) or name_problem(value, 2_000)):
            wrong.append(f"'{key}' is not one line of text")
            fields[key] = str(value) if key == "api_base" else None
    for key in _NUMBERS:
        value = fields.get(key)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            used = "the provider's is used" if key in CAPABILITIES else "it is left empty"
            wrong.append(f"'{key}' must be a finite number >= 0; {used}")
            fields[key] = None
    for key in CAPABILITIES:
        if key not in _NUMBERS and not isinstance(fields.get(key, False), bool):
            wrong.append(f"'{key}' must be true or false; the provider's is used")
            fields[key] = None
    effort = fields.get("reasoning_effort")
    if effort is not None and effort not in EFFORTS:
        wrong.append(f"'reasoning_effort' must be one of {', '.join(EFFORTS)}; medium is used")
        fields["reasoning_effort"] = None
    fields["name"] = fields.get("name") or model_id
    fields["developer"] = fields.get("developer") or ""
    extra = {k: v for k, v in entry.items() if k not in ModelInfo.__dataclass_fields__}
    return ModelInfo(**fields, extra=extra), [f"{w} ({model_id})" for w in wrong]


def get_model(model_id: str, registry: list[ModelInfo] | None = None) -> ModelInfo | None:
    """The registry's entry for `model_id`, None when it has none."""
    found = load_models() if registry is None else registry
    return next((m for m in found if m.id == model_id), None)
