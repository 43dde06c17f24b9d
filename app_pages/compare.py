"""Compare: two models on the same instances, bias by bias (paired differences), or a factor's
levels (reasoning efforts, interventions) against a reference (`_factor`)."""

from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _factor, _figure, _pair, _report, _tables
from app_pages._common import (
    keep,
    open_store_or_stop,
    result_sources,
    source_filter,
    test_cases,
)
from cogbias.core.records import DecisionStatus, Pair
from cogbias.core.redact import redactor
from cogbias.runs import kinds
from cogbias.store import Store
from cogbias.studies import analysis, cells
from cogbias.views import charts, pair_tables, safe_text, shown_pairs
from cogbias.views.figures import Source
from cogbias.views.numbers import signed


def factor_mode() -> bool:
    """Whether the page compares a factor's levels (`_factor`) rather than two models."""
    keep("cmp_mode")
    return (
        st.radio(
            "Compare",
            ["models", "factor"],
            format_func={
                "models": "Two models",
                "factor": "A factor: reasoning effort levels or interventions",
            }.get,
            horizontal=True,
            key="cmp_mode",
            help="A factor: runs that differ in that setting alone, each level against a "
            "reference on the same instances (which interventions reduce which biases).",
        )
        == "factor"
    )


def chosen(store: Store) -> tuple[str | None, str | None, str, str] | None:
    """The results compared and the two models (run id, dataset, model A, model B), or None
    (said why) when fewer than two models have results there."""
    sources, source_label = result_sources(kinds.records(store), store.datasets())
    keep("cmp_source", allowed=sources)
    if st.session_state.get("cmp_source") not in sources:
        st.session_state["cmp_source"] = "all"
    c1, c2, c3 = st.columns([3, 2, 2])
    source = c1.selectbox("Results", sources, format_func=source_label, key="cmp_source")
    run_id, dataset = source_filter(source)
    models = sorted({r["model"] for r in store.results(run_id, dataset)})
    if len(models) < 2:
        st.info(
            "Comparing needs results of at least two models here. Start a run with two decision "
            "models on the **Run** page (the random baseline needs no key)."
        )
        return None
    others = [m for m in models if m != "random"] or models
    keep("cmp_a", allowed=models)
    model_a = c2.selectbox("Model A", models, index=models.index(others[0]), key="cmp_a")
    rest = [m for m in models if m != model_a]
    keep("cmp_b", allowed=rest)
    model_b = c3.selectbox(
        "Model B", rest, index=rest.index("random") if "random" in rest else 0, key="cmp_b"
    )
    return run_id, dataset, model_a, model_b


def differences(
    store: Store, run_id: str | None, dataset: str | None, model_a: str, model_b: str
) -> pd.DataFrame:
    """The two models' paired scores per shared instance, token-bias ones left out (their
    scores mean something else: the Token bias page reads them)."""
    paired = analysis.paired_frame(store.paired_scores(model_a, model_b, run_id, dataset))
    return paired[~paired["bias"].isin(cells.token_bias_test_cases(store))]


def compared(
    table: pd.DataFrame, names: dict[str, str], chosen: tuple[str | None, str | None, str, str]
) -> None:
    """The forest of paired differences per bias, its numbers, a figure and a report."""
    run_id, dataset, model_a, model_b = chosen
    st.altair_chart(charts.compare_chart(table, model_a, model_b, names))
    st.caption(
        f"Right of the dashed line: {safe_text.escape_markdown(model_a)} scores higher (more "
        f"biased in the test's direction) than {safe_text.escape_markdown(model_b)} on the same "
        "instances; red dots differ significantly after Benjamini–Hochberg correction. Hover "
        "for n and p."
    )
    _figure.save_figure(
        ["compare-forest"], "cmp_figure", Source(run_id, dataset, models=(model_a, model_b))
    )
    with st.expander("The numbers"):
        _tables.table(
            pair_tables.compare_numbers(table, model_a, model_b, names),
            "cmp_numbers",
            f"compare-{model_a}-{model_b}",
            data=table,
            hide_index=True,
            column_config={"significant after BH": st.column_config.CheckboxColumn()},
        )
        st.caption("A dash: no value (an interval or a test needs more paired instances).")
    _report.offer(
        "compare", "cmp_report", model_a=model_a, model_b=model_b, run_id=run_id, dataset=dataset
    )


def disagreements(
    store: Store,
    paired: pd.DataFrame,
    table: pd.DataFrame,
    names: dict[str, str],
    models: tuple[str, str],
) -> None:
    """The instances of one bias where the two models' scores differ most, with both answers."""
    st.subheader("Where they disagree most")
    biases = list(table["bias"])
    if st.session_state.get("cmp_bias") not in biases:
        st.session_state["cmp_bias"] = biases[0]
    bias = st.selectbox("Bias", biases, format_func=lambda b: names.get(b, b), key="cmp_bias")
    top = analysis.disagreements(paired, bias)
    if top.empty:
        st.info("The two models scored every shared instance of this bias the same.")
    clean = redactor()
    for number, item in enumerate(top.itertuples(), start=1):
        pairs = store.instance_pairs(item.instance_id, list(models))
        scenario = safe_text.escape_markdown(clean(str(pairs[0].scenario if pairs else ""))[:80])
        label = f"{number}. A {signed(item.score_a)} vs B {signed(item.score_b)} — {scenario}"
        with st.expander(label, expanded=number == 1):
            disagreement(pairs, models, (item.score_a, item.score_b), clean)


def disagreement(
    pairs: list[Pair], models: tuple[str, str], scores: tuple[float, float], clean: Any
) -> None:
    """One instance: its two halves as written, then each model's answers and score."""
    first = shown_pairs.shown_stored_pair(pairs[0], clean) if pairs else None
    if first is not None:
        left, right = st.columns(2)
        for column, half in ((left, first.control), (right, first.treatment)):
            with column:  # a long imported text shows its start, the rest collapsed
                st.markdown(_pair.HALF_TITLES[half.name] + ", as written")  # a fixed title
                _pair.long_text(half.situation + "\n\n" + half.prompt)
    for column, model, score in zip(st.columns(2), models, scores, strict=True):
        with column, st.container(border=True):
            st.markdown(f"**{safe_text.escape_markdown(model)}** · score {signed(score)}")
            for pair in (
                p
                for p in pairs
                if p.decision.model == model and p.decision.status == DecisionStatus.OK
            ):
                shown = shown_pairs.shown_stored_pair(pair, clean)
                if shown is not None:
                    _pair.show_answers(shown)
                break


def main() -> None:
    st.title("Compare two models")
    st.caption(
        "Where two models answered the *same* instances, the difference of their scores on "
        "each instance shows which one is more biased, with each instance's own quirks "
        "cancelled out. Per bias: the mean of those differences, its 95% CI (t-interval, "
        "truncated to [-2, 2]), and a Wilcoxon signed-rank test, Benjamini–Hochberg adjusted "
        "across biases."
    )
    store = open_store_or_stop()
    if factor_mode():
        _factor.show(store)
        return
    picked = chosen(store)
    if picked is None:
        return
    paired = differences(store, *picked)
    if paired.empty:
        st.info(
            "These two models share no scored instance here. Run both on the same test cases, "
            "scenarios and generator (one run with both models does it), or on the same dataset."
        )
        return
    names = {case_id: case.name for case_id, case in test_cases().items()}
    table = analysis.compare_models(paired)
    compared(table, names, picked)
    disagreements(store, paired, table, names, picked[2:])


main()
