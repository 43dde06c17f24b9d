"""`cogbias run pairs|dataset|study` and `cogbias results ...`: each mode takes only its own
flags (anything else is an argparse error, exit 2, naming the flag), and the old spellings
still work for one release, saying once on stderr how to spell them now."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.cli.main import main
from cogbias.datasets import tokenbias_study
from cogbias.store import Store

DEPRECATED = "deprecated: "


def _runs(db: Path) -> list[dict]:
    with Store(db) as store:
        return [{**r, "spec": json.loads(r["spec"])} for r in store.runs()]


def _argparse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """argparse refuses the command line: exit 2, its message on stderr."""
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    return capsys.readouterr().err


def _materialised(db: Path) -> Path:
    with Store(db) as store:
        tokenbias_study.materialise(store)
    return db


# --------------------------------------------------------------------------- the modes


def test_run_help_lists_the_modes(capsys):
    with pytest.raises(SystemExit) as shown:
        main(["run", "--help"])
    assert shown.value.code == 0
    out = capsys.readouterr().out
    for mode in ("pairs", "dataset", "study"):
        assert f"\n    {mode} " in out, out
    assert "--temperature" not in out  # a mode's flags are in the mode's own help


def test_run_without_a_mode_is_an_argparse_error(capsys):
    err = _argparse_error(["run"], capsys)
    assert "required: MODE" in err and DEPRECATED not in err


def test_run_pairs_runs_library_test_cases(tmp_path, capsys):
    db = tmp_path / "r.db"
    argv = ["run", "pairs", "--models", "random", "--biases", "anchoring", "--scenarios", "2"]
    assert main([*argv, "--temperature", "0.3", "--db", str(db)]) == 0
    assert DEPRECATED not in capsys.readouterr().err
    (run,) = _runs(db)
    assert run["status"] == "done" and run["spec"]["biases"] == ["anchoring"]
    assert run["spec"]["scenarios"] == 2 and run["spec"]["temperature"] == 0.3
    assert "dataset" not in run["spec"] or run["spec"]["dataset"] is None


def test_run_dataset_runs_an_imported_dataset(tmp_path, capsys):
    db = _materialised(tmp_path / "r.db")
    argv = ["run", "dataset", "tokenbias", "--models", "random", "--per-bias", "1"]
    assert main([*argv, "--prompting", "baseline,zs_cot", "--db", str(db)]) == 0
    assert DEPRECATED not in capsys.readouterr().err
    runs = _runs(db)
    assert len(runs) == 2  # one run per prompting method
    assert {r["spec"]["dataset"] for r in runs} == {"tokenbias"}
    assert {r["spec"].get("prompting", "baseline") for r in runs} == {"baseline", "zs_cot"}


def test_run_study_runs_a_study(tmp_path, capsys):
    db = tmp_path / "r.db"
    argv = ["run", "study", "mohr8", "--models", "random", "--tests", "anchoring"]
    argv += ["--temperatures", "0.2", "--variants", "0_normal", "--repeats", "2"]
    assert main([*argv, "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert DEPRECATED not in captured.err
    assert "cogbias results run run-" in captured.out  # points to the new spelling
    (run,) = _runs(db)
    assert run["status"] == "done" and run["spec"]["study"] == "mohr8"


def test_run_study_tokenbias_is_the_old_study_run(tmp_path, capsys):
    """`run study tokenbias` stores the study's pairs like a dataset and runs them, with the
    flags of a dataset run: what `run --study tokenbias` did, to the same run ids."""
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    flags = ["--models", "random", "--per-bias", "1", "--temperature", "0.5"]
    assert main(["run", "study", "tokenbias", *flags, "--db", str(new)]) == 0
    assert DEPRECATED not in capsys.readouterr().err
    assert main(["run", "--study", "tokenbias", *flags, "--db", str(old)]) == 0
    assert capsys.readouterr().err.count(DEPRECATED) == 1
    made = _runs(new)
    assert [r["id"] for r in made] == [r["id"] for r in _runs(old)]
    assert made[0]["spec"]["dataset"] == "tokenbias" and made[0]["spec"]["temperature"] == 0.5


def test_a_dry_run_of_the_token_bias_study_plans_the_real_runs_and_keeps_nothing(tmp_path, capsys):
    """Planning reads the study's pairs, so a dry run stores them, but inside a transaction
    it rolls back: the database it leaves holds no dataset and no run (it kept the study)."""
    db = tmp_path / "dry.db"
    flags = ["--models", "random", "--per-bias", "1", "--prompting", "baseline,zs_cot"]
    assert main(["run", "study", "tokenbias", *flags, "--dry-run", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    planned = sorted(set(re.findall(r"run (run-[0-9a-f]+):", err)))
    assert len(planned) == 2 and "nothing is kept" in err
    with Store(db) as store:
        assert store.datasets() == [] and store.runs() == []
    assert main(["run", "study", "tokenbias", *flags, "--db", str(db)]) == 0
    assert sorted(r["id"] for r in _runs(db)) == planned  # what the dry run said


def test_results_modes(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["run", "study", "tokenbias", "--models", "random", "--per-bias", "1",
                 "--db", str(db)]) == 0  # fmt: skip
    assert main(["run", "study", "mohr8", "--models", "random", "--tests", "anchoring",
                 "--temperatures", "0.2", "--repeats", "2", "--db", str(db)]) == 0  # fmt: skip
    study_run = next(r["id"] for r in _runs(db) if "study" in r["spec"])
    capsys.readouterr()
    assert main(["results", "pairs", "--db", str(db), "--format", "json"]) == 0
    assert {r["bias"] for r in json.loads(capsys.readouterr().out)} >= {"tb_h1_misleading_option"}
    assert main(["results", "dataset", "tokenbias", "--db", str(db), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("bias,model,mean")
    assert main(["results", "hypotheses", "tokenbias", "--db", str(db), "--alpha", "0.1"]) == 0
    assert "alpha 0.1" in capsys.readouterr().out
    assert main(["results", "study", "mohr8", "--by", "temperature", "--db", str(db)]) == 0
    assert "one column per temperature" in capsys.readouterr().out
    assert main(["results", "run", study_run, "--by", "model", "--db", str(db)]) == 0
    assert "one column per model" in capsys.readouterr().out
    # as data, the same way in each mode (`terminal.print_data`): JSON records, CSV rows
    for mode, name in (("hypotheses", "tokenbias"), ("study", "mohr8")):
        assert main(["results", mode, name, "--db", str(db), "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows and {"model", "p_value"} <= set(rows[0])
        assert main(["results", mode, name, "--db", str(db), "--format", "csv"]) == 0
        header, *lines = capsys.readouterr().out.splitlines()
        assert {"model", "p_value"} <= set(header.split(",")) and len(lines) == len(rows)
    # the old `results --study` meant both: each spelling now points to the other
    assert main(["results", "study", "tokenbias", "--db", str(db)]) == 2
    assert "`cogbias results hypotheses tokenbias`" in capsys.readouterr().err
    assert main(["results", "hypotheses", "mohr8", "--db", str(db)]) == 2
    assert "`cogbias results study mohr8`" in capsys.readouterr().err
    assert main(["results", "hypotheses", "nope", "--db", str(db)]) == 2
    assert "no study or dataset 'nope'" in capsys.readouterr().err


# --------------------------------------------------------------------------- refused flags

REFUSED = [
    (["run", "study", "biasbuster", "--temperature", "0.7"], "--temperature"),
    (["run", "study", "mohr8", "--per-bias", "1"], "--per-bias"),
    (["run", "study", "mohr8", "--prompting", "zs_cot"], "--prompting"),
    (["run", "study", "mohr8", "--batch"], "--batch"),
    (["run", "study", "mohr8", "--biases", "anchoring"], "--biases"),
    (["run", "study", "tokenbias", "--mitigations", "none"], "--mitigations"),
    (["run", "study", "tokenbias", "--scenarios", "2"], "--scenarios"),
    (["run", "pairs", "--per-bias", "1"], "--per-bias"),
    (["run", "pairs", "--mitigations", "awareness"], "--mitigations"),
    (["run", "pairs", "--temperatures", "0.2"], "--temperatures"),
    (["run", "dataset", "x", "--scenarios", "2"], "--scenarios"),
    (["run", "dataset", "x", "--generator", "examples"], "--generator"),
    (["run", "dataset", "x", "--tests", "a"], "--tests"),
]


@pytest.mark.parametrize(
    ("argv", "flag"), REFUSED, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_a_flag_a_run_mode_does_not_take_is_an_argparse_error(argv, flag, tmp_path, capsys):
    db = tmp_path / "r.db"
    err = _argparse_error([*argv, "--models", "random", "--db", str(db)], capsys)
    assert f"unrecognized arguments: {flag}" in err, err
    assert f"{flag} only apply to" in err  # and where it does apply
    assert not db.exists()


def test_no_abbreviation_turns_one_flag_into_another(tmp_path, capsys):
    """`--temperature` is a prefix of a study's `--temperatures`: it must not stand for it."""
    argv = ["run", "study", "biasbuster", "--temperature", "0.7", "--models", "random"]
    err = _argparse_error([*argv, "--db", str(tmp_path / "r.db")], capsys)
    assert "unrecognized arguments: --temperature 0.7" in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["results", "pairs", "--by", "model"], "--by"),
        (["results", "pairs", "--alpha", "0.1"], "--alpha"),
        (["results", "dataset", "x", "--by", "model"], "--by"),
        (["results", "study", "mohr8", "--alpha", "0.1"], "--alpha"),
        (["results", "study", "mohr8", "--run", "run-x"], "--run"),
        (["results", "hypotheses", "tokenbias", "--by", "model"], "--by"),
        (["results", "run", "run-x", "--normal-above", "3"], "--normal-above"),
    ],
)
def test_a_flag_a_results_mode_does_not_take_is_an_argparse_error(argv, flag, tmp_path, capsys):
    err = _argparse_error([*argv, "--db", str(tmp_path / "r.db")], capsys)
    assert f"unrecognized arguments: {flag}" in err, err


def test_the_acceptance_command_is_refused_by_the_real_cli(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "study", "biasbuster", "--temperature", "0.7",
         "--models", "random", "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cogbias run study: error: unrecognized arguments: --temperature 0.7" in done.stderr
    assert not (tmp_path / "r.db").exists()


# --------------------------------------------------------------------------- old spellings

OLD = [
    (["run", "--biases", "anchoring", "--models", "random"], "`cogbias run pairs`", "pairs"),
    (["run", "--dataset", "tokenbias", "--per-bias", "1", "--models", "random"],
     "`cogbias run dataset tokenbias`", "dataset"),
    (["run", "--study", "mohr8", "--tests", "anchoring", "--temperatures", "0.2", "--repeats",
      "2", "--models", "random"], "`cogbias run study mohr8`", "study"),
    (["run", "--study", "tokenbias", "--per-bias", "1", "--models", "random"],
     "`cogbias run study tokenbias`", "dataset"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "new", "kind"), OLD, ids=lambda v: v if isinstance(v, str) else None
)
def test_an_old_run_spelling_works_and_says_the_new_one(argv, new, kind, tmp_path, capsys):
    db = _materialised(tmp_path / "r.db")
    assert main([*argv, "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert err.count(DEPRECATED) == 1 and f"is now {new};" in err, err
    (run,) = _runs(db)
    assert run["status"] == "done"
    assert ("study" in run["spec"]) == (kind == "study")
    assert bool(run["spec"].get("dataset")) == (kind == "dataset")


def test_old_results_spellings_work_and_say_the_new_ones(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["run", "study", "tokenbias", "--models", "random", "--per-bias", "1",
                 "--db", str(db)]) == 0  # fmt: skip
    assert main(["run", "study", "mohr8", "--models", "random", "--tests", "anchoring",
                 "--temperatures", "0.2", "--repeats", "2", "--db", str(db)]) == 0  # fmt: skip
    pair_run = next(r["id"] for r in _runs(db) if "study" not in r["spec"])
    capsys.readouterr()
    for old, new in [
        (["results"], "`cogbias results pairs`"),
        (["results", "--format", "csv"], "`cogbias results pairs`"),
        (["results", "--dataset", "tokenbias"], "`cogbias results dataset tokenbias`"),
        (["results", "--run", pair_run], f"`cogbias results run {pair_run}`"),
        (["results", "--study", "tokenbias"], "`cogbias results hypotheses tokenbias`"),
        (["results", "--study", "mohr8", "--by", "model"], "`cogbias results study mohr8`"),
    ]:
        assert main([*old, "--db", str(db)]) == 0, old
        captured = capsys.readouterr()
        assert captured.err.count(DEPRECATED) == 1 and f"is now {new};" in captured.err, old
        assert captured.out.strip(), old


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["run", "--study", "biasbuster", "--temperature", "0.7", "--biases", "anchoring",
          "--instances", "5"], ["--temperature", "--biases", "--instances"]),
        (["run", "--study", "mohr8", "--dataset", "x"], ["--dataset"]),
        (["run", "--study", "tokenbias", "--mitigations", "none"], ["--mitigations"]),
        (["run", "--dataset", "x", "--scenarios", "3"], ["--scenarios"]),
        (["run", "--biases", "anchoring", "--per-bias", "2"], ["--per-bias"]),
        (["run", "--biases", "anchoring", "--mitigations", "none"], ["--mitigations"]),
    ],
)  # fmt: skip
def test_an_old_run_spelling_refuses_a_flag_that_does_not_apply(argv, flags, tmp_path, capsys):
    db = tmp_path / "r.db"
    err = _argparse_error([*argv, "--models", "random", "--db", str(db)], capsys)
    assert err.count(DEPRECATED) == 1
    for flag in flags:
        assert flag in err.split("unrecognized arguments:", 1)[1], err
    assert not db.exists()


def test_an_old_results_spelling_refuses_a_flag_that_does_not_apply(tmp_path, capsys):
    db = tmp_path / "r.db"
    err = _argparse_error(["results", "--study", "mohr8", "--alpha", "0.1", "--db", str(db)],
                          capsys)  # fmt: skip
    assert err.count(DEPRECATED) == 1 and "unrecognized arguments: --alpha 0.1" in err
    err = _argparse_error(["results", "--run", "run-x", "--alpha", "0.1", "--db", str(db)],
                          capsys)  # fmt: skip
    assert "unrecognized arguments: --alpha 0.1" in err


def test_the_old_spelling_on_the_real_cli(tmp_path):
    """The acceptance command of the issue: it used to exit 0 and ignore four flags."""
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "--study", "biasbuster", "--temperature", "0.7",
         "--biases", "anchoring", "--instances", "5", "--models", "random",
         "--db", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "deprecated: `cogbias run --study biasbuster` is now `cogbias run study biasbuster`; "
        "the old spelling goes in the next release"
    )
    assert "unrecognized arguments: --temperature 0.7 --biases anchoring --instances 5" in lines[-1]
