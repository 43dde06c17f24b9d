"""Reproduction on the papers' real released data (never committed: see dataset_helpers.released).

Skipped, saying which variable to set, unless COGBIAS_RELEASED names the folder that holds
the released files (`.ci/run` sets it when CI has them beside the clone).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from cogbias.datasets.mohr_format import import_mohr
from cogbias.store import Store
from cogbias.studies.effect_tables import load_effects, mean_table
from tests.dataset_helpers import released


def test_the_thesis_bias_by_model_means_are_reproduced_from_its_released_effects(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")
    folder = tmp_path / "mohr"
    folder.mkdir()
    shutil.copy(source / "bias_detections.csv", folder)  # the effect sizes alone
    published = pd.read_csv(source / "bias_detections.csv")
    with Store(tmp_path / "r.db") as store:
        import_mohr(store, folder)
        frame = load_effects(store, "mohr2025")
    assert len(frame) == len(published) == 1599  # one combination is missing in the release
    expected = published.groupby(["bias", "model"])["bias_detected_mod"].mean()
    names = dict(zip(frame["bias"], frame["bias_name"], strict=True))
    got = mean_table(frame, by="model").stack().rename(index=names, level=0)
    pd.testing.assert_series_equal(
        got.sort_index(), expected.sort_index(), check_names=False, check_index_type=False
    )
