"""Reports: the results of a paired run, a study run, a dataset, two models compared or a
class session (`views/report_class.py`), as one `Report` (`views/report_parts.py`) that
`views/report_html.py` writes as a single HTML file.

Each builder reads the store through the functions the pages use (Explore's summary,
Compare's paired differences, a study run's scored cells, the humans beside them), draws the
page's own charts offline (`views/figures.py`) and keeps the numbers behind every chart as a
table, so a report says what the app and `cogbias results` say. The methods come from the
stored spec (`views/report_methods.py`).

A new kind of report is one more builder returning a `Report` and one line in `REPORTS`:
the HTML, `cogbias report` and the pages' download take any `Report` as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import altair as alt
import pandas as pd

from cogbias.core.run_record import ResultsPage
from cogbias.runs import kinds, study_results, summaries
from cogbias.store import Store
from cogbias.studies import analysis, cells, paper_results
from cogbias.views import (
    charts_studies,
    explore,
    figures,
    pair_tables,
    references_view,
    study_views,
)
from cogbias.views import paper_results as paper_views
from cogbias.views.factor_view import factor_report
from cogbias.views.report_class import class_report
from cogbias.views.report_methods import dataset_methods, run_methods, runs_methods, software
from cogbias.views.report_parts import Report, ReportError, Section, Table
from cogbias.views.svg import chart_svg

HEATMAP_NOTE = (
    "Mean score per cell, from -1 to 1: positive (red) means the model shows the bias, "
    "negative (blue) the opposite effect. * and a dashed frame: significantly different from 0 "
    "(t-test, Benjamini–Hochberg adjusted p < 0.05 across the table). Grey: no scored pair. "
    "The null (uniform answers) is a cell's mean if both halves were answered uniformly at "
    "random; significance is tested against 0, as in the paper."
)
COMPARE_NOTE = (
    "Where the two models answered the same instances, the difference of their scores on each "
    "instance, per bias: its mean, a 95% t-interval (truncated to [-2, 2]) and a Wilcoxon "
    "signed-rank test, Benjamini–Hochberg adjusted across biases. Right of the dashed line: "
    "model A scores higher (more biased in the test's direction) than model B."
)
STUDY_NOTE = (
    "Headline value of each test's metric per cell (test × model × temperature × variant × "
    "mitigation); red always means more biased (the anchoring distance is coloured by its "
    "negative); * marks a degenerate cell (under 1% admitted or rejected). Empty: too few "
    "readable answers."
)
HUMANS_NOTE = (
    "What people answered in the original experiments beside this run's answers to the same "
    "question: the share choosing the option named (or the median), 95% intervals, the "
    "difference model − humans and Cohen's h."
)
PAPER_NOTE = (
    "Printed in the paper for its own models and prompts, in the same units as this run; "
    "cogbias asks the same design in its own words, so read the two side by side."
)
MAX_HUMAN_CHARTS = 6  # one chart per cell beside the humans; the table holds every cell


def figure_svg(chart: alt.TopLevelMixin) -> str:
    """A figure of `views/figures.py` (the page's chart, built from the numbers the report
    already holds), print-styled at a page's width, as SVG text."""
    page = figures.WIDTHS["page"]
    return figures.figure_bytes(figures.printed(chart, page), "svg").decode("utf-8")


def _with_ids(frame: pd.DataFrame, ids: Sequence[str]) -> pd.DataFrame:
    """A page's table with the test case id beside the display name (as `cogbias results`)."""
    out = frame.copy()
    out.insert(1, "id", list(ids))
    return out


def _heatmap_section(store: Store, run_id: str | None, dataset: str | None) -> Section:
    summary = cells.cognitive_bias_summary(store, run_id=run_id, dataset=dataset)
    if summary.empty:
        what = f"run {run_id}" if run_id else f"dataset {dataset}"
        raise ReportError(
            f"{what} has no scored cognitive-bias decisions yet (token-bias and effect-size "
            "results have their own pages); nothing to report"
        )
    table = cells.with_uniform_null(store, summary, run_id=run_id, dataset=dataset)
    names = figures.case_names()
    chart = figure_svg(figures.explore_figure(summary, figures.WIDTHS["page"]))
    numbers = _with_ids(explore.numbers_table(table, names), table["bias"])
    return Section(
        "Bias × model: mean scores",
        paragraphs=(HEATMAP_NOTE,),
        charts=(chart,),
        tables=(Table("The numbers behind the heatmap", numbers, "scores"),),
    )


def _run_summary(store: Store, run_id: str) -> tuple[str, ...]:
    run = kinds.stored(store, run_id)
    models = ", ".join(str(m) for m in run.spec.get("models") or [])
    return (
        f"Run {run.id}" + (f" “{run.name}”" if run.name else "") + f", {run.status}",
        f"Models: {models}",
        f"{run.done:,} of {run.planned:,} units done, {run.failed:,} failed; "
        f"{run.tokens or 0:,} tokens; cost {summaries.cost_text(run)}",
    )


def paired_report(store: Store, run_id: str) -> Report:
    """A paired, dataset or token-bias run: its heatmap, numbers and methods."""
    run = kinds.stored(store, run_id)
    title = f"cogbias report: run {run.name or run_id}"
    return Report(
        "run",
        title,
        _run_summary(store, run_id),
        (_heatmap_section(store, run_id, None),),
        (software(), *run_methods(store, run_id)),
    )


def dataset_report(store: Store, name: str) -> Report:
    """Every decision on a dataset (published and run): heatmap, numbers, origin, runs."""
    row = next((d for d in store.datasets() if d["name"] == name), None)
    if row is None:
        known = ", ".join(d["name"] for d in store.datasets()[:5]) or "none"
        raise ReportError(f"no dataset {name} in {store.path} (datasets: {known})")
    summary = (
        f"Dataset {name} ({row.get('kind') or 'imported'}), {row.get('rows') or 0:,} rows, "
        f"imported {row.get('imported_at') or '–'}",
    )
    return Report(
        "dataset",
        f"cogbias report: dataset {name}",
        summary,
        (_heatmap_section(store, None, name),),
        (software(), *dataset_methods(store, name)),
    )


def compare_report(
    store: Store, model_a: str, model_b: str, run_id: str | None = None, dataset: str | None = None
) -> Report:
    """Two models on the same instances: paired differences per bias, and each model's
    scores (`cogbias results`' numbers for the two)."""
    if run_id:
        kinds.stored(store, run_id)
    models = {r["model"] for r in store.results(run_id, dataset)}
    missing = [m for m in (model_a, model_b) if m not in models]
    if missing or model_a == model_b:
        said = "two different models" if model_a == model_b else f"no results of {missing[0]}"
        raise ReportError(f"{said} here; models with results: {', '.join(sorted(models))}")
    paired = analysis.paired_frame(store.paired_scores(model_a, model_b, run_id, dataset))
    paired = paired[~paired["bias"].isin(cells.token_bias_test_cases(store))]
    if paired.empty:
        raise ReportError(f"{model_a} and {model_b} share no scored instance here")
    table = analysis.compare_models(paired)
    names = figures.case_names()
    chart = figure_svg(figures.compare_figure(table, model_a, model_b, figures.WIDTHS["page"]))
    numbers = _with_ids(pair_tables.compare_numbers(table, model_a, model_b, names), table["bias"])
    compared = Section(
        f"{model_a} (A) against {model_b} (B)",
        paragraphs=(COMPARE_NOTE,),
        charts=(chart,),
        tables=(Table("Paired differences per bias", numbers, "compare"),),
    )
    summary = cells.cognitive_bias_summary(store, run_id=run_id, dataset=dataset)
    summary = summary[summary["model"].isin([model_a, model_b])].reset_index(drop=True)
    each = Section(
        "Each model's scores",
        paragraphs=("All scored pairs of each model here, shared or not.",),
        tables=(
            Table(
                "Mean score per bias and model",
                _with_ids(explore.numbers_table(summary, names), summary["bias"]),
                "scores",
            ),
        ),
    )
    where = f"run {run_id}" if run_id else (f"dataset {dataset}" if dataset else "all results")
    lines = (f"{model_a} against {model_b} on {where}", f"{len(paired):,} shared instances")
    methods = _compare_methods(store, run_id, dataset)
    return Report(
        "compare", f"cogbias report: {model_a} vs {model_b}", lines, (compared, each), methods
    )


def _compare_methods(store: Store, run_id: str | None, dataset: str | None) -> tuple[Section, ...]:
    if run_id:
        return (software(), *run_methods(store, run_id))
    if dataset:
        return (software(), *dataset_methods(store, dataset))
    behind = explore.runs_behind(kinds.records(store), store.datasets())
    return (software(), *runs_methods(store, behind))


def study_report(store: Store, run_id: str) -> Report:
    """A study run: its headline heatmap and figures, the humans and the paper beside it."""
    run = kinds.stored(store, run_id)
    if not study_results.is_study(run):
        raise ReportError(f"run {run_id} is {kinds.described(run)}, not a study run")
    table = study_results.results(store, run_id)
    if table.empty:
        raise ReportError(f"run {run_id} has no answers stored yet; nothing to report")
    dimensions = list(charts_studies.PIVOT_LABELS)
    by = next((d for d in dimensions if table[d].nunique() > 1), dimensions[0])
    pivot = study_views.pivot_data(table, by)
    headline = Section(
        "Headline values",
        paragraphs=(STUDY_NOTE,),
        charts=(figure_svg(figures.study_figure(table, by, figures.WIDTHS["page"])),),
        tables=(
            Table(f"Headline value per test, one column per {by}", pivot, "pivot"),
            Table("All figures per cell", study_views.figures_table(table), "figures"),
        ),
    )
    study = study_results.study_of_run(store, run_id).id
    sections = [headline, *_humans(store, run_id), *_paper_models(table, study)]
    return Report(
        "study",
        f"cogbias report: study run {run.name or run_id} ({study})",
        _run_summary(store, run_id),
        tuple(sections),
        (software(), *run_methods(store, run_id)),
    )


def _humans(store: Store, run_id: str) -> list[Section]:
    frame = study_results.comparison(store, run_id)
    if frame.empty:
        return []
    charts = []
    for cell in list(dict.fromkeys(references_view.cell_label(r) for r in frame.itertuples()))[
        :MAX_HUMAN_CHARTS
    ]:
        shown = frame[[references_view.cell_label(r) == cell for r in frame.itertuples()]]
        chart = references_view.share_chart(shown)
        if chart is not None:
            charts.append(chart_svg(figures.printed(chart)))
    return [
        Section(
            "Beside the humans",
            paragraphs=(HUMANS_NOTE,),
            charts=tuple(charts),
            tables=(Table("Model and humans", references_view.shown_comparison(frame), "humans"),),
            items=tuple(references_view.citations(frame)),
        )
    ]


def _paper_models(table: pd.DataFrame, study: str) -> list[Section]:
    sections = []
    for result in paper_results.for_study(study):
        if result.kind != "biasbuster_table3":
            continue
        run = paper_views.table3_of_run(table)
        frame = pd.concat([run, paper_views.table3_rows(result)], ignore_index=True)
        sections.append(
            Section(
                f"The paper's own models: {result.title}",
                paragraphs=(PAPER_NOTE, f"Source: {result.cited}"),
                charts=(chart_svg(figures.printed(paper_views.table3_chart(frame))),),
                tables=(
                    Table("Table 3 beside this run", paper_views.table3_shown(frame), "paper"),
                ),
            )
        )
    return sections


def cells_report(store: Store, run_id: str) -> Report:
    """A run of a kind shown on no page: its cells (its kind's `cells`) and its methods."""
    run = kinds.stored(store, run_id)
    table = kinds.of(run).cells(store, run)
    if table.empty:
        raise ReportError(f"run {run_id} has no results stored yet; nothing to report")
    cells_section = Section(
        "Results", tables=(Table("Its results, one row per cell", table, "cells"),)
    )
    return Report(
        "run",
        f"cogbias report: run {run.name or run_id}",
        _run_summary(store, run_id),
        (cells_section,),
        (software(), *run_methods(store, run_id)),
    )


def session_report(store: Store, run_id: str) -> Report:
    """A class run's report: its session's (the class, the humans and every model beside)."""
    return class_report(store, str(kinds.stored(store, run_id).spec.get("session")))


# the report of a run shown on each page (its page's own charts); any other: `cells_report`
PAGE_REPORTS: dict[ResultsPage, Callable[[Store, str], Report]] = {
    ResultsPage.EXPLORE: paired_report,
    ResultsPage.STUDIES: study_report,
    ResultsPage.CLASS: session_report,
}


def run_report(store: Store, run_id: str) -> Report:
    """The report of one run, as the page that shows its kind's results draws them (a class
    run's is its session's)."""
    page = kinds.of(kinds.stored(store, run_id)).page
    report = PAGE_REPORTS.get(page) if page is not None else None
    return (report or cells_report)(store, run_id)


# kind -> builder; a new kind of report is one more entry (see the module docstring)
REPORTS: dict[str, Callable[..., Report]] = {
    "run": run_report,
    "dataset": dataset_report,
    "compare": compare_report,
    "class": class_report,  # views/report_class.py
    "factor": factor_report,  # views/factor_view.py
}


def build(kind: str, store: Store, **what: Any) -> Report:
    """The report of `kind` (a key of `REPORTS`) for `what` (its builder's arguments)."""
    if kind not in REPORTS:
        raise ReportError(f"unknown report kind {kind!r}; use one of {', '.join(REPORTS)}")
    return REPORTS[kind](store, **what)
