"""Preview: fill a test case for a scenario and inspect the pair, insertion by insertion."""

import streamlit as st

from app_pages import _live, _pair, _tables
from app_pages._common import (
    RANDOM_MODEL,
    attempt,
    case_label,
    chosen_gone,
    generator_label,
    keep,
    model_names,
    models,
    scenarios,
    test_cases,
)
from cogbias.core.records import DecisionStatus
from cogbias.library import examples
from cogbias.views import highlight, safe_text, shown_pairs

NO_GENERATOR = ""
st.title("Preview: fill a test case")
st.caption(
    "Pick a test case and a scenario; a generator model writes the blue gaps, value "
    "generators fill the red ones. Every insertion is marked with where it came from."
)

cases = test_cases()
infos = models()
label = model_names(infos)
all_scenarios = scenarios()

keep("pv_case", allowed=cases)
keep("pv_scenario", allowed=range(len(all_scenarios)))
keep("pv_typed", "pv_seed")
# A test case or model deleted elsewhere since this page was drawn: named; nothing is asked.
gone = chosen_gone("pv_case", cases, "Test case")
c1, c2 = st.columns(2)
case_id = c1.selectbox("Test case", list(cases), format_func=case_label(cases), key="pv_case")
number = c2.selectbox(
    "Scenario",
    range(len(all_scenarios)),
    format_func=lambda i: f"{all_scenarios[i].id}. {all_scenarios[i].text}",
    key="pv_scenario",
)
typed = st.text_input(
    "…or type your own scenario",
    key="pv_typed",
    placeholder="A hospital procurement lead choosing…",
)
scenario = typed.strip() or all_scenarios[number].text
if typed.strip() and not examples.reads_scenario(scenario):
    st.caption(
        "The role and organisation are read from scenarios written like “A head teacher at a "
        "secondary school deciding …”; this one is not, so they keep their defaults."
    )

generators = [*examples.generator_choices([m.id for m in infos]), NO_GENERATOR]
keep("pv_generator", allowed=generators)
gone = any([gone, chosen_gone("pv_generator", generators, "Model")])
c1, c2, c3 = st.columns([3, 1, 1])
generator = c1.selectbox(
    "Generator model",
    generators,
    format_func=lambda g: (
        "None: fill values only, leave [[gaps]] visible" if not g else generator_label(label)(g)
    ),
    key="pv_generator",
)
if "pv_seed" not in st.session_state:
    st.session_state["pv_seed"] = 0
c2.number_input("Seed", min_value=0, step=1, key="pv_seed")
temperature = c3.slider("Temperature", 0.0, 1.5, 0.7, 0.1, key="pv_temperature")
case = cases[case_id]


def _fill() -> None:
    what = f"Filling the gaps with {generator or 'value generators only'}…"
    with st.spinner(safe_text.escape_markdown(what)):
        instance = attempt(
            "Filling the gaps",
            lambda: _live.fill_pair(
                case, scenario, generator, int(st.session_state["pv_seed"]), infos, temperature
            ),
            _live.FAILURE_HINT,
        )
    if instance is not None:
        st.session_state["pv_instance"] = (wanted, instance)
        st.session_state.pop("pv_decision", None)


def _next_seed() -> None:
    # A callback runs before the widgets are drawn, the only time their state may change.
    st.session_state["pv_seed"] = int(st.session_state["pv_seed"]) + 1
    st.session_state["pv_fill_next"] = True


b1, b2 = st.columns(2)
fill_now = b1.button("Fill", type="primary", key="pv_fill") and not gone
b2.button("Regenerate (next seed)", key="pv_regen", on_click=_next_seed)
# A fill is shown only for the inputs it was made for. Offline fills cost nothing, so they
# follow every change and the page is never blank; a model's fills wait for Fill (they take
# seconds and may cost money).
wanted = (case.content_hash, scenario, generator, int(st.session_state["pv_seed"]))
instant = generator in (examples.EXAMPLES_GENERATOR, NO_GENERATOR)
held = st.session_state.get("pv_instance")
stale = not held or held[0] != wanted
fill_next = st.session_state.pop("pv_fill_next", False) and not gone
if fill_next or fill_now or (instant and stale):
    _fill()
    held = st.session_state.get("pv_instance")
if not held or held[0] != wanted:
    st.info("Press **Fill** to see this test case filled for the scenario with this generator.")
    st.stop()
instance = held[1]
st.caption(
    safe_text.escape_markdown(
        f"Scenario: {instance.scenario} · generator: {instance.generator or 'none'} · "
        f"seed {instance.seed} · variant: {instance.variant}"
    )
)
st.markdown(highlight.legend_html(instance), unsafe_allow_html=True)
for rejected in highlight.rejected_fills(instance):
    st.caption(safe_text.escape_markdown(rejected))
_pair.show_marked_halves(highlight.filled_halves_html(case, instance))
with st.expander("All insertions", expanded=False):
    _tables.table(
        highlight.insertions_frame(instance),
        "pv_insertions",
        f"{case.id}-insertions",
        hide_index=True,
        width="stretch",
    )

st.subheader("Decide")
ids = [m.id for m in infos]
gone = any([gone, chosen_gone("pv_model", ids, "Model")])
c1, c2 = st.columns([3, 1])
model = c1.selectbox(
    "Decision model",
    ids,
    index=ids.index(RANDOM_MODEL) if RANDOM_MODEL in ids else 0,
    format_func=label,
    key="pv_model",
)
sampled, decision_temperature = _live.scoring_controls(
    "pv_scoring", "pv_decision_temperature", model, infos, instance.n_options
)
scoring = sampled["scoring"]
if c2.button("Decide", key="pv_decide") and not gone:
    with st.spinner(safe_text.escape_markdown(f"Asking {model} both versions…")):
        decided = attempt(
            "Asking the model",
            lambda: _live.decide(
                instance, model, infos, temperature=decision_temperature, **sampled
            ),
            _live.FAILURE_HINT,
        )
    if decided is not None:
        st.session_state["pv_decision"] = (instance.id, model, scoring, decided)
held = st.session_state.get("pv_decision")
if held and held[:3] == (instance.id, model, scoring):
    decision = held[3]
    pair = shown_pairs.shown_pair(instance.control, instance.treatment, decision)
    safe_model = safe_text.escape_markdown(label(model))
    st.markdown(f"**Answers of {safe_model}**, with the options as this model saw them")
    if pair is not None:
        _pair.show_pair(pair)
        _pair.show_probabilities(pair)
        _pair.show_samples(pair)
    explained = safe_text.escape_markdown(shown_pairs.explain_score(instance, decision))
    (st.info if decision.status == DecisionStatus.OK else st.warning)(explained)
