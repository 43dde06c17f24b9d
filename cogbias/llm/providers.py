"""What each provider's API accepts beyond what litellm tells us: one entry per provider.

A model profile (`cogbias.llm.profiles`) reads its provider's entry for the capabilities a
registry entry does not state. A new provider quirk is a field here and a value in the
provider's entry; a new provider is one more entry.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_TEMPERATURE = 2.0  # OpenAI's limit, and what most APIs and servers accept


@dataclass(frozen=True)
class Provider:
    """A provider, recognised by the start of a litellm model string (or a bare model name)."""

    prefixes: tuple[str, ...]
    max_temperature: float = DEFAULT_MAX_TEMPERATURE
    batchable: bool = False  # an OpenAI-style Batch API (files + batches) that we drive
    logprobs: bool = False  # answers carry token log-probabilities when asked


PROVIDERS: tuple[Provider, ...] = (
    # OpenAI and every OpenAI-compatible server (vLLM, llama.cpp, Ollama) through `openai/…`
    Provider(("openai/",), batchable=True, logprobs=True),
    Provider(("anthropic/", "claude"), max_temperature=1.0),
)
OTHER = Provider(())


def provider_of(litellm_model: str | None) -> Provider:
    """The entry of the provider that serves `litellm_model` (OTHER when none matches)."""
    name = str(litellm_model or "")
    return next((p for p in PROVIDERS if name.startswith(p.prefixes)), OTHER)
