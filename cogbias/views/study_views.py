"""What the app's Studies page lists and shows, shaped from the stored turns of a study run.

The page stays a thin layer over these: which studies can be run (built-in and user studies,
plus imported thesis datasets that carry their prompts), one line per conversation of a
sequential test, a conversation as a list of chat messages, and one line per self-help unit.
Texts are returned as stored; the page renders them as plain text (they are model output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from cogbias.core.records import TurnStatus
from cogbias.core.redact import redactor
from cogbias.library.testcases import Problem
from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import resolve
from cogbias.store import Store
from cogbias.studies.definitions import Study, StudyTest, show
from cogbias.studies.study_catalog import load_studies_report

CONVERSATION_KEYS = ["test", "mitigation", "model", "temperature", "variant", "slot", "ord"]
SELFHELP_KEYS = ["test", "condition", "model", "temperature", "variant", "slot", "attempt"]


def study_choices(store: Store) -> tuple[list[str], list[Problem]]:
    """Runnable studies (built-in and user studies, then imported datasets with prompts) and
    the problems of the study files left out (file:line:col), for the page to name.

    One broken file in the user's folder leaves out that file alone: the others, the
    built-ins above all, stay runnable (the command line runs them too)."""
    usable, problems = load_studies_report()
    names = list(usable)
    names += [d for d in store.study_prompt_datasets() if d not in names]
    return names, problems


def presented_order(turns: pd.DataFrame, conversation: str) -> str:
    """The items of a conversation in the order they were shown (1-based, as generated)."""
    rows = turns[turns["conversation"] == conversation]
    order = json.loads(rows["presented"].iloc[0] or "[]") if len(rows) else []
    return ", ".join(str(i + 1) for i in order)


def sequence_tests(study: Study) -> list[str]:
    """The tests whose unit is a conversation (the conversation viewer's choices)."""
    return [t.id for t in study.tests.values() if t.design == "sequence"]


def conversation_index(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per conversation (`study_results.conversations`), in a stable order, with
    its number of turns and a label naming model, temperature, variant, repeat and order."""
    if turns.empty:
        return pd.DataFrame(columns=["conversation", *CONVERSATION_KEYS, "turns", "label"])
    index = (
        turns.groupby("conversation", sort=False)
        .agg(**{k: (k, "first") for k in CONVERSATION_KEYS}, turns=("turn", "count"))
        .reset_index()
        .sort_values(CONVERSATION_KEYS, kind="stable")
        .reset_index(drop=True)
    )
    index["label"] = [
        f"{r.model} · temperature {r.temperature:g} · {r.variant} · repeat {r.slot + 1} · "
        f"order {r.ord + 1} ({r.turns} turns)"
        for r in index.itertuples()
    ]
    return index


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation as the model saw it: `speaker` is "user" or
    "assistant"; `note` says how the answer was read; `revise` marks the self-help turn."""

    speaker: str
    text: str
    turn: int
    revise: bool = False
    note: str = ""
    ok: bool = True


def decision_text(test: StudyTest | None, value: Any) -> str:
    """A read answer as the test's words: admit/reject, yes/no, the letter, the number."""
    if isinstance(value, list):  # a revise turn: one decision per item
        return ", ".join(decision_text(test, v) for v in value)
    if test is not None and isinstance(value, bool):
        words = {"admit_reject": ("reject", "admit"), "yes_no": ("no", "yes")}.get(test.answer)
        if words:
            return words[value]
    if test is not None and test.answer == "letter" and isinstance(value, int):
        return test.letters[value] if 0 <= value < len(test.letters) else str(value)
    return show(value)


def reading(row: Any, test: StudyTest | None) -> tuple[str, bool]:
    """How a stored turn was read, and whether it was."""
    if row.status == TurnStatus.OK:
        value = None if row.value is None else json.loads(row.value)
        return f"read as: {decision_text(test, value)}", True
    what = "unreadable" if row.status == TurnStatus.UNPARSEABLE else "failed"
    return f"{what}: {row.error or 'no reason recorded'}", False


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def chat(turns: pd.DataFrame, conversation: str, study: Study) -> list[ChatMessage]:
    """The conversation's messages in turn order: each turn's prompt, then the answer.
    Texts are redacted again (rows stored by an older version may not be)."""
    clean = redactor()
    rows = turns[turns["conversation"] == conversation].sort_values("turn")
    messages: list[ChatMessage] = []
    for row in rows.itertuples():
        revise = row.role == "revise"
        turn = int(row.turn)
        messages.append(ChatMessage("user", clean(_text(row.prompt)) or "", turn, revise))
        note, ok = reading(row, study.tests.get(row.test))
        answer = clean(_text(row.response)) or ""
        messages.append(ChatMessage("assistant", answer, turn, revise, clean(note) or "", ok))
    return messages


NO_REWRITE_NOTE = (
    "The random baseline does not rewrite: the text shown is the original prompt, unchanged."
)


def rewrite_note(model: str) -> str:
    """What to say beside a self-help rewrite: empty for a model that writes text; for the
    `random` baseline, which returns the prompt as given, that it did not rewrite (asked of
    the profile, never of the name)."""
    try:
        writes = resolve(model).writes_text
    except (LLMError, KeyError, ValueError):  # a model no longer known: it wrote what it wrote
        return ""
    return "" if writes else NO_REWRITE_NOTE


def selfhelp_index(pairs: pd.DataFrame, study: Study) -> pd.DataFrame:
    """`study_results.selfhelp_pairs` with a label per unit, how its decision was read and a
    note on the rewrite (`rewrite_note`); texts redacted."""
    if pairs.empty:
        return pairs.assign(label=[], reading=[], rewrite_note=[])
    out = pairs.sort_values(SELFHELP_KEYS, kind="stable").reset_index(drop=True)
    out["label"] = [
        f"{r.test} · {r.condition} · {r.model} · temperature {r.temperature:g} · {r.variant} · "
        f"repeat {r.slot + 1}" + (f" · attempt {r.attempt + 1}" if r.attempt else "")
        for r in out.itertuples()
    ]
    out["reading"] = [reading(r, study.tests.get(r.test))[0] for r in out.itertuples()]
    notes = {m: rewrite_note(m) for m in out["model"].unique()}
    out["rewrite_note"] = out["model"].map(notes)
    clean = redactor()  # as in `chat`
    for column in ("original", "rewrite_answer", "rewritten", "answer", "reading"):
        out[column] = [clean(_text(v)) or "" for v in out[column]]
    return out
