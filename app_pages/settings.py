"""Models: the registry, which provider keys are set (names only), and custom endpoints."""

import os

import pandas as pd
import streamlit as st

from app_pages import _tables
from app_pages._common import chosen_gone, friendly, models, removed_here
from cogbias.llm import registry, settings
from cogbias.llm.keys import key_for_model
from cogbias.llm.profiles import resolve
from cogbias.views import safe_text
from cogbias.views.numbers import number_or_dash

st.title("Models and keys")


def _key_cell(model_id: str, api_base: str | None, api_key_env: str | None) -> str:
    name = key_for_model(model_id, api_base, api_key_env)
    if name is None:
        return "not needed"
    return f"{name} {'✅' if os.environ.get(name, '').strip() else '— missing'}"


def _json_schema(model_id: str, api_base: str | None, infos: list) -> str:
    """What the model's profile says (an entry that does not state it keeps the default)."""
    try:
        return "yes" if resolve(model_id, api_base, registry=infos).json_schema else "no"
    except (ValueError, KeyError):
        return "—"


st.subheader("Registry")
infos = models()
path = settings.user_models_path()
user_ids = {m.id for m in registry.load_models(path)} if path.is_file() else set()
if wrong := registry.registry_problems():
    st.warning("Some entries of the model registry are not as they should be:")
    more = [f"… and {len(wrong) - 20} more"] if len(wrong) > 20 else []
    st.code("\n".join([*wrong[:20], *more]), language=None)
table = pd.DataFrame(
    [
        {
            "id": m.id,
            "name": m.name,
            "developer": m.developer,
            "parameters (B)": number_or_dash(m.params_b),
            "arena score": number_or_dash(m.arena_score),
            "JSON schema": _json_schema(m.id, m.api_base, infos),
            "key": _key_cell(m.id, m.api_base, m.api_key_env),
            "endpoint": m.api_base or "",
            "yours": m.id in user_ids,
        }
        for m in infos
    ]
)
_tables.table(table, "settings_models", "models", hide_index=True, width="stretch")
st.caption(
    "`random` (the paper's baseline) and `local/smollm2` (a small model run on this machine) "
    "need no key and no network."
)

st.subheader("API keys")
st.caption(
    "Keys are read from the environment or `.streamlit/secrets.toml`. This page only says "
    "whether each is set; it never shows a value."
)
keys = pd.DataFrame(settings.key_status())
keys["set"] = keys.pop("present").map({True: "✅ set", False: "— not set"})
_tables.table(keys, "settings_keys", "keys", hide_index=True, width="stretch")

st.subheader("Add a custom endpoint")
st.caption(
    "Any OpenAI-compatible server works: Ollama (`http://127.0.0.1:11434/v1`), vLLM, "
    "llama.cpp server, LM Studio. It is sent no key (never OPENAI_API_KEY) unless you name "
    "the variable holding its own; a key goes only over https, or to this machine. Saved to "
    + safe_text.escape_markdown(str(settings.user_models_path()))  # a path: not markup
    + "."
)
with st.form("add_model", clear_on_submit=False):
    c1, c2 = st.columns(2)
    served = c1.text_input("Model name on the server", placeholder="llama3.2", key="add_served")
    base = c2.text_input("Base URL", placeholder="http://127.0.0.1:8000/v1", key="add_base")
    c1, c2, c3 = st.columns(3)
    display = c1.text_input("Display name (optional)", key="add_display")
    schema = c2.checkbox("Accepts a JSON schema (structured outputs)", key="add_schema")
    max_t = c3.number_input("Highest temperature", 0.0, 5.0, 2.0, 0.1, key="add_max_t")
    key_env = st.text_input(
        "Variable holding its key (optional)",
        placeholder="MY_SERVER_KEY",
        help="The name of an environment variable (or .streamlit/secrets.toml entry), never "
        "the key itself; it must contain KEY, TOKEN, SECRET or PASSWORD.",
        key="add_key_env",
    )
    submitted = st.form_submit_button("Add model", type="primary", key="add_submit")
if submitted:
    if not served.strip():
        st.error("Give the model's name on the server (e.g. llama3.2).")
    else:
        model_id = served.strip() if "/" in served else f"openai/{served.strip()}"
        try:
            written = settings.add_custom_model(
                model_id, display or served, base, "", schema, max_t, api_key_env=key_env
            )
        except ValueError as exc:
            st.error(f"Not added: {friendly(exc)}")
        except OSError as exc:
            st.error(f"Could not write {settings.user_models_path()}: {friendly(exc)}")
        else:
            st.session_state["settings_flash"] = (
                safe_text.escape_markdown(f"Added {model_id} to {written}.")
                + " It is now offered on every page."
            )
            st.rerun()
if "settings_flash" in st.session_state:
    st.success(st.session_state.pop("settings_flash"))

if user_ids:
    # A model removed elsewhere since this page was drawn: named; the click removes nothing
    # (the picker would have fallen back to another of the user's models).
    stale = chosen_gone("settings_remove", user_ids, "Model")
    c1, c2 = st.columns([3, 1])
    gone = c1.selectbox("Remove one of yours", sorted(user_ids), key="settings_remove")
    if c2.button("Remove", key="settings_remove_btn") and not stale:
        settings.remove_custom_model(gone)
        removed_here("settings_remove", gone)
        st.rerun()
