"""Every heatmap of the app names every column and keeps its legends under the chart.

Streamlit's chart theme sets `labelOverlap: true`, so Vega hides category labels that would
touch (the Mohr heatmap named 5 of its 10 models), and a legend on the right of a wide chart
is cut off at the page's edge. Each chart spec is walked here: every band axis must say
`labelOverlap: false` (or show no labels at all) and every colour legend must sit under or
over the chart. The coefficient tables' formatter keeps the digits a small coefficient needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cogbias.views import charts, charts_effects, charts_explore, charts_studies, charts_tokenbias
from cogbias.views.coefficients import coefficient_table, significant

MODELS = [
    "claude-3-5-sonnet-20240620", "gpt-4o-mini-2024-07-18", "llama3.1:8b", "gemma2:27b",
    "mistral-nemo:12b", "qwen2.5:32b", "phi3.5:3.8b", "gpt-4o-2024-08-06", "llama3.1:70b",
    "deepseek-v2.5",
]  # fmt: skip
SCENARIOS = ["0_normal", "1_persona", "2_odd_numbers", "3_persona_odd_numbers"]
BIASES = ["anchoring", "framing_effect", "loss_aversion"]


def band_axes(spec: Any) -> Iterator[tuple[str, str, Any]]:
    """(channel, field, axis) of every nominal/ordinal x or y encoding anywhere in `spec`."""
    if isinstance(spec, dict):
        for channel, encoding in (spec.get("encoding") or {}).items():
            if channel in ("x", "y") and encoding.get("type") in ("nominal", "ordinal"):
                yield channel, encoding.get("field", ""), encoding.get("axis", {})
        for value in spec.values():
            yield from band_axes(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from band_axes(value)


def colour_legends(spec: Any) -> Iterator[dict[str, Any]]:
    if isinstance(spec, dict):
        colour = (spec.get("encoding") or {}).get("color")
        if isinstance(colour, dict) and "field" in colour:
            yield colour.get("legend") or {}
        for value in spec.values():
            yield from colour_legends(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from colour_legends(value)


def effects_long(columns: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = [(b, c, float(rng.uniform())) for b in BIASES for c in columns]
    long = pd.DataFrame(rows, columns=["bias", "column", "value"])
    return long.assign(
        homogeneity=long["bias"].map(dict(zip(BIASES, [0.2, 0.5, 0.9], strict=True)))
    )


def explore_summary() -> pd.DataFrame:
    cells = [(b, m) for b in BIASES for m in MODELS]
    n = len(cells)
    return pd.DataFrame(
        {
            "bias": [b for b, _ in cells], "model": [m for _, m in cells],
            "mean": np.linspace(-0.9, 0.9, n), "n": [12] * n, "failures": [0] * n,
            "failure_rate": [0.0] * n, "ci_low": [-0.1] * n, "ci_high": [0.1] * n,
            "p_adjusted": [0.5] * n, "significant": [False] * n,
        }
    )  # fmt: skip


def study_table() -> pd.DataFrame:
    rows = [
        {"run_id": "r1", "test": t, "metric": "rate_difference", "mitigation": "none",
         "temperature": 0.7, "variant": "base", "model": m, "value": 0.25, "degenerate": False,
         "note": None, "n": 20, "a": 0.5, "b": 0.25, "neutral_share": 0.0, "ci_low": 0.0,
         "ci_high": 0.5, "p_value": 0.1, "unreadable": 0, "failed": 0}
        for t in BIASES for m in MODELS
    ]  # fmt: skip
    return pd.DataFrame(rows)


def tokenbias_table() -> pd.DataFrame:
    rows = [
        {"hypothesis": h, "model": m, "prompting": "zero-shot", "n12": 5, "n21": 9,
         "n_star": 14, "z": 1.07, "p_adjusted": 0.3, "reject": False}
        for h in ("H1 names", "H2 quantifiers") for m in MODELS
    ]  # fmt: skip
    return pd.DataFrame(rows)


def all_charts() -> dict[str, Any]:
    figure7 = pd.DataFrame(
        np.linspace(-1, 1, len(BIASES) * len(MODELS)).reshape(len(BIASES), len(MODELS)),
        index=BIASES,
        columns=MODELS,
    )
    compare = pd.DataFrame(
        {"bias": BIASES, "significant": [True, False, False], "ci_low": [-0.2] * 3,
         "ci_high": [0.4] * 3, "mean_diff": [0.1] * 3, "n": [20] * 3, "mean_a": [0.3] * 3,
         "mean_b": [0.2] * 3, "p_adjusted": [0.01, 0.4, 0.9]}
    )  # fmt: skip
    return {
        "effects by model": charts_effects.effects_heatmap(effects_long(MODELS), "model"),
        "effects by scenario": charts_effects.effects_heatmap(effects_long(SCENARIOS), "scenario"),
        "figure 7": charts.heatmap(figure7),
        "compare": charts.compare_chart(compare, MODELS[0], MODELS[1]),
        "explore": charts_explore.explore_heatmap(explore_summary(), "mean", BIASES, MODELS),
        "study": charts_studies.study_heatmap(study_table(), "model"),
        "token bias rejections": charts_tokenbias.rejection_heatmap(tokenbias_table()),
        "token bias bars": charts_tokenbias.discordant_bars(tokenbias_table()),
    }


@pytest.mark.parametrize("name", list(all_charts()))
def test_every_band_axis_labels_every_category(name: str) -> None:
    spec = all_charts()[name].to_dict()
    axes = list(band_axes(spec))
    assert axes, f"{name}: no band axis found (the walk would check nothing)"
    for channel, field, axis in axes:
        if axis is None or axis.get("labels") is False:
            continue  # an axis that shows no labels hides none
        assert axis.get("labelOverlap") is False, f"{name}: {channel} ({field}) drops labels"
        assert axis.get("labelLimit", 0) >= 200, f"{name}: {channel} ({field}) cuts long names"


@pytest.mark.parametrize("name", list(all_charts()))
def test_every_colour_legend_sits_under_or_over_the_chart(name: str) -> None:
    legends = list(colour_legends(all_charts()[name].to_dict()))
    assert legends, f"{name}: no colour legend found"
    for legend in legends:
        assert legend.get("orient") in ("bottom", "top"), f"{name}: legend {legend} on the side"


def test_effect_heatmap_tilts_long_model_names_and_fits_ten_models() -> None:
    spec = charts_effects.effects_heatmap(effects_long(MODELS), "model").to_dict()
    cells = spec["hconcat"][0]
    x = cells["layer"][0]["encoding"]["x"]
    assert x["sort"] == MODELS and x["axis"]["labelAngle"] != 0
    assert cells["width"]["step"] * len(MODELS) <= charts_effects.CELLS_WIDTH
    assert cells["width"]["step"] >= charts_effects.STEP_RANGE[0]
    by_scenario = charts_effects.effects_heatmap(effects_long(["0.2", "1"]), "temperature")
    assert (
        by_scenario.to_dict()["hconcat"][0]["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == 0
    )  # short labels stay upright


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.000123456, "+0.000123"),
        (-2.5e-6, "-2.50e-06"),
        (0.0312, "+0.0312"),
        (12.345, "+12.3"),
        (2.0e7, "+2.00e+07"),
        (0.0, "0"),
        (float("nan"), "–"),
    ],
)
def test_significant_keeps_three_digits_of_any_magnitude(value: float, shown: str) -> None:
    assert significant(value) == shown


def test_a_tiny_coefficient_shows_nonzero_digits_in_every_column() -> None:
    table = pd.DataFrame(
        {"term": ["Intercept", "release_days"], "coef": [0.41, 0.000184],
         "std_err": [0.05, 0.0000612], "t": [8.2, 3.01], "p": [1e-9, 0.0031],
         "ci_low": [0.31, 0.0000640], "ci_high": [0.51, 0.000304]}
    )  # fmt: skip
    shown = coefficient_table(table).set_index("term").loc["release_days"]
    assert shown["coefficient"] == "+0.000184"
    assert shown["std. error"] == "6.12e-05"
    assert shown["95% CI"] == "+6.40e-05 … +0.000304"
    for text in shown[["coefficient", "std. error", "95% CI"]]:
        assert any(digit in text for digit in "123456789"), text
    assert float(shown["coefficient"]) == pytest.approx(0.000184)


def test_study_heatmap_tilts_long_model_names_and_narrows_its_columns() -> None:
    by_model = charts_studies.study_heatmap(study_table(), "model").to_dict()
    x = by_model["layer"][0]["encoding"]["x"]
    assert x["axis"]["labelAngle"] != 0 and x["axis"]["labelOverlap"] is False
    assert by_model["width"]["step"] * len(MODELS) <= charts_studies.CELLS_WIDTH
    by_test = study_table().query("model == 'llama3.1:8b'")
    upright = charts_studies.study_heatmap(by_test, "model").to_dict()
    assert upright["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == 0
    assert upright["width"]["step"] == charts_studies.STEP_RANGE[1]  # one column, full width


def test_explore_heatmap_fits_ten_models_and_keeps_two_names_upright() -> None:
    """The cells share one width: ten long model names are tilted into narrow columns, while
    the demo's two models get columns wide enough to name them upright (both were tilted and
    a page of many models ran off the screen)."""
    ten = charts_explore.explore_heatmap(explore_summary(), "mean", BIASES, MODELS).to_dict()
    x = ten["layer"][0]["encoding"]["x"]
    assert x["axis"]["labelAngle"] != 0 and x["axis"]["orient"] == "top"
    assert ten["width"]["step"] * len(MODELS) <= charts_explore.CELLS_WIDTH
    assert ten["width"]["step"] >= charts_explore.STEP_RANGE[0]
    demo = ["local/smollm2", "random"]
    renamed = dict(zip(MODELS[:2], demo, strict=True))
    two = explore_summary().query("model in @MODELS[:2]").replace(renamed)
    upright = charts_explore.explore_heatmap(two, "mean", BIASES, demo).to_dict()
    assert upright["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == 0
    assert upright["width"]["step"] == charts_explore.STEP_RANGE[1]


def test_figure7_heatmap_narrows_its_columns_for_many_models() -> None:
    table = pd.DataFrame(0.1, index=BIASES, columns=MODELS)
    spec = charts.heatmap(table).to_dict()
    step = spec["width"]["step"]
    assert step * len(MODELS) <= charts.FIGURE7_WIDTH and step >= charts.FIGURE7_STEP[0]
    assert spec["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] != 0
