"""Reproduction on the papers' real released data (never committed: see dataset_helpers.released).

Skipped, saying which variable to set, unless COGBIAS_RELEASED names the folder that holds
the released files (`.ci/run` sets it when CI has them beside the clone).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from cogbias.datasets.mohr_format import import_mohr
from cogbias.runs.study_plan import load_study
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


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_thesis_folder_imports_with_its_prompts_and_runs_as_the_thesis_asked(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")  # read in place: biases.csv, bias_detections.csv, models.csv
    db = tmp_path / "t.db"
    imported = _cli("import", "mohr2025", source, "--db", db)
    assert imported.returncode == 0, imported.stderr
    said = imported.stdout + imported.stderr  # the summary goes where the command reports
    assert "1599 effect sizes of 10 model(s), 64 prompts, 50 model feature rows" in said
    assert "prompts: 64 from biases.csv (32 bias × scenario experiments" in said
    done = _cli("run", "study", "mohr2025", "--models", "random", "--repeats", "5", "--db", db)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        rows = store.query("select * from study_calls")
        study = load_study("mohr2025", store)
    assert len(rows) == 32 * 2 * 5 and {r["status"] for r in rows} == {"ok"}
    # §3.4.1 / Table 6: the treatment group is the part the thesis expects the bias in
    endowment = study.tests["endowment_effect__1_persona"]
    treatment = {c.name: c.prompt for c in endowment.conditions}["treatment"]
    assert "I hand you a mug" in treatment and "sell" in treatment
    assert study.tests["loss_aversion__0_normal"].target == "b"  # B = 1
    assert study.tests["transaction_utility__0_normal"].target == "b"
    radio = {c.name: c.prompt for c in study.tests["transaction_utility__0_normal"].conditions}
    assert "radio" in radio["treatment"] and "television" in radio["control"]
    assert study.tests["framing_effect__2_odd_numbers"].undirected  # Eq. 2: |d|
    assert not study.tests["anchoring__0_normal"].undirected
    # the persona is in the system message of every scenario except 0_normal
    assert "You are a customer with median income" in study.tests["anchoring__1_persona"].system
    assert "customer" not in study.tests["anchoring__0_normal"].system
    odd = {c.name: c.prompt for c in study.tests["anchoring__2_odd_numbers"].conditions}
    assert "{{" in odd["control"]  # the anchors are the thesis' own values (12 and 76)
    asked = {r["prompt"] for r in rows if r["test"] == "anchoring__2_odd_numbers"}
    assert any("higher or lower than 12 %" in p for p in asked)
    assert any("higher or lower than 76 %" in p for p in asked)


def test_the_thesis_regression_and_table_8_are_reproduced_from_its_detections(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    ols = _cli("effects", "--db", db, "--view", "ols", "--format", "csv")
    assert ols.returncode == 0, ols.stderr
    assert "reference levels: bias = 'anchoring', model = 'claude-3-haiku', scenario = " \
        "'1_persona'" in ols.stderr  # fmt: skip
    coef = pd.read_csv(io.StringIO(ols.stdout)).set_index("term")["coef"]
    # Tables 4 / 10 (capped): the thesis' "1_no_persona" is the data's 0_normal
    assert f"{coef['Intercept']:.4f}" == "0.6241"
    assert f"{coef['C(scenario)[T.0_normal]']:.4f}" == "0.0081"
    assert f"{coef['C(scenario)[T.2_odd_numbers]']:.4f}" == "-0.0006"
    assert f"{coef['C(scenario)[T.3_large_numbers]']:.4f}" == "-0.0734"
    shown = _cli("effects", "--db", db, "--view", "ols")  # the table prints 3 decimals
    assert "Intercept  0.624" in shown.stdout and "-0.073" in shown.stdout
    raw = _cli("effects", "--db", db, "--view", "ols", "--uncapped", "--format", "csv")
    raw_coef = pd.read_csv(io.StringIO(raw.stdout)).set_index("term")["coef"]
    assert f"{raw_coef['Intercept']:.4f}" == "3.9224"  # Tables 4 / 9
    assert f"{raw_coef['C(scenario)[T.0_normal]']:.4f}" == "-2.1589"
    # Table 8: homogeneity of the capped detections, with the thesis' approximation of J
    for hedges, phi3, llama in (
        ("thesis", "0.90121", "0.493774"),
        ("exact", "0.90116", "0.493744"),
    ):
        table = _cli(
            "effects", "--db", db, "--view", "homogeneity", "--hedges", hedges, "--format", "csv"
        )
        assert f"Hedges' J in the sampling variance: {hedges}" in table.stderr
        row = pd.read_csv(io.StringIO(table.stdout)).set_index("bias").loc["anchoring"]
        assert (f"{row['phi3:medium']:.5f}", f"{row['llama3.1:70b']:.6f}") == (phi3, llama)
