"""The Mohr (2025) thesis' published data: effect sizes, study prompts and model features.

The tables are created by migration 7 (`cogbias.store.migrations`); `cogbias.datasets.
mohr_format` reads and validates the CSV files and hands the rows here as tuples in the
`*_FIELDS` order. Readers get rows as typed dicts (`EffectSize`, `ModelFeatures`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from cogbias.store.connection import StoreBase

EFFECT_FIELDS = (
    "dataset",
    "bias",
    "bias_name",
    "scenario",
    "model",
    "temperature",
    "n_control",
    "n_treatment",
    "d",
    "d_capped",
    "source_row",
)
PROMPT_FIELDS = (
    "dataset",
    "prompt_id",
    "bias",
    "bias_name",
    "experiment_type",
    "scenario",
    "content",
    "variables",
    "response_type",
    "target_response",
    "part",
    "parts_total",
    "source_row",
)
FEATURE_FIELDS = (
    "dataset",
    "model",
    "temperature",
    "local",
    "release_date",
    "number_parameters",
    "features",
    "source_row",
)
# `features` keys (models.csv columns) that hold a capability score, in order of preference:
# the import checks them as numbers, the feature regression reads the first one a model has.
CAPABILITY_COLUMNS = ("chatbot_arena", "arena_score", "mmlu")
THESIS_TABLES = {
    "effect_sizes": EFFECT_FIELDS,
    "study_prompts": PROMPT_FIELDS,
    "model_features": FEATURE_FIELDS,
}


class EffectSize(TypedDict):
    """One published Cohen's d: bias × scenario × model × temperature."""

    dataset: str
    bias: str
    bias_name: str
    scenario: str
    model: str
    temperature: float
    n_control: int
    n_treatment: int
    d: float
    d_capped: float
    source_row: int | None


class StudyPrompt(TypedDict):
    """One part of a thesis prompt (`variables` is JSON text)."""

    dataset: str
    prompt_id: str
    bias: str
    bias_name: str
    experiment_type: str | None
    scenario: str
    content: str
    variables: str
    response_type: str
    target_response: str | None
    part: int
    parts_total: int
    source_row: int | None


class ModelFeatures(TypedDict):
    """A model's published features; `features` is every published column, as JSON text."""

    model: str
    number_parameters: float | None
    release_date: str | None
    features: str


class EffectsRepo(StoreBase):
    """`effect_sizes`, `study_prompts` and `model_features`."""

    def replace_thesis_data(
        self,
        dataset: str,
        effects: Sequence[Sequence[Any]],
        prompts: Sequence[Sequence[Any]],
        features: Sequence[Sequence[Any]],
    ) -> None:
        """Replace a dataset's rows of the three tables (tuples in the `*_FIELDS` order).

        Call it inside the importer's `atomic()` block: the rows and the dataset's entry in
        `datasets` then arrive together or not at all."""
        with self.atomic():
            for (table, fields), rows in zip(
                THESIS_TABLES.items(), (effects, prompts, features), strict=True
            ):
                self.db.execute(f"delete from {table} where dataset = ?", (dataset,))
                marks = ", ".join("?" * len(fields))
                self.db.conn.executemany(
                    f"insert into {table} ({', '.join(fields)}) values ({marks})", rows
                )

    def effect_sizes(self, dataset: str | None = None) -> list[EffectSize]:
        """Published effect sizes of one dataset (or of all), in their file's row order."""
        sql = f"select {', '.join(EFFECT_FIELDS)} from effect_sizes"
        params: list[str] = []
        if dataset is not None:
            sql += " where dataset = ?"
            params.append(dataset)
        return self.query(sql + " order by source_row", params)  # type: ignore[return-value]

    def thesis_rows(self, table: str, dataset: str) -> list[dict[str, Any]]:
        """Every stored column of one of the thesis' tables (`THESIS_TABLES`: effect_sizes,
        study_prompts, model_features) for one dataset, in its file's row order: what its
        export writes."""
        fields = THESIS_TABLES[table]  # a KeyError for any other name: no SQL from outside
        return self.query(
            f"select {', '.join(fields)} from {table} where dataset = ? order by source_row",
            (dataset,),
        )

    def has_effect_sizes(self) -> bool:
        """Whether any dataset with published effect sizes was imported."""
        return self.db.execute("select 1 from effect_sizes limit 1").fetchone() is not None

    def study_prompt_datasets(self) -> list[str]:
        """Datasets whose thesis prompts can be run as a study, by name."""
        rows = self.db.execute("select distinct dataset from study_prompts order by dataset")
        return [r[0] for r in rows]

    def study_prompts(self, dataset: str) -> list[StudyPrompt]:
        """The prompts of one imported thesis dataset."""
        return self.query(  # type: ignore[return-value]
            "select * from study_prompts where dataset = ?", [dataset]
        )

    def model_features(self, dataset: str) -> list[ModelFeatures]:
        """A dataset's published model features, in their file's row order (a model may
        appear once per temperature)."""
        return self.query(  # type: ignore[return-value]
            "select model, number_parameters, release_date, features from model_features "
            "where dataset = ? order by source_row",
            (dataset,),
        )
