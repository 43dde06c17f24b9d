"""`cogbias results` of a study run prints the humans of the original experiments beside the
model: a `classics` run on `random` (real `cogbias` processes, offline), and `mohr8`, whose
base scenario asks three originals' questions and whose other questions and variants say why
no human figure stands beside them. The tests after the first run the command in-process."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cogbias(*args: object, home: Path) -> subprocess.CompletedProcess[str]:
    # a terminal wide enough that no cell of the tables read here is clipped to fit
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COGBIAS_HOME": str(home), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def here(cogbias_main):
    """`cogbias` in this process, for the tests after the first (which starts the real one)."""
    return lambda *args, home: cogbias_main(*args, env={"COGBIAS_HOME": str(home)})


def run_id(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return next(w for w in done.stderr.split() if w.startswith("run-")).rstrip(":")


def test_results_of_a_classics_run_on_random_print_the_humans_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    run = run_id(cogbias("run", "study", "classics", "--models", "random", "--repeats", "12",
                         "--db", db, home=tmp_path))  # fmt: skip
    shown = cogbias("results", "run", run, "--db", db, home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    figures, _, humans = out.partition("beside the humans")
    assert "asian_disease" in figures and "linda" in figures  # the run's own figures first
    # the human rows, each with its n and interval, beside the model's 12 answers
    for row in (
        "72% [64%, 79%], n = 152",  # Asian disease, lives saved
        "22% [16%, 29%], n = 155",
        "46% [39%, 53%], n = 200",  # theatre ticket
        "88% [82%, 92%], n = 183",
        "68% [58%, 77%], n = 93",  # calculator
        "29% [21%, 39%], n = 88",
        "72% [64%, 79%], n = 126",  # $300 richer
        "36% [28%, 45%], n = 128",
        "54% [42%, 66%], n = 61",  # ski trip: 33 of 61
        "85% [78%, 90%], n = 142",  # Linda
        "$7.12",  # the mug's medians
        "$2.87",
        "25%",  # the UN anchor's medians
        "45%",
    ):
        assert row in humans, row
    assert humans.count("n = 12") >= 10  # the model's answers per condition
    assert "effect: lives saved − lives lost" in humans
    assert "sources:" in humans
    assert "Science, 211(4481), 453-458. p. 453, Problems 1 and 2." in humans
    assert "Psychological Review, 90(4), 293-315. p. 299" in humans

    table = cogbias("results", "run", run, "--humans", "--format", "csv", "--db", db, home=tmp_path)
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert {r["test"] for r in rows} == {
        "asian_disease", "theatre_ticket", "calculator", "bonus", "ski_trip", "mug", "un_anchor",
        "linda",
    }  # fmt: skip
    saved = next(r for r in rows if r["condition"] == "lives_saved")
    assert (saved["humans"], saved["humans_n"], saved["model_n"]) == ("0.72", "152", "12")
    assert "p. 453" in saved["citation"] and saved["model"] == "random"
    assert float(saved["h_low"]) < float(saved["h"]) < float(saved["h_high"])


def test_mohr8_shows_the_humans_for_the_originals_and_says_why_not_elsewhere(
    tmp_path: Path, here
) -> None:
    db = tmp_path / "m.db"
    run = run_id(here("run", "study", "mohr8", "--models", "random", "--repeats", "6",
                         "--variants", "1_persona,2_odd_numbers", "--temperatures", "0.7",
                         "--db", db, home=tmp_path))  # fmt: skip
    table = here("results", "run", run, "--humans", "--format", "json", "--db", db,
                    home=tmp_path)  # fmt: skip
    assert table.returncode == 0, table.stderr
    rows = json.loads(table.stdout)
    base = [r for r in rows if r["variant"] == "1_persona"]
    compared = {r["test"] for r in base if r["kind"] == "condition"}
    assert compared == {"anchoring", "endowment", "framing", "loss_aversion", "sunk_cost"}
    tv = [r for r in base if r["test"] == "transaction_utility"]
    assert [r["kind"] for r in tv] == ["note"] and "$650 TV" in tv[0]["note"]
    odd = [r for r in rows if r["variant"] == "2_odd_numbers"]
    assert odd and all(r["kind"] == "note" for r in odd)
    assert any("changes them, so no human figure is shown" in r["note"] for r in odd)
    sunk = [r for r in base if r["test"] == "sunk_cost"]
    assert [r["kind"] for r in sunk] == ["condition"]  # the original's one group: no effect


def test_a_users_reference_joins_the_built_in_ones(tmp_path: Path, here) -> None:
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "our_class.toml").write_text(
        'id = "our_class"\nexperiment = "Our class, 2025"\ncitation = "Room 4."\n'
        'where = "lesson 3"\nmeasure = "share"\nfocus = "b"\n'
        '[conditions.linda]\nlabel = "the class"\nn = 24\ncounts = { a = 6, b = 18 }\n'
        '[[uses]]\nstudy = "classics"\ntest = "linda"\n'
    )
    (tmp_path / "references" / "broken.toml").write_text('id = "broken"\nmeasure = 3\n')
    db = tmp_path / "u.db"
    run = run_id(here("run", "study", "classics", "--models", "random", "--repeats", "4",
                         "--tests", "linda", "--db", db, home=tmp_path))  # fmt: skip
    shown = here("results", "run", run, "--db", db, home=tmp_path)
    out = shown.stdout
    assert "Our class, 2025" in out and "75% [55%, 88%], n = 24" in out
    assert "broken.toml:2:11: 'measure' should be a string, not an integer" in shown.stderr
    assert "Our class, 2025: Room 4. lesson 3." in out


def test_humans_on_a_paired_run_is_refused_by_name(tmp_path: Path, here) -> None:
    db = tmp_path / "p.db"
    run = run_id(here("run", "pairs", "--models", "random", "--db", db, home=tmp_path))
    refused = here("results", "run", run, "--humans", "--db", db, home=tmp_path)
    assert refused.returncode == 2
    assert f"--humans compares study runs; run {run} is a paired run" in refused.stderr
    assert "Traceback" not in refused.stderr
