"""Token log-probabilities: asking for them, keeping them with the answer, reading an option's.

A request with `top_logprobs` set asks the server for the most probable tokens at each
position of its answer (OpenAI's `logprobs`/`top_logprobs`, which vLLM and llama.cpp's server
speak too). The client then answers with a JSON text, `{"text": ..., "positions": [[[token,
logprob], ...], ...]}`, so the log-probabilities are cached, batched and stored exactly like
any answer text. `option_masses` reads the probability of each option label at the label's
position, merging the spellings of one label (" A", "A", "**A", "A)", full-width "Ａ",
Cyrillic "А").

What a server sends is untrusted: only what the score needs is kept (the positions up to the
label position, at most `MAX_POSITIONS`, each with its sampled token and at most
`TOP_LOGPROBS` alternatives, the most probable), in one linear pass. A listing that is no
probability distribution (a log-probability that is not a finite number or above 0, a token
listed twice with two values, fewer than two tokens listed) raises `NotADistribution` with
the reason when it is read, and is stored as `"malformed"` beside the kept positions; the
stored JSON never holds NaN or infinity.

llama.cpp's `top_logprobs` are computed before its grammar applies: a grammar that forces a
label as the first token makes that position the label position, while the listed
probabilities stay the model's own.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cogbias.core.probabilities import NotADistribution
from cogbias.core.records import cap_text
from cogbias.llm.errors import LLMError

TOP_LOGPROBS = 20  # OpenAI's cap; llama.cpp and vLLM take more, 20 keeps requests alike
LABELS = "ABCDEFGHIJK"  # single tokens in SmolLM2's and OpenAI's tokenizers, with or without " "
MAX_POSITIONS = 8  # the label comes first (the answer is 1-4 tokens); spacing or "**" before it
MAX_TOKEN_CHARS = 200  # a longer "token" is cut: no label is that long
DUPLICATE_TOLERANCE = 1e-6  # one token listed twice (sampled and among the top) with one value
LOGPROB_TOLERANCE = 1e-6  # a log-probability this far above 0 is a rounded 0 (p = 1)
# Look-alikes of the labels in other scripts, read as the label. NFKC already maps full-width
# ("Ａ") and mathematical ("𝐀") letters to "A"; it leaves Cyrillic and Greek capitals alone.
CONFUSABLES = str.maketrans(
    {
        "\u0410": "A",  # Cyrillic А
        "\u0391": "A",  # Greek Alpha
        "\u0412": "B",  # Cyrillic В
        "\u0392": "B",  # Greek Beta
        "\u0421": "C",  # Cyrillic С
        "\u03f9": "C",  # Greek lunate Sigma
        "\u0415": "E",  # Cyrillic Е
        "\u0395": "E",  # Greek Epsilon
        "\u041d": "H",  # Cyrillic Н
        "\u0397": "H",  # Greek Eta
        "\u0406": "I",  # Cyrillic І
        "\u0399": "I",  # Greek Iota
        "\u0408": "J",  # Cyrillic Ј
        "\u041a": "K",  # Cyrillic К
        "\u039a": "K",  # Greek Kappa
    }
)
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
    `choices[0].logprobs.content[i].top_logprobs`), bounded (see the module docstring).
    Raises when the server sent none: the model's profile promised them, and a distribution
    cannot be read without them. A malformed listing is kept with its reason, not raised: it
    is an answer (cached, paid for), and reading it says why it is no distribution."""
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
    answer: dict[str, Any] = {"text": cap_text(text if isinstance(text, str) else "")[0]}
    positions: list[Position] = []
    try:
        for entry in content[:MAX_POSITIONS]:
            positions.append(_position(entry))
            if _says(positions[-1][0][0]):  # the label position: nothing after it is read
                break
    except NotADistribution as exc:
        answer["malformed"] = f"position {len(positions) + 1}: {exc}"
    answer["positions"] = positions
    return json.dumps(answer, ensure_ascii=False, allow_nan=False)


def _position(entry: Any) -> Position:
    """One position of the server's answer: its sampled token, then the listed ones."""
    if not isinstance(entry, dict):
        raise NotADistribution(f"a position is {_kind(entry)}, not an object")
    top = entry.get("top_logprobs")
    if not isinstance(top, list | None):
        raise NotADistribution(f"its top_logprobs are {_kind(top)}, not a list")
    return _listing(itertools.chain((entry,), top or ()), _served_pair)


def _served_pair(item: Any) -> tuple[Any, Any]:
    if not isinstance(item, dict):
        raise NotADistribution(f"a listed token is {_kind(item)}, not an object")
    return item.get("token"), item.get("logprob")


def _stored_pair(item: Any) -> tuple[Any, Any]:
    if not isinstance(item, list) or len(item) != 2:
        raise NotADistribution(f"a stored token is {_kind(item)}, not [token, log-probability]")
    return item[0], item[1]


def _listing(items: Iterable[Any], pair: Callable[[Any], tuple[Any, Any]]) -> Position:
    """Checked (token, logprob) pairs, the first (the sampled token) first, then the
    `TOP_LOGPROBS` most probable others; one linear pass. A token listed twice with one
    value counts once; a label listed with two values is malformed (which is its mass?),
    any other text's two values add up."""
    listed: dict[str, float] = {}
    for item in items:
        raw_token, raw_logprob = pair(item)
        token, logprob = _token(raw_token), _logprob(raw_logprob)
        known = listed.setdefault(token, logprob)
        if abs(known - logprob) <= DUPLICATE_TOLERANCE:
            continue
        if len(_core(token)) == 1 and _core(token) in LABELS:
            raise NotADistribution(
                f"the token {token[:40]!r} is listed twice, with log-probabilities {known:g} and "
                f"{logprob:g}"
            )
        # Two tokens of one text (byte pieces a tokenizer shows as "\ufffd"): both are
        # probability the model gives to something that is no option.
        listed[token] = max(known, logprob) + math.log1p(math.exp(-abs(known - logprob)))
    if not listed:
        raise NotADistribution("a position lists no token")
    first, *others = listed.items()
    top = heapq.nlargest(TOP_LOGPROBS, others, key=lambda item: item[1])
    return [first, *top]


def _token(value: Any) -> str:
    if not isinstance(value, str):
        raise NotADistribution(f"a token is {_kind(value)}, not text")
    return value[:MAX_TOKEN_CHARS]


def _logprob(value: Any) -> float:
    """A finite number (booleans are no numbers here, though Python counts them as ints)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotADistribution(f"a log-probability is {_kind(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        number = math.inf
    if not math.isfinite(number):
        raise NotADistribution(f"a log-probability is {number}, not a finite number")
    return number


def _kind(value: Any) -> str:
    """What a misplaced value is, shortly (it is untrusted: quoted, cut)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)[:24]
    if isinstance(value, str):
        return f"the text {value[:24]!r}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    return type(value).__name__


def decode_answer(text: str) -> tuple[str, list[Position]]:
    """(the answer's text, its positions) from `encode_answer`'s JSON. Raises
    `NotADistribution` when it holds a malformed listing, or is no such JSON (an entry cached
    by an older version is checked and bounded as a server's answer is)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise NotADistribution("the stored answer is not the JSON of log-probabilities") from None
    if not isinstance(data, dict) or not isinstance(data.get("positions"), list):
        raise NotADistribution("the stored answer holds no positions of log-probabilities")
    if data.get("malformed"):
        raise NotADistribution(str(data["malformed"])[:300])
    positions = []
    for position in data["positions"][:MAX_POSITIONS]:
        if not isinstance(position, list):
            raise NotADistribution(f"a stored position is {_kind(position)}, not a list")
        positions.append(_listing(position, _stored_pair))
    return str(data.get("text") or ""), positions


def _core(token: str) -> str:
    """The token without spacing and Markdown, in the letters it looks like."""
    return unicodedata.normalize("NFKC", token).translate(CONFUSABLES).lstrip(_LEFT).rstrip(_RIGHT)


def _says(token: str) -> bool:
    return bool(_core(token))


def label_of(token: str, n_options: int) -> int | None:
    """The 0-based option a token names (" A", "**A", "A)", "Ａ", Cyrillic "А" -> 0), else
    None; lower-case letters name none."""
    core = _core(token)
    if len(core) == 1 and core in LABELS[:n_options]:
        return LABELS.index(core)
    return None


def label_position(positions: Sequence[Position]) -> int | None:
    """The first position whose sampled token says more than spacing or Markdown ("**")."""
    for i, position in enumerate(positions):
        if position and _says(position[0][0]):
            return i
    return None


def option_masses(positions: Sequence[Position], n_options: int) -> tuple[list[float], float, int]:
    """(probability of each presented option, probability of every token listed, position).

    Read at the label position; the spellings of one label add up. A token listed twice
    (the sampled one is also among the top ones) counts once. Raises `NotADistribution`
    when the answer has no label position, when fewer than two tokens are listed there (a
    lone sampled token would read as certainty), or a log-probability is above 0.
    """
    at = label_position(positions)
    if at is None:
        raise NotADistribution("no token of the answer is more than spacing or Markdown")
    listing = positions[at]
    seen: dict[str, float] = {}
    for token, logprob in listing:
        if not logprob <= LOGPROB_TOLERANCE:  # NaN too
            raise NotADistribution(
                f"the token {token[:40]!r} has the log-probability {logprob:g}, above 0 "
                "(a probability above 100%)"
            )
        seen.setdefault(token, min(logprob, 0.0))
    if len(seen) < 2:
        raise NotADistribution(
            f"the server listed {len(seen)} token where the answer begins (asked for the "
            f"{TOP_LOGPROBS} most probable): one token is no distribution"
        )
    masses = [0.0] * n_options
    for token, logprob in seen.items():
        option = label_of(token, n_options)
        if option is not None:
            masses[option] += math.exp(logprob)
    return masses, math.fsum(math.exp(lp) for lp in seen.values()), at
