"""The model registry: `data/models.toml` plus the user's own `COGBIAS_HOME/models.toml`.

It lives in the llm layer because it says how to reach a model (endpoint, JSON schema, the
highest temperature an API takes) and `llm.profiles` resolves every model against it; the
test case library below knows nothing about models. Display facts (name, developer, size,
arena score) ride along for the pages and figures that label models.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    json_schema: bool = False
    max_temperature: float = 1.0
    api_base: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def user_models_path() -> Path:
    """The user's own registry (custom endpoints), read after the built-in one."""
    return user_dir().parent / "models.toml"


def load_models(path: Path | None = None) -> list[ModelInfo]:
    """The model registry (data/models.toml) plus the user's own (COGBIAS_HOME/models.toml);
    a user entry with a built-in's id replaces it. `path` reads that one file only."""
    paths = [path] if path else [BUILTIN_MODELS, user_models_path()]
    models: dict[str, ModelInfo] = {}
    known = set(ModelInfo.__dataclass_fields__) - {"extra"}
    for p in paths:
        if not p.is_file():
            continue
        for entry in tomllib.loads(p.read_text(encoding="utf-8")).get("models", []):
            fields = {k: v for k, v in entry.items() if k in known}
            extra = {k: v for k, v in entry.items() if k not in known}
            models[entry["id"]] = ModelInfo(**fields, extra=extra)
    return list(models.values())


def get_model(model_id: str, registry: list[ModelInfo] | None = None) -> ModelInfo | None:
    """The registry's entry for `model_id`, None when it has none."""
    found = load_models() if registry is None else registry
    return next((m for m in found if m.id == model_id), None)
