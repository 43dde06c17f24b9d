"""Learn: what each bias is, its control and treatment side by side, and a live run."""

import streamlit as st

from cogbias import present
from pages import _live
from pages._common import (
    LOCAL_MODEL,
    RANDOM_MODEL,
    attempt,
    case_label,
    model_names,
    models,
    scenarios,
    test_cases,
)

st.title("Learn: cognitive biases in LLMs")
st.caption(
    "Each test asks a model the same decision twice. The **control** and the **treatment** "
    "differ only in the detail that should trigger the bias (highlighted). "
    "Blue [[gaps]] are written by a generator model to fit a scenario; red {{gaps}} are "
    "numbers or choices drawn at random."
)

cases = test_cases()
case_id = st.selectbox("Bias", list(cases), format_func=case_label(cases), key="learn_bias")
case = cases[case_id]
st.subheader(case.name)
st.write(case.description)
if case.references:
    with st.expander("References"):
        for ref in case.references:
            st.markdown(f"- {ref}")

halves = present.case_halves_html(case)
for column, half in zip(st.columns(2), ("control", "treatment"), strict=True):
    with column, st.container(border=True):
        st.markdown(f"**{half.capitalize()}**")
        st.markdown(f"*Situation:* {halves[half]['situation']}", unsafe_allow_html=True)
        st.markdown(f"*Prompt:* {halves[half]['prompt']}", unsafe_allow_html=True)
        st.markdown(f"<ol>{halves[half]['options']}</ol>", unsafe_allow_html=True)

st.divider()
st.subheader("Run it live")
infos = models()
ids = [m.id for m in infos]
label = model_names(infos)
c1, c2, c3 = st.columns([2, 2, 1])
model = c1.selectbox(
    "Decision model",
    ids,
    index=ids.index(LOCAL_MODEL) if LOCAL_MODEL in ids else 0,
    format_func=label,
    key="learn_model",
)
generators = [g for g in ids if g != RANDOM_MODEL]
generator = c2.selectbox(
    "Generator (fills the blue gaps)",
    generators,
    index=generators.index(LOCAL_MODEL) if LOCAL_MODEL in generators else 0,
    format_func=label,
    key="learn_generator",
)
seed = int(c3.number_input("Seed", min_value=0, value=0, step=1, key="learn_seed"))
scenario = scenarios()[seed % len(scenarios())]
st.caption(f"Scenario: {scenario.text}")

if st.button("Run this pair", type="primary", key="learn_run"):
    with st.status("Running the pair…", expanded=True) as status:
        st.write(f"Filling the gaps with {generator} (the local model may take a minute)…")
        instance = attempt(
            "Filling the gaps",
            lambda: _live.fill_pair(case, scenario.text, generator, seed, infos),
            _live.FAILURE_HINT,
        )
        row = None
        if instance is not None:
            st.write(f"Asking {model} both versions…")
            row = attempt(
                "Asking the model",
                lambda: _live.decide(instance, model, infos, seed),
                _live.FAILURE_HINT,
            )
        if row is None:
            status.update(label="The pair could not be run", state="error")
        else:
            st.session_state["learn_result"] = (case.content_hash, instance, row)
            status.update(label="Done", state="complete", expanded=False)

result = st.session_state.get("learn_result")
if result and result[0] == case.content_hash:
    _, instance, row = result
    for column, half in zip(st.columns(2), ("control", "treatment"), strict=True):
        with column, st.container(border=True):
            filled = present.filled_html(case, instance, half)
            st.markdown(f"**{half.capitalize()}** — {filled['situation']}", unsafe_allow_html=True)
            st.markdown(f"*{filled['prompt']}*", unsafe_allow_html=True)
            st.markdown("**Answer**")
            st.text(row.get(f"{half}_answer") or "(no answer)")
    st.info(present.explain_score(instance, row))
