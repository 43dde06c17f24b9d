"""Every number is checked where it comes in, with a message naming the bound (issue 22,
points 13, 14 and 16): flags, test case files, study files and imported thesis data. Each
refused input leaves the database exactly as it was."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.cli.main import main
from cogbias.library import testcases as library
from cogbias.store import Store
from tests.dataset_helpers import MOHR_DIR, TOKENBIAS_DIR, snapshot
from tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
STUDY = (ROOT / "data" / "studies" / "mohr8.toml").read_text(encoding="utf-8")


def cogbias(*args: object, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if home is not None:
        env["COGBIAS_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text
    assert "unexpected" not in text, text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    Store(path).close()
    return path


# ------------------------------------------------------------------ point 13: flags

BAD_RUN_FLAGS = {
    ("--temperature", "nan"): "argument --temperature: must be a number from 0 to 2, not nan",
    ("--temperature", "inf"): "argument --temperature: must be a number from 0 to 2, not inf",
    ("--temperature", "-1"): "argument --temperature: must be a number from 0 to 2, not -1.0",
    ("--generator-temperature", "3"): "argument --generator-temperature: must be a number "
    "from 0 to 2, not 3.0",
    ("--deadline", "-5"): "argument --deadline: must be a number above 0 and at most 604800",
    ("--timeout", "nan"): "argument --timeout: must be a number above 0 and at most 604800",
    ("--poll-seconds", "0"): "argument --poll-seconds: must be a number above 0",
    ("--repeats", "0"): "argument --repeats: must be at least 1, not 0",
    ("--max-retries", "-1"): "argument --max-retries: must be at least 0, not -1",
    ("--seed", "1" * 29): "argument --seed: must be at most 9,223,372,036,854,775,807, "
    "not a 29-digit number",
    ("--scenarios", "0"): "argument --scenarios: must be at least 1, not 0",
}


@pytest.mark.parametrize("flag", list(BAD_RUN_FLAGS), ids=lambda f: f"{f[0]}={f[1][:8]}")
def test_run_flags_out_of_range_are_refused_naming_the_bound(
    flag: tuple[str, str], db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(db)
    with pytest.raises(SystemExit) as exited:
        main(
            ["run", "pairs", "--models", "random", "--biases", "anchoring", *flag, "--db", str(db)]
        )
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert BAD_RUN_FLAGS[flag] in err
    no_traceback(err)
    assert snapshot(db) == before


def test_a_huge_seed_once_failed_the_run_and_now_is_refused_before_it(db: Path) -> None:
    """The probe: a 29-digit seed ran and then failed writing its rows (OverflowError)."""
    before = snapshot(db)
    done = cogbias("run", "pairs", "--models", "random", "--biases", "anchoring",
                   "--seed", "12345678901234567890123456789", "--db", db)  # fmt: skip
    assert done.returncode == 2
    assert "--seed: must be at most" in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before
    ok = cogbias("run", "pairs", "--models", "random", "--biases", "anchoring",
                 "--seed", str(2**63 - 1), "--db", db)  # fmt: skip
    assert ok.returncode == 0, ok.stderr  # the largest seed the store holds still runs


def test_preview_temperature_and_alpha_are_bounded_too(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, expected in [
        (["preview", "anchoring", "--temperature", "inf"], "--temperature: must be a number"),
        (["results", "hypotheses", "tokenbias", "--alpha", "0"], "--alpha: must be a number "
         "above 0 and at most 1"),
    ]:  # fmt: skip
        with pytest.raises(SystemExit):
            main(argv)
        assert expected in capsys.readouterr().err


def test_a_float_range_wider_than_a_float_is_refused_by_library_check(tmp_path: Path) -> None:
    """The probe: min -1e308, max 1e308 passed and rendered "Value inf here"."""
    text = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
    text = text.replace("[values.", '[values.wide]\ntype = "float"\nmin = -1e308\nmax = 1e308\n\n'
                        "[values.", 1)  # fmt: skip
    path = tmp_path / "anchoring.toml"
    path.write_text(text.replace('situation = """', 'situation = """Value {{wide}} here. ', 1))
    done = cogbias("library", "check", path)
    assert done.returncode == 1
    assert re.search(r"anchoring\.toml:\d+:\d+: value 'wide': max - min must be a finite number "
                     r"\(at most 1\.8e\+308\)", done.stderr), done.stderr  # fmt: skip
    no_traceback(done.stderr)


def test_a_derived_value_that_overflows_is_located(tmp_path: Path) -> None:
    text = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
    text = text.replace("[values.", '[values.wide]\ntype = "float"\nmin = 1e300\nmax = 1e301\n\n'
                        '[values.huge]\ntype = "derived"\nexpr = "wide * wide"\n\n[values.', 1)  # fmt: skip
    path = tmp_path / "anchoring.toml"
    path.write_text(text)
    done = cogbias("library", "check", path)
    assert done.returncode == 1
    assert "value 'huge' fails" in done.stderr and "not a finite number" in done.stderr
    no_traceback(done.stderr)


def thesis_copy(tmp_path: Path, row: int, column: str, value: str) -> Path:
    folder = tmp_path / "thesis"
    folder.mkdir()
    for source in MOHR_DIR.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    path = folder / "bias_detections.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("temperature", "50", "column 'temperature': must lie in [0, 2]"),
        ("bias_detected", "1e300", "column 'bias_detected': must lie within ±1,000,000"),
    ],
)
def test_thesis_numbers_out_of_range_are_refused_with_file_row_and_column(
    column: str, value: str, message: str, tmp_path: Path, db: Path
) -> None:
    """The probe: temperatures of 50 were imported, and `bias_detected = 1e300` made
    `effects --view thesis` end in "unexpected OverflowError"."""
    folder = thesis_copy(tmp_path, 1, column, value)
    before = snapshot(db)
    done = cogbias("import", "mohr2025", folder, "--db", db)
    assert done.returncode == 2
    assert f"bias_detections.csv, row 1 (line 2), {message}" in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before


def test_a_cache_age_past_a_century_names_its_bound(db: Path) -> None:
    before = snapshot(db)
    done = cogbias("cache", "prune", "--older-than", "1000000d", "--db", db)
    assert done.returncode == 2
    assert "--older-than '1000000d': at most 36,500 days" in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before


# ------------------------------------------------------------------ point 14: study prompts


@pytest.mark.parametrize("where", ["persona", "condition"])
def test_a_study_prompt_past_50000_characters_is_refused(
    where: str, tmp_path: Path, db: Path
) -> None:
    """The probe: a 60,000-character prompt ran though the documented limit is 50,000."""
    home = tmp_path / "home"
    (home / "studies").mkdir(parents=True)
    text = STUDY.replace('id = "mohr8"', 'id = "long"', 1)
    if where == "persona":
        anchor = 'persona = "'  # [prompts] persona, before any variant's `persona = true`
    else:  # a condition prompt, refused before its gaps are filled
        anchor = 'prompt = """An urn holds '
    at = text.index(anchor) + len(anchor)
    text = text[:at] + "x" * 60_000 + " " + text[at:]
    (home / "studies" / "long.toml").write_text(text, encoding="utf-8")
    before = snapshot(db)
    done = cogbias("run", "study", "long", "--models", "random", "--repeats", "1", "--db", db,
                   home=home)  # fmt: skip
    assert done.returncode != 0
    assert re.search(r"long\.toml:\d+:\d+: (the text|the question \(persona, prompt and answer hint\)) is "
                     r"60,\d{3} characters long; at most 50,000 are allowed", done.stderr), done.stderr  # fmt: skip
    no_traceback(done.stderr)
    assert snapshot(db) == before


# ------------------------------------------------------------------ point 16: located messages

DEEP = "[" * 50_000 + "]" * 50_000


def test_deep_nesting_in_a_thesis_variables_cell_is_located(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "thesis"
    folder.mkdir()
    for source in MOHR_DIR.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    experiments = folder / "experiments.csv"
    text = experiments.read_text(encoding="utf-8")
    # 5,000 levels: past the parser's recursion, within a variables cell's 20,000 characters
    deep = '"{""a"": ' + DEEP[:5_000] + DEEP[-5_000:] + '}"'
    experiments.write_text(text.replace('"{""anchor_value"": 900}"', deep, 1), encoding="utf-8")
    before = snapshot(db)
    done = cogbias("import", "mohr2025", folder, "--db", db)
    assert done.returncode == 2
    assert ("experiments.csv, row 1 (line 2), column 'variables': nested too deeply; at most 100 "
            "levels are allowed") in done.stderr  # fmt: skip
    no_traceback(done.stderr)
    assert snapshot(db) == before


def test_deep_nesting_in_token_bias_json_is_located(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "tokenbias"
    folder.mkdir()
    for source in TOKENBIAS_DIR.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    gold = folder / "synthetic_dataset_demo_original_gold.json"
    data = json.loads(gold.read_text(encoding="utf-8"))
    text = json.dumps(data).replace('"generation_mode": "gold"', f'"extra": {DEEP}', 1)
    gold.write_text(text, encoding="utf-8")
    before = snapshot(db)
    done = cogbias("import", "peek2024", folder, "--db", db)
    assert done.returncode == 2
    assert "synthetic_dataset_demo_original_gold.json: nested too deeply" in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before


def test_a_lone_surrogate_in_an_imported_line_is_named_by_row_and_field(
    tmp_path: Path, db: Path
) -> None:
    """The probe: a lone surrogate was refused with a bare codec message."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        '{"bias": "anchoring", "control": "Pick\\ud800\\nOption 1: a\\nOption 2: b", '
        '"treatment": "Pick\\nOption 1: a\\nOption 2: b"}\n',
        encoding="utf-8",
    )
    before = snapshot(db)
    done = cogbias("import", "generic", path, "--map", "bias=bias", "--map", "control=control",
                   "--map", "treatment=treatment", "--db", db)  # fmt: skip
    assert done.returncode == 2
    assert ("pairs.jsonl, row 1 (line 1): holds a lone surrogate (\\ud800) in control at "
            "character 5, which is not text") in done.stderr  # fmt: skip
    assert "codec" not in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before


def test_an_argument_that_is_not_utf8_is_named(db: Path) -> None:
    before = snapshot(db)
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"cogbias", b"run", b"pairs", b"--models", b"random",
         b"--biases", b"anchoring", b"--name", b"ab\xff", b"--db", str(db).encode()],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        timeout=300, check=False,
    )  # fmt: skip
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2
    assert "error: argument name: ab\\udcff is not UTF-8 text" in err
    assert "codec" not in err
    no_traceback(err)
    assert snapshot(db) == before


def test_missing_example_fills_are_an_error_not_unexpected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    text = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
    text = text.replace('id = "anchoring"', 'id = "bare_anchoring"')
    bare = tmp_path / "bare_anchoring.toml"
    bare.write_text(text[: text.index("[examples]")], encoding="utf-8")
    assert cogbias("library", "add", bare, home=home).returncode == 0
    done = cogbias("preview", "bare_anchoring", "--generator", "examples", home=home)
    assert done.returncode == 1
    assert done.stderr.startswith("error: bare_anchoring has no example fills for the gap")
    no_traceback(done.stderr)


def test_a_refused_key_is_an_error_not_unexpected(db: Path) -> None:
    before = snapshot(db)
    with FakeLLMServer(api_key="sk-the-right-one") as server:
        done = cogbias("pair", "anchoring", "--models", "openai/x", "--api-base", server.base_url,
                       "--db", db)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("error: openai/x at http://127.0.0.1:")
    assert "authentication failed" in done.stderr and "sk-the-right-one" not in done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "target_answer",
            "1" + "0" * 400,
            "a number must be finite and within ±1e+15, found a huge",
        ),
        ("target_answer", "NaN", "a number must be finite and within ±1e+15, found nan"),
        ("question_idx", "1" + "0" * 50, "expected a whole number from 0 to 2**53, found a huge"),
    ],
)
def test_out_of_range_numbers_in_token_bias_json_are_located(
    field: str, value: str, message: str, tmp_path: Path, db: Path
) -> None:
    """Found by the property test: these ended in "unexpected OverflowError"."""
    folder = tmp_path / "tokenbias"
    folder.mkdir()
    for source in TOKENBIAS_DIR.iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    gold = folder / "synthetic_dataset_demo_original_gold.json"
    data = json.loads(gold.read_text(encoding="utf-8"))
    data["0"][field] = "MARK"
    gold.write_text(json.dumps(data).replace('"MARK"', value, 1), encoding="utf-8")
    before = snapshot(db)
    done = cogbias("import", "peek2024", folder, "--db", db)
    assert done.returncode == 2
    assert f"row 1, column '{field}': (item \"0\") {message}" in done.stderr, done.stderr
    no_traceback(done.stderr)
    assert snapshot(db) == before
