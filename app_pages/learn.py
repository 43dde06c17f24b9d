"""Learn: what each bias is, its control and treatment side by side, and a live run."""

import streamlit as st

from app_pages import _live, _pair
from app_pages._common import (
    LOCAL_MODEL,
    case_label,
    chosen_gone,
    friendly,
    generator_label,
    keep,
    model_names,
    models,
    scenarios,
    test_cases,
)
from cogbias.core.records import DecisionStatus
from cogbias.library import designs, examples
from cogbias.llm.errors import MissingKeyError
from cogbias.runs import scorers
from cogbias.runs.pipeline import Instance
from cogbias.views import highlight, safe_text, shown_pairs, unread_answers

# Said under an unscored pair of a model that can show its option probabilities: the small
# local model often writes two options ("Option 4: Very good"), which is never guessed at.
READ_PROBABILITIES = (
    "This model can also be read without words: choose Scoring “Option probabilities” and run "
    "the pair again to see how likely it found each option in both halves."
)
READ_STRONGER = "A larger decision model names one option, and its answers can be read."

MAX_REFERENCES = 50  # a user's file may list thousands; the rest stay in the file
st.title("Learn: cognitive biases in LLMs")
st.caption(
    "Each test asks a model the same decision twice. The **control** and the **treatment** "
    "differ only in the detail that should trigger the bias (highlighted in the template). "
    "Blue [[gaps]] are written by a generator model to fit a scenario; red {{gaps}} are "
    "numbers or choices drawn at random."
)

cases = test_cases()
keep("learn_bias", allowed=cases)
# A test case or model deleted elsewhere since this page was drawn: named; no pair is run.
gone = chosen_gone("learn_bias", cases, "Test case")
case_id = st.selectbox("Bias", list(cases), format_func=case_label(cases), key="learn_bias")
case = cases[case_id]
st.subheader(safe_text.escape_markdown(case.name))  # a user's file: text, never markup
_pair.long_prose(case.description)  # a user's file: a 1 MB description shows its start
if case.references:
    with st.expander("References"):
        refs = [safe_text.preview_text(ref)[0] for ref in case.references[:MAX_REFERENCES]]
        st.markdown("\n".join(f"- {safe_text.escape_markdown(ref)}" for ref in refs))
        if len(case.references) > MAX_REFERENCES:
            more = len(case.references) - MAX_REFERENCES
            st.caption(safe_text.escape_markdown(f"… and {more:,} more in the file."))
differs = designs.differences(case)  # the built-ins follow the paper's designs: where not
if differs:
    with st.expander(f"How this test differs from the paper's design ({len(differs)})"):
        for what, why in differs:
            st.markdown(f"- **{safe_text.escape_markdown(what)}** {safe_text.escape_markdown(why)}")


def _example_pair() -> Instance | None:
    """The pair filled offline from the test case's own example fills: no model, instant, so
    the page shows a real decision task before anything runs (None if it has no examples)."""
    first = scenarios()[0]
    try:
        return _live.fill_pair(case, first.text, examples.EXAMPLES_GENERATOR, 0, [])
    except Exception:  # a user's test case without example fills
        return None


template = highlight.case_halves_html(case)
example = _example_pair()
if example is None:
    _pair.show_marked_halves(template, parts_named=True)
else:
    st.caption(
        "An example pair, filled offline from the test case's example fills for the scenario "
        f"“{safe_text.escape_markdown(example.scenario.rstrip('. '))}”. Run it live below."
    )
    _pair.show_marked_halves(highlight.filled_halves_html(case, example), parts_named=True)
    with st.expander("The template behind it: its gaps, before they are filled"):
        _pair.show_marked_halves(template, parts_named=True)

st.divider()
st.subheader("Run it live")
st.caption(
    "The **random baseline** picks an answer uniformly at random: its scores show how far from "
    "0 a score can land by chance alone, so a real bias has to stand out from it. The **local "
    "model** (SmolLM2-135M) is a tiny demonstration model that runs on this machine without a "
    "key; it shows how a test works, not how capable models behave."
)
infos = models()
ids = [m.id for m in infos]
label = model_names(infos)
generators = examples.generator_choices(ids)  # the default first
gone = any(
    [
        gone,
        chosen_gone("learn_model", ids, "Model"),
        chosen_gone("learn_generator", generators, "Model"),
    ]
)
c1, c2, c3 = st.columns([2, 2, 1])
model = c1.selectbox(
    "Decision model",
    ids,
    index=ids.index(LOCAL_MODEL) if LOCAL_MODEL in ids else 0,
    format_func=label,
    key="learn_model",
)
generator = c2.selectbox(
    "Generator (fills the blue gaps)",
    generators,
    format_func=generator_label(label),
    key="learn_generator",
)
seed = int(c3.number_input("Seed", min_value=0, value=0, step=1, key="learn_seed"))
# scoring, samples and reducer; a temperature where each half is asked several times
sampled, temperature = _live.scoring_controls(
    "learn_scoring", "learn_temperature", model, infos, case.n_options
)
scoring = sampled["scoring"]
scenario = scenarios()[seed % len(scenarios())]
st.caption(f"Scenario: {safe_text.escape_markdown(scenario.text)}")


def _run_pair() -> tuple[Instance, dict] | str:
    """The filled pair and its decision, or what went wrong and what to do."""
    step = "Filling the gaps"
    try:
        instance = _live.fill_pair(case, scenario.text, generator, seed, infos)
        step = "Asking the model"
        return instance, _live.decide(instance, model, infos, seed, temperature, **sampled)
    except MissingKeyError as exc:  # says what to set: no advice on servers after it
        return f"{step} failed: {friendly(exc)}"
    except Exception as exc:
        return f"{step} failed: {friendly(exc)}\n\n{_live.FAILURE_HINT}"


# A result belongs to exactly these choices: switching the bias, a model or the seed hides it.
chosen = (case.content_hash, generator, model, seed, *sampled.values(), temperature)
if st.button("Run this pair", type="primary", key="learn_run") and not gone:
    who = f"Filling the gaps with {label(generator)}, then asking {label(model)}…"
    with st.spinner(safe_text.escape_markdown(who)):
        st.session_state["learn_result"] = (chosen, _run_pair())

held = st.session_state.get("learn_result")
if held and held[0] == chosen:
    outcome = held[1]
    if isinstance(outcome, str):
        st.error(outcome, icon=":material/error:")
    else:
        instance, decision = outcome
        pair = shown_pairs.shown_pair(instance.control, instance.treatment, decision)
        html = highlight.filled_halves_html(case, instance)
        st.caption(
            f"Generator: {safe_text.escape_markdown(generator_label(label)(generator))} · decision model: "
            f"{safe_text.escape_markdown(label(model))} · seed {seed}"
        )
        for rejected in highlight.rejected_fills(instance):  # a fill that copied its instruction
            st.caption(safe_text.escape_markdown(rejected))
        scored = decision.status == DecisionStatus.OK
        if pair is not None:
            _pair.show_pair(pair, html, with_error=scored)  # the warning below says why
            _pair.show_probabilities(pair)
            _pair.show_samples(pair)
        explained = shown_pairs.explain_score(instance, decision)
        unread = None  # how many answers could not be read, why, in plain words
        abstained = decision.status == DecisionStatus.ABSTAINED  # an abstention was read
        if scorers.get(scoring).reads_answers and not abstained:
            unread = unread_answers.unread_sentence([decision])
        if unread is not None:
            fix = READ_STRONGER
            if _live.probability_problem(instance, model, infos) is None:
                fix = READ_PROBABILITIES
            explained = f"{unread} {fix}"
        (st.info if scored else st.warning)(safe_text.escape_markdown(explained))
