"""Every table a page shows can be taken away, and none shows "None" or "nan".

The pages run on one database holding what a person using cogbias daily has: a paired run of
two models, the Mohr thesis' published data (tests/fixtures, in the thesis' format), a study
run on its prompts with the page's defaults, the classics beside their humans, BiasBuster
beside the paper's Table 3, and the token-bias study's random baseline. Each page is walked
in the order it is drawn: every table must be followed by its Download menu, whose CSV,
JSONL and Parquet files hold the table's rows; no cell of a table or of a file, and no
column name, may read "None" or "nan" (a missing value is "–" on screen, empty in a file).
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from cogbias.classroom import sessions
from cogbias.datasets.mohr_format import import_mohr
from cogbias.runs import executor, kinds, paired_plan, study_results
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.views.charts_studies import PIVOT_LABELS
from tests.app_helpers import make_results_db
from tests.class_helpers import open_on
from tests.dataset_helpers import MOHR_DIR
from tests.study_helpers import study_run
from tests.test_app_pages import assert_clean, open_page

FORMATS = ("csv", "jsonl", "parquet")
WORDS = {"none", "nan", "nat", "<na>"}  # on screen, what a missing value must never read as
# in a file, what pandas reads as a missing value (a stored name such as the mitigation
# "none" is a value there)
FILE_WORDS = {"None", "nan", "NaN", "NaT", "<NA>", "NULL", "null", "N/A", "n/a"}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The database every page is walked on (filled once: the runs take a few seconds)."""
    folder = tmp_path_factory.mktemp("tables")
    db = folder / "app.db"
    make_results_db(db, instances=6)
    shutil.copytree(MOHR_DIR, folder / "mohr")
    with Store(db) as store:
        import_mohr(store, folder / "mohr")
        spec = paired_plan.RunSpec(models=["random"], dataset="tokenbias")
        executor.execute(kinds.plan(spec, store), store)
    study_run(db, StudySpec("mohr2025", ["random"]))  # the page's defaults: 100 repeats
    study_run(db, StudySpec("classics", ["random"], repeats=3))
    study_run(db, StudySpec("biasbuster", ["random"], tests=["framing", "anchoring"], repeats=2))
    code = open_on(db)  # a class answered the theatre ticket; the reveal is on screen
    with Store(db) as store:
        session = sessions.require_session(store, code)
        for token, answer in [("p1", "a"), ("p2", "b"), ("p3", "a"), ("p4", "b")]:
            sessions.assign_condition(store, session, token)
            assert sessions.submit_answer(store, session, token, answer) == "saved"
        sessions.close_session(store, code)
        sessions.reveal_session(store, code)
    yield db


@pytest.fixture
def app(filled: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COGBIAS_DB", str(filled))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    return filled


def walk(node: Any) -> Iterator[Any]:
    """Every element under `node` in the order the page draws it."""
    children = getattr(node, "children", None)
    if children is None:
        yield node
        return
    for key in sorted(children):
        yield from walk(children[key])


def tables_and_downloads(at: AppTest) -> list[tuple[pd.DataFrame, list[Any]]]:
    """Each table the page shows, with the download buttons drawn after it (before the
    next table)."""
    found: list[tuple[pd.DataFrame, list[Any]]] = []
    for element in walk(at.main):
        kind = getattr(element, "type", "")
        if kind in ("arrow_data_frame", "dataframe"):
            found.append((element.value, []))
        elif kind == "download_button" and found:
            found[-1][1].append(element)
    return found


def missing_words(values: Any) -> list[str]:
    """The cells or names that read as a missing value's word, or are one."""
    bad = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            bad.append(repr(value))
        elif isinstance(value, str) and value.strip().lower() in WORDS:
            bad.append(value)
    return bad


def file_rows(data: bytes, fmt: str) -> tuple[list[str], list[list[Any]]]:
    """A downloaded table's column names and rows, read as a researcher's tools read them."""
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        return rows[0], rows[1:]
    if fmt == "jsonl":
        records = [json.loads(line) for line in data.decode("utf-8").splitlines()]
        names = list(records[0]) if records else []
        return names, [list(r.values()) for r in records]
    table = pq.read_table(io.BytesIO(data))
    return table.column_names, [list(r.values()) for r in table.to_pylist()]


def check_page(at: AppTest, downloaded: Callable[[Any], bytes], where: str) -> int:
    """Every table of `at`: readable cells, and its three files with its rows; the number of
    tables checked."""
    found = tables_and_downloads(at)
    for index, (frame, buttons) in enumerate(found):
        label = f"{where}, table {index + 1} ({list(frame.columns)[:4]})"
        assert not missing_words([str(c) for c in frame.columns]), label
        cells = [v for column in frame.columns for v in frame[column]]
        assert not missing_words(cells), f"{label}: {missing_words(cells)[:5]}"
        files = {b.key.rsplit(":", 1)[-1]: b for b in buttons if b.key and ":" in b.key}
        assert set(FORMATS) <= set(files), f"{label} has no downloads: {[b.key for b in buttons]}"
        for fmt in FORMATS:
            names, rows = file_rows(downloaded(files[fmt]), fmt)
            assert len(rows) == len(frame), f"{label} as {fmt}: {len(rows)} rows"
            assert names and not missing_words(names) and all(names), f"{label} as {fmt}"
            # in a file a missing value is an empty cell (CSV) or null, never a word for it
            words = [v for row in rows for v in row if isinstance(v, str)]
            assert not [v for v in words if v.strip() in FILE_WORDS], f"{label} as {fmt}"
    return len(found)


def test_every_table_on_every_page_exports_its_rows_and_reads_no_none(
    app: Path, downloaded: Callable[[Any], bytes]
) -> None:
    checked = {}
    pages = ("learn", "preview", "run", "explore", "compare", "settings", "tokenbias")
    for name in (*pages, "classroom"):
        checked[name] = check_page(open_page(name), downloaded, name)
    at = open_page("datasets")
    for dataset in at.selectbox(key="ds_current").options:  # a thesis' and the token bias'
        at.selectbox(key="ds_current").set_value(dataset).run()
        assert_clean(at)
        checked[f"datasets {dataset}"] = check_page(at, downloaded, f"datasets {dataset}")
    at = open_page("studies")
    for run_id in study_runs(app):  # mohr2025, classics, biasbuster
        at.selectbox(key="study_run").set_value(run_id).run()
        assert_clean(at)
        for by in PIVOT_LABELS:
            at.radio(key="study_pivot").set_value(by).run()
            assert_clean(at)
            checked[f"studies {run_id} by {by}"] = check_page(at, downloaded, f"{run_id} {by}")
    empty = [page for page, count in checked.items() if not count]
    assert not [p for p in empty if p.startswith(("datasets", "studies", "run", "class"))]
    assert sum(checked.values()) >= 30, checked


def study_runs(db: Path, study: str | None = None) -> list[str]:
    """The ids of the study runs in `db` (of `study` alone, when given)."""
    with Store(db) as store:
        runs = [run for run in kinds.records(store) if study_results.is_study(run)]
    return [run.id for run in runs if study is None or run.spec.get("study") == study]


def test_the_thesis_study_with_the_pages_defaults_has_a_value_in_every_cell(
    app: Path,
) -> None:
    """Studies → mohr2025 → random → Start with the defaults: readable cells, no dash."""
    at = open_page("studies")
    at.selectbox(key="study_name").set_value("mohr2025").run()
    assert at.number_input(key="study_repeats").value == 100  # the thesis' own (§3.3.1)
    assert not at.warning  # nothing to warn about before Start
    (run_id,) = study_runs(app, "mohr2025")  # the fixture's: the page's defaults
    at.selectbox(key="study_run").set_value(run_id).run()
    assert_clean(at)
    pivot = next(d.value for d in at.dataframe if "test" in d.value.columns)
    values = pivot.drop(columns=[c for c in ("test", "metric") if c in pivot.columns])
    assert list(values.columns) == ["no mitigation"]
    assert all(v != "–" for v in values["no mitigation"]), pivot
    assert not [c.value for c in at.caption if "marks a cell without a value" in c.value]


def test_one_repeat_is_said_to_give_no_value_before_start(app: Path) -> None:
    at = open_page("studies")
    at.selectbox(key="study_name").set_value("mohr2025").run()
    at.number_input(key="study_repeats").set_value(1).run()
    assert_clean(at)
    (warning,) = [w.value for w in at.warning]
    assert "Cohen's d needs at least 2 answers per condition" in warning
    assert "Choose 2 repeats or more" in warning


def test_a_shown_table_downloads_with_missing_values_empty_and_formulas_defused() -> None:
    """`frame_bytes`: the writers of `cogbias export`, for a page's table: a missing value
    (None, NaN, pandas' NA, the "–" a page shows) is an empty CSV cell and null elsewhere,
    numbers keep their type, a cell that would run as a formula is neutralised."""
    from cogbias.views.export import frame_bytes
    from cogbias.views.numbers import dashed

    frame = pd.DataFrame(
        {
            "name": ["=HYPERLINK(1)", "plain", None],
            "n": pd.array([3, None, 5], dtype="Int64"),
            "value": [0.25, float("nan"), -1.5],
            "shown": ["+0.25", "–", "-1.50"],
            "ok": [True, False, None],
        }
    )
    on_screen = dashed(frame)
    assert list(on_screen["value"]) == ["0.25", "–", "-1.5"]
    assert list(on_screen["n"])[1] == "–" and list(on_screen["name"])[2] == "–"
    assert not missing_words([v for c in on_screen.columns for v in on_screen[c]])
    rows = list(csv.DictReader(io.StringIO(frame_bytes(frame, "csv").decode())))
    assert rows[0]["name"] == "'=HYPERLINK(1)" and rows[1]["shown"] == "" and rows[1]["n"] == ""
    assert (rows[0]["n"], rows[2]["value"], rows[0]["ok"]) == ("3", "-1.5", "true")
    lines = [json.loads(line) for line in frame_bytes(frame, "jsonl").decode().splitlines()]
    assert lines[1] == {"name": "plain", "n": None, "value": None, "shown": None, "ok": False}
    table = pq.read_table(io.BytesIO(frame_bytes(frame, "parquet")))
    assert str(table.schema.field("n").type) == "int64"
    assert table.column("value").to_pylist() == [0.25, None, -1.5]
    assert table.column("ok").to_pylist() == [True, False, None]


def test_a_tables_files_are_written_once_per_content_and_never_from_another_table():
    """The Download menu's files are cached on the table's content (`_tables._files`): the
    same content gives the same files, and tables pandas would hash alike (None and "None",
    1 and "1" in a column of objects; a column renamed or retyped) each get their own."""
    from app_pages import _tables
    from cogbias.views.export import frame_bytes

    tables = [
        pd.DataFrame({"x": [1, None], "y": [0.5, math.nan]}, dtype=object),
        pd.DataFrame({"x": ["1", "None"], "y": [0.5, math.nan]}, dtype=object),
        pd.DataFrame({"x": [1.0, math.nan], "y": [0.5, math.nan]}),
        pd.DataFrame({"z": [1.0, math.nan], "y": [0.5, math.nan]}),
        pd.DataFrame({"x": [["a", "b"], ["c"]], "y": [1, 2]}),  # lists: written every time
    ]
    for table in tables * 2:
        files = _tables._files(table)
        assert files == {fmt: frame_bytes(table, fmt) for fmt in FORMATS}
    keys = {_tables.fingerprint(t) for t in tables[:4]}
    assert len(keys) == 4
    assert _tables.fingerprint(tables[0].copy()) == _tables.fingerprint(tables[0])
