"""What each provider's API accepts beyond what litellm tells us: one entry per provider.

A model profile (`cogbias.llm.profiles`) reads its provider's entry for every capability a
registry entry does not state (an entry overrides only what it states). A new provider quirk
is a field here and a value in the provider's entry; a new provider is one more entry.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_TEMPERATURE = 2.0  # OpenAI's limit, and what most APIs and servers accept


@dataclass(frozen=True)
class Provider:
    """A provider, recognised by the start of a litellm model string (or a bare model name)."""

    prefixes: tuple[str, ...]
    max_temperature: float = DEFAULT_MAX_TEMPERATURE
    batchable: bool = False  # a Batch API that we drive (`batch_api` says which)
    # "openai": files + batches (OpenAI and compatibles); "anthropic": Message Batches
    batch_api: str = "openai"
    logprobs: bool = False  # answers carry the sampled tokens' log-probabilities when asked
    top_logprobs: bool = False  # ... and the most probable alternatives (what scoring reads)
    # the only temperature the API takes while the model thinks (None: any it takes)
    thinking_temperature: float | None = None


PROVIDERS: tuple[Provider, ...] = (
    # OpenAI and every OpenAI-compatible server (vLLM, llama.cpp, Ollama) through `openai/…`
    Provider(("openai/",), batchable=True, logprobs=True, top_logprobs=True),
    Provider(
        ("anthropic/", "claude"),
        max_temperature=1.0,
        batchable=True,
        batch_api="anthropic",
        thinking_temperature=1.0,  # extended thinking refuses any other
    ),
)
OTHER = Provider(())
# The widest range any provider accepts: an imported temperature above it is damage.
HIGHEST_TEMPERATURE = max(p.max_temperature for p in (*PROVIDERS, OTHER))


def provider_of(litellm_model: str | None) -> Provider:
    """The entry of the provider that serves `litellm_model` (OTHER when none matches)."""
    name = str(litellm_model or "")
    return next((p for p in PROVIDERS if name.startswith(p.prefixes)), OTHER)
