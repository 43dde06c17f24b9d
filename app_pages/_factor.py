"""Compare's "factor" mode: runs that differ in the reasoning effort or the intervention alone,
each level against a reference on the same instances (`views.factor_view`)."""

from __future__ import annotations

import streamlit as st

from app_pages import _report, _tables
from app_pages._common import friendly, keep, test_cases
from cogbias.runs import factor_runs, kinds
from cogbias.runs.factors import FACTORS
from cogbias.store import Store
from cogbias.views import factor_view

FACTOR_LABELS = {"effort": "Reasoning effort", "intervention": "Intervention"}


def show(store: Store) -> None:
    """Pick a factor and a set of runs varying it, a reference level; the heatmap of changes,
    the numbers, the thinking each level cost, the trace signal and a report."""
    keep("cmp_factor", "cmp_factor_set", "cmp_reference")
    factor = st.radio(
        "Factor", list(FACTORS), format_func=FACTOR_LABELS.get, horizontal=True, key="cmp_factor"
    )
    sets = factor_runs.factor_sets(kinds.records(store), factor)
    if not sets:
        st.info(
            f"No runs here differ in the {FACTOR_LABELS[factor].lower()} alone. On the **Run** "
            "page, run the same test cases and models once per level (or on the command line: "
            "`--reasoning-effort low,high`, `--intervention none,awareness,self_help`)."
        )
        return
    labels = {s.label(): s for s in sets}
    if st.session_state.get("cmp_factor_set") not in labels:
        st.session_state["cmp_factor_set"] = next(iter(labels))
    c1, c2 = st.columns([3, 1])
    chosen = labels[c1.selectbox("Runs", list(labels), key="cmp_factor_set")]
    if st.session_state.get("cmp_reference") not in chosen.levels:
        st.session_state["cmp_reference"] = chosen.reference
    reference = c2.selectbox("Reference level", list(chosen.levels), key="cmp_reference")
    run_ids = list(chosen.levels.values())
    try:
        tables = factor_view.factor_tables(store, factor, run_ids, reference)
    except ValueError as exc:
        st.error(friendly(exc))
        return
    if tables.effects.empty:
        st.info("These runs share no scored instance: their pairs cannot be compared.")
        return
    names = {case_id: case.name for case_id, case in test_cases().items()}
    st.altair_chart(factor_view.factor_heatmap(tables, names))
    st.caption(factor_view.FACTOR_NOTE)
    with st.expander("The numbers", expanded=True):
        numbers = factor_view.effects_numbers(tables, names)
        _tables.table(
            numbers,
            "cmp_factor",
            f"cogbias-{factor}-{reference}",
            data=tables.effects,  # unrounded, as `cogbias results compare` writes them
            hide_index=True,
            column_config={"significant after BH": st.column_config.CheckboxColumn()},
        )
    st.markdown("**What each level cost**")
    _tables.table(
        factor_view.thinking_numbers(tables),
        "cmp_thinking",
        f"cogbias-{factor}-cost",
        hide_index=True,
    )
    st.caption(factor_view.THINKING_NOTE)
    if not tables.traces.empty:
        st.markdown("**Trace signal**")
        _tables.table(
            factor_view.trace_numbers(tables, names),
            "cmp_traces",
            f"cogbias-{factor}-traces",
            hide_index=True,
        )
        st.caption(factor_view.TRACE_NOTE)
    _report.offer(
        "factor", "cmp_factor_report", factor=factor, run_ids=tuple(run_ids), reference=reference
    )
