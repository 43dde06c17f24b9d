"""Model profiles: one resolution of a model string into how to call it.

Every caller (a run, the CLI's preview, the app's Learn and Preview pages) asks the same
profile how to talk to a model: which litellm model and endpoint, whether it takes a JSON
schema or a GBNF grammar, how many tokens an answer may use, what a token costs, how long an
attempt and a whole call may take. So equal questions become equal requests, and equal
requests share one cache entry, whichever page asked.

Facts come from, in order: the built-ins (`random`, `local/...`), the model registry
(`data/models.toml` and the user's own), the provider's entry (`llm.providers`), and
litellm's bundled price map, which we read as JSON *without importing litellm* (the import
costs seconds, and a fully cached rerun or a plan's cost estimate must not pay for it). A
registry entry overrides only the capabilities it states. Nothing is guessed from a name's
prefix beyond the provider part of the litellm string itself.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from cogbias.llm.local import LOCAL_MODELS, LOCAL_PREFIX, LOCAL_TIMEOUT_S, smollm2_gguf_path
from cogbias.llm.providers import provider_of
from cogbias.llm.registry import check_key_variable, load_models
from cogbias.llm.thinking import room

RANDOM_MODEL = "random"
ProfileKind = Literal["random", "local", "remote"]
ANSWER_TOKENS = 300  # room to reason before choosing, as in the paper's free-answer step
LOCAL_ANSWER_TOKENS = (
    32  # one short sentence: each token of a 135M model costs 15-100 ms on 2 busy cores
)
# Hosted APIs answer within seconds or not at all: a hung attempt is cut after a minute, and
# a call gives up (as a transient failure, retried on resume) after five. The local model on
# two busy cores is slow rather than broken, so it gets much longer.
REMOTE_TIMEOUT_S = 60.0
REMOTE_DEADLINE_S = 300.0
LOCAL_DEADLINE_S = 2 * LOCAL_TIMEOUT_S


@dataclass(frozen=True)
class ModelProfile:
    """How to call one model. `api_base` is the endpoint's identity (None for local models,
    whose port changes every process); prices are USD per token, None when unknown.

    The capabilities (`registry.CAPABILITIES`: `json_schema`, `grammar`, `max_temperature`,
    `batchable`, `logprobs`, `top_logprobs`, `probabilities_first`, `prefix_cache`,
    `writes_text`, `reasoning`, `thinking_temperature`) are
    resolved here once, from the built-ins, the provider part of the litellm string and what
    a registry entry states, so no caller tells models apart by name.
    """

    id: str
    kind: ProfileKind
    litellm_model: str | None
    api_base: str | None
    json_schema: bool
    grammar: bool
    answer_tokens: int
    max_temperature: float  # the highest temperature the API accepts
    input_price: float | None
    output_price: float | None
    batch_input_price: float | None
    batch_output_price: float | None
    timeout_s: float
    deadline_s: float
    file_identity: str | None = None  # the model file's hash, if given; see `cache_extras`
    direct: bool = False  # sent by our lean OpenAI-compatible client rather than litellm
    batchable: bool = False  # the provider's batch API takes it (OpenAI's and Anthropic's)
    batch_api: str = "openai"  # which: "openai" (files + batches) or "anthropic" (Message Batches)
    logprobs: bool = False  # answers can carry the sampled tokens' log-probabilities
    top_logprobs: bool = False  # ... and the most probable alternatives at each position
    # read by option probabilities unless asked otherwise: its sampled answers are often
    # unreadable (a small local model); `runs.scorers.default_scoring`
    probabilities_first: bool = False
    prefix_cache: bool = False  # the server reuses the last prompt's prefix: ask in sequence
    writes_text: bool = True  # False for `random`, which picks uniformly from an answer space
    # the variable named to hold this endpoint's key; None: a provider's key goes only to the
    # provider's own hosts (`llm.keys.key_for_model`). Never part of a cache key.
    api_key_env: str | None = None
    # The model thinks before it answers (registry `reasoning`, else litellm's model map
    # `supports_reasoning`), at `reasoning_effort` when a run names none (`llm.thinking`).
    reasoning: bool = False
    reasoning_effort: str | None = None
    thinking_temperature: float | None = None  # the only one the API takes while it thinks

    @property
    def served_name(self) -> str:
        """The name the endpoint knows the model by (the litellm string minus its provider)."""
        return str(self.litellm_model).split("/", 1)[-1]

    @property
    def priced(self) -> bool:
        return self.input_price is not None and self.output_price is not None

    def price_per_call(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD for one call of this size; 0 for built-ins, None when the price is unknown."""
        if self.kind != "remote":
            return 0.0
        if not self.priced:
            return None
        return prompt_tokens * self.input_price + completion_tokens * self.output_price  # type: ignore[operator]

    def batch_price_per_call(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD for one call through the provider's batch API: its batch prices where litellm's
        map has them, else half the interactive price (OpenAI's and Anthropic's discount)."""
        if self.batch_input_price is not None and self.batch_output_price is not None:
            return (
                prompt_tokens * self.batch_input_price + completion_tokens * self.batch_output_price
            )
        price = self.price_per_call(prompt_tokens, completion_tokens)
        return None if price is None else price / 2

    def thinking(self, effort: str | None, budget: int | None) -> dict[str, Any]:
        """An answer's request fields for a run asking `effort` and `budget`: what is sent
        (nothing to a model that does not reason) and `max_tokens`, the answer's own room
        plus its thinking's (`llm.thinking.room`)."""
        extra = room(self.reasoning, self.reasoning_effort, effort, budget)
        return {
            "max_tokens": self.answer_tokens + extra,
            "reasoning_effort": effort if self.reasoning else None,
            "thinking_budget": budget if self.reasoning else None,
        }

    def cache_extras(self) -> dict[str, Any]:
        """What the profile adds to a request that can change the answer (for the cache key).
        A local model's file is hashed here, when a key needs it, not when its profile is
        resolved: a page that only asks what the model can do (Learn's first draw) must not
        read 100 MB for it."""
        file = self.file_identity
        if file is None and self.kind == "local":
            file = _local_file_identity()  # memoised per file
        return {"litellm_model": self.litellm_model, "file": file}


def resolve(
    model: str,
    api_base: str | None = None,
    registry: list[Any] | None = None,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
    api_key_env: str | None = None,
) -> ModelProfile:
    """The profile of `model`. `api_base` overrides the registry's endpoint for remote models;
    `registry` defaults to `registry.load_models()`; timeouts override the profile's defaults;
    `api_key_env` names the variable holding `api_base`'s key (`llm.keys`)."""
    if model == RANDOM_MODEL:
        return _profile(model, "random", None, None, True, False, 0, {}, 0.0, 0.0)
    if model.startswith(LOCAL_PREFIX):
        if model not in LOCAL_MODELS:
            from cogbias.llm.errors import FatalLLMError

            known = ", ".join(sorted(LOCAL_MODELS))
            raise FatalLLMError(
                f"{model}: unknown local model (known: {known})", kind="not_found", model=model
            )
        return _profile(
            model,
            "local",
            "openai/" + model.removeprefix(LOCAL_PREFIX),
            None,
            True,
            True,
            LOCAL_ANSWER_TOKENS,
            {},
            timeout_s or LOCAL_TIMEOUT_S,
            deadline_s or LOCAL_DEADLINE_S,
        )
    if registry is None:
        registry = load_models()
    entry = next((m for m in registry if m.id == model), None)
    base = api_base or (entry.api_base if entry else None)
    if base is None and (model.startswith("openai/") or "/" not in model):
        # litellm would send OpenAI models there on its own: the endpoint is the command's
        api_base = base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    prices = price_entry(model)
    profile = _profile(
        model,
        "remote",
        model,
        base.rstrip("/") if base else None,
        # Our own OpenAI-compatible servers (vLLM, llama.cpp, Ollama) take a JSON schema.
        base is not None or bool(prices.get("supports_response_schema")),
        False,
        ANSWER_TOKENS,
        prices,
        timeout_s or REMOTE_TIMEOUT_S,
        deadline_s or REMOTE_DEADLINE_S,
        api_key_env=_named_key(model, entry, base, api_base, api_key_env),
    )
    return profile if entry is None else _stated(profile, entry.stated())


def _stated(profile: ModelProfile, stated: dict[str, Any]) -> ModelProfile:
    """`profile` with the capabilities a registry entry states, and only those. Listed
    alternatives come with log-probabilities: stating `top_logprobs = true` states
    `logprobs` too, and a profile without `logprobs` has no `top_logprobs`."""
    if stated.get("top_logprobs") and "logprobs" not in stated:
        stated["logprobs"] = True
    profile = replace(profile, **stated)
    return replace(profile, top_logprobs=profile.top_logprobs and profile.logprobs)


def _named_key(
    model: str, entry: Any, base: str | None, commanded: str | None, api_key_env: str | None
) -> str | None:
    """The variable named to hold the key of the endpoint in use: `api_key_env` for the
    command's own endpoint (`commanded`: --api-base, OPENAI_BASE_URL), else the registry
    entry's `api_key_env` when the endpoint is the entry's own (`llm.keys` says the rest)."""
    if api_key_env and commanded:
        return check_key_variable(api_key_env)
    named = entry.api_key_env if entry is not None else None
    if named is None or (entry.api_base or "").rstrip("/") != (base or "").rstrip("/"):
        return None
    try:
        return check_key_variable(named)
    except ValueError as exc:
        from cogbias.llm.errors import FatalLLMError

        raise FatalLLMError(
            f"{model}: api_key_env in the model registry: {exc}", kind="auth", model=model
        ) from None


def _profile(
    model: str,
    kind: ProfileKind,
    litellm_model: str | None,
    api_base: str | None,
    json_schema: bool,
    grammar: bool,
    answer_tokens: int,
    prices: dict[str, Any],
    timeout_s: float,
    deadline_s: float,
    api_key_env: str | None = None,
) -> ModelProfile:
    """The profile a model of `kind` gets from its provider, before any registry entry."""
    provider = provider_of(litellm_model)
    return ModelProfile(
        id=model,
        kind=kind,
        litellm_model=litellm_model,
        api_base=api_base,
        json_schema=json_schema,
        grammar=grammar,
        answer_tokens=answer_tokens,
        max_temperature=provider.max_temperature,
        input_price=_price(prices, "input_cost_per_token"),
        output_price=_price(prices, "output_cost_per_token"),
        batch_input_price=_price(prices, "input_cost_per_token_batches"),
        batch_output_price=_price(prices, "output_cost_per_token_batches"),
        timeout_s=timeout_s,
        deadline_s=max(deadline_s, timeout_s),
        direct=_direct(kind, litellm_model, api_base),
        batchable=kind == "remote" and provider.batchable,
        batch_api=provider.batch_api,
        logprobs=kind == "local" or provider.logprobs,
        top_logprobs=kind == "local" or provider.top_logprobs,
        probabilities_first=kind == "local",
        prefix_cache=kind == "local",
        writes_text=kind != "random",
        api_key_env=api_key_env,
        reasoning=kind == "remote" and prices.get("supports_reasoning") is True,
        thinking_temperature=provider.thinking_temperature,
    )


TRANSPORT_ENV = "COGBIAS_LLM_TRANSPORT"


def _direct(kind: ProfileKind, litellm_model: str | None, api_base: str | None) -> bool:
    """OpenAI-compatible endpoints of our own (and the local model) take the lean path;
    `COGBIAS_LLM_TRANSPORT=litellm` sends everything through litellm instead."""
    if os.environ.get(TRANSPORT_ENV, "").strip().lower() == "litellm":
        return False
    if kind == "local":
        return True
    return kind == "remote" and bool(api_base) and str(litellm_model).startswith("openai/")


def _price(entry: dict[str, Any], key: str) -> float | None:
    value = entry.get(key)
    return float(value) if isinstance(value, int | float) else None


@functools.cache
def _price_map() -> dict[str, Any]:
    """litellm's bundled model map, read as a file (importing litellm costs seconds)."""
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "model_prices_and_context_window_backup.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
            return data if isinstance(data, dict) else {}
    return {}


def price_entry(model: str) -> dict[str, Any]:
    """The price map's entry for a litellm model string (`openai/gpt-4o` or `gpt-4o`)."""
    prices = _price_map()
    entry = prices.get(model)
    if entry is None and "/" in model:
        entry = prices.get(model.split("/", 1)[1])
    return entry if isinstance(entry, dict) else {}


_file_hashes: dict[tuple[str, int, int], str] = {}


def _local_file_identity() -> str | None:
    """sha256 of the local model's GGUF file (memoised by path, size and mtime): answers from
    another build of the model must not come out of the cache."""
    try:
        path = smollm2_gguf_path()
        stat = path.stat()
    except Exception:  # not installed: the call itself will say so
        return None
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _file_hashes:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _file_hashes[key] = digest.hexdigest()[:16]
    return _file_hashes[key]
