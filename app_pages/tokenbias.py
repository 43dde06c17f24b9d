"""Token bias: does a model reason, or react to surface tokens? (Jiang et al. 2024)

Thin page over `cogbias.studies.tokenbias` and `cogbias.views.charts_tokenbias`: the hypothesis
table in the paper's layout, n12 vs n21 bars, a heatmap of rejections, and P beside P' with
both answers. Every text from a model or a file is shown with `st.text` (never Markdown).
"""

from __future__ import annotations

import streamlit as st

from app_pages import _paper_models
from app_pages._common import attempt, db_path, keep, open_store_or_stop
from app_pages._progress import ACTIVE
from cogbias.core.run_record import RunStatus
from cogbias.runs import executor, paired_plan
from cogbias.runs.summaries import run_summary
from cogbias.studies import analysis, tokenbias
from cogbias.views import charts_tokenbias, safe_text

st.title("Token bias")
st.caption(
    "Each pair asks one logical question twice: as written (P) and with a change a reasoner "
    "should ignore (P′). n12 counts pairs where only P was answered correctly, n21 pairs where "
    "only P′ was. Under the null hypothesis of genuine reasoning they are equally likely; the "
    "exact binomial test (few discordant pairs) or McNemar's z, corrected with Benjamini–"
    "Hochberg across each hypothesis' rows, says whether the change moved the model."
)
store = open_store_or_stop()
names = tokenbias.token_bias_datasets(store)

# Open while the database holds no study: it is the one thing this page can then do.
with st.expander(
    "Add the built-in study" if "tokenbias" not in names else "Built-in study", expanded=not names
):
    st.caption(
        "Stores the study's pairs in this database (like an imported dataset) and answers them "
        "with the random model, the null baseline. Run real models on the Run page or with "
        "`cogbias run study tokenbias --models … --prompting baseline,zs_cot`."
    )
    if st.button("Store the study and run the random baseline", key="tb_materialise"):

        def _launch() -> str:
            """The token-bias kind stores the study's pairs, then a worker process answers
            them (like every run started here; the page only shows its progress)."""
            spec = paired_plan.RunSpec(models=["random"], dataset="tokenbias")
            return executor.launch(spec, db_path())

        started = attempt("Starting the random baseline", _launch)
        if started:
            st.session_state["tb_run"] = started
            st.rerun()


@st.fragment(run_every=1.0)
def progress(run_id: str) -> None:
    """The baseline's progress while its worker runs; the page is redrawn when it ends."""
    run = run_summary(store, run_id)
    if run is None:
        st.info(f"Starting run {run_id}…")
        return
    if run.status not in ACTIVE:
        st.session_state.pop("tb_run", None)
        if run.status == RunStatus.DONE:
            st.rerun()  # redraw the whole page with the baseline's tables
        st.error(f"The random baseline ended {run.status}; the reason:")
        st.text(run.error or "(none recorded)")  # may quote a model: text, never Markdown
        return
    planned = max(run.planned or 0, 1)
    st.progress(
        min(run.done / planned, 1.0),
        text=f"Random baseline: {run.done:,} of {run.planned:,} pairs",
    )


if st.session_state.get("tb_run"):
    progress(st.session_state["tb_run"])

if not names:
    st.info(
        "No token-bias study or dataset in this database yet. Store the built-in study above "
        "(the random baseline answers it in seconds, no key needed), or import the token-bias "
        "items on the **Datasets** page."
    )
    st.stop()

left, middle, right = st.columns([2, 1, 1])
keep("tb_dataset", allowed=names)
dataset = left.selectbox("Study or dataset", names, key="tb_dataset")
alpha = middle.number_input("α", 0.001, 0.5, analysis.ALPHA, step=0.01, key="tb_alpha")
normal_above = right.number_input(
    "Exact test up to n* =", 0, 1000, analysis.NORMAL_ABOVE, key="tb_normal"
)
table = attempt(
    "Computing the hypothesis tables",
    lambda: tokenbias.results(store, dataset, float(alpha), int(normal_above)),
)
if table is None:
    st.stop()
if table.empty:
    st.info(safe_text.escape_markdown(f"No answered pairs on {dataset} yet."))  # a name given
    st.stop()

st.subheader("Hypothesis tests")
shown = table[
    [
        "hypothesis",
        "model",
        "prompting",
        "n",
        "n12",
        "n21",
        "n_star",
        "z",
        "test",
        "p_value",
        "p_adjusted",
        "direction",
        "reject",
    ]
]
st.dataframe(
    shown,
    hide_index=True,
    column_config={
        "n_star": st.column_config.NumberColumn("n*"),
        "z": st.column_config.NumberColumn(format="%.6f"),
        "p_value": st.column_config.NumberColumn("p", format="%.6f"),
        "p_adjusted": st.column_config.NumberColumn("p (BH)", format="%.6f"),
        "direction": st.column_config.TextColumn("H_a (test direction)"),
    },
)

bars, heat, paper = st.tabs(["n12 vs n21", "Rejections", "The paper's models"])
with bars:
    st.altair_chart(charts_tokenbias.discordant_bars(table))
with heat:
    st.altair_chart(charts_tokenbias.rejection_heatmap(table))
with paper:
    _paper_models.beside_tokenbias(table)  # Appendix D for the same hypotheses

st.subheader("P and P′ side by side")
a, b = st.columns(2)
hypothesis = a.selectbox("Hypothesis", sorted(table["hypothesis"].unique()), key="tb_hyp")
model = b.selectbox("Model", sorted(table["model"].unique()), key="tb_model")
views = tokenbias.pair_views(store, dataset, hypothesis, model, limit=200)
if not views:
    st.caption("No answered pairs for this choice.")
    st.stop()
index = st.number_input(f"Pair (1–{len(views)})", 1, len(views), 1, key="tb_pair") - 1
view = views[int(index)]
st.caption(safe_text.escape_markdown(f"Prompting: {view['prompting']} · status: {view['status']}"))
if view["error"]:
    st.text(f"Error: {view['error']}")
for column, (label, half) in zip(
    st.columns(2),
    (("P (original)", view["original"]), ("P′ (perturbed)", view["perturbed"])),
    strict=True,
):
    with column:
        verdict = {True: "correct", False: "wrong", None: "no answer"}[half["correct"]]
        st.markdown(f"**{label}** — {verdict}")
        st.text(half["text"])
        st.caption("Answer")
        st.text(half["answer"] or "(none)")
        st.caption("Chosen option · correct option")
        st.text(f"{half['chosen'] or '(none)'} · {half['correct_option'] or '?'}")
