"""Paper-ready figures: the app's named charts, sized for a journal and saved as SVG or PNG.

Each figure is built from the store by the same data and chart functions as its page (no
second implementation), then restyled for print: every axis and legend label whole
(`labelLimit` 0; a long name makes the figure grow, it is never cut), legends under the
plot inside the figure, text at 10 px (7.5 pt when the figure is printed at its width), and
the plot area fitted to a journal's column: "page" is a double column, 7 in = 672 px at 96
px per inch (the default: a 30 x 10 heatmap needs it), "column" a single one, 3.5 in = 336
px. A figure whose labels cannot fit that width grows rather than cutting them.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd

from cogbias.core.errors import UserError
from cogbias.core.outputs import replacing
from cogbias.store import Store
from cogbias.views.svg import chart_png, chart_svg

WIDTHS = {"column": 336, "page": 672}  # pixels at 96 per inch: 3.5 in and 7 in
PPI = 300  # PNGs carry 300 pixels per inch: the SVG's size in print, at print resolution
FORMATS = ("svg", "png")
FONT = "Liberation Sans, Arial, Helvetica, sans-serif"  # Arial's metrics: measured as shown
LABEL_PX, TITLE_PX, CELL_PX = 10, 11, 9
ORDERS = ("average", "average_asc", "name")  # `explore.row_order`'s sorts
CHAR_PX = 5.6  # about one label character at LABEL_PX, to estimate a name's width


class FigureError(UserError):
    """A figure that cannot be made as asked: unknown name, source or format, nothing to draw."""


@dataclass(frozen=True)
class Source:
    """What a figure shows: a run or a dataset, and the choices its page offers."""

    run_id: str | None = None
    dataset: str | None = None
    models: tuple[str, ...] = ()
    by: str | None = None
    view: str = "mean"  # Explore's "Show": mean, failure_rate or n
    order: str = "average"  # Explore's "Rows": average, average_asc or name


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    needs: str  # what to pass, for --list and the errors
    build: Callable[[Store, Source, int], alt.TopLevelMixin] = field(repr=False)


def _label_px(names: Iterable[object]) -> int:
    return int(max((len(str(n)) for n in names), default=0) * CHAR_PX) + 12


def _step(
    width: int,
    labels: Iterable[object],
    columns: Sequence[object],
    smallest: int,
    largest: int,
) -> int:
    """Pixels per column: what is left of `width` beside the row labels, shared by the
    columns, less what their names tilted by 40 degrees reach out past the last column."""
    left = width - _label_px(labels)
    step = max(smallest, min(largest, left // max(len(columns), 1)))
    reach = [len(str(c)) * CHAR_PX * math.cos(math.radians(40)) for c in columns]
    while step > smallest:
        beyond = max(
            (r - (len(columns) - i - 0.5) * step for i, r in enumerate(reach)), default=0.0
        )
        if len(columns) * step + max(beyond, 0.0) <= left:
            break
        step -= 1
    return step


def case_names() -> dict[str, str]:
    """Test case id -> display name (built-in and the user's)."""
    from cogbias.library import testcases

    return {case_id: case.name for case_id, case in testcases.load_library_report().cases.items()}


def _check_source(store: Store, source: Source) -> None:
    if source.run_id is not None and store.run(source.run_id) is None:
        raise FigureError(f"no run {source.run_id} in {store.path}; see `cogbias runs`")
    if source.dataset is not None and store.dataset(source.dataset) is None:
        raise FigureError(f"no dataset {source.dataset} in {store.path}; see `cogbias datasets`")


def _nothing(what: str, source: Source) -> FigureError:
    where = (
        f"run {source.run_id}"
        if source.run_id
        else f"dataset {source.dataset}"
        if source.dataset
        else "this database"
    )
    return FigureError(f"nothing to draw: {where} has no {what}")


def _explore(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.studies import cells

    _check_source(store, source)
    table = cells.cognitive_bias_summary(store, source.run_id, source.dataset)
    if table.empty:
        raise _nothing("cognitive-bias decisions", source)
    if source.order not in ORDERS:
        raise FigureError(f"order the rows by one of {', '.join(ORDERS)}, not {source.order!r}")
    return explore_figure(table, width, source.view, source.order)


def explore_figure(
    table: pd.DataFrame, width: int, view: str = "mean", order: str = "average"
) -> alt.TopLevelMixin:
    """Explore's heatmap of a summary (`cells.cognitive_bias_summary`), sized for `width`."""
    from cogbias.views import charts_explore, explore

    rows, columns = explore.row_order(table, order), sorted(table["model"].unique())
    names = case_names()
    chart = charts_explore.explore_heatmap(table, view, rows, columns, names)
    # Two lines per cell ("+0.03*" over "(n=3)") keep ten columns inside a page's width.
    step = _step(width, [names.get(r, r) for r in rows], columns, 40, 90)
    return chart.properties(width=alt.Step(step), height=alt.Step(26))


def _compare(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.studies import analysis, cells

    _check_source(store, source)
    models = sorted({r["model"] for r in store.results(source.run_id, source.dataset)})
    if source.models:
        a, b = (source.models + ("",))[:2]
        for m in (a, b):
            if m not in models:
                raise FigureError(f"no model {m!r} here; the models are: {', '.join(models)}")
    else:  # as the Compare page opens: the first model that is not random, against random
        if len(models) < 2:
            raise _nothing("results of two models", source)
        a = ([m for m in models if m != "random"] or models)[0]
        rest = [m for m in models if m != a]
        b = "random" if "random" in rest else rest[0]
    paired = analysis.paired_frame(store.paired_scores(a, b, source.run_id, source.dataset))
    paired = paired[~paired["bias"].isin(cells.token_bias_test_cases(store))]
    if paired.empty:
        raise _nothing(f"instance scored by both {a} and {b}", source)
    return compare_figure(analysis.compare_models(paired), a, b, width)


def compare_figure(table: pd.DataFrame, a: str, b: str, width: int) -> alt.TopLevelMixin:
    """Compare's forest plot of `analysis.compare_models`' table, sized for `width`."""
    from cogbias.views import charts

    names = case_names()
    chart = charts.compare_chart(table, a, b, names)
    plot = max(200, width - _label_px(names.get(x, x) for x in table["bias"]))
    return chart.properties(width=plot)


def _summary(store: Store, source: Source) -> pd.DataFrame:
    """The Datasets page's summary: rows by display name."""
    from cogbias.studies import cells

    _check_source(store, source)
    summary = cells.heatmap_summary(store, source.run_id, source.dataset)
    if summary.empty:
        raise _nothing("decisions", source)
    names = case_names()
    return summary.assign(bias=summary["bias"].map(lambda b: names.get(b, b)))


def _figure7(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.studies import analysis
    from cogbias.views import charts

    summary = _summary(store, source)
    table = analysis.figure7_table(summary)
    step = _step(width, table.index, list(table.columns), 40, 64)
    return charts.heatmap(table, summary).properties(width=alt.Step(step))


def _figure6(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.studies import analysis
    from cogbias.views import charts

    tree = analysis.model_dendrogram(_summary(store, source))
    if len(tree.order) < 2:
        raise _nothing("two models to cluster", source)
    chart = charts.dendrogram(tree)
    names = _label_px(tree.order)
    chart.hconcat[0] = chart.hconcat[0].properties(width=names)
    chart.hconcat[0].encoding.x = alt.value(names)
    chart.hconcat[1] = chart.hconcat[1].properties(width=max(160, width - names - 20))
    return chart


def _figure5(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.llm import registry
    from cogbias.studies import analysis
    from cogbias.views import charts

    capability = analysis.capability_frame(_summary(store, source), registry.load_models())
    if not capability["arena_score"].notna().any():
        raise _nothing("model with a capability score in the registry", source)
    plot = max(240, width - 80)
    return charts.bubbles(capability).properties(width=plot, height=int(plot * 0.62))


def _study(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.runs import study_results
    from cogbias.views import charts_studies

    if source.run_id is None:
        raise FigureError("the study heatmap needs --run with a study run's id")
    _check_source(store, source)
    table = study_results.results(store, source.run_id)
    if table.empty:
        raise _nothing("answers", source)
    dimensions = list(charts_studies.PIVOT_LABELS)
    varying = [d for d in dimensions if table[d].nunique() > 1]
    by = source.by or (varying[0] if varying else dimensions[0])
    if by not in dimensions:
        raise FigureError(f"pivot the study heatmap by one of {', '.join(dimensions)}, not {by!r}")
    return study_figure(table, by, width)


def study_figure(table: pd.DataFrame, by: str, width: int) -> alt.TopLevelMixin:
    """The Studies heatmap of a study run's cells (`study_results.results`), one column per
    value of `by`, sized for `width`."""
    from cogbias.views import charts_studies

    frame = charts_studies.heatmap_frame(table, by)
    columns = charts_studies.column_order(table, by)
    step = _step(width, frame["row"], columns, 44, 110)
    return charts_studies.study_heatmap(table, by).properties(width=alt.Step(step))


def _mohr(store: Store, source: Source, width: int) -> alt.TopLevelMixin:
    from cogbias.studies import effect_tables
    from cogbias.views.charts_effects import effects_heatmap

    if source.dataset is None:
        raise FigureError("the Mohr heatmap needs --dataset with an imported Mohr dataset")
    _check_source(store, source)
    by = source.by or effect_tables.PIVOTS[0]
    if by not in effect_tables.PIVOTS:
        raise FigureError(f"pivot the Mohr heatmap by one of {', '.join(effect_tables.PIVOTS)}")
    frame = effect_tables.load_effects(store, source.dataset)
    if frame.empty:
        raise _nothing("published effect sizes", source)
    long = effect_tables.heatmap_frame(frame, by=by, how="thesis")
    chart = effects_heatmap(long, column_title=by)
    columns = list(dict.fromkeys(long["column"]))
    step = _step(width - 60, long["bias"].unique(), columns, 34, 64)
    chart.hconcat[0] = chart.hconcat[0].properties(width=alt.Step(step))
    chart.hconcat[1] = chart.hconcat[1].properties(width=alt.Step(48))
    return chart


FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        Figure("explore-heatmap", "Explore's bias x model heatmap of mean scores",
               "--run or --dataset (neither: every result)", _explore),
        Figure("compare-forest", "Compare's paired differences of two models, per bias",
               "--run or --dataset, --models A B (default: as the page)", _compare),
        Figure("figure7-heatmap", "Figure 7: mean score per bias and model, with averages",
               "--dataset or --run", _figure7),
        Figure("figure6-dendrogram", "Figure 6: models clustered by their biases",
               "--dataset or --run", _figure6),
        Figure("figure5-bubbles", "Figure 5: biasedness against capability and size",
               "--dataset or --run", _figure5),
        Figure("study-heatmap", "Studies: a study run's headline values",
               "--run STUDY_RUN, --by mitigation|temperature|variant|model", _study),
        Figure("mohr-heatmap", "Mohr thesis: published effect sizes with homogeneity",
               "--dataset MOHR_DATASET, --by model|temperature|scenario", _mohr),
    )
}  # fmt: skip


def figure_chart(
    name: str,
    store: Store,
    *,
    run_id: str | None = None,
    dataset: str | None = None,
    width: str = "page",
    models: Sequence[str] = (),
    by: str | None = None,
    view: str = "mean",
    order: str = "average",
) -> alt.TopLevelMixin:
    """The named figure of a run or dataset in `store`, print-styled and sized for `width`.

    `models` (A, B) is for compare-forest, `by` the columns of study-heatmap and mohr-heatmap,
    `view` and `order` Explore's "Show" and "Rows"; each defaults to what its page opens on.
    """
    figure = FIGURES.get(name)
    if figure is None:
        raise FigureError(f"no figure {name!r}; the figures are: {', '.join(FIGURES)}")
    if width not in WIDTHS:
        raise FigureError(f"width {width!r}: use one of {', '.join(WIDTHS)}")
    if run_id is not None and dataset is not None:
        raise FigureError("give --run or --dataset, not both")
    source = Source(run_id, dataset, tuple(models), by, view, order)
    return printed(figure.build(store, source, WIDTHS[width]), WIDTHS[width])


def printed(chart: alt.TopLevelMixin, width: int = WIDTHS["page"]) -> alt.TopLevelMixin:
    """`chart` restyled for print: labels whole, print font sizes, one font measured as shown."""
    spec = chart.to_dict(validate=False)  # validated once, when it is rendered
    _restyle(spec, width)
    spec["config"] = {
        **spec.get("config", {}),
        "font": FONT,
        "axis": {"labelLimit": 0, "labelFontSize": LABEL_PX, "titleFontSize": TITLE_PX},
        "legend": {
            "labelLimit": 0,
            "labelFontSize": LABEL_PX,
            "titleFontSize": TITLE_PX,
            "titleLimit": 0,
            "orient": "bottom",
        },  # fmt: skip
        # numbers on a narrow axis: drop every other one rather than let "-2.0-1.5" touch
        "axisQuantitative": {"labelOverlap": "greedy", "labelSeparation": 4},
        "text": {"fontSize": CELL_PX},
        "view": {"stroke": None},
    }
    spec["padding"] = 4
    return type(chart).from_dict(spec, validate=False)


def _wrapped(title: str, width: int) -> str | list[str]:
    """A title longer than the figure is wide, as lines broken at spaces (Vega draws a list
    as lines), so a long model name in it grows the figure down, not sideways."""
    most = max(20, int(width / (TITLE_PX * 0.6)))
    if len(title) <= most:
        return title
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= most:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _restyle(node: Any, width: int) -> None:
    """Walk the Vega-Lite spec: every explicit axis/legend label limit lifted, long titles
    wrapped, text marks at the print size, and cell labels with a double space in two lines."""
    if isinstance(node, list):
        for item in node:
            _restyle(item, width)
        return
    if not isinstance(node, dict):
        return
    for key in ("axis", "legend"):
        part = node.get(key)
        if isinstance(part, dict):
            part.update(labelLimit=0, labelFontSize=LABEL_PX, titleFontSize=TITLE_PX)
            if isinstance(part.get("title"), str):
                part["title"] = _wrapped(part["title"], width)
    if isinstance(node.get("field"), str) and isinstance(node.get("title"), str):
        node["title"] = _wrapped(node["title"], width)  # an encoding channel's title
    if node.get("mark") == "text":
        node["mark"] = {"type": "text"}
    if isinstance(node.get("mark"), dict) and node["mark"].get("type") == "text":
        node["mark"]["fontSize"] = CELL_PX
    if isinstance(node.get("layer"), list):
        node["layer"] = [part for layer in node["layer"] for part in _line_broken(layer)]
    for value in node.values():
        _restyle(value, width)


def _line_broken(layer: Any) -> list[Any]:
    """A text layer as two: labels with a double space broken there into two lines and
    raised half a line (Vega puts a label's first line, not the block, at the anchor), the
    others as they were. A cell's "+0.03*  (n=3)" then fits a narrow print column."""
    mark = layer.get("mark") if isinstance(layer, dict) else None
    field = layer.get("encoding", {}).get("text", {}).get("field") if mark else None
    if not isinstance(mark, dict) or mark.get("type") != "text" or not isinstance(field, str):
        return [layer]
    broken = f"indexof(datum[{json.dumps(field)}], '  ') >= 0"
    one, two = copy.deepcopy(layer), copy.deepcopy(layer)
    one.setdefault("transform", []).append({"filter": f"!({broken})"})
    two.setdefault("transform", []).append({"filter": broken})
    two["mark"].update(lineBreak="  ", dy=-(CELL_PX + 2) / 2)  # Vega's line height: size + 2
    return [one, two]


def figure_bytes(chart: alt.TopLevelMixin, fmt: str) -> bytes:
    """The chart as an SVG document or a PNG at 300 px per inch (the SVG's printed size)."""
    if fmt == "svg":
        return chart_svg(chart).encode("utf-8")
    if fmt == "png":
        # vl-convert scales by ppi / 72 itself: 0.75 x 300 / 72 = 300 / 96, the SVG at 300 ppi
        return chart_png(chart, scale=72 / 96, ppi=PPI)
    raise FigureError(f"a figure is saved as {' or '.join(FORMATS)}, not {fmt!r}")


def figure_format(path: str | Path) -> str:
    """svg or png, from the file name's suffix."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise FigureError(
            f"{path}: a figure file ends in .svg or .png (the format is read from the suffix)"
        )
    return suffix


def save_figure(
    chart: alt.TopLevelMixin,
    path: str | Path,
    force: bool = False,
    protect: Iterable[str | Path | None] = (),
) -> Path:
    """Write the chart to `path` as SVG or PNG by its suffix; whole or not at all."""
    data = figure_bytes(chart, figure_format(path))
    with replacing(path, force=force, protect=protect) as temporary:
        temporary.write_bytes(data)
    return Path(path)
