"""Reasoning traces: what a model wrote while thinking, kept apart from what it answered.

Reasoning models return their thinking in one of two ways: a field of its own beside the
answer (`reasoning_content` or `reasoning`, as vLLM, DeepSeek and litellm name it), or inline,
inside the answer's text between tags (`<think>…</think>`, as DeepSeek-R1 and Qwen3 write it
when the server does not parse it out). A trace weighs the options before the model settles
on one ("Tentatively, I choose Option 7…"), so an answer must be read without it:
`split_trace` takes it out. A server whose chat template opens the tag itself sends only the
closing one; a model stopped while it was still thinking sends an opening tag and no close
(`Split.unfinished`).

The trace signal (`eliciting_detail`, `mentions`) is a plain string match, and says only
that: whether a half's trace names a word or number that appears in the treatment's text and
nowhere in the control's (the anchor's number, the framing's word). It is not a judgement of
what the model understood.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

# The reasoning efforts a run may ask for, from least to most (`--reasoning-effort`); one
# value per run, like a prompting method. `none` asks a model that can answer without
# thinking to do so.
EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high")

_TAG = r"think|thinking|reasoning"
_OPEN_RE = re.compile(rf"<\s*({_TAG})\s*>", re.IGNORECASE)
_CLOSE_RE = re.compile(rf"<\s*/\s*({_TAG})\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Split:
    """An answer's text without its inline trace, the trace, and whether the trace was left
    open (the model stopped while thinking: no answer follows it)."""

    answer: str
    trace: str
    unfinished: bool = False


def split_trace(text: str) -> Split:
    """`text` as (answer, inline trace). Every tagged block is taken out, in order; a closing
    tag with no opening one before it closes a trace that began with the text (the chat
    template wrote the opening tag); an opening tag never closed makes the rest a trace.
    A text with no tags is all answer."""
    answer: list[str] = []
    traces: list[str] = []
    rest = text
    while True:
        close = _CLOSE_RE.search(rest)
        opening = _OPEN_RE.search(rest)
        if close is None:
            if opening is None:
                answer.append(rest)
                return _split(answer, traces, unfinished=False)
            answer.append(rest[: opening.start()])
            traces.append(rest[opening.end() :])
            return _split(answer, traces, unfinished=True)
        if opening is not None and opening.start() < close.start():
            answer.append(rest[: opening.start()])
            traces.append(rest[opening.end() : close.start()])
        else:  # the template opened the trace: everything before the close is thinking
            traces.append(rest[: close.start()])
        rest = rest[close.end() :]


def _split(answer: list[str], traces: list[str], unfinished: bool) -> Split:
    trace = "\n\n".join(t.strip() for t in traces if t.strip())
    return Split("".join(answer).strip(), trace, unfinished)


def joined(*traces: str | None) -> str:
    """Traces from several places (a field and inline tags) as one text."""
    return "\n\n".join(t.strip() for t in traces if t and t.strip())


# ----------------------------------------------------------------------------- trace signal

_WORD_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]{4,}", re.UNICODE)
# Words too common to tell a treatment apart, whatever the test case.
_COMMON = frozenset(
    "that this with from have your what which would there their about been were they them "
    "than then will also into more most some such only other when where while option "
    "options choose answer".split()
)


def eliciting_detail(control: str, treatment: str) -> tuple[str, ...]:
    """The words and numbers of the treatment's text that its control lacks: what the two
    halves differ in, read word by word (`difflib` on the words), keeping numbers and words
    of four letters or more that occur nowhere in the control. Callers pass the halves'
    situation and prompt without the options, which both halves share (an anchor's number
    may be one of them). Empty when the treatment adds nothing the control does not say."""
    before, after = control.split(), treatment.split()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    added = " ".join(
        " ".join(after[j1:j2])
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag in ("insert", "replace")
    )
    known = {w.lower() for w in _WORD_RE.findall(control)}
    found: list[str] = []
    for word in _WORD_RE.findall(added):
        low = word.lower()
        if low not in known and low not in _COMMON and low not in found:
            found.append(low)
    return tuple(found)


def mentions(trace: str | None, detail: tuple[str, ...]) -> bool | None:
    """Whether `trace` names any of `detail` (case-insensitive, as a whole word or number);
    None when there is no trace or no detail to look for."""
    if not trace or not detail:
        return None
    text = trace.lower()
    return any(re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", text) for word in detail)


def signal(texts: Sequence[str], traces: Sequence[str]) -> tuple[bool | None, ...]:
    """The trace signal of a pair: whether each half's trace names the treatment's eliciting
    detail (`eliciting_detail` of the control's and the treatment's text, `texts`, looked for
    only when some half has a trace); None for a half without one."""
    if not any(traces):
        return tuple(None for _ in traces)
    detail = eliciting_detail(*texts)
    return tuple(mentions(trace, detail) for trace in traces)
