"""Which environment variable holds a model's key, and whether it is set.

Asked before a call (a model whose key is missing is refused at once, in one sentence, instead
of failing seconds later with the provider's text) and by every model picker, which marks such
models. Keys are only ever named, never read out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cogbias.llm.profiles import RANDOM_MODEL

# litellm provider prefix -> the variable holding its key (None: no key needed)
KEY_OF_PROVIDER: dict[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepinfra": "DEEPINFRA_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "groq": "GROQ_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "ollama": None,
    "ollama_chat": None,
    "local": None,
}


def _provider(model_id: str) -> str:
    return model_id.split("/", 1)[0] if "/" in model_id else "openai"


def key_for_model(model_id: str, api_base: str | None = None) -> str | None:
    """The variable a model's key is read from; None for built-ins and own endpoints."""
    if model_id == RANDOM_MODEL or api_base:
        return None  # own servers (Ollama, vLLM, ...) usually need no key
    provider = _provider(model_id)
    return KEY_OF_PROVIDER.get(provider, f"{provider.upper()}_API_KEY")


def missing_key(
    model_id: str, api_base: str | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The variable to set before `model_id` can be called, or None when nothing is missing.

    Only for providers whose key variable is known: others (cloud credentials, custom setups)
    are left to the provider to judge.
    """
    if _provider(model_id) not in KEY_OF_PROVIDER:
        return None
    name = key_for_model(model_id, api_base)
    env = os.environ if environ is None else environ
    return name if name and not env.get(name, "").strip() else None


def missing_key_message(model: str, variable: str) -> str:
    """One sentence that says what to set, for the CLI and the pages alike."""
    return (
        f"{model} needs an API key and {variable} is not set: set it in the environment, or "
        f'add {variable} = "..." to .streamlit/secrets.toml for the app'
    )
