"""The Datasets page on the Mohr thesis' published effect sizes, driven with AppTest.

The fixture folder is imported into a real database (through the page's Import tab, or with
`import_mohr`), and what the page shows is checked against the CSV and the library.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from cogbias.datasets import bias_id, import_mohr
from cogbias.store import Store
from cogbias.studies import effect_tables, regression
from cogbias.views.coefficients import significant
from tests.dataset_helpers import FIXTURES, MOHR_DIR, write_rows
from tests.test_page_datasets import button, page, texts

FIXTURE = MOHR_DIR


@pytest.fixture
def db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DB", str(path))
    # the app imports only from importable folders: the fixtures and this test's own files
    monkeypatch.setenv("COGBIAS_IMPORT_DIRS", os.pathsep.join([str(FIXTURES), str(tmp_path)]))
    return path


@pytest.fixture
def imported(db) -> Path:
    with Store(db) as store:
        import_mohr(store, FIXTURE)
    return db


def heatmap_cells(at: AppTest) -> pd.DataFrame:
    """The data behind the effect heatmap's cells (the first chart of the hconcat; the
    Reference results tab draws a chart of its own on the same page)."""
    (chart,) = [c for c in at.get("vega_lite_chart") if "hconcat" in json.loads(c.proto.spec)]
    spec = json.loads(chart.proto.spec)
    name = spec["hconcat"][0]["data"]["name"]
    data = next(d for d in chart.proto.datasets if d.name == name)
    assert (
        spec["hconcat"][0]["layer"][0]["encoding"]["x"]["title"] == at.radio(key="ds_eff_by").value
    )
    return pa.ipc.open_stream(data.data.data).read_pandas()


def as_cells(cells: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(r.bias, r.column): r.value for r in cells.itertuples()}


def csv_means(by: str) -> dict[tuple[str, str], float]:
    """bias × `by` mean of bias_detected_mod, straight from the CSV (biases keyed by id)."""
    raw = pd.read_csv(FIXTURE / "bias_detections.csv", dtype={"temperature": str})
    raw["temperature"] = raw["temperature"].map(lambda t: f"{float(t):g}")
    means = raw.groupby([raw["bias"].map(bias_id), by])["bias_detected_mod"].mean()
    return {key: float(v) for key, v in means.items()}


def analysis_dataframes(at: AppTest) -> list[pd.DataFrame]:
    return [d.value for d in at.dataframe]


def test_import_the_folder_then_pivot_the_heatmap(db):
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("mohr2025").run()
    at.text_input(key="ds_path").set_value(str(FIXTURE)).run()
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    assert "16 effect sizes of 2 model(s)" in texts(at)
    assert at.selectbox(key="ds_current").value == "mohr2025"

    assert at.radio(key="ds_eff_by").value == "model"
    # the page opens on the thesis' Figure 2 and says so under the chart
    assert at.radio(key="ds_eff_how").value == "thesis"
    assert "Showing the thesis view (the thesis' Figure 2): per bias × model" in texts(at)
    with Store(db) as store:
        thesis = effect_tables.thesis_table(effect_tables.load_effects(store, "mohr2025"))
    assert as_cells(heatmap_cells(at)) == pytest.approx(
        {key: v for key, v in thesis.stack().items()}, nan_ok=True
    )

    at.radio(key="ds_eff_how").set_value("mean").run()
    assert "Showing the mean view: per bias × model, the plain mean" in texts(at)
    by_model = as_cells(heatmap_cells(at))
    assert by_model == pytest.approx(csv_means("model"))
    assert {c for _, c in by_model} == {"model-a", "model-b:7b"}

    at.radio(key="ds_eff_by").set_value("temperature").run()
    assert not at.exception
    by_temperature = as_cells(heatmap_cells(at))
    assert {c for _, c in by_temperature} == {"0.2", "1"}
    assert by_temperature == pytest.approx(csv_means("temperature"))

    at.radio(key="ds_eff_by").set_value("scenario").run()
    assert {c for _, c in as_cells(heatmap_cells(at))} == {"0_normal", "1_persona"}
    assert as_cells(heatmap_cells(at)) == pytest.approx(csv_means("scenario"))


def test_thesis_aggregate_cells_are_the_weighted_then_capped_means(imported):
    at = page()
    at.radio(key="ds_eff_by").set_value("temperature").run()  # the cells: thesis by default
    assert not at.exception
    with Store(imported) as store:
        frame = effect_tables.load_effects(store, "mohr2025")
    expected = effect_tables.thesis_table(frame, "temperature")
    cells = as_cells(heatmap_cells(at))
    assert cells == pytest.approx(
        {(b, f"{t:g}"): v for (b, t), v in expected.stack().items()}, nan_ok=True
    )
    # the two ways differ on this fixture, so the radio really switches the chart's data
    assert cells != pytest.approx(csv_means("temperature"))
    assert "inverse-variance weighted mean of Cohen's d over the other dimensions" in texts(at)


def test_homogeneity_and_the_two_regressions(imported):
    at = page()
    assert not at.exception
    with Store(imported) as store:
        frame = effect_tables.load_effects(store, "mohr2025")
        features = regression.published_features(store, ["mohr2025"])
    homogeneity = effect_tables.homogeneity_by_bias(frame)
    tables = analysis_dataframes(at)
    shown = next(t for t in tables if "homogeneity" in t.columns)
    assert dict(zip(shown["bias"], shown["homogeneity"], strict=True)) == pytest.approx(
        homogeneity.to_dict()
    )
    assert all(0 <= v <= 1 for v in shown["homogeneity"])
    assert list(shown["experiments"]) == [8, 8]
    # the heatmap's side column carries the same figures
    (chart,) = [c for c in at.get("vega_lite_chart") if "hconcat" in json.loads(c.proto.spec)]
    side = pa.ipc.open_stream(chart.proto.datasets[1].data.data).read_pandas()
    assert dict(zip(side["bias"], side["homogeneity"], strict=True)) == pytest.approx(
        homogeneity.to_dict()
    )

    ols = [t for t in tables if "term" in t.columns]
    assert len(ols) == 2
    fit = regression.experiment_ols(frame)
    assert list(ols[0]["term"]) == list(fit.table["term"])
    assert "C(model)[T.model-b:7b]" in set(ols[0]["term"])
    # shown as text with three significant digits (a per-day coefficient is not "+0.000")
    assert list(ols[0]["p"]) == [significant(p, sign=False) for p in fit.table["p"]]
    assert [float(p) for p in ols[0]["p"]] == pytest.approx(list(fit.table["p"]), rel=5e-3)
    assert f"R² = {fit.r_squared:.3f}" in texts(at)
    by_features = regression.feature_ols(regression.feature_frame(frame, features))
    assert list(ols[1]["term"]) == ["Intercept", "temperature", "release_days"]
    release = ols[1].set_index("term").loc["release_days"]
    assert release["coefficient"] == significant(by_features.coef("release_days"))
    assert any(d in release["coefficient"] + release["std. error"] for d in "123456789")
    assert f"R² = {by_features.r_squared:.3f}" in texts(at)
    # the Browse tab lists the experiments as published
    rows = next(t for t in tables if "d_capped" in t.columns)
    assert len(rows) == 16 and set(rows["model"]) == {"model-a", "model-b:7b"}
    assert "nothing to run from this tab" in texts(at)


def test_too_few_experiments_is_a_message_and_names_are_text(db, tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    source = pd.read_csv(FIXTURE / "bias_detections.csv", dtype=str)
    rows = source.head(3).to_dict("records")
    rows[0]["model"] = "**bold** <b>tag</b>"
    write_rows(folder / "bias_detections.csv", list(source.columns), rows)
    with Store(db) as store:
        import_mohr(store, folder, name="tiny")
    at = page()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any("The OLS on bias, model, scenario and temperature failed" in e for e in errors)
    assert any("too few to estimate" in e for e in errors)
    assert "no models.csv" in texts(at)
    # the hostile model name is a chart column and a dataframe cell, never Markdown
    assert "**bold** <b>tag</b>" in set(heatmap_cells(at)["column"])
    markdown = [m.value for m in (*at.markdown, *at.caption, *at.error, *at.info)]
    assert not any("**bold**" in m or "<b>" in m for m in markdown)


def test_a_folder_without_the_detections_file_is_refused(db, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    shutil.copy(FIXTURE / "models.csv", folder / "models.csv")
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("mohr2025").run()
    at.text_input(key="ds_path").set_value(str(folder)).run()
    button(at, "Import").click().run()
    assert not at.exception
    shown = texts(at)
    assert "has no bias_detections.csv" in shown and "database was not changed" in shown
    with Store(db) as store:
        assert store.datasets() == []
