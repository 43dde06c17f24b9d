"""The Run page's reasoning, intervention and sending controls (`runs.factors`, the Batch API,
`llm.spending`'s cap): kept apart so the page stays a list of short steps."""

from __future__ import annotations

from typing import Any

import streamlit as st

from cogbias.core.reasoning import EFFORTS
from cogbias.llm import thinking
from cogbias.llm.costs import dollars
from cogbias.studies.interventions import INTERVENTIONS

EACH_OWN = ""  # the effort choice "each model's own" (no effort sent)


def factors_asked() -> dict[str, Any]:
    """The run's reasoning effort, thinking budget and intervention (`runs.factors`): one
    value each per run, so comparing levels means one run per level (Compare, "A factor")."""
    with st.expander("Reasoning models and debiasing interventions"):
        c1, c2, c3 = st.columns(3)
        effort = c1.selectbox(
            "Reasoning effort",
            [EACH_OWN, *EFFORTS],
            format_func=lambda e: e or "each model's own",
            key="run_effort",
            help="How hard a reasoning model thinks (models the registry or litellm's map "
            "lists as reasoning; others are refused). One effort per run: run each level "
            "and compare them on the Compare page.",
        )
        budget = int(
            c2.number_input(
                "Thinking budget (tokens, 0: none)",
                0,
                thinking.MAX_BUDGET,
                0,
                step=1024,
                key="run_budget",
                help=f"At least {thinking.MIN_BUDGET:,}: the budget where a provider takes one, "
                "and the room an answer gets for its thinking everywhere.",
            )
        )
        intervention = c3.selectbox(
            "Intervention",
            list(INTERVENTIONS),
            key="run_intervention",
            help="A debiasing intervention applied alike to both halves of every pair "
            "(after BiasBuster, in our words; docs/runs.md, 'Interventions'). self_help: the "
            "model rewrites each question, then answers its rewrite.",
        )
    return dict(
        reasoning_effort=effort or None,
        thinking_budget=budget or None,
        intervention=intervention,
    )


def max_cost() -> float | None:
    """The spend cap set on this page (None: none), for Start and Resume alike."""
    value = float(st.session_state.get("run_max_cost") or 0.0)
    return value if value > 0 else None


def how_to_send(batch_cost: float | None) -> tuple[bool, bool]:
    """The Batch API's box and the spend cap's field: (send through batches, whether the
    run may start: a cap and a batch do not go together)."""
    use_batch = st.checkbox(
        "Send the calls through the provider's Batch API"
        + (f" (estimated {dollars(batch_cost)})" if batch_cost else ""),
        key="run_batch",
        help="Half price and no rate limits, for OpenAI, OpenAI-compatible servers and "
        "Anthropic (Message Batches); "
        "answers arrive within hours. The run polls its batches and can be resumed.",
    )
    st.number_input(
        "Spend at most (USD, 0: no cap)",
        0.0,
        1e6,
        0.0,
        step=0.5,
        format="%.4f",
        key="run_max_cost",
        help="The run stops before a call that could pass this (each call is held at the most "
        "it can cost), and ends resumable; Resume below goes on with the cap set here.",
    )
    if max_cost() is not None and use_batch:
        st.warning(
            "A spend cap stops calls one by one; a batch is charged all at once: choose one."
        )
        return use_batch, False
    return use_batch, True
