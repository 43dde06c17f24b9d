"""Hostile input, as a careless user, a malicious file or a prompt-injected model would give it.

For each input: a clear message that says where (file:line:col, or file/row/column), never a
traceback or a hang; the database byte-for-byte unchanged where nothing should be written;
and a sentinel API key absent from every CLI output, database file and export. The CLI runs
as a real child process wherever what a person sees matters.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cogbias import store
from cogbias.core import expressions
from cogbias.core.expressions import ExpressionError
from cogbias.library import testcases as library
from cogbias.library.testcases import LibraryError, SamplingError, ValueSpec
from cogbias.store import Store, StoreError
from tests.app_helpers import make_results_db
from tests.dataset_helpers import HUB_CSV, edited_csv, format_copy, snapshot
from tests.fake_llm_server import FakeLLMServer, default_responder

ROOT = Path(__file__).resolve().parent.parent
SENTINEL = "sk-sentinel-7Hq2Zx9Lw4Pb8Kd1"
ANCHORING = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
DERIVED = 'expr = "round(anchor / 10)"'


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cogbias ARGS` in a child process, with this checkout on the path."""
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=300,
        check=False,
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    for stream in (done.stdout, done.stderr):
        assert "Traceback" not in stream, stream
        assert not re.search(r"^\w+Error: ", stream, re.MULTILINE), stream


def file_hash(path: Path) -> str:
    """Bytes of the database and its WAL (if any): unchanged means nothing was written."""
    digest = hashlib.sha256(path.read_bytes())
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        digest.update(wal.read_bytes())
    return digest.hexdigest()


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# --------------------------------------------------------------------------- expressions

HOSTILE_EXPRESSIONS = {
    "((9**1000)**1000)**1000": "larger than 2**1024",
    "'a'*10**10": "longer than 10000",
    "len('a'*10**10)": "longer than 10000",
    "1" + "+1" * 3000: "longer than 1000 characters",
    "+".join(["1"] * 300): "nested more than 50 levels",
    "not " * 200 + "1": "nested more than 50 levels",
    "-'a'": "'-' needs a number, not text",
    "'a' < 1": "cannot compare text with a whole number",
    "'a' + 1": "cannot add text and a whole number",
    "int(float('inf'))": "not a finite number",
    "float('nan') + 1": "not a finite number",
    "float(10**400)": "larger than 2**1024",
    "float((2**1000 * 2**23 - 1) * 2 + 1)": "too large for a float",
    "1e999": "not a finite number",
    "10.0 ** 400": "too large",
    "(-8) ** 0.5": "not a real number",
    "round(5, -10**9)": "digits must be a whole number",
    "[[1] * 1000] * 1000": "larger than 100000",
    "str([[1] * 1000] * 1000)": "larger than 100000",
    "int('9' * 5000)": "too long to be a number",
    "1 in 5": "'in' needs text or a list",
    "'%s' % 1": "formatting of text is not supported",
    "min()": "needs at least one value",
    "len(5)": "len()",
    "[1, 2][1.5]": "index must be a whole number",
    "(1).real": "'Attribute' is not allowed",
    "__import__('os')": "unknown function '__import__'",
    "round(x=1)": "keyword arguments are not allowed",
    "1 // 0": "division by zero",
    "b'x'": "is not allowed",
}


@pytest.mark.parametrize("source", list(HOSTILE_EXPRESSIONS), ids=lambda s: s[:30])
def test_hostile_expressions_raise_only_the_librarys_own_error(source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        expressions.evaluate(source, {})
    assert HOSTILE_EXPRESSIONS[source] in caught.value.message
    assert 0 <= caught.value.offset <= len(source)


def test_errors_point_at_the_failing_part_of_the_expression() -> None:
    source = "x + 1000 // (x - 50)"
    with pytest.raises(ExpressionError) as caught:
        expressions.evaluate(source, {"x": 50})
    assert caught.value.offset == source.index("1000")
    assert expressions.evaluate(source, {"x": 51}) == 1051


def test_the_builtin_expressions_still_evaluate() -> None:
    names = {"amount": 250, "factor": 1.37, "delay": 1, "variant": "positive", "share": 40}
    assert expressions.evaluate("int(round(amount * factor))", names) == 342
    assert expressions.evaluate("str(delay) + (' month' if delay == 1 else ' months')", names) == (
        "1 month"
    )
    assert expressions.evaluate("-1 if variant == 'positive' else 1", names) == -1
    assert expressions.evaluate("max([share, 100 - share]) ** 2 / 4", names) == 900.0


# --------------------------------------------------------------------------- test case files


def hostile_case(case_id: str, derived: str | None = None, metric: str | None = None) -> str:
    """The anchoring test case with a replaced derived value and/or [metric] block."""
    text = ANCHORING.replace('id = "anchoring"', f'id = "{case_id}"')
    if derived is not None:
        text = text.replace(DERIVED, derived)
    if metric is not None:
        text = text.replace('[metric]\nk = 1\ny1 = "anchor_index"\ny2 = "anchor_index"', metric)
    return text


HOSTILE_FILES = {
    # name: (file text, text on the reported line, fragment of the message)
    "power": (hostile_case("power", 'expr = "((9**1000)**1000)**1000"'), "((9**", "2**1024"),
    "memory": (hostile_case("memory", "expr = \"len('a'*10**10)\""), "len(", "10000"),
    "chain": (hostile_case("chain", f'expr = "{"1" + "+1" * 3000}"'), "+1+1", "1000 characters"),
    "nots": (hostile_case("nots", f'expr = "{"not " * 200}1"'), "not not", "nested"),
    "negate": (hostile_case("negate", "expr = \"-'a'\""), "-'a'", "needs a number"),
    "compare": (hostile_case("compare", "expr = \"'a' < 1\""), "'a' < 1", "cannot compare"),
    "infinite": (
        hostile_case("infinite", "expr = \"int(float('inf'))\""),
        "int(float",
        "not a finite number",
    ),
    "hugefloat": (hostile_case("hugefloat", 'expr = "float(10**400)"'), "float(10", "2**1024"),
    "division": (
        hostile_case("division", 'expr = "1000 // (anchor - 50)"'),
        "1000 //",
        "anchor = 50",
    ),
    "k1000": (
        hostile_case("k1000", metric="[metric]\nk = 1000\ny1 = 0\ny2 = 0"),
        "k = 1000",
        "k must lie in [-1, 1]",
    ),  # fmt: skip
    "knan": (
        hostile_case("knan", metric="[metric]\nk = nan\ny1 = 0\ny2 = 0"),
        "k = nan",
        "finite",
    ),  # fmt: skip
    "kinf": (
        hostile_case("kinf", metric="[metric]\nk = 1e999\ny1 = 0\ny2 = 0"),
        "k = 1e999",
        "finite",
    ),  # fmt: skip
    "yrange": (
        hostile_case("yrange", 'expr = "anchor // 2"'),
        'y1 = "anchor_index"',
        "not a reference point between -10 and 20",
    ),
    "zeroweights": (
        hostile_case(
            "zeroweights",
            'expr = "anchor"\n[values.pick]\ntype = "choice"\noptions = [1, 2]\nweights = [0, 0]',
        ),
        "weights = [0, 0]",
        "at least one weight must be greater than 0",
    ),
    "textweights": (
        hostile_case(
            "textweights",
            'expr = "anchor // 10"\n[values.pick]\ntype = "choice"\noptions = [1, 2]\n'
            'weights = ["a", "b"]',
        ),
        "weights = [",
        "weight 1 should be a number, not 'a'",
    ),
}


def test_library_check_locates_every_hostile_file_without_a_traceback(tmp_path: Path) -> None:
    paths = []
    for name, (text, _, _) in HOSTILE_FILES.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    done = cli("library", "check", *paths)
    no_traceback(done)
    assert done.returncode == 1
    for name, (text, on_line, fragment) in HOSTILE_FILES.items():
        found = re.findall(rf"{re.escape(name)}\.toml:(\d+):(\d+): (.*)", done.stderr)
        matching = [(int(line), message) for line, _, message in found if fragment in message]
        assert matching, f"{name}: {fragment!r} not in {found}"
        assert matching[0][0] == line_of(text, on_line), (name, matching)
    assert f"{len(HOSTILE_FILES)} of {len(HOSTILE_FILES)} file(s) have problems" in done.stderr


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ('kind = "percent11"', 'kind = "percent11"\noptions = 1979-05-27', "should be a list"),
        ('kind = "percent11"', 'kind = "percent11"\noptions = nan', "should be a list"),
        ("references = [", "variants = [[1], {a = 1}]\nreferences = [", "variants[0] should be"),
        ('type = "int"', "type = [1]", "unknown generator type"),
        ('type = "int"', "type = {a = 1}", "unknown generator type"),
        ('name = "Anchoring"', "name = " + "[" * 5000 + "]" * 5000, "nests arrays or tables"),
    ],
    ids=["date options", "nan options", "list variants", "list type", "table type", "deep"],
)
def test_values_of_the_wrong_shape_are_problems_not_crashes(
    old: str, new: str, fragment: str
) -> None:
    with pytest.raises(LibraryError) as caught:
        library.parse_test_case(ANCHORING.replace(old, new, 1), "shape.toml")
    assert fragment in str(caught.value)
    assert re.match(r"shape\.toml:\d+:\d+: ", str(caught.value))


def test_check_walks_small_domains_whole_and_samples_large_ones_widely() -> None:
    two_ranges = hostile_case("wide", 'expr = "1000 // (x - 50) + y"').replace(
        "[values.anchor]", '[values.x]\ntype = "int"\nmin = 0\nmax = 100\n'
        '[values.y]\ntype = "int"\nmin = 0\nmax = 1000\n[values.anchor]'
    )  # fmt: skip
    with pytest.raises(LibraryError) as caught:
        library.parse_test_case(two_ranges, "wide.toml")
    assert "division by zero" in str(caught.value) and "x = 50" in str(caught.value)

    edge_of_a_float = hostile_case("floaty", 'expr = "int(1 // (share - 0.75))"').replace(
        "[values.anchor]", '[values.share]\ntype = "float"\nmin = 0.5\nmax = 0.75\n[values.anchor]'
    )
    with pytest.raises(LibraryError) as caught:
        library.parse_test_case(edge_of_a_float, "floaty.toml")
    assert "share = 0.75" in str(caught.value)


def test_a_value_that_fails_at_run_time_fails_that_instance_with_its_values() -> None:
    case = library.get_test_case("anchoring")
    spec = ValueSpec("anchor_index", "derived", {"expr": "1000 // (anchor - 50)"})
    broken = dataclasses.replace(case, values={**case.values, "anchor_index": spec})
    with pytest.raises(SamplingError) as caught:
        broken.sample_values(random.Random(0), fixed={"anchor": 50})
    error = caught.value
    assert (error.test_case, error.name, error.values["anchor"]) == (
        "anchoring",
        "anchor_index",
        50,
    )
    assert "test case 'anchoring'" in str(error) and "anchor=50" in str(error)
    assert "division by zero" in str(error)
    # Any other draw works, and a failing draw is never anything but a SamplingError.
    failures = 0
    for seed in range(300):
        try:
            values = broken.sample_values(random.Random(seed))
        except SamplingError:
            failures += 1
            continue
        assert values["anchor_index"] == 1000 // (values["anchor"] - 50)
    assert 0 < failures < 300
    with pytest.raises(SamplingError, match="y1 = 25 is not a reference point"):
        case.metric_params({"anchor": 50, "anchor_index": 25, "variant": "default"})


def test_thousands_of_problems_are_each_located(tmp_path: Path) -> None:
    keys = "".join(f"unknown_{i} = {i}\n" for i in range(3000))
    text = ANCHORING.replace("[metric]\n", "[metric]\n" + keys)
    with pytest.raises(LibraryError) as caught:
        library.parse_test_case(text, "many.toml")
    problems = caught.value.problems
    assert len(problems) == 3000
    assert all(p.line == line_of(text, f"unknown_{i} =") for i, p in enumerate(problems))


def test_a_byte_order_mark_is_accepted_and_lines_still_count(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_text(ANCHORING, encoding="utf-8-sig")
    assert library.load_test_case(path).id == "anchoring"
    broken = ANCHORING.replace("kind = ", "kinf = ")
    path.write_text(broken, encoding="utf-8-sig")
    with pytest.raises(LibraryError) as caught:
        library.load_test_case(path)
    assert caught.value.problems[0].line == line_of(broken, "kinf =")


# --------------------------------------------------------------------------- one bad file


@pytest.fixture
def bad_user_files(isolated_home: Path) -> list[Path]:
    folder = library.user_dir()
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "not_toml.toml": 'id = "x"\nname = [unclosed\n',
        "division.toml": HOSTILE_FILES["division"][0],
        "power.toml": HOSTILE_FILES["power"][0],
        "twin.toml": ANCHORING,  # the id of a built-in
        "fine.toml": hostile_case("my_fine_case"),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files if name != "fine.toml"]


def test_one_bad_file_never_takes_down_library_list_or_show(bad_user_files: list[Path]) -> None:
    done = cli("library", "list")
    no_traceback(done)
    assert done.returncode == 1
    assert "anchoring" in done.stdout and "my_fine_case  (user)" in done.stdout
    assert "4 file(s) skipped because of problems" in done.stderr
    for path in bad_user_files:
        assert re.search(rf"{re.escape(str(path))}:\d+:\d+: ", done.stderr), path
    report = library.load_library_report()
    assert "my_fine_case" in report.cases and len(report.broken_files()) == 4

    shown = cli("library", "show", "division")
    no_traceback(shown)
    assert shown.returncode == 2
    assert "cannot be used until its file is fixed" in shown.stderr
    assert "division.toml:" in shown.stderr

    preview = cli("preview", "anchoring")
    no_traceback(preview)
    assert preview.returncode == 0 and "=== TREATMENT ===" in preview.stdout


def test_pages_still_work_with_a_bad_file_and_list_its_problems(
    bad_user_files: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("COGBIAS_DB", str(tmp_path / "app.db"))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    for page in ("learn", "templates"):
        at.switch_page(f"app_pages/{page}.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("have problems and were skipped" in w.value for w in at.warning)
        assert any("division.toml" in c.value for c in at.code)


# --------------------------------------------------------------------------- overwrite


def test_saving_onto_a_users_own_id_needs_overwrite(isolated_home: Path) -> None:
    case = library.get_test_case("anchoring")
    mine = dataclasses.replace(case, id="mine", path=None)
    path = library.save_test_case(mine)
    before = path.read_bytes()
    renamed = dataclasses.replace(mine, name="Renamed")
    with pytest.raises(library.AlreadyExistsError, match="already have a test case 'mine'"):
        library.save_test_case(renamed)
    assert path.read_bytes() == before
    library.save_test_case(renamed, overwrite=True)
    assert library.get_test_case("mine").name == "Renamed"


def test_library_add_needs_force_to_replace_a_users_own_test_case(tmp_path: Path) -> None:
    source = tmp_path / "mine.toml"
    source.write_text(hostile_case("mine"), encoding="utf-8")
    added = cli("library", "add", str(source))
    assert added.returncode == 0, added.stderr
    target = library.user_dir() / "mine.toml"
    before = target.read_bytes()
    source.write_text(hostile_case("mine").replace('name = "Anchoring"', 'name = "Mine"'))
    again = cli("library", "add", str(source))
    no_traceback(again)
    assert again.returncode == 2 and "add --force to replace it" in again.stderr
    assert target.read_bytes() == before
    forced = cli("library", "add", str(source), "--force")
    assert forced.returncode == 0, forced.stderr
    assert library.load_test_case(target).name == "Mine"
    builtin = cli("library", "add", str(library.BUILTIN_DIR / "anchoring.toml"))
    no_traceback(builtin)
    assert builtin.returncode == 2 and "is a built-in test case" in builtin.stderr


def test_the_templates_page_asks_before_replacing(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("COGBIAS_DB", str(tmp_path / "app.db"))
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/templates.py")
    at.run()
    first = hostile_case("my_own")
    at.session_state["tpl_text"] = first  # what the editor sends once the author stops typing
    at.run()
    at.button(key="tpl_save").click().run()
    saved = library.user_dir() / "my_own.toml"
    before = saved.read_bytes()
    at.session_state["tpl_text"] = first.replace('name = "Anchoring"', 'name = "Mine"')
    at.run()
    at.button(key="tpl_save").click().run()
    assert not at.exception
    assert any("already have a test case with the id 'my_own'" in w.value for w in at.warning)
    assert saved.read_bytes() == before
    at.button(key="tpl_replace").click().run()
    assert not at.exception
    assert library.load_test_case(saved).name == "Mine"


# --------------------------------------------------------------------------- imported numbers


@pytest.fixture
def imported_db(tmp_path: Path) -> Path:
    """A database that already holds results, so 'unchanged' is not trivially true."""
    path = tmp_path / "imported.db"
    make_results_db(path, instances=2)
    return path


def _metric(rows: list[dict[str, str]], index: int, text: str) -> None:
    rows[index]["metric_params"] = text


HUB_EDITS = {
    "k1000": (
        lambda h, rows: _metric(rows, 2, "{'k': 1000, 'x_1': 0, 'x_2': 0}"),
        "row 3",
        "k must lie in [-1, 1]",
    ),  # fmt: skip
    "nan": (
        lambda h, rows: _metric(rows, 4, '{"k": NaN, "x_1": 0, "x_2": 0}'),
        "row 5",
        "'k' must be a finite number",
    ),  # fmt: skip
    "inf": (
        lambda h, rows: _metric(rows, 1, '{"k": 1, "x_1": 1e400, "x_2": 0}'),
        "row 2",
        "'x_1' must be a finite number",
    ),  # fmt: skip
    "digits": (
        lambda h, rows: _metric(rows, 6, "{'k': 1, 'x_1': " + "9" * 400 + ", 'x_2': 0}"),
        "row 7",
        "'x_1' must be a finite number",
    ),  # fmt: skip
    "outside": (
        lambda h, rows: _metric(rows, 0, "{'k': 1, 'x_1': 0, 'x_2': 40}"),
        "row 1",
        "x_2 = 40.0 is not an option index",
    ),  # fmt: skip
    "nested": (
        lambda h, rows: _metric(rows, 3, "[" * 20000 + "]" * 20000),
        "row 4",
        "cannot be read",
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", list(HUB_EDITS))
def test_hub_import_range_checks_metric_parameters(
    case: str, imported_db: Path, tmp_path: Path
) -> None:
    edit, row, fragment = HUB_EDITS[case]
    path = edited_csv(HUB_CSV, tmp_path / f"{case}.csv", edit)
    before = (file_hash(imported_db), snapshot(imported_db))
    done = cli("import", "malberg2024-hub", str(path), "--db", str(imported_db))
    no_traceback(done)
    assert done.returncode == 2
    assert f"{case}.csv, {row}" in done.stderr and "column 'metric_params'" in done.stderr
    assert fragment in done.stderr
    assert (file_hash(imported_db), snapshot(imported_db)) == before


MALBERG_EDITS = {
    "remarks": ("remarks", "{'k': 1000, 'x_1': 0, 'x_2': 0}", "k must lie in [-1, 1]"),
    "remarks nan": ("remarks", "{'k': 1, 'x_1': float('nan'), 'x_2': 0}", "cannot be read"),
    "remarks inf": ("remarks", '{"k": 1, "x_1": 1e400, "x_2": 0}', "x_1 must be a finite"),
    "seed": ("seed", "9" * 400, "expected a whole number of at most 18 digits"),
    "temperature": ("temperature", "1e400", "expected a finite number"),
    "hot": ("temperature", "50", "50.0 is outside [0, 2]"),
}


@pytest.mark.parametrize("case", list(MALBERG_EDITS))
def test_paper_format_import_range_checks_its_numbers(
    case: str, imported_db: Path, tmp_path: Path
) -> None:
    column, value, fragment = MALBERG_EDITS[case]
    folder = format_copy(tmp_path / "output")
    tests = folder / "full_dataset.csv"
    edited_csv(tests, tests, lambda header, rows: rows[4].update({column: value}))
    before = (file_hash(imported_db), snapshot(imported_db))
    done = cli("import", "malberg2024", str(folder), "--db", str(imported_db))
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert "full_dataset.csv, row 5" in done.stderr and f"column '{column}'" in done.stderr
    assert fragment in done.stderr, done.stderr
    assert (file_hash(imported_db), snapshot(imported_db)) == before


GOOD_ROW = {
    "bias": "Anchoring",
    "control": "Pick one.\nOption 1: a\nOption 2: b\nOption 3: c",
    "treatment": "Pick one, please.\nOption 1: a\nOption 2: b\nOption 3: c",
    "model": "m",
    "a": 0,
    "b": 1,
    "k": 1,
    "s": 0.5,
}


def _row(field: str, raw: str) -> str:
    """A JSONL line of GOOD_ROW with `field` written exactly as `raw` (NaN, 1e400, ...)."""
    return json.dumps({**GOOD_ROW, field: "@@"}).replace('"@@"', raw)


@pytest.mark.parametrize(
    ("third_line", "fragment"),
    [
        (_row("a", "1e400"), "column 'a': expected an option index"),
        (_row("a", "9" * 400), "column 'a': expected an option index"),
        (_row("a", '"nan"'), "column 'a': expected an option index"),
        (_row("a", "7"), "column 'a': option '7' does not exist"),
        (_row("k", "1e400"), "column 'k': expected a finite number"),
        (_row("k", "-3"), "column 'k': k must lie in [-1, 1]"),
        (_row("s", "4.5"), "column 's': 4.5 is outside [-1, 1]"),
        (_row("s", "Infinity"), "column 's': expected a finite number"),
        (_row("a", "[" * 5000 + "]" * 5000), "nested too deeply"),
    ],
    ids=[
        "1e400",
        "400 digits",
        "nan text",
        "no such option",
        "k inf",
        "k -3",
        "score",
        "score inf",
        "nesting",
    ],  # fmt: skip
)
def test_generic_import_range_checks_answers_and_numbers(
    third_line: str, fragment: str, imported_db: Path, tmp_path: Path
) -> None:
    rows = [json.dumps(GOOD_ROW), json.dumps({**GOOD_ROW, "model": "m2"}), third_line]
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    before = (file_hash(imported_db), snapshot(imported_db))
    mapping = {"bias": "bias", "control": "control", "treatment": "treatment", "model": "model",
               "control_answer": "a", "treatment_answer": "b", "k": "k", "score": "s"}  # fmt: skip
    args = [arg for field, column in mapping.items() for arg in ("--map", f"{field}={column}")]
    done = cli("import", "generic", str(path), "--db", str(imported_db), *args)
    no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert "answers.jsonl, row 3 (line 3)" in done.stderr, done.stderr
    assert fragment in done.stderr, done.stderr
    assert (file_hash(imported_db), snapshot(imported_db)) == before


def test_a_missing_nan_answer_is_a_failed_pair_not_a_crash(tmp_path: Path) -> None:
    """pandas writes a missing answer as NaN: that pair failed, the rest import."""
    rows = [json.dumps(GOOD_ROW), _row("a", "NaN").replace('"m"', '"m2"')]
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    db = tmp_path / "nan.db"
    args = ["--map", "bias=bias", "--map", "control=control", "--map", "treatment=treatment"]
    args += ["--map", "model=model", "--map", "control_answer=a", "--map", "treatment_answer=b"]
    done = cli("import", "generic", str(path), "--db", str(db), *args)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    with Store(db) as opened:
        statuses = {r["model"]: (r["status"], r["error"]) for r in opened.query(
            "select model, status, error from decisions")}  # fmt: skip
    assert statuses == {"m": ("ok", None), "m2": ("failed", "no answer")}


# --------------------------------------------------------------------------- databases


def test_results_on_an_empty_database_or_an_unknown_run_is_a_message(
    tmp_path: Path, cogbias_main
) -> None:
    """The first command in a real process, the second in this one (`cogbias_main`)."""
    db = tmp_path / "empty.db"
    done = cli("results", "--db", str(db))
    no_traceback(done)
    assert done.returncode == 0 and "no results yet" in done.stderr
    before = file_hash(db)
    unknown = cogbias_main("results", "--db", str(db), "--run", "run-nope")
    no_traceback(unknown)
    assert unknown.returncode == 2 and "no run run-nope in" in unknown.stderr
    assert "cogbias runs" in unknown.stderr
    assert file_hash(db) == before


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.db"
    make_results_db(path, instances=3)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _newer(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    with Store(path) as opened:
        opened.db["meta"].upsert({"key": "schema_version", "value": "99"}, pk="key")
    return path


BROKEN_DATABASES = {
    "corrupt": (lambda tmp: _write(tmp / "corrupt.db", os.urandom(8192)), "corrupt or truncated"),
    "text": (
        lambda tmp: _write(tmp / "notes.db", b"hello, not a database\n" * 300),
        "not a cogbias database",
    ),  # fmt: skip
    "truncated": (_truncated, "corrupt or truncated"),
    "newer": (_newer, "written by a newer cogbias (schema 99"),
    "folder": (lambda tmp: tmp, "is a folder, not a database file"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", list(BROKEN_DATABASES))
def test_broken_databases_get_a_message_and_stay_untouched(
    kind: str, tmp_path: Path, cogbias_main
) -> None:
    make, fragment = BROKEN_DATABASES[kind]
    db = make(tmp_path)
    before = file_hash(db) if db.is_file() else None
    run = cli if kind == "corrupt" else cogbias_main  # one kind in real processes
    for command in (["runs"], ["results"], ["datasets"], ["analyze"]):
        done = run(*command, "--db", str(db))
        no_traceback(done)
        assert done.returncode == 1, (command, done.stderr)
        assert fragment in done.stderr, (command, done.stderr)
    if before is not None:
        assert file_hash(db) == before


def test_a_locked_database_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "locked.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("create table t (x)")
    holder.execute("begin exclusive")
    monkeypatch.setattr(store.connection, "LOCK_TIMEOUT", 0.2)
    try:
        with pytest.raises(StoreError, match="locked by another process"):
            Store(db)
    finally:
        holder.execute("rollback")
        holder.close()


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and folders read-only for this process, even when it runs as root (where
    permission bits do not apply, the immutable attribute does)."""
    if os.geteuid() != 0:
        modes = [p.stat().st_mode for p in paths]
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in zip(paths, modes, strict=True):
                p.chmod(mode)
        return
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("cannot make files read-only here (running as root without chattr)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def test_reading_commands_work_on_a_read_only_database(tmp_path: Path, cogbias_main) -> None:
    """The first command in a real process, the others in this one (`cogbias_main`)."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    db = folder / "results.db"
    run_id = make_results_db(db, instances=3)
    before = file_hash(db)
    out = tmp_path / "pairs.csv"
    with read_only(db, folder):
        assert not os.access(db, os.W_OK)
        for command in (
            ["runs"],
            ["results", "--run", run_id],
            ["datasets"],
            ["analyze"],
            ["export", "--run", run_id, "-o", str(out)],
        ):
            done = (cli if command == ["runs"] else cogbias_main)(*command, "--db", str(db))
            no_traceback(done)
            assert done.returncode == 0, (command, done.stderr)
        writing = cogbias_main(
            "run", "--biases", "anchoring", "--models", "random", "--db", str(db)
        )
        no_traceback(writing)
        assert writing.returncode == 1 and "is read-only" in writing.stderr
    assert file_hash(db) == before
    with out.open(encoding="utf-8", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 3 * 3 * 2  # biases x instances x models


def test_a_read_only_database_that_needs_an_upgrade_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    db = folder / "old.db"
    conn = sqlite3.connect(db)
    conn.execute("create table meta (key text primary key, value text)")
    conn.execute("insert into meta values ('schema_version', '1')")
    conn.commit()
    conn.close()
    before = file_hash(db)
    with read_only(db, folder):
        done = cli("runs", "--db", str(db))
    no_traceback(done)
    assert done.returncode == 1 and "needs an upgrade to schema" in done.stderr
    assert "read-only" in done.stderr
    assert file_hash(db) == before


# --------------------------------------------------------------------------- secrets


def echoing_responder(request: dict) -> str:
    """A provider tricked into repeating the key: every answer and gap fill carries it."""
    answer = default_responder(request)
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"].get("properties", {})
        return json.dumps({key: f"fill my key is {SENTINEL}" for key in keys})
    return f"{answer} (my key is {SENTINEL})"


@pytest.fixture(scope="module")
def echoing_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(echoing_responder) as server:
        yield server


def test_preview_never_prints_a_key_the_generator_echoes(echoing_server: FakeLLMServer) -> None:
    env = {"OPENAI_API_KEY": SENTINEL}
    done = cli(
        "preview", "framing_effect", "--generator", "openai/echo", "--api-base",
        echoing_server.base_url, env=env,
    )  # fmt: skip
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert "fill my key is ***" in done.stdout
    assert SENTINEL not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{SENTINEL}@127.0.0.1:9/v1",
        f"http://127.0.0.1:9/v1?api_key={SENTINEL}",
        f"ftp://user:{SENTINEL}@127.0.0.1:9/v1",
        f"http://user:{SENTINEL}@127.0.0.1:port/v1",
    ],
)
def test_preview_refuses_credentials_in_the_endpoint_url(url: str) -> None:
    done = cli("preview", "anchoring", "--generator", "openai/x", "--api-base", url)
    no_traceback(done)
    assert done.returncode == 2
    assert "must not hold a user, password or query string" in done.stderr
    assert SENTINEL not in done.stdout + done.stderr


def test_an_echoed_key_reaches_no_output_database_file_or_export(
    echoing_server: FakeLLMServer, tmp_path: Path
) -> None:
    db = tmp_path / "secret.db"
    env = {"OPENAI_API_KEY": SENTINEL}
    outputs = []
    ran = cli(
        "run", "--biases", "anchoring,framing_effect", "--models", "openai/echo",
        "--generator", "openai/echo", "--api-base", echoing_server.base_url,
        "--instances", "2", "--db", str(db), env=env,
    )  # fmt: skip
    no_traceback(ran)
    outputs.append(ran.stdout + ran.stderr)
    assert echoing_server.calls > 0
    for command in (["runs"], ["results"], ["analyze"]):
        done = cli(*command, "--db", str(db), env=env)
        outputs.append(done.stdout + done.stderr)
    with Store(db) as opened:
        run_id = opened.runs()[0]["id"]
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"pairs.{fmt}"
        done = cli("export", "--db", str(db), "--run", run_id, "-o", str(out), env=env)
        outputs.append(done.stdout + done.stderr)
        assert out.is_file(), done.stderr
        assert SENTINEL.encode() not in out.read_bytes()
    for text in outputs:
        assert SENTINEL not in text
    for path in tmp_path.glob("secret.db*"):
        assert SENTINEL.encode() not in path.read_bytes(), path
