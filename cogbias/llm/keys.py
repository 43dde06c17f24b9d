"""Which key goes to which endpoint, and whether it is set.

A provider's key is sent only to that provider's own hosts (`PROVIDER_HOSTS`, over https):
an endpoint of the user's (`--api-base`, a registry entry's `api_base`, `OPENAI_BASE_URL`)
gets a key only when one is named for it — its registry entry's `api_key_env = "VAR"`, or
`--api-key-env VAR` for the command's own endpoint. Otherwise it gets a placeholder, never
the key of the provider its model string names: anyone who runs a server, or who can make a
user type its address, would otherwise collect the user's OpenAI key.

A key is never sent over plain http beyond this machine (a loopback address may use http:
nothing crosses a network). Asked before a call, so a model whose key is missing is refused
at once, in one sentence, instead of failing seconds later with the provider's text. Keys
are only ever named, never read out, except by `key_to_send` for the request itself.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from collections.abc import Callable, Mapping

from cogbias.llm.errors import FatalLLMError, MissingKeyError
from cogbias.llm.local import LOCAL_PREFIX
from cogbias.llm.profiles import RANDOM_MODEL, ModelProfile
from cogbias.llm.registry import check_key_variable, get_model

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
# The hosts a provider's key may be sent to when an endpoint is given explicitly (exact
# names, https only). Without an endpoint, litellm calls the provider's own host.
PROVIDER_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
    "gemini": ("generativelanguage.googleapis.com",),
    "mistral": ("api.mistral.ai",),
    "deepinfra": ("api.deepinfra.com",),
    "fireworks_ai": ("api.fireworks.ai",),
    "groq": ("api.groq.com",),
    "together_ai": ("api.together.xyz",),
    "openrouter": ("openrouter.ai",),
    "xai": ("api.x.ai",),
    "cohere": ("api.cohere.com", "api.cohere.ai"),
}
PLACEHOLDER_KEY = "sk-no-key-required"  # what an endpoint without a key of its own is sent


def _provider(model_id: str) -> str:
    return model_id.split("/", 1)[0] if "/" in model_id else "openai"


def is_provider_host(model_id: str, api_base: str) -> bool:
    """True when `api_base` is https on one of the hosts of the provider `model_id` names."""
    parts = _split(api_base)
    hosts = PROVIDER_HOSTS.get(_provider(model_id), ())
    return parts is not None and parts.scheme == "https" and (parts.hostname or "") in hosts


def is_loopback(api_base: str) -> bool:
    """True for an endpoint on this machine (localhost, 127.0.0.0/8, ::1)."""
    parts = _split(api_base)
    host = (parts.hostname or "") if parts else ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(url: str) -> urllib.parse.SplitResult | None:
    try:
        return urllib.parse.urlsplit(url.strip())
    except ValueError:
        return None


def key_refusal(api_base: str | None, variable: str | None) -> str | None:
    """Why the key in `variable` must not go to `api_base` (plain http beyond this machine),
    or None when it may."""
    if not variable or not api_base or is_loopback(api_base):
        return None
    parts = _split(api_base)
    if parts is not None and parts.scheme == "https":
        return None
    return (
        f"cogbias sends no key over plain http to another machine: {api_base} would receive "
        f"the key in {variable} unencrypted; use an https URL, or a loopback address "
        "(127.0.0.1) for a server on this machine"
    )


def key_for_model(
    model_id: str, api_base: str | None = None, named: str | None = None
) -> str | None:
    """The variable whose value is sent as `model_id`'s key to `api_base`, or None (none is).

    `named` is the variable named for this very endpoint (a registry entry's `api_key_env`,
    or `--api-key-env`); without one, a provider's key goes only to the provider: its own
    host (no `api_base`) or `api_base` on one of `PROVIDER_HOSTS`.
    """
    if model_id == RANDOM_MODEL or model_id.startswith(LOCAL_PREFIX):
        return None
    if named and isinstance(named, str):  # a hand-written non-string is refused at the call
        return named
    provider = _provider(model_id)
    if api_base and not is_provider_host(model_id, api_base):
        return None  # own servers (Ollama, vLLM, ...) get no provider's key
    return KEY_OF_PROVIDER.get(provider, f"{provider.upper()}_API_KEY")


def _required(model_id: str, variable: str, named: str | None) -> bool:
    """Whether a missing `variable` dooms the call: named keys and known providers' keys;
    other providers' credentials (cloud accounts, custom setups) are theirs to judge."""
    return bool(named) or _provider(model_id) in KEY_OF_PROVIDER


def missing_key(
    model_id: str,
    api_base: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    key_env: str | None = None,
) -> str | None:
    """The variable to set before `model_id` can be called at `api_base`, or None when
    nothing is missing. `key_env` is the variable named for the endpoint; without it, a
    registry entry for `model_id` at `api_base` names its own (`api_key_env`)."""
    if key_env is None and api_base:
        entry = get_model(model_id)
        if entry is not None and entry.api_key_env and _same_base(entry.api_base, api_base):
            try:
                key_env = check_key_variable(entry.api_key_env)
            except ValueError:  # the call says what is wrong with the entry
                return None
    name = key_for_model(model_id, api_base, key_env)
    env = os.environ if environ is None else environ
    if not name or not _required(model_id, name, key_env):
        return None
    return name if not env.get(name, "").strip() else None


def _same_base(a: str | None, b: str | None) -> bool:
    return (a or "").strip().rstrip("/") == (b or "").strip().rstrip("/")


def key_to_send(profile: ModelProfile, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to send for one call of `profile`'s model, None when the endpoint gets none.

    Raises `MissingKeyError` when the key it needs is not set, and `FatalLLMError` when the
    key would cross a network unencrypted (see `key_refusal`): both before anything is sent.
    """
    if profile.kind != "remote":
        return None
    name = key_for_model(profile.id, profile.api_base, profile.api_key_env)
    if not name:
        return None
    env = os.environ if environ is None else environ
    value = env.get(name, "").strip()
    if not value:
        if _required(profile.id, name, profile.api_key_env):
            message = missing_key_message(profile.id, name)
            raise MissingKeyError(message, kind="auth", model=profile.id)
        return None
    refusal = key_refusal(profile.api_base, name)
    if refusal:
        raise FatalLLMError(f"{profile.id}: {refusal}", kind="auth", model=profile.id)
    return value


def auth_hint(profile: ModelProfile) -> Callable[[str], str] | None:
    """What to check when `profile`'s endpoint refuses its key (None: ask litellm, for a
    provider's own host)."""
    name = key_for_model(profile.id, profile.api_base, profile.api_key_env)
    if name:
        return lambda _model: f"{name} is probably wrong or lacks access"
    if profile.api_base is None:
        return None
    return lambda _model: (
        "this endpoint was sent no key: a provider's key (OPENAI_API_KEY, ...) goes only to "
        "the provider's own host; name the variable holding this server's key with "
        '--api-key-env VAR, or api_key_env = "VAR" in the model\'s registry entry'
    )


def missing_key_message(model: str, variable: str) -> str:
    """One sentence that says what to set, for the CLI and the pages alike."""
    return (
        f"{model} needs an API key and {variable} is not set: set it in the environment, or "
        f'add {variable} = "..." to .streamlit/secrets.toml for the app'
    )
