"""The Datasets page, driven with Streamlit's AppTest against a real database file."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.core.records import Decision, Pair
from cogbias.datasets import import_hub, import_malberg
from cogbias.runs import executor, paired_plan
from cogbias.store import Store
from cogbias.views import shown_pairs
from tests.dataset_helpers import FIXTURES, FORMAT_DIR, HUB_CSV, edited_csv, write_rows

PAGE = str(Path(__file__).resolve().parent.parent / "app_pages" / "datasets.py")


@pytest.fixture
def db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DB", str(path))
    # the app imports only from importable folders: the fixtures and this test's own files
    monkeypatch.setenv("COGBIAS_IMPORT_DIRS", os.pathsep.join([str(FIXTURES), str(tmp_path)]))
    return path


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    shown = [
        *at.markdown,
        *at.caption,
        *at.info,
        *at.error,
        *at.success,
        *at.subheader,
        *at.warning,
    ]
    parts = [m.value for m in shown]
    return unescape("\n".join(str(p) for p in parts))


def unescape(text: str) -> str:
    """What a reader sees of Markdown-escaped text (untrusted text is shown escaped)."""
    return re.sub(r"\\(.)", r"\1", text)


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def test_empty_database_explains_what_to_do(db):
    at = page()
    assert "No datasets yet" in texts(at)


def test_browse_run_results_analysis_and_export(db):
    with Store(db) as store:
        import_hub(store, HUB_CSV)
        import_malberg(store, FORMAT_DIR)
        spec = paired_plan.RunSpec(models=["random"], dataset="malberg2024-hub")
        run = executor.execute(paired_plan.plan(spec, store), store)
        # a second, registered model: the same answers under another name and key
        copies = [
            replace(Decision.from_row(row), id=row["id"] + "-gpt", model="openai/gpt-4o-2024-08-06")
            for row in store.query("select * from decisions where run_id = ?", (run.id,))
        ]
        store.save_decisions(copies)
    at = page()
    at.selectbox(key="ds_current").set_value("malberg2024-hub").run()
    assert not at.exception
    assert len(at.dataframe) >= 4  # datasets, test cases, pairs, runs
    shown = texts(at)
    assert "Figure 7" in shown and "Figure 6" in shown and "Figure 5" in shown
    assert len(at.get("vega_lite_chart")) == 4  # heatmap, dendrogram, bubbles; Table 3
    at.selectbox(key="ds_bias").set_value("anchoring").run()
    assert set(at.dataframe[1].value["bias"]) == {"anchoring"}
    button(at, "Prepare the file").click().run()
    assert not at.exception
    assert at.get("download_button"), "a download button after preparing the export"
    # the paper's code output cannot be run on new models, and says why
    at.selectbox(key="ds_current").set_value("malberg2024").run()
    assert "without metric parameters" in texts(at)


def test_import_from_a_path_and_a_malformed_file(db, tmp_path):
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("malberg2024-hub").run()
    at.text_input(key="ds_path").set_value(str(HUB_CSV)).run()
    button(at, "Import").click().run()
    assert not at.exception
    assert "imported 'malberg2024-hub'" in texts(at)
    with Store(db) as store:
        assert store.counts()["instances"] == 12

    bad = edited_csv(
        HUB_CSV, tmp_path / "bad.csv", lambda h, rows: rows[2].update(metric_params="{")
    )
    at.text_input(key="ds_path").set_value(str(bad)).run()
    at.text_input(key="ds_name_malberg2024-hub").set_value("bad").run()
    button(at, "Import").click().run()
    error = texts(at)
    assert "bad.csv, row 3" in error and "column 'metric_params'" in error
    assert "database was not changed" in error


def test_generic_import_with_the_mapping_form(db, tmp_path):
    rows = [
        {"bias": "Halo Effect", "a": "Rate.\nOption 1: good\nOption 2: bad",
         "b": "Rate!\nOption 1: good\nOption 2: bad", "who": "m", "x": "0", "y": "1"}
    ]  # fmt: skip
    path = write_rows(tmp_path / "mine.csv", list(rows[0]), rows)
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("generic").run()
    at.text_input(key="ds_path").set_value(str(path)).run()
    assert at.selectbox(key="ds_map_bias").value == "bias"  # guessed from the column name
    for field, column in {"control": "a", "treatment": "b", "model": "who",
                          "control_answer": "x", "treatment_answer": "y"}.items():  # fmt: skip
        at.selectbox(key=f"ds_map_{field}").set_value(column)
    at.run()
    button(at, "Import").click().run()
    assert not at.exception
    assert "imported 'mine'" in texts(at)
    with Store(db) as store:
        assert store.results(dataset="mine")[0]["mean"] == -1.0  # (|0 - 0| - |1 - 0|) / 1


def test_import_from_the_hub_and_start_a_background_run(db, monkeypatch):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HUB_CSV.parent))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("COGBIAS_HUB_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("COGBIAS_HUB_FILE", HUB_CSV.name)
    try:
        at = page()
        at.session_state["ds_tab"] = "Import"
        button(at, "Download and import").click().run()
        assert not at.exception
        assert "12 test cases" in texts(at)
        assert at.session_state["ds_tab"] == "Import"  # an import does not move the user
        at.session_state["ds_tab"] = "Run"  # what clicking the Run tab does
        at.number_input(key="ds_per_bias").set_value(2).run()
        button(at, "Start the run").click().run()
        assert not at.exception
        assert "started in the background" in texts(at)
        spec = paired_plan.RunSpec(models=["random"], dataset="malberg2024-hub", per_bias=2)
        # said on the Run tab where it was started, naming the run, and the tab stays chosen
        run_tab = next(t for t in at.tabs if t.label == "Run")
        said = unescape("\n".join(s.value for s in run_tab.success))
        assert f"Run {spec.run_id} started in the background" in said
        assert at.session_state["ds_tab"] == "Run"
        with Store(db) as store:
            run = store.wait_for(spec.run_id, timeout=60)
        assert run is not None and (run["status"], run["done"]) == ("done", 6)
        at.run()  # the next redraw says how the run ended, still on the Run tab
        run_tab = next(t for t in at.tabs if t.label == "Run")
        ended = unescape("\n".join(s.value for s in run_tab.success))
        assert f"{spec.run_id} · done" in ended and "6 of 6 pairs, 0 failed" in ended
        assert at.session_state["ds_tab"] == "Run"
    finally:
        server.shutdown()
        server.server_close()


def _shown_text(at: AppTest) -> str:
    return texts(at) + "\n" + "\n".join(str(t.value) for t in at.text)


def test_two_imports_in_a_row_then_switching_keeps_the_pair_viewer_in_step(db):
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("malberg2024-hub").run()
    at.text_input(key="ds_path").set_value(str(HUB_CSV)).run()
    button(at, "Import").click().run()
    assert not at.exception
    assert at.selectbox(key="ds_current").value == "malberg2024-hub"
    with Store(db) as store:  # answers on the first dataset, each recognisable on the page
        executor.execute(
            paired_plan.plan(paired_plan.RunSpec(["random"], dataset="malberg2024-hub"), store),
            store,
        )
        with store.atomic():
            store.db.execute(
                "update decisions set control_answer = 'first dataset answer ' || rowid "
                "where instance_id in (select id from instances where dataset = 'malberg2024-hub')"
            )
    # the second import in the same session used to raise StreamlitWidgetAlreadyInstantiatedError
    at.selectbox(key="ds_fmt").set_value("malberg2024").run()
    at.text_input(key="ds_path").set_value(str(FORMAT_DIR)).run()
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="ds_current").value == "malberg2024"
    with Store(db) as store:
        first = store.pairs(dataset="malberg2024-hub", limit=1)[0]
        second = store.pairs(dataset="malberg2024", limit=1)[0]
    assert first.decision.control_answer != second.decision.control_answer

    def viewer_shows(pair: Pair) -> bool:
        """The pair's own answer (distinct in each dataset) is on the page."""
        shown = shown_pairs.shown_stored_pair(pair)
        assert shown is not None
        return shown.control.answer[:200] in _shown_text(at)

    assert viewer_shows(second) and not viewer_shows(first)
    at.selectbox(key="ds_pair").set_value(1).run()  # read another pair, then switch dataset
    at.selectbox(key="ds_current").set_value("malberg2024-hub").run()
    assert not at.exception
    assert at.selectbox(key="ds_pair").value == 0  # the pick starts afresh in this dataset
    assert viewer_shows(first) and not viewer_shows(second)
    at.selectbox(key="ds_current").set_value("malberg2024").run()
    assert not at.exception and viewer_shows(second)


def test_delete_a_dataset_after_confirming(db):
    with Store(db) as store:
        import_hub(store, HUB_CSV, name="keep")
        import_hub(store, HUB_CSV, name="drop")
    at = page()
    at.selectbox(key="ds_current").set_value("drop").run()
    button(at, "Delete this dataset…").click().run()
    assert "Delete dataset drop" in texts(at)
    button(at, "Cancel").click().run()
    with Store(db) as store:
        assert {d["name"] for d in store.datasets()} == {"keep", "drop"}
    button(at, "Delete this dataset…").click().run()
    button(at, "Yes, delete").click().run()
    assert not at.exception
    with Store(db) as store:
        assert [d["name"] for d in store.datasets()] == ["keep"]
        assert store.counts()["instances"] == 12
    assert at.selectbox(key="ds_current").value == "keep"
    assert "Deleted dataset drop" in texts(at)


def test_run_tab_shows_progress_and_analysis_uses_display_names(db):
    import os

    with Store(db) as store:
        import_hub(store, HUB_CSV)
        spec = paired_plan.RunSpec(["random"], dataset="malberg2024-hub")
        executor.execute(paired_plan.plan(spec, store), store)
        going = paired_plan.RunSpec(["random_b"], dataset="malberg2024-hub", per_bias=2)
        store.create_run(going.run_id, {"models": ["random_b"], "dataset": "malberg2024-hub"}, 6)
        store.update_run(going.run_id, status="running", pid=os.getpid(), done=2)
    at = page()
    assert not at.exception
    bars = [p for p in at.get("progress") if going.run_id in p.proto.text]
    assert bars and "2 of 6 pairs" in bars[0].proto.text
    heatmap = json.dumps([json.loads(c.proto.spec) for c in at.get("vega_lite_chart")])
    assert "Framing Effect" in heatmap and '"framing_effect"' not in heatmap


def test_the_import_tab_offers_every_registered_format_and_imports_token_bias_and_mohr(db):
    """The page imports through `datasets.formats.FORMATS`, as `cogbias import` does: the
    token-bias JSON files (a folder) and the Mohr thesis folder with its prompts."""
    from cogbias.datasets.formats import FORMATS
    from tests.dataset_helpers import MOHR_DIR, TOKENBIAS_DIR

    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    assert at.selectbox(key="ds_fmt").options == [f"{f.name}: {f.help}" for f in FORMATS]
    at.selectbox(key="ds_fmt").set_value("peek2024").run()
    at.text_input(key="ds_path").set_value(str(TOKENBIAS_DIR)).run()
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    assert "imported 'peek2024' (peek2024)" in texts(at)
    assert at.selectbox(key="ds_current").value == "peek2024"
    assert not at.get("progress")  # no bar left behind
    at.selectbox(key="ds_fmt").set_value("mohr2025").run()
    at.text_input(key="ds_path").set_value(str(MOHR_DIR)).run()
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    shown = texts(at)
    assert "4 prompts" in shown and "prompts: 4 from biases.csv" in shown
    assert "not imported: experiments.csv (the same prompts again)" in shown
    with Store(db) as store:
        assert {d["name"] for d in store.datasets()} == {"peek2024", "mohr2025"}


def test_a_failed_import_speaks_the_pages_words_and_leaves_no_progress_bar(db, tmp_path):
    import shutil

    from tests.dataset_helpers import MOHR_DIR

    folder = tmp_path / "m"
    shutil.copytree(MOHR_DIR, folder)
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value("mohr2025").run()
    at.text_input(key="ds_path").set_value(str(folder)).run()
    button(at, "Import").click().run()
    path = folder / "bias_detections.csv"
    path.write_text(path.read_text().replace("-0.098302", "-0.1"))  # other content, same name
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    error = unescape(at.error[0].value)
    assert "already exists with other content" in error
    assert "--" not in error and "Replace a dataset of the same name" in error
    assert not at.get("progress")


def test_the_imported_table_counts_what_each_kind_holds(db):
    """The thesis' effect sizes, a token-bias dataset's item pairs, a paired dataset's test
    cases and published decisions: each counted in its own unit (the thesis used to show as
    "test cases 0, published decisions 0")."""
    from cogbias.datasets import import_mohr, import_peek
    from tests.dataset_helpers import MOHR_DIR, TOKENBIAS_DIR

    with Store(db) as store:
        import_hub(store, HUB_CSV)
        import_malberg(store, FORMAT_DIR)
        import_mohr(store, MOHR_DIR)
        import_peek(store, [TOKENBIAS_DIR])
        contents = store.dataset_contents()
        (published,) = store.db.execute(
            "select count(*) from decisions where run_id = 'import:malberg2024'"
        ).fetchone()
    pairs = contents["peek2024"]["instances"]
    assert pairs > 0 and published > 0
    at = page()
    table = at.dataframe[0].value
    holds = dict(zip(table["name"], table["holds"], strict=True))
    assert holds == {
        "mohr2025": "16 effect sizes, 4 prompts",
        "peek2024": f"{pairs} item pairs",
        "malberg2024-hub": "12 test cases",
        "malberg2024": f"{contents['malberg2024']['instances']} test cases, "
        f"{published} published decisions",
    }
    assert "test cases" not in table.columns and "published decisions" not in table.columns
