"""User settings: which provider keys are present, and the user's own model endpoints.

Keys are only ever reported by *name*: a UI or log must not be able to show a key's value.
Custom endpoints go to `COGBIAS_HOME/models.toml`, which `llm.registry.load_models` reads after
the built-in registry (same fields as `data/models.toml`).
"""

from __future__ import annotations

import os
import re
import tempfile
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

import tomlkit

from cogbias.llm import registry
from cogbias.llm.keys import key_refusal
from cogbias.llm.local import LOCAL_PREFIX
from cogbias.llm.profiles import RANDOM_MODEL

# Environment variables litellm reads for the providers in the registry, and common others.
PROVIDER_KEYS = {
    "OPENAI_API_KEY": "OpenAI",
    "ANTHROPIC_API_KEY": "Anthropic",
    "GEMINI_API_KEY": "Google Gemini",
    "MISTRAL_API_KEY": "Mistral AI",
    "DEEPINFRA_API_KEY": "DeepInfra",
    "FIREWORKS_AI_API_KEY": "Fireworks AI",
    "GROQ_API_KEY": "Groq",
    "TOGETHERAI_API_KEY": "Together AI",
    "OPENROUTER_API_KEY": "OpenRouter",
    "XAI_API_KEY": "xAI",
    "COHERE_API_KEY": "Cohere",
    "HF_TOKEN": "Hugging Face",
}
_ID_RE = re.compile(r"[A-Za-z0-9_.:/@-]+")
RESERVED = {RANDOM_MODEL}  # built-in ids (and every LOCAL_PREFIX id) cannot be registered


def key_status(environ: Mapping[str, str] | None = None) -> list[dict[str, object]]:
    """Each known key variable (and any other `*_API_KEY`) with whether it is set; no values."""
    env = os.environ if environ is None else environ
    names = dict(PROVIDER_KEYS)
    for name in sorted(env):
        if name.endswith("_API_KEY") and name not in names:
            names[name] = name.removesuffix("_API_KEY").replace("_", " ").title()
    return [
        {"variable": name, "provider": provider, "present": bool(env.get(name, "").strip())}
        for name, provider in names.items()
    ]


def user_models_path() -> Path:
    return registry.user_models_path()


def check_api_base(url: str) -> str:
    """A base URL for an OpenAI-compatible server; credentials in it are refused."""
    url = url.strip().rstrip("/")
    try:
        parts = urllib.parse.urlsplit(url)
        credentials = bool(parts.username or parts.password or parts.query or parts.fragment)
    except ValueError:  # e.g. a malformed port or IPv6 address
        parts, credentials = None, "@" in url or "?" in url
    if credentials:  # checked first, and the URL never repeated: it may hold a key
        raise ValueError(
            "the URL must not hold a user, password or query string: keys belong in the "
            "environment, named with api_key_env (or --api-key-env), never in the URL"
        )
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{url}' is not an http(s) URL like http://127.0.0.1:8000/v1")
    return url


def add_custom_model(
    model_id: str,
    name: str,
    api_base: str,
    developer: str = "",
    json_schema: bool = False,
    max_temperature: float = 2.0,
    path: Path | None = None,
    api_key_env: str = "",
) -> Path:
    """Add (or replace, by id) a model in the user's registry; returns the file written.

    `api_key_env` names the environment variable holding the endpoint's key: no other key
    is ever sent to it (`llm.keys`), and none over plain http to another machine."""
    model_id = model_id.strip()
    if not _ID_RE.fullmatch(model_id) or model_id in RESERVED or model_id.startswith(LOCAL_PREFIX):
        raise ValueError(
            f"'{model_id}' is not a usable model id; for an OpenAI-compatible server write "
            "openai/<the name the server knows the model by>"
        )
    entry = tomlkit.table()
    entry["id"] = model_id
    entry["name"] = name.strip() or model_id
    if developer.strip():
        entry["developer"] = developer.strip()
    entry["api_base"] = check_api_base(api_base)
    if api_key_env.strip():
        entry["api_key_env"] = registry.check_key_variable(api_key_env)
        refusal = key_refusal(entry["api_base"], entry["api_key_env"])
        if refusal:
            raise ValueError(refusal)
    entry["json_schema"] = bool(json_schema)
    entry["max_temperature"] = float(max_temperature)
    path = path or user_models_path()
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    kept = [m for m in doc.get("models", []) if m.get("id") != model_id]
    models = tomlkit.aot()
    for m in [*kept, entry]:
        models.append(m)
    doc["models"] = models
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".models.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(tomlkit.dumps(doc))
    os.replace(tmp, path)
    return path


def remove_custom_model(model_id: str, path: Path | None = None) -> bool:
    """Remove a model from the user's registry; False when it was not there."""
    path = path or user_models_path()
    if not path.is_file():
        return False
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    entries = list(doc.get("models", []))
    kept = [m for m in entries if m.get("id") != model_id]
    if len(kept) == len(entries):
        return False
    models = tomlkit.aot()
    for m in kept:
        models.append(m)
    doc["models"] = models
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return True
