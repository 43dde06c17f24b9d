"""OLS of effect sizes on experiment variables and model features (statsmodels), on the fixture."""

import shutil

import numpy as np
import pandas as pd
import pytest

from cogbias.datasets.mohr_format import import_mohr
from cogbias.store import Store
from cogbias.studies.effect_tables import load_effects
from cogbias.studies.regression import experiment_ols, feature_frame, feature_ols, model_features
from tests.dataset_helpers import MOHR_DIR

FIXTURE = MOHR_DIR


@pytest.fixture
def store(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "mohr")
    with Store(tmp_path / "r.db") as store:
        import_mohr(store, tmp_path / "mohr")
        yield store


def lstsq(y: pd.Series, x: pd.DataFrame) -> tuple[np.ndarray, float]:
    design = np.column_stack([np.ones(len(x)), x.to_numpy(dtype=float)])
    beta, *_ = np.linalg.lstsq(design, y.to_numpy(dtype=float), rcond=None)
    residual = y.to_numpy() - design @ beta
    r2 = 1 - (residual**2).sum() / ((y - y.mean()) ** 2).sum()
    return beta, r2


def test_experiment_ols_on_the_fixture_matches_least_squares(store):
    frame = load_effects(store)
    result = experiment_ols(frame)
    assert result.formula == "d_capped ~ C(bias) + C(model) + C(scenario) + temperature"
    assert result.n == 16
    # Independent fit from the CSV with dummy coding: reference = first bias and model, and the
    # thesis' base scenario 1_persona (issue 19: its tables' intercepts are that scenario's).
    assert result.reference == {
        "bias": "anchoring", "model": "model-a", "scenario": "1_persona"
    }  # fmt: skip
    csv = pd.read_csv(f"{FIXTURE}/bias_detections.csv")
    x = pd.DataFrame(
        {
            "framing": csv["bias"].eq("framing effect"),
            "model_b": csv["model"].eq("model-b:7b"),
            "no_persona": csv["scenario"].eq("0_normal"),
            "temperature": csv["temperature"],
        }
    )
    beta, r2 = lstsq(csv["bias_detected_mod"], x)
    assert result.table["coef"].to_numpy() == pytest.approx(beta, abs=1e-10)
    assert result.r_squared == pytest.approx(r2)
    assert result.coef("C(model)[T.model-b:7b]") == pytest.approx(beta[2])
    assert result.coef("C(scenario)[T.0_normal]") == pytest.approx(beta[3])
    assert list(result.table.columns) == ["term", "coef", "std_err", "t", "p", "ci_low", "ci_high"]
    assert (result.table["p"].between(0, 1)).all()
    # The uncapped target works the same way.
    raw = experiment_ols(frame, target="d")
    beta_raw, _ = lstsq(csv["bias_detected"], x)
    assert raw.table["coef"].to_numpy() == pytest.approx(beta_raw, abs=1e-10)


def test_feature_ols_on_the_fixture(store):
    frame = load_effects(store)
    features = model_features(store, "mohr2025")
    assert list(features["model"]) == ["model-a", "model-b:7b"]
    joined = feature_frame(frame, features)
    assert sorted(joined["release_days"].unique()) == [0, 71]  # 2024-05-13 → 2024-07-23
    # Parameters are published for one model only and capability for none: left out.
    result = feature_ols(joined)
    assert result.formula == "d_capped ~ temperature + release_days"
    x = joined[["temperature", "release_days"]]
    beta, _ = lstsq(joined["d_capped"], x)
    assert result.table["coef"].to_numpy() == pytest.approx(beta, abs=1e-10)
    # Two models cannot separate a capability score from the release date.
    scored = feature_frame(frame, features, capability={"model-a": 1280, "model-b:7b": 1200})
    with pytest.raises(ValueError, match="collinear"):
        feature_ols(scored)


def test_feature_ols_with_more_models():
    rng = np.random.default_rng(7)
    models = pd.DataFrame(
        {
            "model": [f"m{i}" for i in range(6)],
            "number_parameters": [7, 70, 9, 27, 14, 400],
            "capability": [1150, 1250, 1180, 1220, 1160, 1290],
            "release_date": [
                "2024-01-10",
                "2024-07-23",
                "2024-06-27",
                "2024-06-27",
                "2024-05-21",
                "2024-05-13",
            ],
        }
    )
    rows = []
    for model in models["model"]:
        for temperature in (0.2, 0.7, 1.0, 1.3, 1.8):
            rows.append({"model": model, "temperature": temperature})
    effects = pd.DataFrame(rows)
    joined = feature_frame(effects.assign(d_capped=0.0), models)
    joined["d_capped"] = (
        0.1
        + 0.07 * joined["temperature"]
        + 0.001 * joined["number_parameters"]
        + rng.normal(0, 0.01, len(joined))
    )
    result = feature_ols(joined)
    assert result.formula == (
        "d_capped ~ temperature + number_parameters + capability + release_days"
    )
    x = joined[["temperature", "number_parameters", "capability", "release_days"]]
    beta, r2 = lstsq(joined["d_capped"], x)
    assert result.table["coef"].to_numpy() == pytest.approx(beta, rel=1e-8, abs=1e-12)
    assert result.coef("temperature") == pytest.approx(0.07, abs=0.01)
    assert result.r_squared == pytest.approx(r2)


def test_too_little_data_is_refused():
    frame = pd.DataFrame(
        {
            "bias": ["a", "b"],
            "model": ["m", "m"],
            "scenario": ["s", "s"],
            "temperature": [1.0, 1.0],
            "d_capped": [0.1, 0.2],
        }
    )
    with pytest.raises(ValueError, match="too few"):
        experiment_ols(frame)
    with pytest.raises(ValueError, match="is known and varies"):
        feature_ols(frame.assign(number_parameters=np.nan))
