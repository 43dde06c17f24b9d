"""The paired effect of a factor as the Compare page, `cogbias results compare --factor` and a
report show it: which levels (efforts, interventions) change which biases, against a
reference level, on the same instances. The numbers come from `studies.factor_effects`; here
they are read from the store, arranged as tables and drawn by the one heatmap builder as
Explore draws its cells (one column per level, or level · model), on the same diverging
scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import altair as alt
import pandas as pd

from cogbias.llm.costs import dollars
from cogbias.runs import factor_runs, kinds
from cogbias.store import Store
from cogbias.studies import cells
from cogbias.studies import factor_effects as effects
from cogbias.views.charts import heatmap_of
from cogbias.views.charts_explore import (
    CELL_COLUMNS,
    CI_TITLE,
    MEAN_DARK,
    cells_spec,
    heatmap_frame,
    mean_color,
    significant_frames,
)
from cogbias.views.numbers import MISSING, missing, percent, signed_or_dash
from cogbias.views.pair_tables import tested_columns
from cogbias.views.report_methods import runs_methods, software
from cogbias.views.report_parts import Report, ReportError, Section, Table

FACTOR_NOTE = (
    "Runs that differ in this setting alone asked the same instances. Per bias and model, the "
    "change in score at each level against the reference level on each shared instance (the "
    "level's minus the reference's, repeats averaged): its mean, a paired 95% t-interval "
    "(truncated to [-2, 2]) and a Wilcoxon signed-rank test, Benjamini–Hochberg adjusted "
    "across the bias × model cells of each level. Negative (blue): the level lowered the "
    "score, i.e. reduced the bias where the test is scored in its direction."
)
THINKING_NOTE = (
    "What each level cost: the thinking tokens the answers reported (a pair's two halves "
    "together; providers that report none leave it empty) and what the pairs cost when asked "
    "(answers from the cache cost nothing)."
)
TRACE_NOTE = (
    "Share of traces that name the treatment's eliciting detail: a plain string match of the "
    "words and numbers that are in the treatment's text and not in the control's, not a "
    "judgement of what the model understood."
)


@dataclass(frozen=True)
class FactorTables:
    """A factor set's numbers (`studies.factor_effects`' frames) and the reference used."""

    factor_set: factor_runs.FactorSet
    reference: str
    effects: pd.DataFrame
    thinking: pd.DataFrame
    traces: pd.DataFrame


def factor_tables(
    store: Store, factor: str, run_ids: Sequence[str] = (), reference: str | None = None
) -> FactorTables:
    """The factor set of `run_ids` (or the one design varying `factor`) against `reference`
    (default: its first level); token-bias pairs are left out (their scores mean something
    else: the Token bias page reads them). ValueError saying what is missing."""
    fset = factor_runs.found_set(kinds.records(store), factor, run_ids)
    reference = reference or fset.reference
    if reference not in fset.levels:
        raise ValueError(
            f"no run at the {factor} level {reference!r} here: the levels are "
            f"{', '.join(fset.levels)}"
        )
    ids = list(fset.levels.values())
    scores = effects.level_scores(store.run_scores(ids), fset.by_run)
    scores = scores[~scores["bias"].isin(cells.token_bias_test_cases(store))]
    table = effects.factor_effects(scores, reference, list(fset.levels))
    thinking = effects.thinking_by_level(store.run_thinking(ids), fset.by_run)
    traced = [r for run_id in ids for r in store.trace_signal(run_id=run_id)]
    traces = effects.trace_shares(traced, fset.by_run)
    return FactorTables(fset, reference, table, thinking, traces)


def column_of(level: str, model: str, models: int) -> str:
    """A heatmap column: the level, with the model where several are compared."""
    return level if models == 1 else f"{level} · {model}"


def heatmap_cells(tables: FactorTables) -> tuple[pd.DataFrame, list[str]]:
    """The effects as Explore's cells (`CELL_COLUMNS`: `mean` holds the mean change), and the
    columns in order (the factor's levels, then the models)."""
    table = tables.effects
    models = sorted(table["model"].unique())
    order = [
        column_of(lv, m, len(models))
        for lv in tables.factor_set.levels
        if lv != tables.reference
        for m in models
    ]
    frame = pd.DataFrame(
        {
            "bias": table["bias"],
            "model": [
                column_of(lv, m, len(models))
                for lv, m in zip(table["level"], table["model"], strict=True)
            ],
            "mean": table["mean_change"],
            "n": table["n"],
            "failures": 0,
            "failure_rate": 0.0,
            "ci_low": table["ci_low"],
            "ci_high": table["ci_high"],
            "p_adjusted": table["p_adjusted"],
            "significant": table["significant"],
        }
    )
    return frame[CELL_COLUMNS], [c for c in order if c in set(frame["model"])]


def factor_heatmap(tables: FactorTables, names: Mapping[str, str]) -> alt.LayerChart:
    """Bias × level: the mean change against the reference, drawn as Explore draws its cells
    (`charts_explore.cells_spec`) on its diverging scale, significant cells framed."""
    changes, columns = heatmap_cells(tables)
    rows = sorted(changes["bias"].unique())
    frame = heatmap_frame(changes, "mean", rows, columns)
    frame["bias_name"] = [names.get(b, b) for b in frame["bias"]]
    measure = f"mean change vs {tables.reference}"
    tooltip = [
        alt.Tooltip("bias_name:N", title="bias"),
        alt.Tooltip("model:N", title="level"),
        alt.Tooltip("mean_text:N", title=measure),
        alt.Tooltip("n:Q", title="n (paired instances)"),
        alt.Tooltip("ci:N", title=CI_TITLE),
        alt.Tooltip("verdict:N", title="significant after BH over the level's cells"),
        alt.Tooltip("p_text:N", title="p (BH-adjusted)"),
    ]
    named_rows = [names.get(b, b) for b in rows]
    spec = cells_spec(columns, named_rows, mean_color(measure), MEAN_DARK, tooltip)
    return heatmap_of(frame, spec, lambda base: [significant_frames(base)])


def effects_numbers(tables: FactorTables, names: Mapping[str, str]) -> pd.DataFrame:
    """The effects as a page shows them: three decimals, a dash where a cell's interval or
    test needs more shared instances."""
    t = tables.effects
    return pd.DataFrame(
        {
            tables.factor_set.factor: t["level"],
            "bias": [names.get(b, b) for b in t["bias"]],
            "model": t["model"],
            "n (shared instances)": t["n"].astype(int),
            f"mean at {tables.reference}": [signed_or_dash(v, 3) for v in t["mean_reference"]],
            "mean at level": [signed_or_dash(v, 3) for v in t["mean_level"]],
            "mean change": [signed_or_dash(v, 3) for v in t["mean_change"]],
            **tested_columns(t, "95% CI (paired t, cut to [-2, 2])", "p (BH within level)"),
        }
    )


def thinking_numbers(tables: FactorTables) -> pd.DataFrame:
    t = tables.thinking
    return pd.DataFrame(
        {
            tables.factor_set.factor: t["level"],
            "model": t["model"],
            "pairs": t["pairs"].astype(int),
            "pairs reporting thinking": t["reported"].astype(int),
            "thinking tokens": t["thinking_tokens"].astype(int),
            "thinking tokens per pair": [
                MISSING if missing(v) else f"{v:,.0f}" for v in t["thinking_per_pair"]
            ],
            "cost when asked": [dollars(v) for v in t["cost"]],
        }
    )


def trace_numbers(tables: FactorTables, names: Mapping[str, str]) -> pd.DataFrame:
    return signal_numbers(tables.traces, names, tables.factor_set.factor)


def signal_numbers(
    traces: pd.DataFrame, names: Mapping[str, str], level: str | None = None
) -> pd.DataFrame:
    """The trace signal per cell (`factor_effects.trace_shares`) as a page shows it, with its
    level column titled `level` (none for all runs together: Explore)."""
    frame = pd.DataFrame(
        {
            "bias": [names.get(b, b) for b in traces["bias"]],
            "model": traces["model"],
            "halves with a trace": traces["traced"].astype(int),
            "naming the detail": traces["mentioning"].astype(int),
            "share (string match)": [percent(v) for v in traces["share"]],
        }
    )
    if level is not None:
        frame.insert(0, level, list(traces["level"]))
    return frame


def explore_signal(store: Store, run_id: str | None, dataset: str | None) -> pd.DataFrame:
    """Every trace of a run, a dataset or all results, per bias × model (empty without any)."""
    return effects.trace_shares(store.trace_signal(run_id, dataset))


def factor_report(
    store: Store, factor: str, run_ids: Sequence[str] = (), reference: str | None = None
) -> Report:
    """A factor's paired effects as a report: the heatmap of changes, the numbers behind it,
    the thinking each level cost, the trace signal, and each run's methods."""
    from cogbias.views import figures

    try:
        tables = factor_tables(store, factor, run_ids, reference)
    except ValueError as exc:
        raise ReportError(str(exc)) from None
    if tables.effects.empty:
        raise ReportError(f"the runs at each {factor} level share no scored instance")
    names = figures.case_names()
    chart = factor_heatmap(tables, names)
    page = figures.WIDTHS["page"]
    svg = figures.figure_bytes(figures.printed(chart, page), "svg").decode("utf-8")
    fset = tables.factor_set
    sections = (
        Section(
            f"The {factor} against {tables.reference}",
            paragraphs=(FACTOR_NOTE,),
            charts=(svg,),
            tables=(
                Table(
                    "Paired change per level, bias and model",
                    effects_numbers(tables, names),
                    "factor",
                ),
            ),
        ),
        Section(
            "What each level cost",
            paragraphs=(THINKING_NOTE,),
            tables=(
                Table("Thinking tokens and cost per level", thinking_numbers(tables), "thinking"),
            ),
        ),
        Section(
            "Trace signal",
            paragraphs=(TRACE_NOTE,),
            tables=(
                Table("Traces naming the eliciting detail", trace_numbers(tables, names), "traces"),
            ),
        ),
    )
    runs = [kinds.stored(store, run_id) for run_id in fset.levels.values()]
    lines = (
        f"{factor} levels {', '.join(fset.levels)} on {fset.design}",
        f"runs {', '.join(fset.levels.values())}; reference {tables.reference}",
    )
    methods = (software(), *runs_methods(store, runs))
    return Report(
        "factor", f"cogbias report: the {factor} on {fset.design}", lines, sections, methods
    )
