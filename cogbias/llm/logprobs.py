"""Token log-probabilities: asking for them, keeping them with the answer, reading an option's.

A request with `top_logprobs` set asks the server for the most probable tokens at each
position of its answer (OpenAI's `logprobs`/`top_logprobs`, which vLLM and llama.cpp's server
speak too). The client then answers with a JSON text, `{"text": ..., "positions": [[[token,
logprob], ...], ...]}`, so the log-probabilities are cached, batched and stored exactly like
any answer text. `option_masses` reads the probability of each option label at the label's
position, merging the spellings of one label (" A", "A", "**A", "A)").

llama.cpp's `top_logprobs` are computed before its grammar applies: a grammar that forces a
label as the first token makes that position the label position, while the listed
probabilities stay the model's own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from cogbias.llm.errors import LLMError

TOP_LOGPROBS = 20  # OpenAI's cap; llama.cpp and vLLM take more, 20 keeps requests alike
LABELS = "ABCDEFGHIJK"  # single tokens in SmolLM2's and OpenAI's tokenizers, with or without " "
_LEFT = " \t\n*_([{\"'`"
_RIGHT = " \t\n*_)]}.:,\"'`"

Position = list[tuple[str, float]]  # (token, logprob), the sampled token first


def labels(n_options: int) -> str:
    """The labels of `n_options` options; ValueError when there are more than labels."""
    if not 1 <= n_options <= len(LABELS):
        raise ValueError(
            f"{n_options} options cannot be labelled with single letters (at most {len(LABELS)})"
        )
    return LABELS[:n_options]


def label_grammar(n_options: int) -> str:
    """GBNF admitting exactly one label (the answer is the label alone)."""
    return "root ::= " + " | ".join(f'"{c}"' for c in labels(n_options))


def encode_answer(data: Any, model: str) -> str:
    """The answer text of a chat completion that carries log-probabilities (OpenAI's shape:
    `choices[0].logprobs.content[i].top_logprobs`). Raises when the server sent none: the
    model's profile promised them, and a distribution cannot be read without them."""
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"]
        content = choice["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        content, text = None, None
    if not isinstance(content, list) or not content:
        raise LLMError(
            f"{model}: the answer carries no token log-probabilities (the server ignored "
            "`logprobs`); choose --scoring choice for this model",
            kind="bad_request",
            model=model,
        )
    positions = [_position(entry) for entry in content if isinstance(entry, dict)]
    return json.dumps({"text": text or "", "positions": positions}, ensure_ascii=False)


def _position(entry: dict[str, Any]) -> Position:
    out: Position = []
    token, logprob = entry.get("token"), entry.get("logprob")
    if isinstance(token, str) and isinstance(logprob, int | float):
        out.append((token, float(logprob)))
    for top in entry.get("top_logprobs") or []:
        if isinstance(top, dict) and isinstance(top.get("token"), str):
            value = top.get("logprob")
            if isinstance(value, int | float) and (top["token"], float(value)) not in out:
                out.append((top["token"], float(value)))
    return out


def decode_answer(text: str) -> tuple[str, list[Position]]:
    """(the answer's text, its positions) from `encode_answer`'s JSON."""
    data = json.loads(text)
    positions = [[(str(t), float(lp)) for t, lp in position] for position in data["positions"]]
    return str(data.get("text", "")), positions


def label_of(token: str, n_options: int) -> int | None:
    """The 0-based option a token names (" A", "**A", "A)" -> 0), else None."""
    core = token.lstrip(_LEFT).rstrip(_RIGHT)
    if len(core) == 1 and core in LABELS[:n_options]:
        return LABELS.index(core)
    return None


def label_position(positions: Sequence[Position]) -> int | None:
    """The first position whose sampled token says more than spacing or Markdown ("**")."""
    for i, position in enumerate(positions):
        if position and position[0][0].lstrip(_LEFT).rstrip(_RIGHT):
            return i
    return None


def option_masses(positions: Sequence[Position], n_options: int) -> tuple[list[float], float, int]:
    """(probability of each presented option, probability of every token listed, position).

    Read at the label position; the spellings of one label add up. A token listed twice
    (the sampled one is also among the top ones) counts once.
    """
    at = label_position(positions)
    masses = [0.0] * n_options
    if at is None:
        return masses, 0.0, -1
    seen: dict[str, float] = {}
    for token, logprob in positions[at]:
        seen.setdefault(token, logprob)
    listed = 0.0
    for token, logprob in seen.items():
        p = math.exp(logprob)
        listed += p
        option = label_of(token, n_options)
        if option is not None:
            masses[option] += p
    return masses, listed, at
