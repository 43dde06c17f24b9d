"""The `random` model answers a number question inside the question's own range: the bounds
its test declares, and for a bound the test leaves open, the range the question states
("between 0 and 100"). An imported thesis prompt declares none, so before this its random
answers to a percentage ran to 1000."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dataset_helpers import MOHR_DIR, edited_csv, released

from cogbias.llm import random_provider
from cogbias.runs import study_answers
from cogbias.runs.study_plan import Script
from cogbias.store import Store
from cogbias.studies import study_files
from cogbias.studies.questions import read_answer

ROOT = Path(__file__).resolve().parent.parent

STUDY = """id = "r"
name = "R"
description = "One number question."
[values.x]
type = "int"
min = 3
max = 3
[tests.num]
bias = "b"
name = "Num"
design = "conditions"
answer = "number"
metric = "cohens_d"
{bounds}
[tests.num.conditions.control]
prompt = "Guess ({{{{x}}}})."
[tests.num.conditions.treatment]
prompt = "Guess again ({{{{x}}}})."
"""


def _answers(bounds: str, question: str, n: int = 400) -> list[float]:
    """`n` random answers to `question` asked by a test with `bounds`, as the reader reads
    them (every one must be readable)."""
    test = study_files.parse_study(STUDY.format(bounds=bounds), "r.toml").tests["num"]
    script = Script([question], question)
    spaces = [study_answers.random_space(test, "decide", script, f"{i:x}") for i in range(n)]
    read = [read_answer(test, random_provider.answer(space)) for space in spaces]
    assert all(r.ok for r in read), [r.error for r in read if not r.ok][:3]
    return [r.value for r in read]


@pytest.mark.parametrize(
    ("question", "low", "high"),
    [
        ("What is the chance? Answer the percentage between 0 and 100. % __", 0, 100),
        ("Give a number from 0 to 100, as a number without the % sign.", 0, 100),
        ("Pick a year between 1,900 and 2,000.", 1900, 2000),
        ("Say a temperature from -40 to -10 degrees.", -40, -10),
        # the last range stated is the one the answer is asked in
        ("Balls from 1 to 5 are red. Answer between 20 and 30.", 20, 30),
    ],
)
def test_an_open_number_question_is_answered_inside_the_range_it_states(question, low, high):
    values = _answers("", question)
    assert low <= min(values) and max(values) <= high
    # spread over the range, not pinned to a bound
    assert min(values) < low + (high - low) / 4 and max(values) > high - (high - low) / 4


def test_declared_bounds_come_first_and_a_contradicting_stated_range_is_ignored():
    # the test declares 0..10: the stated 0..100 must not let answers past 10 (the reader
    # would refuse them)
    assert max(_answers("min = 0\nmax = 10", "Answer between 0 and 100.")) <= 10
    # a stated range that lies wholly outside the declared bounds is ignored
    values = _answers("min = 500", "Answer between 0 and 100.")
    assert min(values) >= 500
    # only the open bound is taken from the question
    values = _answers("min = 50", "Answer between 0 and 100.")
    assert 50 <= min(values) and max(values) <= 100


def test_a_question_that_states_no_range_keeps_the_open_rule():
    values = _answers("", "How much would you pay for it? $ __")
    assert 0 <= min(values) and max(values) <= 1000 and max(values) > 100


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _random_answers_by_prompt(db: Path) -> list[tuple[str, float]]:
    with Store(db) as store:
        rows = store.query("select prompt, value, status from study_calls where role = 'decide'")
    assert rows and {r["status"] for r in rows} == {"ok"}
    return [(r["prompt"], json.loads(r["value"])) for r in rows]


def test_an_imported_thesis_percentage_is_answered_from_0_to_100(tmp_path: Path) -> None:
    """A thesis folder whose numerical prompt asks a percentage, imported and run with the
    `random` model through the real command: every answer lies in 0..100."""
    folder = tmp_path / "thesis"
    shutil.copytree(MOHR_DIR, folder)
    (folder / "experiments.csv").unlink()  # one prompt file: the edited one

    def percentage(header: list[str], rows: list[dict[str, str]]) -> None:
        for row in rows:
            if row["bias"] == "anchoring":
                row["content"] = (
                    "Is the share higher or lower than anchor_value %? Answer the percentage "
                    "between 0 and 100. % __"
                )
                row["variables"] = (
                    '{"anchor_value": ' + ("10" if row["part"] == "1" else "65") + "}"
                )

    edited_csv(folder / "biases.csv", folder / "biases.csv", percentage)
    db = tmp_path / "t.db"
    imported = _cli("import", "mohr2025", folder, "--db", db)
    assert imported.returncode == 0, imported.stderr
    done = _cli("run", "study", "mohr2025", "--models", "random", "--repeats", "20", "--db", db)
    assert done.returncode == 0, done.stderr
    shares = [v for p, v in _random_answers_by_prompt(db) if "between 0 and 100" in p]
    assert len(shares) == 40
    assert 0 <= min(shares) and max(shares) <= 100 and max(shares) > 50


def test_the_released_thesis_study_is_answered_inside_each_question_s_range(
    tmp_path: Path,
) -> None:
    """Acceptance: the imported thesis study run by the `random` model answers each of its
    percentage questions (category size, gambler's fallacy, anchoring) from 0 to 100."""
    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    done = _cli("run", "study", "mohr2025", "--models", "random", "--repeats", "5", "--db", db)
    assert done.returncode == 0, done.stderr
    answers = _random_answers_by_prompt(db)
    shares = [v for p, v in answers if "Answer the percentage between 0 and 100" in p]
    # 3 biases x 4 scenarios x 2 parts x 5 repeats
    assert len(shares) == 3 * 4 * 2 * 5
    assert 0 <= min(shares) and max(shares) <= 100
