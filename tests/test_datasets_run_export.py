"""Running an imported dataset, exporting pairs, downloading from a (local) Hub, the CLI."""

from __future__ import annotations

import csv
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cogbias.cli.main import main
from cogbias.core.metrics import hub_score
from cogbias.core.templates import Filled, render_decision_text
from cogbias.datasets import (
    ColumnMapping,
    DatasetError,
    import_generic,
    import_hub,
    import_malberg,
    parse_prompt,
)
from cogbias.runs import executor, paired_plan
from cogbias.store import Store
from cogbias.views.export import PAIR_COLUMNS, export
from tests.dataset_helpers import FORMAT_DIR, HUB_CSV, read_rows, snapshot


def _question(text: str) -> str:
    return text.split("\n\nAnswer options:")[0]


def _published_params() -> dict[str, dict[str, float]]:
    """treatment text as a decision model sees it (up to its options) -> the row's published
    metric_params."""
    out = {}
    for row in read_rows(HUB_CSV)[1]:
        parsed = parse_prompt(row["treatment"])
        text = _question(
            render_decision_text(Filled(parsed.situation, parsed.prompt, parsed.options))
        )
        values = dict(
            (k.strip().strip("'"), float(v))
            for k, v in (p.split(":") for p in row["metric_params"].strip("{}").split(","))
        )
        assert out.get(text, values) == values  # equal texts never carry different parameters
        out[text] = values
    return out


def test_hub_run_scores_every_pair_with_its_own_metric_params(tmp_path):
    with Store(tmp_path / "x.db") as store:
        import_hub(store, HUB_CSV)
        plan = paired_plan.plan(
            paired_plan.RunSpec(models=["random"], dataset="malberg2024-hub"), store
        )
        run = executor.execute(plan, store)
        assert (run.status, run.done, run.failed) == ("done", 12, 0)
        assert export(store, tmp_path / "pairs.csv", dataset="malberg2024-hub") == 12
    published = _published_params()
    with (tmp_path / "pairs.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 and list(rows[0]) == list(PAIR_COLUMNS)
    assert {row["reversed"] for row in rows} == {"true", "false"}  # option reversal happened
    for row in rows:
        params = published[_question(row["treatment_text"])]
        # the exported text is what the model read: its options in the order presented
        options, order = json.loads(row["treatment_options"]), json.loads(row["treatment_order"])
        shown = [f"Option {i + 1}: {options[j]}" for i, j in enumerate(order)]
        assert row["treatment_text"].endswith("Answer options:\n" + "\n".join(shown))
        assert (float(row["k"]), float(row["y1"]), float(row["y2"])) == (
            params["k"],
            params["x_1"],
            params["x_2"],
        )
        recomputed = hub_score(
            int(row["control_answer"]),
            int(row["treatment_answer"]),
            params["k"],
            params["x_1"],
            params["x_2"],
        )
        # the card's formula adds 1e-8 to the denominator; the pipeline's metric does not
        assert float(row["score"]) == pytest.approx(recomputed, abs=1e-7)
        order = json.loads(row["control_order"])
        assert row["control_raw_answer"] == f"Option {order.index(int(row['control_answer'])) + 1}"


def test_per_bias_and_bias_filters_limit_a_dataset_run(tmp_path):
    with Store(tmp_path / "x.db") as store:
        import_hub(store, HUB_CSV)
        spec = paired_plan.RunSpec(
            models=["random"],
            dataset="malberg2024-hub",
            per_bias=2,
            biases=["anchoring", "loss_aversion"],
        )
        run = executor.execute(paired_plan.plan(spec, store), store)
        rows = store.results(run_id=run.id)
    assert [(r["bias"], r["n"]) for r in rows] == [("anchoring", 2), ("loss_aversion", 2)]


def test_code_format_dataset_cannot_be_run_without_metric(tmp_path):
    with Store(tmp_path / "x.db") as store:
        import_malberg(store, FORMAT_DIR)
        with pytest.raises(ValueError, match="without metric parameters"):
            paired_plan.plan(paired_plan.RunSpec(models=["random"], dataset="malberg2024"), store)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_exports_have_the_same_documented_columns_and_values(tmp_path, fmt):
    with Store(tmp_path / "x.db") as store:
        import_malberg(store, FORMAT_DIR)
        assert export(store, tmp_path / f"out.{fmt}", dataset="malberg2024") == 12
    path = tmp_path / f"out.{fmt}"
    if fmt == "csv":
        with path.open(encoding="utf-8", newline="") as handle:
            records = list(csv.DictReader(handle))
        columns = list(records[0])
    elif fmt == "jsonl":
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        columns = list(records[0])
    else:
        table = pq.read_table(path)
        columns, records = table.column_names, table.to_pylist()
    assert columns == list(PAIR_COLUMNS)
    first = records[0]
    assert (str(first["control_answer"]), str(first["treatment_answer"])) == ("10", "2")
    assert float(first["score"]) == 0.8888888879012344  # as published
    assert first["bias"] == "anchoring" and first["model"] == "stub"
    assert "Option 11: 100%" in first["control_text"]


def test_exported_pairs_import_back_as_a_generic_file(tmp_path):
    with Store(tmp_path / "x.db") as store:
        import_hub(store, HUB_CSV)
        run = executor.execute(
            paired_plan.plan(
                paired_plan.RunSpec(models=["random"], dataset="malberg2024-hub"), store
            ),
            store,
        )
        export(store, tmp_path / "pairs.jsonl", run_id=run.id)
        original = store.results(run_id=run.id)
        fields = [
            "bias",
            "scenario",
            "control_answer",
            "treatment_answer",
            "model",
            "k",
            "y1",
            "y2",
            "score",
            "status",
        ]
        mapping = ColumnMapping(
            {f: f for f in fields} | {"control": "control_text", "treatment": "treatment_text"}
        )
        summary = import_generic(store, tmp_path / "pairs.jsonl", mapping, name="again")
        assert (summary.instances, summary.decisions) == (12, 12)
        again = store.results(run_id="import:again")
    assert again == original


# ------------------------------------------------------------------ the Hub, served locally


@pytest.fixture
def local_hub(monkeypatch) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HUB_CSV.parent))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("COGBIAS_HUB_URL", url)
    monkeypatch.setenv("COGBIAS_HUB_FILE", HUB_CSV.name)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def test_hub_download_with_progress(tmp_path, local_hub):
    seen: list[tuple[int, int]] = []
    with Store(tmp_path / "x.db") as store:
        summary = import_hub(
            store, download_dir=tmp_path / "dl", progress=lambda label, d, t: seen.append((d, t))
        )
        assert summary.instances == 12
    size = HUB_CSV.stat().st_size
    assert (tmp_path / "dl" / HUB_CSV.name).read_bytes() == HUB_CSV.read_bytes()
    assert (size, size) in seen
    assert not list((tmp_path / "dl").glob("*.part"))


def test_hub_download_404_names_the_url_and_changes_nothing(tmp_path, local_hub):
    db = tmp_path / "x.db"
    Store(db).close()
    before = snapshot(db)
    with Store(db) as store, pytest.raises(DatasetError, match="404") as caught:
        import_hub(store, hub_file="missing.csv", download_dir=tmp_path / "dl")
    assert f"{local_hub}/missing.csv" in str(caught.value)
    assert snapshot(db) == before
    assert not list((tmp_path / "dl").glob("*"))


def test_cli_import_run_analyze_export(tmp_path, local_hub, capsys):
    db = str(tmp_path / "x.db")
    assert main(["import", "malberg2024-hub", "--db", db, "--download-dir", str(tmp_path)]) == 0
    assert "12 test cases" in capsys.readouterr().err
    assert main(["import", "malberg2024", str(FORMAT_DIR), "--db", db]) == 0
    assert main(["datasets", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert "malberg2024-hub" in listed and "12 test cases" in listed
    args = ["run", "--dataset", "malberg2024-hub", "--per-bias", "2", "--models", "random"]
    assert main([*args, "--db", db]) == 0
    assert main(["analyze", "--db", db, "--view", "table", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "bias,random,stub,Average,Average Absolute"
    assert "Average Absolute," in out
    assert (
        main(["export", "--db", db, "--dataset", "malberg2024", "-o", str(tmp_path / "p.parquet")])
        == 0
    )
    assert pq.read_table(tmp_path / "p.parquet").num_rows == 12
    assert (
        main(
            [
                "export",
                "--db",
                db,
                "--dataset",
                "malberg2024-hub",
                "--test-cases",
                "-o",
                str(tmp_path / "t.jsonl"),
            ]
        )
        == 0
    )
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 12


def test_cli_reports_malformed_files_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("bias,scenario\nAnchoring,x\n", encoding="utf-8")
    assert main(["import", "malberg2024-hub", str(bad), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad.csv, header (line 1), column 'control': missing column")
    assert (
        main(["run", "--dataset", "nope", "--models", "random", "--db", str(tmp_path / "x.db")])
        == 2
    )
    assert "no dataset 'nope'" in capsys.readouterr().err


def test_cli_generic_import_with_map_and_set(tmp_path, capsys):
    path = Path(tmp_path / "g.csv")
    path.write_text(
        'q1,q2,a,b\n"Pick.\nOption 1: x\nOption 2: y","Pick!\nOption 1: x\nOption 2: y",1,0\n',
        encoding="utf-8",
    )
    db = str(tmp_path / "x.db")
    args = [
        "import",
        "generic",
        str(path),
        "--db",
        db,
        "--set",
        "bias=Halo Effect",
        "--set",
        "model=m",
    ]
    args += ["--map", "control=q1", "--map", "treatment=q2", "--map", "control_answer=a"]
    args += ["--map", "treatment_answer=b"]
    assert main(args) == 0
    with Store(db) as store:
        [row] = store.results(dataset="g")
    assert (row["bias"], row["model"], row["mean"]) == ("halo_effect", "m", 1.0)
