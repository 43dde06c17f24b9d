"""The real local model (SmolLM2 via llama.cpp) on the live pair path (issue 41): `cogbias
pair` prints a score on the issue's own pair, by option probabilities by default and by a
sampled "Option N" held by the grammar when asked; and the app's background start leaves a
server the first click finds running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.cli.main import PAIR_BY_PROBABILITIES, main

pytestmark = pytest.mark.local_model

ROOT = Path(__file__).resolve().parent.parent
PAIR = ["pair", "framing_effect", "--scenario", "12", "--models", "local/smollm2"]


def _score(out: str) -> float:
    (line,) = [line for line in out.splitlines() if line.startswith("score: ")]
    match = re.fullmatch(r"score: (-?[\d.e-]+)", line)
    assert match, line  # a number, no error
    return float(match[1])


def test_the_issues_pair_is_scored_by_probabilities_on_the_local_model(tmp_path, capsys):
    pytest.importorskip("xllamacpp")
    assert main([*PAIR, "--db", str(tmp_path / "p.db")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(PAIR_BY_PROBABILITIES)
    assert -1.0 <= _score(out) <= 1.0
    assert out.count("option probabilities 1:") == 2


def test_sampled_answers_of_the_local_model_name_one_option_each(tmp_path, capsys):
    """Asked freely it wrote "I would choose Option 4: Very bad" (two options, unread); held
    to its grammar it answers "Option N", which is read."""
    pytest.importorskip("xllamacpp")
    assert main([*PAIR, "--scoring", "choice", "--db", str(tmp_path / "p.db")]) == 0
    out = capsys.readouterr().out
    answers = re.findall(r"^(?:control|treatment): answer '(.*)' -> (\S+)", out, re.MULTILINE)
    assert len(answers) == 2
    for answer, chosen in answers:
        assert re.fullmatch(r"Option [1-7]", answer) and chosen != "none", out
    assert -1.0 <= _score(out) <= 1.0 and "could not be read" not in out


def test_the_background_start_leaves_the_server_running(tmp_path):
    """What the app does after its first page (`local.warm_in_background`), in a process of
    its own: the thread ends with the server answering; with COGBIAS_LOCAL_WARM=0 nothing
    starts."""
    pytest.importorskip("xllamacpp")
    code = (
        "from cogbias.llm import local\n"
        "thread = local.warm_in_background()\n"
        "print(thread is not None)\n"
        "thread and thread.join(300)\n"
        "print(local.local_server_started())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COGBIAS_HOME": str(tmp_path)}
    env.pop("COGBIAS_LOCAL_API_BASE", None)
    for warm, printed in (("1", "True\nTrue\n"), ("0", "False\nFalse\n")):
        env["COGBIAS_LOCAL_WARM"] = warm
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == printed
