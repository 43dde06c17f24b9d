"""A model request and its cache key: everything that determines an answer, and nothing else.

Kept apart from the client so the key's definition is read on its own: run ids and cached
answers of existing databases depend on it byte for byte (tests/test_golden_ids.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cogbias.llm.profiles import ModelProfile
from cogbias.llm.random_provider import AnswerSpace

Message = tuple[str, str]


def _normalize_messages(messages: Iterable[Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    for m in messages:
        if isinstance(m, Mapping):
            extra = set(m) - {"role", "content"}
            if extra:
                raise TypeError(f"message keys other than role/content are not supported: {extra}")
            out.append((str(m["role"]), str(m["content"])))
        else:
            role, content = m
            out.append((str(role), str(content)))
    return tuple(out)


@dataclass(frozen=True)
class LLMRequest:
    """Everything that determines an answer; hashable, and the basis of the cache key.

    `messages` may be given as (role, content) pairs or {"role", "content"} dicts; it is
    stored as a tuple of pairs. `repeat` only enters the cache key, so repeated samples at
    temperature > 0 are distinct calls. `grammar` (GBNF) is sent as `extra_body` and only
    understood by llama.cpp servers. `top_logprobs` asks for that many most probable tokens
    at each position; the answer's text is then `llm.logprobs.encode_answer`'s JSON.
    `answer_space` says which answers the question admits, for the `random` model (real
    models ignore it); it is not part of the cache key. `reasoning_effort` and
    `thinking_budget` say how much a reasoning model may think (`llm.thinking`); None sends
    nothing, as every request did before they existed.
    """

    model: str
    messages: tuple[Message, ...]
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = field(default=None, hash=False)
    grammar: str | None = None
    repeat: int = 0
    answer_space: AnswerSpace | None = field(default=None, hash=False, compare=False)
    top_logprobs: int | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalize_messages(self.messages))
        object.__setattr__(self, "temperature", float(self.temperature))

    @property
    def sent_seed(self) -> int | None:
        """The seed the provider gets: the run's for the first sample, one drawn from (seed,
        repeat) for every other. A seeded server (llama.cpp, OpenAI's `seed`) samples the same
        answer for the same seed, so repeats sent with one seed would be one draw counted n
        times. The cache key keeps `seed` and `repeat` as asked, so stored answers keep theirs."""
        if self.seed is None or self.repeat == 0:
            return self.seed
        digest = hashlib.sha256(f"{self.seed}:{self.repeat}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF

    def message_dicts(self) -> list[dict[str, str]]:
        """Messages in the OpenAI wire format."""
        return [{"role": role, "content": content} for role, content in self.messages]

    def chat_body(self, model: str) -> dict[str, Any]:
        """The OpenAI chat-completions JSON body, for the model the server knows as `model`
        (the lean client's request, and a batch file's line)."""
        body: dict[str, Any] = {
            "model": model,
            "messages": self.message_dicts(),
            "temperature": self.temperature,
        }
        if self.seed is not None:
            body["seed"] = self.sent_seed
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.response_format is not None:
            body["response_format"] = self.response_format
        if self.grammar is not None:
            body["grammar"] = self.grammar  # llama.cpp and vLLM read it from the body
        if self.top_logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        if self.reasoning_effort is not None:  # OpenAI's name, which compatible servers read
            body["reasoning_effort"] = self.reasoning_effort
        return body

    def request_record(self) -> dict[str, Any]:
        """JSON-able description of the request for the store (never keys or headers)."""
        return {
            "messages": self.message_dicts(),
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "response_format": self.response_format,
            "grammar": self.grammar,
            "repeat": self.repeat,
        } | {
            name: value
            for name, value in (
                ("top_logprobs", self.top_logprobs),
                ("reasoning_effort", self.reasoning_effort),
                ("thinking_budget", self.thinking_budget),
            )
            if value is not None
        }


CACHE_KEY_VERSION = 2


def cache_key(req: LLMRequest, profile: ModelProfile) -> str:
    """sha256 of the canonical JSON of everything that can change the answer.

    In the key: the key version; the model id; the endpoint's identity (`profile.api_base`,
    None for local models); the full messages; temperature; seed; max tokens; response
    format; grammar; the repeat index; `top_logprobs`, `reasoning_effort` and
    `thinking_budget` when asked for (absent otherwise, so the keys of answers asked without
    them are what they always were); and what model
    resolution adds (the litellm model string, the local model file's hash). Deliberately
    out of it: timeouts, retries, concurrency, deadlines and API keys, none of which changes
    what a model answers.
    """
    payload = {
        "v": CACHE_KEY_VERSION,
        "model": req.model,
        "api_base": profile.api_base,
        "messages": req.messages,
        "temperature": req.temperature,
        "seed": req.seed,
        "max_tokens": req.max_tokens,
        "response_format": req.response_format,
        "grammar": req.grammar,
        "repeat": req.repeat,
        "extras": profile.cache_extras(),
    }
    for name in ("top_logprobs", "reasoning_effort", "thinking_budget"):
        if getattr(req, name) is not None:
            payload[name] = getattr(req, name)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
