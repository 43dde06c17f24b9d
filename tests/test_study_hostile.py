"""Study runs under hostile input: a careless or malicious study file, an imported thesis CSV
that plays with names, a model that answers badly, odd command-line flags, and two workers
racing for one run.

For each: a clear message that says what is wrong and where (file:line:col, or the CSV rows),
never a traceback or a hang; nothing half-written; everything bounded. The CLI runs as a real
child process wherever what a person sees matters; models are `random` or a scripted
OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from dataset_helpers import MOHR_DIR
from fake_llm_server import FakeLLMServer, _last_user_text

from cogbias.datasets import tokenbias_study
from cogbias.library.testcases import LibraryError
from cogbias.llm import random_provider
from cogbias.runs import executor, study_answers, study_plan, study_results
from cogbias.store import Store
from cogbias.studies import definitions as studies
from cogbias.studies import interventions, study_catalog, study_files
from cogbias.studies.questions import read_answer, study_from_prompts

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = MOHR_DIR


def cogbias(*args: object, home: Path | None = None, timeout: float = 300):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    if home is not None:
        env["COGBIAS_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    for stream in (done.stdout, done.stderr):
        assert "Traceback" not in stream, stream
        assert not re.search(r"^\w+Error: ", stream, re.MULTILINE), stream


def calls(db: Path) -> list[dict]:
    with Store(db) as store:
        return store.query("select * from study_calls order by rowid")


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


# --------------------------------------------------------------------------- study files

BASE = """id = "x"
name = "X"
description = "A small study to break."
repeats = 2
[values.n]
type = "int"
min = 1
max = 9
[tests.t]
bias = "anchoring"
design = "conditions"
answer = "number"
metric = "cohens_d"
[tests.t.conditions.control]
prompt = "n is {{n}}; guess a number."
[tests.t.conditions.treatment]
prompt = "n is {{n}}0; guess a number."
"""
SEQUENCE = """id = "x"
name = "X"
description = "A small sequence to break."
[values.n]
type = "int"
min = 1
max = 9
[tests.s]
bias = "anchoring"
design = "sequence"
answer = "admit_reject"
metric = "anchoring_distance"
item = "applicant {{n}}"
turn = "Next: {{item}}. Admit or reject?"
length = 3
orders = 3
[tests.s.conditions.sequential]
prompt = "Decide one applicant at a time."
"""
LONG_VALUE = '[values.big]\ntype = "derived"\nexpr = "\'x\' * 10000"\n'

# name → (file text, the text on the line the problem is reported at, words of the message)
HOSTILE_FILES = {
    "attempts": (BASE.replace("repeats = 2", "max_attempts = 1000000000"), "max_attempts", "between 1 and 20"),
    "repeats": (BASE.replace("repeats = 2", "repeats = 10000000000000"), "repeats =", "between 1 and 100,000"),
    "length": (SEQUENCE.replace("length = 3", "length = 1000000"), "length =", "between 2 and 50 items"),
    "orders": (SEQUENCE.replace("orders = 3", "orders = 1000000000"), "orders =", "between 2 and 6 presentation orders"),
    "megaprompt": (BASE.replace("[tests.t]", LONG_VALUE + "[tests.t]").replace("n is {{n}}0", "{{big}}" * 2000), "{{big}}", "longer than 50,000 characters"),
    "scale_nan": (BASE + "[variants.v]\npersona = false\nscale = nan\n", "scale = nan", "positive number up to 1e12"),
    "scale_inf": (BASE + "[variants.v]\npersona = false\nscale = inf\n", "scale = inf", "positive number up to 1e12"),
    "min_nan": (BASE.replace('metric = "cohens_d"', 'metric = "cohens_d"\nmin = nan'), "min = nan", "between -1e15 and 1e15"),
    "letters": (BASE.replace('answer = "number"', 'answer = "letter"\nletters = "éàü"\ntarget = "é"'), "letters =", "distinct letters a-z"),
    "condition_name": (BASE.replace("conditions.control]", 'conditions."c\\u001b[2J"]'), "[tests.t]", r"condition name 'c\x1b[2J'"),
    "selfhelp_gap": (BASE.replace("[values.n]", '[prompts]\nselfhelp = "Rewrite {{prompt}} for {{n}}"\n[values.n]'), "selfhelp =", "takes only {{prompt}}"),
    "persona_gap": (BASE.replace("[values.n]", '[prompts]\npersona = "You are {{n}}"\n[values.n]'), "persona =", "it is used as written"),
    "nested": ("a = " + "[" * 50_000 + "]" * 50_000, "a = ", "nests arrays or tables too deeply"),
    "control_char": (BASE.replace('design = "conditions"', 'design = "\x1b[2J"'), "design", "not valid TOML"),
    "scaled_overflow": (BASE.replace("max = 9", "max = " + "9" * 400).replace('metric = "cohens_d"', 'metric = "cohens_d"\nscaled = ["n"]') + "[variants.v]\npersona = false\nscale = 1e12\n", "scaled", "only numbers can be scaled"),
    "unicode_id": (BASE.replace("[tests.t]", '[tests."tü"]').replace("tests.t.", 'tests."tü".'), '[tests."tü"]', "test id 'tü' must be lower-case"),
    "duplicate_test": (BASE + "# again\n" + BASE[BASE.index("[tests.t]") :], "# again", "Cannot declare ('tests', 't') twice"),
    "digits": (BASE.replace("repeats = 2", "repeats = " + "9" * 5000), "repeats =", "too many digits"),
    "min_huge": (BASE.replace('metric = "cohens_d"', 'metric = "cohens_d"\nmin = -1e300'), "min = -1e300", "between -1e15 and 1e15"),
    "variants": (BASE + "".join(f"[variants.v{i}]\npersona = false\n" for i in range(21)), "[variants.v0]", "at most 20 variants, not 21"),
    "conditions": (BASE.replace('design = "conditions"', 'design = "options"').replace('answer = "number"', 'answer = "letter"').replace('metric = "cohens_d"', 'metric = "primacy"\nk = 2\nitem = "i {{n}}"').split("[tests.t.conditions")[0] + "".join(f'[tests.t.conditions.c{i}]\nprompt = "{{{{options}}}}"\n' for i in range(21)), "[tests.t]", "at most 20 conditions, not 21"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(HOSTILE_FILES))
def test_a_hostile_study_file_is_one_located_problem_never_a_crash(name: str) -> None:
    text, at, words = HOSTILE_FILES[name]
    with pytest.raises(LibraryError) as caught:
        study_files.parse_study(text, f"{name}.toml")
    problems = caught.value.problems
    assert any(words in p.message for p in problems), [p.message for p in problems]
    problem = next(p for p in problems if words in p.message)
    assert problem.file == f"{name}.toml"
    if name not in ("nested", "scaled_overflow"):
        line = line_of(text, at) + (at == "# again")  # the repeated table, after the mark
        assert problem.line == line, (problem, text)


def test_more_than_the_bounded_number_of_tests_is_refused() -> None:
    test = BASE[BASE.index("[tests.t]") :]
    many = BASE[: BASE.index("[tests.t]")] + "".join(
        test.replace("tests.t", f"tests.t{i}") for i in range(studies.MAX_TESTS + 1)
    )
    with pytest.raises(LibraryError, match="at most 500 tests"):
        study_files.parse_study(many, "many.toml")


def test_a_value_that_reads_like_a_gap_is_inserted_as_text_never_rendered_again() -> None:
    text = BASE.replace(
        "min = 1\nmax = 9",
        'min = 1\nmax = 1\n[values.s]\ntype = "choice"\noptions = ["{{prompt}} {{n}}"]',
    )
    text = text.replace("n is {{n}}; guess", "{{s}}; guess")
    study = study_files.parse_study(text, "x.toml")
    spec = study_plan.resolve(
        study_plan.StudySpec("x", ["random"], mitigations=["selfhelp"]), study
    )
    unit = study_plan.plan(spec, study).units[0]
    script = study_plan.compose(study, spec, unit)
    assert script.turns[0].startswith("{{prompt}} {{n}}; guess")
    assert "{{prompt}} {{n}}; guess" in script.rewrite  # the original, placed once


def test_a_byte_order_mark_is_accepted() -> None:
    assert study_files.parse_study("\ufeff" + BASE, "bom.toml").id == "x"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "studies").mkdir(parents=True)
    return home


def test_broken_user_study_files_are_located_and_never_break_the_others(
    home: Path, tmp_path: Path, cogbias_main: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The first broken file in a real process, the others in this one (`cogbias_main`)."""
    folder = home / "studies"
    (folder / "bad.toml").write_text('id = "bad"\nname = 5\n', encoding="utf-8")
    (folder / "latin.toml").write_bytes('id = "latin"\nname = "Caf\xe9"\n'.encode("latin-1"))
    (folder / "huge.toml").write_bytes(b"#" * (studies.MAX_STUDY_BYTES + 1))
    shutil.copy(studies.STUDY_DIR / "mohr8.toml", folder / "mohr8.toml")  # shadows a built-in
    db = tmp_path / "s.db"
    expected = {
        "bad": f"{folder / 'bad.toml'}:2:8: 'name' should be a string",
        "latin": f"{folder / 'latin.toml'}:2:12: byte 0xe9 is not UTF-8 text",
        "huge": f"{folder / 'huge.toml'}:1:1: the file is {studies.MAX_STUDY_BYTES + 1:,} bytes",
    }
    for name, message in expected.items():
        words = ("run", "--study", name, "--models", "random", "--dry-run", "--db", db)
        if name == "bad":
            done = cogbias(*words, home=home)
        else:
            done = cogbias_main(*words, env={"COGBIAS_HOME": str(home)})
        assert done.returncode == 1 and message in done.stderr, done.stderr  # a file problem
        no_traceback(done)
    # the built-in still runs; the file that shadows it is named, not silently ignored
    done = cogbias_main(
        "run", "--study", "mohr8", "--models", "random", "--dry-run", "--db", db,
        env={"COGBIAS_HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"note: {folder / 'mohr8.toml'}:1:" in done.stderr
    assert "a built-in study has the id 'mohr8'" in done.stderr
    assert not db.exists() or not calls(db)  # a dry run writes nothing
    os.environ["COGBIAS_HOME"] = str(home)  # the library view the app lists problems from
    try:
        usable, problems = study_catalog.load_studies_report()
    finally:
        del os.environ["COGBIAS_HOME"]
    assert set(usable) == {p.stem for p in studies.STUDY_DIR.glob("*.toml")}  # the built-ins
    assert {Path(p.file).stem for p in problems} == {"bad", "latin", "huge", "mohr8"}
    assert usable["mohr8"].path == studies.STUDY_DIR / "mohr8.toml"


# --------------------------------------------------------------------------- command line

BAD_FLAGS = {
    ("--temperatures", ""): "--temperatures is empty",
    ("--temperatures", ",,,"): "--temperatures is empty",
    ("--temperatures", "nan"): "temperature nan is outside 0..2",
    ("--temperatures", "inf"): "temperature inf is outside 0..2",
    ("--temperatures", "-1"): "temperature -1.0 is outside 0..2",
    ("--temperatures", "warm"): "'warm' is not a number",
    ("--repeats", "0"): "--repeats must be at least 1, not 0",
    ("--repeats", "-5"): "--repeats must be at least 1, not -5",
    ("--max-attempts", "0"): "--max-attempts must be at least 1",
    ("--max-attempts", "100"): "attempts must be between 1 and 20",
    ("--models", ""): "--models is empty",
    ("--models", " , "): "--models is empty",
    ("--variants", ""): "--variants is empty",
    ("--variants", "nope"): "unknown variant 'nope'; the study has: 0_normal",
    ("--tests", "nope"): "unknown test 'nope'",
    ("--mitigations", "bogus"): "unknown mitigation 'bogus'",
}


@pytest.mark.parametrize("flag", list(BAD_FLAGS), ids=lambda f: f"{f[0]}={f[1]!r}")
def test_bad_study_flags_get_a_message_and_write_nothing(
    flag: tuple[str, str], tmp_path: Path, cogbias_main
) -> None:
    db = tmp_path / "s.db"
    args = {"--models": "random", **dict([flag])}
    flat = [x for pair in args.items() for x in pair]
    done = cogbias_main("run", "--study", "mohr8", *flat, "--db", db)  # real processes below
    assert done.returncode == 2, done.stderr
    assert BAD_FLAGS[flag] in done.stderr
    no_traceback(done)
    assert not db.exists() or not calls(db)


def test_a_name_given_twice_is_asked_once(tmp_path: Path) -> None:
    study = study_plan.load_study("mohr8")
    once = study_plan.resolve(
        study_plan.StudySpec("mohr8", ["random"], temperatures=[0.2], repeats=2), study
    )
    twice = study_plan.resolve(
        study_plan.StudySpec("mohr8", ["random", "random"], tests=["anchoring", "anchoring"],
                             temperatures=[0.2, 0.20], variants=["0_normal", "0_normal"], repeats=2),
        study,
    )  # fmt: skip
    assert twice.models == ["random"] and twice.tests == ["anchoring"]
    assert twice.temperatures == [0.2] and twice.variants == ["0_normal"]
    units = study_plan.plan(twice, study).units
    assert len(units) == len(set(units)) == 2 * 2  # 2 conditions × 2 repeats
    assert once.models == twice.models


def test_a_token_bias_dataset_given_as_a_study_says_how_to_run_it(tmp_path: Path) -> None:
    from cogbias.studies import tokenbias

    source = (ROOT / "data" / "tokenbias.toml").read_text(encoding="utf-8")
    copy = tmp_path / "tb_copy.toml"
    copy.write_text(source.replace('id = "tokenbias"', 'id = "tb_copy"', 1), encoding="utf-8")
    db = tmp_path / "s.db"
    with Store(db) as store:
        tokenbias_study.materialise(store, tokenbias.load_study(copy))
    done = cogbias("run", "--study", "tb_copy", "--models", "random", "--db", db)
    assert done.returncode == 2
    assert "'tb_copy' is a token-bias dataset, not a study" in done.stderr
    assert "run dataset tb_copy" in done.stderr
    no_traceback(done)


def test_results_and_resume_of_a_run_whose_study_source_is_gone(
    tmp_path: Path, cogbias_main: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The study run in a real process; the ten commands after it in this one
    (`cogbias_main`: a process start each was most of this test's time)."""
    db = tmp_path / "s.db"
    done = cogbias(
        "run", "--study", "mohr8", "--models", "random", "--tests", "anchoring",
        "--temperatures", "0.7", "--variants", "0_normal", "--repeats", "2", "--db", db,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        run_id = study_results.study_runs(store)[0].id
    for by in ("model", "temperature", "variant", "mitigation"):  # one value each
        shown = cogbias_main("results", "--run", run_id, "--by", by, "--db", db)
        assert shown.returncode == 0, shown.stderr
        assert "anchoring" in shown.stdout and "cohens_d" in shown.stdout
    paired = cogbias_main(
        "run", "--models", "random", "--biases", "anchoring", "--scenarios", "1", "--db", db
    )
    assert paired.returncode == 0, paired.stderr
    with Store(db) as store:
        pair_run = next(r["id"] for r in store.runs() if r["id"] != run_id)
        store.db.execute("delete from study_sources")
        store.db.conn.commit()
    by = cogbias_main("results", "--run", pair_run, "--by", "mitigation", "--db", db)
    assert by.returncode == 2 and f"run {pair_run} is a paired run" in by.stderr
    for args in (("resume", run_id), ("results", "--run", run_id), ("results", "--study", "mohr8")):
        gone = cogbias_main(*args, "--db", db)
        assert gone.returncode == 2, gone.stderr
        assert "the study 'mohr8' this run was planned from" in gone.stderr
        assert "cogbias delete run" in gone.stderr
        no_traceback(gone)
    # its turns still export as answered; only `coded` needs the study, so it stays empty
    out = tmp_path / "turns.csv"
    exported = cogbias_main("export", "--run", run_id, "--db", db, "-o", out)
    assert exported.returncode == 0, exported.stderr
    with out.open(newline="") as handle:
        turns = list(csv.DictReader(handle))
    assert len(turns) == 4 and all(t["value"] for t in turns)
    assert {t["coded"] for t in turns} == {""}


# --------------------------------------------------------------------------- thesis prompts

HOSTILE_EXPERIMENTS = [
    # keys with regex metacharacters; one key inside another ("a" in "a.b"); "x y" and "x_y"
    # slug alike; literal {{ }} and [[ ]] in the published text
    ("1", "anchoring", "0_normal", "Price a.b* then a and (x) and a.b [[q]] {{r}} $ __",
     {"a.b*": 11, "a": 22, "(x)": 33, "a.b": 44}, "numerical", "", 1),
    ("2", "anchoring", "0_normal", "Price x y and x_y $ __", {"x y": 55, "x_y": 66}, "numerical", "", 2),
    # two scenarios whose names slug alike stay two tests
    ("3", "anchoring", "0 normal", "Other price z $ __", {"z": 77}, "numerical", "", 1),
    ("4", "anchoring", "0 normal", "Other price z $ __", {"z": 88}, "numerical", "", 2),
    # three parts: part 1 against part 2 and against part 3
    ("5", "framing effect", "0_normal", "Save 200? Answer yes or no.", {}, "choice", "yes", 1),
    ("6", "framing effect", "0_normal", "Lose 400? Answer yes or no.", {}, "choice", "yes", 2),
    ("7", "framing effect", "0_normal", "Lose 2 in 3? Answer yes or no.", {}, "choice", "yes", 3),
]  # fmt: skip


def write_experiments(folder: Path, rows: list[tuple]) -> None:
    """The folder's prompts are these rows, in the older file name (experiments.csv): the
    fixture's biases.csv, which the importer would also read, is taken out."""
    (folder / "biases.csv").unlink(missing_ok=True)
    totals: dict[tuple[str, str], int] = {}
    for row in rows:
        totals[(row[1], row[2])] = max(totals.get((row[1], row[2]), 0), row[7])
    with (folder / "experiments.csv").open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["bias_id", "bias", "experiment_type", "scenario", "content", "variables",
                      "response_type", "target_response", "part", "parts_total", "updated_at"])  # fmt: skip
        for pid, bias, scenario, content, variables, kind, target, part in rows:
            out.writerow([pid, bias, "single-scenario", scenario, content, json.dumps(variables),
                          kind, target, part, totals[(bias, scenario)], ""])  # fmt: skip


def test_hostile_thesis_prompts_import_and_run_with_every_value_in_its_place(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "m"
    shutil.copytree(FIXTURE, folder)
    write_experiments(folder, HOSTILE_EXPERIMENTS)
    db = tmp_path / "s.db"
    imported = cogbias("import", "mohr2025", folder, "--db", db)
    assert imported.returncode == 0, imported.stderr
    done = cogbias("run", "--study", "mohr2025", "--models", "random", "--repeats", "2", "--db", db)
    assert done.returncode == 0, done.stderr
    # each prompt is asked inside the thesis' user message: the question is its middle part
    framed = {(r["test"], r["condition"]): r["prompt"].split("\n----\n") for r in calls(db)}
    assert {len(parts) for parts in framed.values()} == {3}
    prompts = {key: parts[1] for key, parts in framed.items()}
    assert set(prompts) == {
        ("anchoring__0_normal", "control"), ("anchoring__0_normal", "treatment"),
        ("anchoring__0_normal_2", "control"), ("anchoring__0_normal_2", "treatment"),
        ("framing_effect__0_normal__part2", "control"), ("framing_effect__0_normal__part2", "treatment"),
        ("framing_effect__0_normal__part3", "control"), ("framing_effect__0_normal__part3", "treatment"),
    }  # fmt: skip
    pairs = [
        [prompts[(test, c)] for c in ("control", "treatment")]
        for test in ("anchoring__0_normal", "anchoring__0_normal_2")
    ]
    assert sorted(pairs) == [
        ["Other price 77 $ __", "Other price 88 $ __"],
        ["Price 11 then 22 and 33 and 44 [[q]] {{r}} $ __", "Price 55 and 66 $ __"],
    ]
    assert prompts[("framing_effect__0_normal__part3", "treatment")].startswith("Lose 2 in 3?")
    assert prompts[("framing_effect__0_normal__part3", "control")].startswith("Save 200?")


def test_thesis_prompts_that_cannot_be_scored_are_refused_naming_their_rows(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(FIXTURE, folder)
    rows = [
        ("1", "loss aversion", "0_normal", "Take it? A or B", {}, "choice", "zzz", 1),
        ("2", "loss aversion", "0_normal", "Take it? A or B", {}, "choice", "zzz", 2),
    ]
    write_experiments(folder, rows)
    db = tmp_path / "s.db"
    assert cogbias("import", "mohr2025", folder, "--db", db).returncode == 0
    done = cogbias("run", "--study", "mohr2025", "--models", "random", "--db", db)
    assert done.returncode == 2
    assert "dataset mohr2025, experiments.csv rows 1, 2 (bias 'loss_aversion'" in done.stderr
    assert "target_response 'zzz' is neither yes, no nor one letter" in done.stderr
    no_traceback(done)
    assert not calls(db)


def test_ten_thousand_parts_of_one_bias_are_refused_quickly() -> None:
    rows = [
        dict(bias="anchoring", bias_name="anchoring", scenario="s", part=p, content="p __",
             variables="{}", response_type="numerical", target_response=None, source_row=p + 1)
        for p in range(1, 10_001)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="make 9,999 tests .* at most 500"):
        study_from_prompts(rows, "d")


def test_a_published_value_too_long_for_a_prompt_names_its_rows() -> None:
    rows = [
        dict(bias="anchoring", bias_name="anchoring", scenario="s", part=p, content="v __",
             variables=json.dumps({"v": "x" * 60_000}), response_type="numerical",
             target_response=None, source_row=p + 5)
        for p in (1, 2)
    ]  # fmt: skip
    with pytest.raises(ValueError) as caught:
        study_from_prompts(rows, "d")
    assert "experiments.csv rows 6, 7 (bias 'anchoring', scenario 's')" in str(caught.value)
    assert "longer than 50,000 characters" in str(caught.value)


# --------------------------------------------------------------------------- hostile answers

HOSTILE_STUDY = """id = "hostile"
name = "Hostile answers"
description = "Every answer format, asked of a server that answers badly."
repeats = 3
max_attempts = 2
temperatures = [0.5]
[values.x]
type = "int"
min = 1
max = 9
[tests.num]
bias = "anchoring"
design = "conditions"
answer = "number"
metric = "cohens_d"
[tests.num.conditions.control]
prompt = "Guess a number (x = {{x}})."
[tests.num.conditions.treatment]
prompt = "Guess a number (x = {{x}}0)."
[tests.opt]
bias = "primacy"
design = "options"
answer = "letter"
metric = "primacy"
letters = "abc"
k = 3
item = "item {{x}}"
[tests.opt.conditions.neutral]
prompt = "Pick one:\\n{{options}}"
[tests.seq]
bias = "anchoring"
design = "sequence"
answer = "admit_reject"
metric = "anchoring_distance"
length = 3
orders = 3
item = "applicant {{x}}"
turn = "Next: {{item}}. Admit or reject?"
[tests.seq.conditions.sequential]
prompt = "Decide on applicants one at a time."
"""
# Bad answers by the kind of turn, each given in turn (then a readable one), so that every
# kind of bad answer reaches every kind of turn whatever the order the requests arrive in.
BAD_ANSWERS = [
    "x" * 1_000_000, "yes\x00no", "", "   ", "\n" * 5000, "1e309", "NaN", "9" * 400,
    "1" + "0" * 5000, "z", "d", "inf", "\ud800", "\n".join(["admit"] * 3000),
]  # fmt: skip
BAD_REWRITES = [
    "[rewritten text]" * 5000, "[rewritten text]  ", "[rewritten text] " + "y" * 100_000, "",
    "\ud800",
]  # fmt: skip
BAD_REVISIONS = ["\n".join(["admit"] * 3000), "admit", "admit\nmaybe\nreject"]
GOOD = {"num": "50", "opt": "b", "seq": "admit"}


def hostile_responder_factory() -> Callable[[dict], str]:
    asked: Counter[str] = Counter()

    def respond(request: dict) -> str:
        text = _last_user_text(request)
        kind = next((k for k, word in (("rewrite", "[text starts]"), ("revise", "Look back"),
                     ("num", "Guess"), ("opt", "Pick one")) if word in text), "seq")  # fmt: skip
        bad = {"rewrite": BAD_REWRITES, "revise": BAD_REVISIONS}.get(kind, BAD_ANSWERS)
        n = asked[kind]
        asked[kind] += 1
        if n < len(bad):
            return bad[n]
        if kind == "rewrite":
            body = text.split("[text starts]\n", 1)[1].split("\n[text ends]", 1)[0]
            return "[rewritten text]\n" + body
        return GOOD.get(kind, "\n".join(["admit"] * 3))

    return respond


def test_hostile_answers_are_stored_as_clear_records_and_results_still_score(
    home: Path, tmp_path: Path
) -> None:
    (home / "studies" / "hostile.toml").write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    with FakeLLMServer(hostile_responder_factory()) as server:
        done = cogbias(
            "run", "--study", "hostile", "--models", "openai/fake", "--api-base", server.base_url,
            "--mitigations", "none,selfhelp", "--db", db, home=home,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    rows = calls(db)
    assert rows and {r["status"] for r in rows} <= {"ok", "unparseable"}
    for row in rows:
        assert row["status"] == "ok" or row["error"], row["id"]
        assert len(row["response"] or "") <= 20_100  # answers are capped when stored
        assert len(row["prompt"] or "") <= interventions.MAX_REWRITE_CHARS + 1000
        assert len(row["value"] or "") <= interventions.MAX_REWRITE_CHARS + 100
        if row["status"] == "ok" and row["role"] == "decide" and row["test"] == "num":
            assert math.isfinite(json.loads(row["value"]))
    errors = {r["error"] for r in rows if r["error"]}
    assert any("more than the 6,000 a rewrite may have" in e for e in errors)
    assert "openai/fake: empty answer" in errors  # stored as unreadable, asked again
    assert any("expected 3 lines, each one decision; got 3000" in e for e in errors)
    assert any("expected 3 lines, each one decision; got 1" in e for e in errors)
    assert any(e.startswith("line 2 of the revision: found neither") for e in errors)
    # the attempts go on while an answer cannot be read, and stop at max_attempts
    attempts = {(r["conversation"], r["turn"]): r["attempt"] for r in rows}
    assert max(attempts.values()) == 1
    # a lone surrogate became a replacement mark instead of breaking every later write
    assert all("\ud800" not in (r["response"] or "") for r in rows)
    for fmt in ("table", "json", "csv"):
        shown = cogbias("results", "--study", "hostile", "--format", fmt, "--db", db, home=home)
        assert shown.returncode == 0, shown.stderr
        no_traceback(shown)
    json.loads(
        cogbias("results", "--study", "hostile", "--format", "json", "--db", db, home=home).stdout
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("1e309", "found no number"), ("NaN", "found no number"), ("inf", "found no number"),
        ("9" * 400, "too large to be an answer"), ("1" + "0" * 5000, "too large to be an answer"),
        ("-" + "9" * 20, "too large to be an answer"), ("١٢", 12.0), ("-0", 0.0), ("", "empty"),
        ("12 or 13", "several numbers"),
    ],
    ids=lambda v: str(v)[:20],
)  # fmt: skip
def test_number_answers_are_finite_and_bounded(answer: str, expected: object) -> None:
    test = study_files.parse_study(HOSTILE_STUDY, "h.toml").tests["num"]
    read = read_answer(test, answer)
    if isinstance(expected, float):
        assert read.ok and read.value == expected
    else:
        assert not read.ok and expected in read.error


def constant_responder(request: dict) -> str:
    """The control group always answers 10, the treatment group always 20: zero variance."""
    return "20" if "0)." in _last_user_text(request) else "10"


def test_zero_variance_and_single_answer_cells_score_without_crashing(
    home: Path, tmp_path: Path
) -> None:
    (home / "studies" / "hostile.toml").write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    with FakeLLMServer(constant_responder) as server:
        for repeats in ("3", "1"):
            done = cogbias(
                "run", "--study", "hostile", "--tests", "num", "--models", "openai/fake",
                "--api-base", server.base_url, "--repeats", repeats, "--db", db, home=home,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
    with Store(db) as store:
        runs = {
            study_plan.StudySpec.from_stored(r.spec).repeats: r.id
            for r in study_results.study_runs(store)
        }
        separated = study_results.results(store, runs[3]).iloc[0]
        single = study_results.results(store, runs[1]).iloc[0]
    assert json.loads(separated["details"])["d"] == math.inf  # perfectly separated groups
    assert separated["value"] == 1.0  # capped
    assert pd.isna(single["value"]) and "three in all" in single["note"]
    shown = cogbias("results", "--study", "hostile", "--format", "json", "--db", db, home=home)
    assert shown.returncode == 0 and len(json.loads(shown.stdout)) == 2


# --------------------------------------------------------------------------- two workers, cancel


def admit_responder(request: dict) -> str:
    return "admit"


def test_two_workers_on_one_study_run_one_is_refused_and_no_turn_is_doubled(
    home: Path, tmp_path: Path
) -> None:
    (home / "studies" / "hostile.toml").write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    with FakeLLMServer(admit_responder, latency=0.3) as server:
        args = [
            sys.executable, "-m", "cogbias", "run", "--study", "hostile", "--tests", "seq",
            "--models", "openai/fake", "--api-base", server.base_url, "--concurrency", "2",
            "--db", str(db),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COGBIAS_HOME": str(home)}
        procs = [subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
        outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 3], outcomes
    refused = next(err for code, err in outcomes if code == 3)
    assert "is already being worked on by process" in refused and "Traceback" not in refused
    rows = calls(db)
    # 3 repeats × 3 orders × 3 turns, each asked once
    assert len(rows) == 27 and len({r["id"] for r in rows}) == 27


def test_a_cancelled_study_run_resumes_to_exactly_the_planned_turns(
    home: Path, tmp_path: Path
) -> None:
    (home / "studies" / "hostile.toml").write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    with FakeLLMServer(admit_responder, latency=0.2) as server:
        args = [
            "run", "--study", "hostile", "--tests", "seq", "--models", "openai/fake",
            "--api-base", server.base_url, "--mitigations", "none,selfhelp", "--concurrency", "2",
            "--db", db,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COGBIAS_HOME": str(home)}
        proc = subprocess.Popen([sys.executable, "-m", "cogbias", *map(str, args)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and len(calls(db)) >= 4:
                break
            time.sleep(0.05)
        with Store(db) as store:
            run_id = study_results.study_runs(store)[0].id
        cancelled = cogbias("cancel", run_id, "--db", db, home=home)
        assert cancelled.returncode == 0, cancelled.stderr
        proc.wait(timeout=120)
        with Store(db) as store:
            assert store.run(run_id)["status"] == "cancelled"
        partial = len(calls(db))
        resumed = cogbias("resume", run_id, "--db", db, home=home)
        assert resumed.returncode == 0, resumed.stderr
    rows = calls(db)
    # 3 repeats × 3 orders × (3 turns without, 4 with the self-help revision)
    assert 0 < partial < len(rows) == 9 * 3 + 9 * 4
    assert len({r["id"] for r in rows}) == len(rows)
    by_conversation: dict[str, list[int]] = {}
    for r in rows:
        by_conversation.setdefault(r["conversation"], []).append(r["turn"])
    assert sorted(len(t) for t in by_conversation.values()) == [3] * 9 + [4] * 9
    assert all(sorted(t) == list(range(len(t))) for t in by_conversation.values())
    with Store(db) as store:
        assert store.run(run_id)["status"] == "done"


def test_concurrency_below_one_is_refused_instead_of_waiting_forever(tmp_path: Path) -> None:
    for value in ("0", "-3"):
        done = cogbias("run", "--study", "mohr8", "--models", "random", "--concurrency", value,
                       "--db", tmp_path / "s.db")  # fmt: skip
        assert done.returncode == 2
        assert f"argument --concurrency: must be at least 1, not {value}" in done.stderr
    plan = study_plan.plan(
        study_plan.resolve(study_plan.StudySpec("mohr8", ["random"], repeats=1), study_plan.load_study("mohr8")),
        study_plan.load_study("mohr8"),
    )  # fmt: skip
    with Store(tmp_path / "s.db") as store, pytest.raises(ValueError, match="at least 1, not 0"):
        executor.execute(plan, store, concurrency=0)


def test_a_pivot_keeps_the_tests_that_have_no_figure_yet(home: Path, tmp_path: Path) -> None:
    (home / "studies" / "hostile.toml").write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    with FakeLLMServer(lambda request: "no idea") as server:  # nothing can be read
        done = cogbias(
            "run", "--study", "hostile", "--models", "openai/fake", "--api-base", server.base_url,
            "--mitigations", "none,awareness", "--repeats", "1", "--db", db, home=home,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = cogbias("results", "--study", "hostile", "--by", "mitigation", "--db", db, home=home)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1].split() == ["test", "metric", "no", "mitigation", "awareness"]
    rows = [line.split() for line in lines[2:5]]
    assert [r[0] for r in rows] == ["num", "opt", "seq"]
    assert all(r[2:] == ["–", "–"] for r in rows)  # a missing value is a dash, never NaN
    assert lines[5].startswith("– marks a cell without a value (6 of 6): ")
    assert "no readable answers" in lines[5] and "NaN" not in shown.stdout


@pytest.mark.parametrize(
    ("answer", "prompt"),
    [
        ("[rewritten text]\nDecide on the facts.", "Decide on the facts."),
        ("Sure! [REWRITTEN TEXT] Decide. [rewritten text]", "Decide."),
        ("[rewritten text]" * 5000, ""),
        ("No marker at all", "No marker at all"),
    ],
    ids=["plain", "marker-twice", "markers-only", "no-marker"],
)
def test_a_rewrite_is_what_follows_the_marker_without_further_markers(
    answer: str, prompt: str
) -> None:
    assert interventions.rewritten(answer) == prompt


def test_names_and_texts_of_imported_prompts_cannot_inject_toml() -> None:
    evil = 'x"""\n[tests.evil]\ndesign = "options"\n"""'
    rows = [
        dict(bias='b"]\n[tests.evil', bias_name=evil, scenario=evil, part=p, content=evil + " __",
             variables=json.dumps({'k"]\n[values.evil': p}), response_type="numerical",
             target_response=None, source_row=p)
        for p in (1, 2)
    ]  # fmt: skip
    study = study_from_prompts(rows, 'd"]\n[tests.evil')
    assert list(study.tests) == ["b_tests_evil__x_tests_evil_design_options"]
    test = next(iter(study.tests.values()))
    # the published text stands as written inside the thesis' user message (its middle part)
    assert [c.prompt.split("\n----\n")[1] for c in test.conditions] == [evil + " __"] * 2
    assert test.design == "conditions" and "evil" not in study.values


def test_a_dataset_named_like_a_study_is_refused_as_ambiguous(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(FIXTURE, folder)
    db = tmp_path / "s.db"
    assert cogbias("import", "mohr2025", folder, "--name", "mohr8", "--db", db).returncode == 0
    done = cogbias("run", "--study", "mohr8", "--models", "random", "--db", db)
    assert done.returncode == 2
    assert "'mohr8' names both a study and an imported dataset's prompts" in done.stderr
    no_traceback(done)
    assert not calls(db)


def test_a_sweep_no_model_accepts_is_refused_instead_of_an_empty_run(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    done = cogbias("run", "--study", "mohr8", "--models", "anthropic/claude-3-5-sonnet-20240620",
                   "--temperatures", "1.5", "--db", db)  # fmt: skip
    assert done.returncode == 2
    assert (
        "nothing to run: anthropic/claude-3-5-sonnet-20240620 accepts temperatures up to 1"
        in done.stderr
    )
    assert not db.exists() or not calls(db)
    with Store(db) as store:
        assert not study_results.study_runs(store)


LONG_OPTIONS = """id = "long_options"
name = "Options too long together"
description = "Each item is fine alone; six of them make a prompt over the limit."
[values.big]
type = "derived"
expr = "'x' * 10000"
[tests.opt]
bias = "primacy"
design = "options"
answer = "letter"
metric = "primacy"
letters = "abcdef"
k = 6
item = "{{big}}"
[tests.opt.conditions.neutral]
prompt = "Pick one:\\n{{options}}"
"""


def test_a_question_that_cannot_be_composed_fails_its_unit_and_the_run_goes_on(
    home: Path, tmp_path: Path
) -> None:
    (home / "studies" / "long_options.toml").write_text(LONG_OPTIONS, encoding="utf-8")
    db = tmp_path / "s.db"
    done = cogbias("run", "--study", "long_options", "--models", "random", "--db", db, home=home)
    assert done.returncode == 0, done.stderr
    no_traceback(done)
    rows = calls(db)
    assert len(rows) == 6  # one unit per order, each failed once, never asked
    assert {(r["status"], r["failure_kind"]) for r in rows} == {("failed", "invalid")}
    assert all(
        r["error"] == "the question could not be composed: the text with its values filled in "
        "is longer than 50,000 characters (at {{options}})"
        for r in rows
    )
    shown = cogbias("results", "--study", "long_options", "--db", db, home=home)
    assert shown.returncode == 0 and "no readable answers" in shown.stdout


def test_runs_of_a_study_file_broken_later_still_show_and_resume(
    home: Path, tmp_path: Path, cogbias_main: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The first run in a real process, the commands after the file broke in this one
    (`cogbias_main`), which reads the file again as a new process would."""
    path = home / "studies" / "hostile.toml"
    path.write_text(HOSTILE_STUDY, encoding="utf-8")
    db = tmp_path / "s.db"
    done = cogbias(
        "run", "--study", "hostile", "--tests", "num", "--models", "random", "--db", db, home=home
    )
    assert done.returncode == 0, done.stderr
    path.write_text(HOSTILE_STUDY.replace("max = 9", "max = [9"), encoding="utf-8")
    env = {"COGBIAS_HOME": str(home)}
    shown = cogbias_main("results", "--study", "hostile", "--db", db, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "num" in shown.stdout and "cohens_d" in shown.stdout
    again = cogbias_main("run", "--study", "hostile", "--models", "random", "--db", db, env=env)
    assert again.returncode == 1 and f"{path}:11:1: this is not valid TOML" in again.stderr
    with Store(db) as store:
        run_id = study_results.study_runs(store)[0].id
    resumed = cogbias_main("resume", run_id, "--db", db, env=env)
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize("number", ["NaN", "1e999", "-Infinity"])
def test_a_published_variable_that_is_not_a_finite_number_names_its_rows(number: str) -> None:
    rows = [
        dict(bias="anchoring", bias_name="anchoring", scenario="s", part=p, content="v __",
             variables='{"v": ' + number + "}", response_type="numerical", target_response=None,
             source_row=p)
        for p in (1, 2)
    ]  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"rows 1, 2 \(bias 'anchoring', scenario 's'\): variable 'v' is .*, not a number",
    ):
        study_from_prompts(rows, "d")


@pytest.mark.parametrize(
    "bounds", ["", "max = -5", "max = 50", "min = 1e15", "min = 0.2\nmax = 0.7", "min = 3\nmax = 3"]
)
def test_the_random_baseline_answers_numbers_inside_any_allowed_range(bounds: str) -> None:
    text = HOSTILE_STUDY.replace('metric = "cohens_d"', 'metric = "cohens_d"\n' + bounds)
    test = study_files.parse_study(text, "h.toml").tests["num"]
    script = study_plan.Script(["Guess a number (x = 3)."], "Guess a number (x = 3).")
    spaces = [study_answers.random_space(test, "decide", script, f"{i:x}") for i in range(500)]
    answers = [random_provider.answer(space) for space in spaces]
    read = [read_answer(test, answer) for answer in answers]
    assert all(r.ok for r in read), [r.error for r in read if not r.ok][:3]
    values = [r.value for r in read]
    assert (test.min is None or min(values) >= test.min) and (
        test.max is None or max(values) <= test.max
    )
    if not bounds:
        assert 0 <= min(values) and max(values) <= 1000


@pytest.mark.parametrize(
    "answer",
    ["a" + "*" * 1_000_000 + "a", "1" + " " * 1_000_000 + "x", "a" + " _" * 500_000 + "a"],
    ids=["stars", "spaces", "spaced-underscores"],
)
@pytest.mark.parametrize("strict", [False, True])
def test_a_megabyte_answer_is_read_in_one_pass(answer: str, strict: bool) -> None:
    """A pattern anchored at the end retried every run of wrapping characters inside the
    answer: a megabyte of them took most of an hour (and held the event loop)."""
    from cogbias.core.answers import parse_admit_reject, parse_letter, parse_number, parse_yes_no

    for parse in (parse_admit_reject, parse_yes_no):
        assert not parse(answer, strict=strict).ok
    assert not parse_letter(answer, "abcd", strict).ok
    number = parse_number(answer, strict=strict)
    assert number.value == (1.0 if answer.startswith("1") and not strict else None)
