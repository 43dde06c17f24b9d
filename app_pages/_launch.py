"""The checks before a worker starts and the start itself, shared by the Run and Studies pages.

Both pages start runs the same way: one run talks to one custom endpoint, every chosen model
must have its key before the first call, and a worker is started beside the app (reusing its
local model server) with any failure said in a sentence. One place keeps the two pages from
drifting apart on what is refused and how.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import streamlit as st

from app_pages._common import (
    api_base_of,
    db_path,
    friendly,
    refuse_missing_keys,
    share_local_server,
)
from cogbias.llm.registry import ModelInfo
from cogbias.llm.settings import check_api_base
from cogbias.runs import executor
from cogbias.views.safe_text import escape_markdown


def endpoints(model_ids: Iterable[str], infos: list[ModelInfo]) -> set[str]:
    """The custom endpoints the chosen models live on (none for the built-in providers)."""
    return {b for b in (api_base_of(m, infos) for m in model_ids) if b}


def custom_endpoint(decision_models: list[str], key: str) -> set[str]:
    """The custom endpoint typed on a page (its model added to `decision_models`), checked:
    a base URL that is not one stops the page with what is wrong. Empty when none is typed."""
    with st.expander("Custom OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp server, …)"):
        custom_base = st.text_input(
            "Base URL", placeholder="http://127.0.0.1:8000/v1", key=f"{key}_base"
        )
        custom_name = st.text_input("Model name on that server", key=f"{key}_custom_model")
        st.caption(
            "Keys are read from the environment (e.g. OPENAI_API_KEY), never typed here. "
            "To keep an endpoint for later, add it on the Models page."
        )
    if custom_name.strip():
        decision_models.append(f"openai/{custom_name.strip()}")
    if not custom_base.strip():
        return set()
    try:
        return {check_api_base(custom_base)}
    except ValueError as exc:
        st.error(f"Base URL: {friendly(exc)}")
        st.stop()


def refused(model_ids: Iterable[str], infos: list[ModelInfo], bases: set[str]) -> bool:
    """Say why these models cannot run together, before anything starts; True when refused:
    more than one custom endpoint (a run has one `api_base`), or a model without its key (a
    run would only fail on its first call)."""
    if len(bases) > 1:
        st.error(
            "These models live on different endpoints "
            f"({escape_markdown(', '.join(sorted(bases)))}); one run can use one custom "
            "endpoint. Split them into separate runs."
        )
        return True
    return refuse_missing_keys(model_ids, infos)


def launch(
    what: str, spec: Any, name: str = "", batch: bool = False, max_cost: float | None = None
) -> str | None:
    """Plan, store and start a run in a worker process (`executor.launch`), within
    `max_cost` USD when given; its id, or None after saying why it could not start (`what`
    names it: "run", "study run")."""
    share_local_server()
    try:
        return executor.launch(spec, db_path(), name, batch=batch, max_cost=max_cost)
    except (OSError, executor.RunBusy, KeyError, ValueError) as exc:
        st.error(f"The {what} could not be started: {friendly(exc)}")
        return None


def resume(
    what: str, run_id: str, retry_failed: bool = False, max_cost: float | None = None
) -> bool:
    """Start a worker on a stored run (`executor.start_background`), within `max_cost` USD
    when given; False after saying why it could not (`what` names the run as `launch`
    does)."""
    share_local_server()
    try:
        executor.start_background(run_id, db_path(), retry_failed=retry_failed, max_cost=max_cost)
    except OSError as exc:
        st.error(f"The {what} could not be resumed: {friendly(exc)}")
        return False
    return True
