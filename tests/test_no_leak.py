"""Issue 22, "nothing leaked": a key a provider echoes (plainly or disguised) reaches no
output, database or export, and no engine message; nothing printed can act on the terminal.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_llm_server import FakeLLMServer, default_responder

from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-probe-9Fh3Ka7Qz2Lm5Xw8Rt4"
# what a provider tricked into revealing the key sends back (the probe's disguises)
DISGUISES = {
    "plain": KEY,
    "reversed": KEY[::-1],
    "spaced": " ".join(KEY),
    "upper": KEY.upper(),
    "base64": base64.b64encode(f"my key is {KEY}".encode()).decode(),
    "url-safe base64": base64.urlsafe_b64encode(f"key={KEY}!".encode()).decode(),
}


def cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`cogbias ARGS` in a child process (its own environment, as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY, **(env or {})},
    )  # fmt: skip


def leaks(data: str | bytes) -> list[str]:
    """Which disguises of the key `data` still holds."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return [name for name, form in DISGUISES.items() if form in text]


def disguising_responder(request: dict) -> str:
    """Every answer and every gap fill carries the key in all its disguises."""
    echoed = " / ".join(DISGUISES.values())
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"].get("properties", {})
        return json.dumps({key: f"fill {echoed}" for key in keys})
    return f"{default_responder(request)} (my key: {echoed})"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(disguising_responder) as srv:
        yield srv


# --------------------------------------------------------------------------- point 4


def test_pair_prints_the_answer_redacted_as_run_stores_it(server: FakeLLMServer, tmp_path: Path):
    done = cli(
        "pair", "anchoring", "--models", "openai/echo", "--generator", "openai/echo",
        "--api-base", server.base_url, "--db", tmp_path / "p.db",
        "--scoring", "choice",  # a sampled answer, echoed (its default: probabilities)
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "control: answer 'Option" in done.stdout and "***" in done.stdout, done.stdout
    assert leaks(done.stdout + done.stderr) == []


# --------------------------------------------------------------------------- point 5


def test_disguised_keys_reach_no_decision_call_insertion_or_export(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    db = tmp_path / "run.db"
    ran = cli(
        "run", "pairs", "--biases", "anchoring", "--models", "openai/echo", "--generator",
        "openai/echo", "--api-base", server.base_url, "--instances", 2, "--db", db,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    outputs = [ran.stdout + ran.stderr]
    with Store(db) as store:
        run_id = store.runs()[0]["id"]
        stored = {
            "decisions": store.query("select * from decisions"),
            "calls": store.query("select * from llm_calls"),
            "instances": store.query("select * from instances"),
        }
    for table, rows in stored.items():
        assert rows, table
        assert leaks(json.dumps(rows, ensure_ascii=False)) == [], table
    assert "***" in json.dumps(stored["decisions"]) and "***" in json.dumps(stored["instances"])
    for path in tmp_path.glob("run.db*"):
        assert leaks(path.read_bytes()) == [], path
    for command in (["runs"], ["results"], ["analyze"]):
        done = cli(*command, "--db", db)
        outputs.append(done.stdout + done.stderr)
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"pairs.{fmt}"
        done = cli("export", "--run", run_id, "-o", out, "--db", db)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
        data = out.read_bytes() if fmt != "parquet" else json.dumps(pq.read_table(out).to_pylist())
        assert leaks(data) == [], fmt
    for text in outputs:
        assert leaks(text) == []


# --------------------------------------------------------------------------- point 6


def test_batch_import_never_prints_an_engine_message_with_the_key(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    made = cli(
        "run", "pairs", "--models", "openai/engine", "--api-base", "http://127.0.0.1:9/v1",
        "--biases", "anchoring", "--scenarios", 1, "--instances", 1, "--db", db, "--plan-only",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = made.stdout.strip()
    requests = tmp_path / "r.jsonl"
    assert cli("batch", "export", run_id, "-o", requests, "--db", db).returncode == 0
    keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    messages = [f"invalid api key {form}" for form in DISGUISES.values()]
    lines = [
        {"custom_id": key, "response": None, "error": {"message": messages[i % len(messages)]}}
        for i, key in enumerate(keys)
    ]
    results = tmp_path / "o.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert len(keys) >= 2
    done = cli("batch", "import", results, "--db", db)
    assert done.returncode == 0, done.stderr
    assert "the engine reported an error: invalid api key ***" in done.stderr, done.stderr
    assert leaks(done.stdout + done.stderr) == []
    # each disguise in turn, as an error that is a plain string rather than an object
    for form in DISGUISES.values():
        first = {"custom_id": keys[0], "response": None, "error": f"bad key: {form}"}
        results.write_text(json.dumps(first) + "\n")
        done = cli("batch", "import", results, "--db", db)
        assert done.returncode == 0 and "error: bad key: " in done.stderr, done.stderr
        assert "***" in done.stderr
        assert leaks(done.stdout + done.stderr) == []


# --------------------------------------------------------------------------- point 11

FORMULA = '=HYPERLINK("http://127.0.0.1/x","click")'


def read_csv(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def test_csv_text_cells_never_start_a_formula_numbers_stay_numbers_jsonl_stays_exact(
    tmp_path: Path,
) -> None:
    from dataset_helpers import MOHR_DIR, edited_csv, format_copy

    # the paper's output format with a model, an answer and an error that start formulas
    folder = format_copy(tmp_path / "fmt")
    results = folder / "decision_results" / "stub-model.csv"

    def hostile(header: list[str], rows: list[dict[str, str]]) -> None:
        for row in rows:
            row["model"] = FORMULA
        rows[0]["control_answer"] = "@SUM(1+1) I choose something."
        rows[1].update(status="ERROR", individual_score="", error_message="-2+3+cmd|' /C calc'!A0")
        rows[1].update(control_decision="", treatment_decision="")

    edited_csv(results, results, hostile)
    db = tmp_path / "f.db"
    done = cli("import", "malberg2024", folder, "--name", "+evil", "--db", db)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "pairs.csv"
    assert cli("export", "--dataset", "+evil", "-o", out, "--db", db).returncode == 0
    rows = read_csv(out.read_text(encoding="utf-8"))
    assert {r["dataset"] for r in rows} == {"'+evil"}
    assert {r["model"] for r in rows} == {"'" + FORMULA}
    assert "'@SUM(1+1) I choose something." in {r["control_raw_answer"] for r in rows}
    assert "'-2+3+cmd|' /C calc'!A0" in {r["error"] for r in rows}
    for row in rows:  # numbers stay numbers, negative ones included
        for name in ("score", "k", "y1", "temperature"):
            assert row[name] == "" or float(row[name]) == float(row[name]), (name, row[name])
    assert any(r["score"].startswith("-") for r in rows)  # a negative score, as a number
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "@", "\t", "\r")), value
            assert not value.startswith("-") or float(value) < 0, value
    # JSONL keeps the exact text
    exact = tmp_path / "pairs.jsonl"
    assert cli("export", "--dataset", "+evil", "-o", exact, "--db", db).returncode == 0
    records = [json.loads(line) for line in exact.read_text(encoding="utf-8").splitlines()]
    assert {r["model"] for r in records} == {FORMULA}
    assert {r["dataset"] for r in records} == {"+evil"}

    # the tables the command prints as CSV: results and analyze
    for command in (["results", "dataset", "+evil"], ["analyze", "--dataset", "+evil"]):
        done = cli(*command, "--format", "csv", "--db", db)
        assert done.returncode == 0, (command, done.stderr)
        printed = read_csv(done.stdout)
        assert printed and {r["model"] for r in printed} == {"'" + FORMULA}, done.stdout

    # published effect sizes: a model name that is a formula, negative d values as numbers
    mohr = tmp_path / "mohr"
    import shutil

    shutil.copytree(MOHR_DIR, mohr)
    detections = mohr / "bias_detections.csv"

    def rename_model(header: list[str], rows: list[dict[str, str]]) -> None:
        for row in rows:
            if row["model"] == "model-a":
                row["model"] = "@model-a"

    edited_csv(detections, detections, rename_model)
    done = cli("import", "mohr2025", mohr, "--name", "m", "--db", db)
    assert done.returncode == 0, done.stderr
    done = cli("effects", "--db", db, "--dataset", "m", "--format", "csv")
    assert done.returncode == 0, done.stderr
    printed = read_csv(done.stdout)
    columns = list(printed[0])
    assert "'@model-a" in columns or "'@model-a" in {r.get("model") for r in printed}, done.stdout
    cells = [v for r in printed for v in r.values() if v]
    quoted = [v for v in cells if v.startswith("'")]
    assert quoted == ["'@model-a"] * len(quoted) and len(quoted) < len(cells)


# --------------------------------------------------------------------------- point 12

TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
CSI = "\x9b31m"  # the one-byte C1 form of ESC [
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def test_names_with_terminal_controls_are_printed_escaped(tmp_path: Path, cogbias_main) -> None:
    """Names with controls are refused where they come in (issue 29, point 10) and the
    refusal prints them escaped; a label an older version stored still lists as one row."""
    from dataset_helpers import HUB_CSV

    from cogbias.store import Store

    db = tmp_path / "t.db"
    name = f"{TITLE}data{CLEAR}set\u202e"
    run_name = f"{CSI}my run\r\nfake line"
    model = f"openai/m{CLEAR}"
    commands = [
        ["import", "malberg2024-hub", HUB_CSV, "--name", name],
        ["import", "malberg2024-hub", HUB_CSV, "--name", "ds"],
        ["run", "dataset", "ds", "--models", "random", "--name", run_name],
        ["run", "dataset", "ds", "--models", "random"],
        ["run", "pairs", "--biases", "anchoring", "--models", model,
         "--api-base", "http://127.0.0.1:9/v1", "--plan-only"],
        ["runs"],
        ["datasets"],
        ["results", "dataset", "ds"],
        ["results", "dataset", "ds", "--format", "csv"],
        ["results", "pairs"],
        ["analyze", "--dataset", "ds"],
        ["analyze", "--dataset", "ds", "--format", "csv"],
        ["export", "--dataset", "ds", "-o", tmp_path / f"{CLEAR}.csv"],
        ["results", "dataset", f"{CLEAR}no such dataset"],
        ["delete", "dataset", f"{TITLE}nothing", "--yes"],
    ]  # fmt: skip
    shown = ""
    for command in commands:
        if command == ["runs"]:  # a label stored by an older version, before labels were checked
            with Store(db) as store:
                store.update_run(store.runs()[0]["id"], name=run_name)
        done = cogbias_main(*command, "--db", db, env={"OPENAI_API_KEY": KEY})
        printed = done.stdout + done.stderr
        assert "Traceback" not in printed, printed
        for char in RAW:
            assert char not in printed, (command, printed)
        shown += printed
    # escaped, not dropped: what is printed still says what is stored or refused
    assert "the dataset name '\\x1b]0;pwned\\x07data\\x1b[2J\\x1b[Hset\\u202e' holds a" in shown
    assert "--name: the label holds a control or invisible character (\\x9b)" in shown
    # the label in `cogbias runs`: escaped in one row (clipped to the terminal's width)
    assert "\\x9b31m" in shown
    assert "openai/m\\x1b[2J\\x1b[H" in shown
    assert "\\x1b[2J\\x1b[Hno such dataset" in shown


def test_the_disguise_patterns_catch_the_key_and_leave_ordinary_text_alone() -> None:
    from cogbias.core.redact import redactor
    from cogbias.core.safetext import csv_cell, terminal

    clean = redactor((KEY,))
    for name, form in DISGUISES.items():
        for text in (form, f"before {form} after", f"{form}\n{form}"):
            assert leaks(clean(text) or "") == [], (name, text)
    assert leaks(clean(" ".join(KEY).upper()[::-1]) or "") == []  # reversed, spaced, upper
    ordinary = "Option 1: sk probe, keep the 9 fh and 3 ka. PROBE-9 hq. " + KEY[:8]
    assert clean(ordinary) == ordinary
    # the spreadsheet and terminal helpers: what changes and what does not
    assert [csv_cell(v) for v in ("=1", "+a", "-a", "@a", "\tx", "\rx", "-3", "+1.5e3", 2)] == [
        "'=1", "'+a", "'-a", "'@a", "'\tx", "'\rx", "-3", "+1.5e3", 2,
    ]  # fmt: skip
    assert terminal("a\x1b[2Jb\nc\u202e\x00") == "a\\x1b[2Jb\\nc\\u202e\\x00"


def test_a_secret_without_a_key_shape_is_caught_reversed_as_well(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the environment value tells the redactor about such a secret (no `sk-` shape to
    fall back on), so each of its disguises, the reversed ones too, must come from knowing it."""
    from cogbias.core.redact import redactor

    secret = "own-server-value-7Qx2Lm5Xw8Rt4"
    monkeypatch.setenv("OWN_SERVER_TOKEN", secret)
    clean = redactor()
    for form in (
        secret,
        secret[::-1],
        secret.upper()[::-1],
        " ".join(secret[::-1]),
        "\n".join(secret[::-1].swapcase()),
    ):
        cleaned = clean(f"echo: {form} end") or ""
        assert cleaned == "echo: *** end", (form, cleaned)
