"""Importing the Mohr thesis' published data; tables, pivots and homogeneity from it."""

import io
import json
import shutil
import sqlite3
import subprocess
import sys

import altair as alt
import pandas as pd
import pytest
from dataset_helpers import MOHR_DIR, edited_csv

from cogbias.datasets import DatasetError
from cogbias.datasets.mohr_format import import_mohr
from cogbias.store import Store
from cogbias.studies.effect_tables import (
    NoEffectSizes,
    heatmap_frame,
    homogeneity_by_bias,
    homogeneity_table,
    load_effects,
    mean_table,
    thesis_table,
)
from cogbias.studies.effects import aggregate, cap
from cogbias.views.charts_effects import effects_heatmap

FIXTURE = MOHR_DIR


@pytest.fixture
def folder(tmp_path):
    target = tmp_path / "mohr"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.fixture
def store(tmp_path, folder):
    with Store(tmp_path / "r.db") as store:
        import_mohr(store, folder)
        yield store


def test_import_reproduces_the_bias_model_means_of_the_csv(store):
    published = pd.read_csv(f"{FIXTURE}/bias_detections.csv")
    expected = published.groupby(["bias", "model"])["bias_detected_mod"].mean()
    frame = load_effects(store, "mohr2025")
    table = mean_table(frame, by="model")
    assert len(frame) == len(published) == 16
    # The store keys biases by library id ("framing effect" → framing_effect).
    names = dict(zip(frame["bias"], frame["bias_name"], strict=True))
    got = table.stack().rename(index=names, level=0)
    pd.testing.assert_series_equal(
        got.sort_index(), expected.sort_index(), check_names=False, check_index_type=False
    )
    assert names == {"anchoring": "anchoring", "framing_effect": "framing effect"}


def test_prompts_and_model_features_are_stored(store):
    prompts = store.query("select * from study_prompts order by prompt_id")
    assert [p["prompt_id"] for p in prompts] == ["101", "102", "201", "202"]
    assert json.loads(prompts[0]["variables"]) == {"anchor_value": 900}
    assert prompts[0]["response_type"] == "numerical" and "__" in prompts[0]["content"]
    assert prompts[2]["response_type"] == "choice" and prompts[2]["target_response"] == "yes"
    features = store.query("select * from model_features order by model")
    assert [(f["model"], f["number_parameters"], f["local"]) for f in features] == [
        ("model-a", None, 0),
        ("model-b:7b", 7.0, 1),
    ]
    assert features[1]["release_date"] == "2024-07-23"
    assert json.loads(features[1]["features"])["ollama_id"] == "abc123"
    meta = store.dataset("mohr2025")
    assert meta["kind"] == "mohr2025" and json.loads(meta["meta"])["effects"] == 16


def test_reimport_is_a_noop_and_other_content_needs_replace(tmp_path, folder):
    with Store(tmp_path / "r.db") as store:
        first = import_mohr(store, folder)
        assert first.effects == 16 and first.prompts == 4 and not first.unchanged
        assert "16 effect sizes of 2 model(s), 4 prompts" in first.describe()
        assert import_mohr(store, folder).unchanged
        path = folder / "bias_detections.csv"
        path.write_text(path.read_text().replace("-0.098302", "-0.1"))
        with pytest.raises(DatasetError, match="--replace"):
            import_mohr(store, folder)
        import_mohr(store, folder, replace=True)
        rows = store.query("select count(*) as n from effect_sizes")
        assert rows[0]["n"] == 16


def test_temperatures_written_two_ways_are_one_temperature(tmp_path, folder):
    def duplicate(header, rows):
        copy = dict(rows[1])  # anchoring, 0_normal, model-a, "1"
        copy["temperature"] = "1.0"
        rows.append(copy)

    edited_csv(folder / "bias_detections.csv", folder / "bias_detections.csv", duplicate)
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(DatasetError) as err:
            import_mohr(store, folder)
        assert store.query("select count(*) as n from datasets")[0]["n"] == 0
    assert str(err.value).startswith("bias_detections.csv, row 17 (line 18), column 'temperature'")
    assert "repeats row 2" in str(err.value)


@pytest.mark.parametrize(
    "file, row, column, value, message",
    [
        ("bias_detections.csv", 3, "bias_detected_mod", "1.4", "must lie in [0, 1]"),
        ("bias_detections.csv", 2, "sample_size_1", "ten", "expected a number"),
        ("bias_detections.csv", 5, "model", "", "is empty"),
        ("experiments.csv", 1, "variables", "{anchor: 9}", "is not valid JSON"),
        ("experiments.csv", 2, "response_type", "free", "expected numerical or choice"),
        ("experiments.csv", 1, "content", "How much? Say it.", "answer slot __"),
        ("experiments.csv", 4, "part", "1", "repeats row 3"),
        ("models.csv", 2, "release_date", "July 2024", "expected a date"),
        ("models.csv", 1, "local", "maybe", "expected true or false"),
    ],
)
def test_malformed_cells_are_located_and_nothing_is_written(
    tmp_path, folder, file, row, column, value, message
):
    def edit(header, rows):
        rows[row - 1][column] = value

    edited_csv(folder / file, folder / file, edit)
    db = tmp_path / "r.db"
    with Store(db) as store, pytest.raises(DatasetError) as err:
        import_mohr(store, folder)
    text = str(err.value)
    assert text.startswith(f"{file}, row {row} (line {row + 1}), column '{column}'"), text
    assert message in text
    # the tables exist from the store's migrations; the failed import wrote no row into them
    conn = sqlite3.connect(db)
    for table in ("effect_sizes", "study_prompts", "model_features", "datasets"):
        assert conn.execute(f"select count(*) from {table}").fetchone()[0] == 0, table


def test_a_missing_part_is_reported(folder, tmp_path):
    edited_csv(folder / "experiments.csv", folder / "experiments.csv", lambda h, rows: rows.pop(1))
    with Store(tmp_path / "r.db") as store, pytest.raises(DatasetError, match="has no part 2 of 2"):
        import_mohr(store, folder)


def test_missing_file_and_empty_store(tmp_path):
    with Store(tmp_path / "r.db") as store:
        with pytest.raises(DatasetError, match="has no bias_detections.csv"):
            import_mohr(store, tmp_path)
        with pytest.raises(NoEffectSizes, match="cogbias import mohr2025"):
            load_effects(store)


def test_pivots_by_temperature_and_scenario_with_homogeneity(store):
    frame = load_effects(store)
    published = pd.read_csv(f"{FIXTURE}/bias_detections.csv")
    published["bias"] = published["bias"].str.replace(" ", "_")
    for by in ("temperature", "scenario"):
        expected = published.pivot_table(
            index="bias", columns=by, values="bias_detected_mod", aggfunc="mean"
        )
        got = mean_table(frame, by=by)
        assert got.to_numpy() == pytest.approx(expected.to_numpy())
        assert list(got.columns) == list(expected.columns)
    # Homogeneity per bias, recomputed from the CSV with the effects module.
    homogeneity = homogeneity_by_bias(frame)
    for bias, group in published.groupby("bias"):
        sizes = list(zip(group["sample_size_1"], group["sample_size_2"], strict=True))
        assert homogeneity[bias] == pytest.approx(
            aggregate(list(group["bias_detected_mod"]), sizes).homogeneity
        )
    assert 0 <= homogeneity.min() and homogeneity.max() <= 1
    long = heatmap_frame(frame, by="temperature")
    assert set(long["column"]) == {"0.2", "1"}
    assert len(long) == 4 and long["homogeneity"].notna().all()
    chart = effects_heatmap(long, "temperature")
    assert isinstance(chart, alt.HConcatChart)
    spec = chart.to_dict()
    assert len(spec["hconcat"]) == 2
    thesis = heatmap_frame(frame, by="temperature", how="thesis")
    expected = thesis_table(frame, "temperature").stack()
    cells = {(r.bias, r.column): r.value for r in thesis.itertuples()}
    assert cells == pytest.approx({(b, f"{t:g}"): v for (b, t), v in expected.items()})
    with pytest.raises(ValueError, match="one of thesis, mean"):
        heatmap_frame(frame, how="median")


def test_thesis_table_caps_the_weighted_mean_of_raw_effects(store):
    frame = load_effects(store)
    table = thesis_table(frame)
    rows = frame[(frame.bias == "anchoring") & (frame.model == "model-b:7b")]
    # Equal group sizes: the weighted mean is the plain mean of d, then capped.
    assert table.loc["anchoring", "model-b:7b"] == pytest.approx(cap(rows["d"].mean()))
    assert table.loc["anchoring", "model-a"] == 0.0  # all negative: capped at 0
    hom = homogeneity_table(frame)
    assert hom.shape == (2, 2)


def test_cli_import(tmp_path, folder):
    db = tmp_path / "cli.db"
    run = subprocess.run(
        [sys.executable, "-m", "cogbias", "import", "mohr2025", str(folder), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "imported 'mohr2025' (mohr2025): 16 effect sizes of 2 model(s)" in run.stderr
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    (bad / "bias_detections.csv").write_text("bias,scenario\nx,y\n")
    run = subprocess.run(
        [sys.executable, "-m", "cogbias", "import", "mohr2025", str(bad), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "bias_detections.csv, header (line 1), column 'model': missing column" in run.stderr
    assert "Traceback" not in run.stderr


def test_cli_effects_views(tmp_path, folder):
    db = tmp_path / "cli.db"

    def cogbias(*args):
        return subprocess.run(
            [sys.executable, "-m", "cogbias", *args], capture_output=True, text=True, timeout=120
        )

    assert cogbias("effects", "--db", str(db)).stderr.startswith(
        "error: this database has no published effect sizes yet"
    )
    assert cogbias("import", "mohr2025", str(folder), "--db", str(db)).returncode == 0
    # by default the thesis' Figure 2, and the output says so
    run = cogbias("effects", "--db", str(db), "--by", "temperature", "--format", "csv")
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("thesis view (the thesis' Figure 2): per bias × temperature")
    shown = pd.read_csv(io.StringIO(run.stdout)).set_index("bias")
    with Store(db) as store:
        thesis = thesis_table(load_effects(store), "temperature")
    assert shown.to_numpy() == pytest.approx(thesis.to_numpy(), nan_ok=True)
    run = cogbias(
        "effects", "--db", str(db), "--by", "temperature", "--view", "mean", "--format", "csv"
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("mean view: per bias × temperature, the plain mean")
    table = pd.read_csv(io.StringIO(run.stdout)).set_index("bias")
    assert table.drop(columns="homogeneity").to_numpy() != pytest.approx(thesis.to_numpy())
    published = pd.read_csv(f"{FIXTURE}/bias_detections.csv")
    expected = published[published.bias == "anchoring"].groupby("temperature")["bias_detected_mod"]
    assert table.loc["anchoring", "0.2"] == pytest.approx(expected.mean()[0.2])
    assert table.loc["anchoring", "1"] == pytest.approx(expected.mean()[1.0])
    assert 0 <= table.loc["anchoring", "homogeneity"] <= 1
    run = cogbias("effects", "--db", str(db), "--view", "ols", "--format", "json")
    assert run.returncode == 0, run.stderr
    terms = [row["term"] for row in json.loads(run.stdout)]
    assert terms[0] == "Intercept" and "temperature" in terms
    assert "n = 16" in run.stderr
    run = cogbias("effects", "--db", str(db), "--view", "features", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert [row["term"] for row in json.loads(run.stdout)] == [
        "Intercept",
        "temperature",
        "release_days",
    ]


def test_run_import_runs_a_registered_format_as_the_command_does(tmp_path, folder):
    from cogbias.datasets.formats import run_import

    with Store(tmp_path / "r.db") as store:
        summary = run_import(store, "mohr2025", [folder])
        assert summary.dataset == "mohr2025" and summary.prompts == 4
        assert "not imported: experiments.csv (the same prompts again)" in summary.describe()
        with pytest.raises(DatasetError, match="cannot read these inputs"):
            run_import(store, "mohr2025", [])  # the folder is missing
        with pytest.raises(DatasetError, match="is not a format cogbias imports"):
            run_import(store, "mohr2026", [folder])


def test_cli_export_writes_the_published_effect_sizes(tmp_path, folder):
    """`cogbias export --dataset mohr2025 -o x.csv` writes the effect sizes the Browse tab
    shows, one row per row of bias_detections.csv, with no "None" or "nan" in any cell."""
    import csv

    db = tmp_path / "cli.db"
    with Store(db) as store:
        import_mohr(store, folder)
    out = tmp_path / "x.csv"
    run = subprocess.run(
        [sys.executable, "-m", "cogbias", "export", "--dataset", "mohr2025", "-o", str(out),
         "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert f"wrote 16 rows to {out}" in run.stderr
    published = pd.read_csv(folder / "bias_detections.csv")
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == len(published) == 16
    assert list(rows[0]) == ["dataset", "bias", "bias_name", "scenario", "model",
                             "temperature", "n_control", "n_treatment", "d", "d_capped",
                             "source_row"]  # fmt: skip
    got = sorted((r["bias_name"], r["scenario"], r["model"], float(r["temperature"]), float(r["d"]))
                 for r in rows)  # fmt: skip
    expected = sorted(
        zip(published["bias"], published["scenario"], published["model"],
            published["temperature"].astype(float), published["bias_detected"], strict=True)
    )  # fmt: skip
    assert got == expected
    cells = [v for r in rows for v in r.values()]
    assert not [v for v in cells if v.strip() in ("None", "nan", "NaN")]


def test_cli_export_names_a_thesis_datasets_other_tables_and_its_hub_folder(
    tmp_path, folder, cogbias_main
):
    import pyarrow.parquet as pq

    db = tmp_path / "cli.db"
    with Store(db) as store:
        import_mohr(store, folder)
    for table, count in (("prompts", 4), ("model_features", 2)):
        out = tmp_path / f"{table}.jsonl"
        done = cogbias_main("export", "--dataset", "mohr2025", "--table", table, "-o", out,
                            "--db", db)  # fmt: skip
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(records) == count and all(r["dataset"] == "mohr2025" for r in records)
    assert records[0]["local"] is False and json.loads(records[0]["features"])["model"]
    refused = cogbias_main("export", "--dataset", "mohr2025", "--table", "pairs", "-o",
                           tmp_path / "p.csv", "--db", db)  # fmt: skip
    assert refused.returncode != 0
    assert "has no table 'pairs'; it has: effect_sizes, prompts, model_features" in refused.stderr
    one = cogbias_main("export", "--dataset", "mohr2025", "--model", "model-a", "-o",
                       tmp_path / "a.parquet", "--db", db)  # fmt: skip
    assert one.returncode == 0 and "wrote 8 rows" in one.stderr
    assert set(pq.read_table(tmp_path / "a.parquet").column("model").to_pylist()) == {"model-a"}
    hub = tmp_path / "hub"
    done = cogbias_main("export", "--dataset", "mohr2025", "--hub", hub, "--db", db)
    assert done.returncode == 0, done.stderr
    assert "wrote 16 effect_sizes, 4 prompts, 2 model_features and README.md" in done.stderr
    assert pq.read_table(hub / "data" / "effect_sizes.parquet").num_rows == 16
    card = (hub / "README.md").read_text()
    assert "The `effect_sizes` table holds 16 rows, as they were published." in card
    assert "option indices" not in card  # no pairs: nothing about answers


def test_the_thesis_study_asks_as_often_as_the_thesis_and_warns_before_too_few(
    tmp_path, folder, cogbias_main
):
    """The study of an imported thesis folder asks each prompt 100 times (§3.3.1) by
    default, so Cohen's d has its answers; one repeat is said to give no value before any
    call, and its cells read "–" with the reason, never None or NaN."""
    db = tmp_path / "s.db"
    with Store(db) as store:
        import_mohr(store, folder)
    planned = cogbias_main("run", "study", "mohr2025", "--models", "random", "--dry-run",
                           "--db", db)  # fmt: skip
    assert planned.returncode == 0 and "× 100 repeats" in planned.stderr
    assert "warning" not in planned.stderr
    done = cogbias_main("run", "study", "mohr2025", "--models", "random", "--repeats", "1",
                        "--db", db)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: Cohen's d needs at least 2 answers per condition: with 1 repeat" in (
        done.stderr
    )
    shown = cogbias_main("results", "study", "mohr2025", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "None" not in shown.stdout and "NaN" not in shown.stdout and "nan" not in shown.stdout
    rows = [line for line in shown.stdout.splitlines() if "cohens_d" in line]
    assert len(rows) == 2 and all(" 2 " in row for row in rows)  # n: the two answers read
    assert all(len(line) <= 120 for line in shown.stdout.splitlines())
