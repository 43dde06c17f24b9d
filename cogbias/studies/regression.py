"""OLS of effect sizes on the experiment's variables and on model features (Mohr 2025, §3.4).

Two regressions, as in the thesis (Tables 4 and 5):

- `experiment_ols`: effect ~ C(bias) + C(model) + C(scenario) + temperature — fixed effects for
  the categorical variables (the experiments are a full crossing of them), temperature linear;
- `feature_ols`: effect ~ temperature + model features (parameters, capability score, release
  date as days since the earliest release), one row per experiment.

Both fit the capped effect by default, as the thesis does, so a few huge d values do not
dominate the fit. statsmodels does the fitting and the inference (standard errors, t, p, CIs);
this module only builds the frames and refuses designs that cannot be estimated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cogbias.store import Store
from cogbias.store.effects import CAPABILITY_COLUMNS

# The thesis' base scenario (with the persona, normal values): the data calls it `1_persona`,
# and the intercepts of its Tables 9-12 are that scenario's mean. The regressions measure the
# other scenarios against it when the data has it.
THESIS_BASE_SCENARIO = "1_persona"
FEATURES = ("temperature", "number_parameters", "capability", "release_days")
FEATURE_COLUMNS = ("model", "number_parameters", "release_date", "capability")
# A regressor or effect beyond this is no measurement (parameter counts reach ~2e12): its
# square would swamp every other column, or overflow to inf.
MAX_VALUE = 1e15


@dataclass(frozen=True)
class OlsResult:
    """A fitted regression: the formula, its size and fit, and one row per coefficient."""

    formula: str
    n: int
    r_squared: float
    adj_r_squared: float
    table: pd.DataFrame  # term, coef, std_err, t, p, ci_low, ci_high
    reference: dict[str, str] = field(default_factory=dict)  # variable → its base level

    def describe(self) -> str:
        """The formula, fit and reference levels in one line, for a report's heading."""
        base = ", ".join(f"{k} = {v!r}" for k, v in self.reference.items())
        return f"{self.formula}   n = {self.n}, R² = {self.r_squared:.3f}" + (
            f"; reference levels: {base}" if base else ""
        )

    def coef(self, term: str) -> float:
        return float(self.table.set_index("term").loc[term, "coef"])


def _check_numbers(data: pd.DataFrame, columns: Sequence[str]) -> None:
    """ValueError naming the first column and model whose value is not a finite number
    within ±MAX_VALUE: statsmodels would say "exog contains inf or nans", or fit numbers
    that mean nothing."""
    for column in columns:
        values = pd.to_numeric(data[column], errors="coerce").astype(float)
        bad = ~(values.abs() <= MAX_VALUE)
        if bad.any():
            row = data[bad].iloc[0]
            model = f" of model {str(row['model'])[:60]!r}" if "model" in data else ""
            raise ValueError(
                f"{column}{model} is {values[bad].iloc[0]:g}, not a finite number within "
                f"±{MAX_VALUE:g}: correct the published value (models.csv) and import it again"
            )


def _fit(formula: str, data: pd.DataFrame, n_terms: int, numbers: Sequence[str]) -> OlsResult:
    """Fit `formula` with each design column scaled to at most 1 in magnitude, then scaled
    back (coefficients, standard errors and intervals divided by the column's scale; t, p
    and R² are unchanged by it). Rank tolerances are relative to the largest singular value,
    so unscaled, a column of parameter counts (1e11) hid the others: the rank check called
    the design "collinear" and the fit dropped directions it needed."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    if len(data) <= n_terms:
        raise ValueError(f"{len(data)} experiments are too few to estimate {n_terms} coefficients")
    _check_numbers(data, numbers)
    design = smf.ols(formula, data=data)
    scale = np.abs(design.exog).max(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    model = sm.OLS(design.endog, design.exog / scale)
    rank = np.linalg.matrix_rank(model.exog)
    if rank < model.exog.shape[1]:
        names = ", ".join(design.exog_names)
        raise ValueError(
            f"the regressors are collinear ({rank} independent of {model.exog.shape[1]}: "
            f"{names}); with few models, model features cannot be told apart — use fewer "
            "features or more models"
        )
    fit = model.fit()
    ci = np.asarray(fit.conf_int()) / scale[:, None]
    table = pd.DataFrame(
        {
            "term": design.exog_names,
            "coef": np.asarray(fit.params) / scale,
            "std_err": np.asarray(fit.bse) / scale,
            "t": np.asarray(fit.tvalues),
            "p": np.asarray(fit.pvalues),
            "ci_low": ci[:, 0],
            "ci_high": ci[:, 1],
        }
    )
    return OlsResult(formula, int(fit.nobs), float(fit.rsquared), float(fit.rsquared_adj), table)


def experiment_ols(
    frame: pd.DataFrame, target: str = "d_capped", base_scenario: str = THESIS_BASE_SCENARIO
) -> OlsResult:
    """effect ~ bias + model + scenario (fixed effects) + temperature (linear).

    A variable with a single value in the data is left out (it would only repeat the
    intercept). Reference levels are the alphabetically first bias and model, and the
    scenario `base_scenario` when the data has it (the thesis' base, so the coefficients are
    its Tables 9/10's), else the alphabetically first scenario; `reference` names them.
    """
    data = frame[frame[target].map(np.isfinite)].copy()
    reference: dict[str, str] = {}
    for name in ("bias", "model", "scenario"):
        levels = sorted(data[name].astype(str).unique())
        if name == "scenario" and base_scenario in levels:
            levels.remove(base_scenario)
            levels.insert(0, base_scenario)
        # a categorical's first level is the formula's reference level
        data[name] = pd.Categorical(data[name].astype(str), categories=levels)
        if len(levels) > 1:
            reference[name] = levels[0]
    terms = [f"C({name})" for name in ("bias", "model", "scenario") if data[name].nunique() > 1]
    if data["temperature"].nunique() > 1:
        terms.append("temperature")
    if not terms:
        raise ValueError("every experiment has the same bias, model, scenario and temperature")
    n_terms = 1 + sum(data[t[2:-1]].nunique() - 1 if t.startswith("C(") else 1 for t in terms)
    numbers = [target] + (["temperature"] if "temperature" in terms else [])
    result = _fit(f"{target} ~ {' + '.join(terms)}", data, n_terms, numbers)
    return OlsResult(**{**result.__dict__, "reference": reference})


def model_features(store: Store, dataset: str) -> pd.DataFrame:
    """One row per model: number_parameters, release_date, capability (when published)."""
    records: dict[str, dict[str, Any]] = {}
    for published in store.model_features(dataset):
        row: dict[str, Any] = dict(published)
        extra = json.loads(row.pop("features") or "{}")
        row["capability"] = next(
            (pd.to_numeric(extra[c], errors="coerce") for c in CAPABILITY_COLUMNS if c in extra),
            np.nan,
        )
        records.setdefault(row["model"], row)  # features do not depend on the temperature
    return pd.DataFrame(list(records.values()), columns=list(FEATURE_COLUMNS))


def published_features(store: Store, datasets: Sequence[str]) -> pd.DataFrame:
    """`model_features` of several datasets in one frame, each model once (the first wins)."""
    frames = [model_features(store, d) for d in datasets]
    if not frames:
        return pd.DataFrame(columns=list(FEATURE_COLUMNS))
    return pd.concat(frames, ignore_index=True).drop_duplicates("model").reset_index(drop=True)


def feature_frame(
    effects: pd.DataFrame,
    features: pd.DataFrame,
    capability: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Effects joined with their model's features; release date as days since the earliest.

    `capability` (model → score, e.g. the registry's Chatbot Arena scores) fills or overrides
    the published capability column.
    """
    table = features.copy()
    if capability:
        given = table["model"].map(capability)
        table["capability"] = given.where(given.notna(), table["capability"])
    dates = pd.to_datetime(table["release_date"], errors="coerce")
    table["release_days"] = (dates - dates.min()).dt.days
    return effects.merge(
        table[["model", "number_parameters", "capability", "release_days"]], on="model", how="left"
    )


def ols_on_features(
    effects: pd.DataFrame, features: pd.DataFrame, target: str = "d_capped"
) -> OlsResult:
    """`feature_ols` of the effects joined with their models' features (`feature_frame`):
    the thesis' Table 5, as the command and the Datasets page fit it."""
    return feature_ols(feature_frame(effects, features), target=target)


def feature_ols(
    frame: pd.DataFrame, target: str = "d_capped", features: Sequence[str] = FEATURES
) -> OlsResult:
    """effect ~ the given features, over experiments whose model has all of them.

    Features nobody has (all missing) or that never vary are left out and named in the error
    if nothing remains.
    """
    usable = [
        f for f in features if f in frame and frame[f].notna().any() and frame[f].nunique() > 1
    ]
    if not usable:
        raise ValueError(
            f"none of the features {', '.join(features)} is known and varies across the models"
        )
    data = frame.dropna(subset=usable)
    data = data[data[target].map(np.isfinite)]
    return _fit(f"{target} ~ {' + '.join(usable)}", data, 1 + len(usable), [target, *usable])
