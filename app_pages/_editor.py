"""The Templates page's TOML editor, which checks a draft as it is typed.

Ace, through `streamlit-ace`: it highlights TOML, sends its text a moment (0.2 s) after the
author stops typing, and keeps its own text between the page's runs, so each run can check
the draft and mark every problem at its line in the editor (a red line, and a mark in the
margin whose tooltip is the message) without the author leaving the box. Its scripts ship in
the package: nothing is loaded from the network.

The draft lives under the page's own key, not the editor's: Ace shows what it was first
given, so when the page replaces the draft (a copy, a file, the saved form) the editor is
drawn anew under a fresh key, and a visit to another page cannot lose what was typed.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

# `st_ace` turns Ace's live completion on, which takes an Enter typed after a word as the
# choice of a suggestion; the component itself passes `setOptions` on to Ace, so we call it
# directly to keep Enter a new line.
from streamlit_ace import _render_component

from cogbias.library.testcases import Problem
from cogbias.views import authoring


def _widget(key: str) -> str:
    return f"{key}_editor_{st.session_state.get(f'{key}_generation', 0)}"


def draft(key: str) -> str:
    """The draft under `key`: what the author typed last, or what the page put there since
    (then the next `editor` is a new one showing it)."""
    state = st.session_state
    typed, shown = state.get(_widget(key)), state.get(f"{key}_shown")
    if typed is not None and typed != shown:
        state[key] = typed
    elif state[key] != shown:
        state[f"{key}_generation"] = state.get(f"{key}_generation", 0) + 1
    return str(state[key])


def editor(key: str, text: str, problems: Sequence[Problem], height: int = 460) -> None:
    """The editor holding `text` (from `draft`), each of `problems` marked at its line."""
    marks = authoring.editor_marks(problems)
    _render_component(
        defaultValue=text,
        default=text,
        placeholder="",
        height=height,
        minLines=12,
        maxLines=None,
        fontSize=14,
        tabSize=2,
        mode="toml",
        theme="chrome",
        showGutter=True,
        showPrintMargin=False,
        wrapEnabled=True,
        readOnly=False,
        keyboardHandler="vscode",
        annotations=marks.annotations,
        markers=marks.markers,
        autoUpdate=True,
        setOptions={"enableLiveAutocompletion": False, "enableBasicAutocompletion": False},
        key=_widget(key),
    )
    st.session_state[f"{key}_shown"] = text
