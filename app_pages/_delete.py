"""Deleting a run or a dataset from a page: a button, then a confirmation naming what goes."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages._common import friendly, removed_here
from cogbias.runs import deletion
from cogbias.store import Store
from cogbias.views import safe_text


def _plan(store: Store, kind: str, name: str) -> deletion.Deletion:
    return (deletion.plan_run if kind == "run" else deletion.plan_dataset)(store, name)


def delete_control(
    store: Store,
    kind: str,
    name: str,
    key: str,
    picker: tuple[str, Any] | None = None,
    stale: bool = False,
) -> None:
    """Offer to delete run or dataset `name`; nothing happens until the user confirms.
    The page shows the outcome with `flash(key)` (after the rerun, the item is gone).

    `picker` is the picker's key and value that chose `name`: once deleted here, the page's
    `chosen_gone` does not report it as deleted elsewhere. `stale`: the picker's choice was
    deleted elsewhere, so the click that brought the news is ignored."""
    pending = f"{key}_pending"
    if st.session_state.get(pending) != (kind, name):
        clicked = st.button(f"Delete this {kind}…", key=key, icon=":material/delete:")
        if clicked and not stale:
            st.session_state[pending] = (kind, name)
            st.rerun()
        return
    try:
        plan = _plan(store, kind, name)
    except (KeyError, ValueError) as exc:
        st.session_state.pop(pending, None)
        st.error(f"Cannot delete: {friendly(exc)}")
        return
    st.warning(
        f"Delete {safe_text.escape_markdown(plan.describe())}? This cannot be undone. Nothing "
        "else in the database is changed."
    )
    yes, no = st.columns(2)
    if yes.button("Yes, delete", type="primary", key=f"{key}_yes"):
        try:
            deletion.apply(store, plan)
        except Exception as exc:  # e.g. the database is locked: nothing was deleted
            st.error(f"Deleting failed, nothing was deleted: {friendly(exc)}")
            return
        st.session_state.pop(pending, None)
        st.session_state[f"{key}_done"] = f"Deleted {plan.describe()}."
        if picker is not None:
            removed_here(*picker)
        st.rerun()
    if no.button("Cancel", key=f"{key}_no"):
        st.session_state.pop(pending, None)
        st.rerun()


def flash(key: str) -> None:
    """Say what the last confirmed deletion under `key` removed (once)."""
    done = st.session_state.pop(f"{key}_done", None)
    if done:
        st.success(safe_text.escape_markdown(done))
