import hashlib
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cogbias.core import metrics
from cogbias.library import testcases as library
from cogbias.library.testcases import (
    LibraryError,
    load_library,
    load_test_case,
    parse_test_case,
    to_toml,
)
from cogbias.llm import registry

ROOT = Path(__file__).resolve().parent.parent
MALFORMED = sorted((ROOT / "tests" / "malformed").glob("*.toml"))
EXPECTED_BIASES = [
    "Anchoring", "Anthropomorphism", "Availability Heuristic", "Bandwagon Effect",
    "Confirmation Bias", "Conservatism", "Disposition Effect", "Endowment Effect",
    "Escalation of Commitment", "Framing Effect", "Fundamental Attribution Error", "Halo Effect",
    "Hindsight Bias", "Hyperbolic Discounting", "Illusion of Control", "In-Group Bias",
    "Information Bias", "Loss Aversion", "Mental Accounting", "Negativity Bias",
    "Not Invented Here", "Optimism Bias", "Planning Fallacy", "Reactance", "Risk Compensation",
    "Self-Serving Bias", "Social Desirability Bias", "Status-Quo Bias", "Stereotyping",
    "Survivorship Bias",
]  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_library_list_shows_exactly_the_30_biases_by_display_name():
    out = cli("library", "list")
    assert out.returncode == 0, out.stderr
    names = [re.split(r"\s{2,}", line.strip())[0] for line in out.stdout.splitlines()]
    assert sorted(names) == sorted(EXPECTED_BIASES)


def test_ids_are_snake_case_of_display_names():
    for case in load_library(include_user=False).values():
        assert case.id == re.sub(r"[^a-z0-9]+", "_", case.name.lower()).strip("_")
        assert case.path.name == f"{case.id}.toml"


def test_check_accepts_every_builtin_file():
    out = cli("library", "check", *map(str, sorted((ROOT / "data" / "biases").glob("*.toml"))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": ok") == 30


def test_loading_the_library_dry_runs_the_users_files_and_not_the_proven_builtins(monkeypatch):
    # The built-ins' dry runs are the test above (`cogbias library check`); an app start
    # skips them. A user's file is still dry-run: one whose metric fails for some values is
    # left out, with its problem.
    from cogbias.library import parsing

    checked: list[str] = []
    real_dry_run = parsing.dry_run

    def counting(case, check):
        checked.append(case.id)
        real_dry_run(case, check)

    monkeypatch.setattr(parsing, "dry_run", counting)
    library.user_dir().mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tests" / "malformed" / "y_out_of_range.toml", library.user_dir())
    report = library.load_library_report()
    assert checked == ["demo"]
    assert sorted(c.name for c in report.cases.values()) == sorted(EXPECTED_BIASES)
    assert [p.file for p in report.problems] == [str(library.user_dir() / "y_out_of_range.toml")]
    assert "not a reference point" in report.problems[0].message


def test_there_are_at_least_15_distinct_malformed_files():
    assert len(MALFORMED) >= 15


def _tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_check_rejects_malformed_files_with_position_and_plain_words(
    path, tmp_path, isolated_home, cogbias_main
):
    work = tmp_path / "work"
    work.mkdir()
    target = work / path.name
    shutil.copy(path, target)
    before = _tree_digest(work), _tree_digest(isolated_home)
    out = cogbias_main("library", "check", str(target))  # the real process: the tests above
    assert out.returncode != 0
    first = out.stderr.splitlines()[0]
    assert re.match(rf"{re.escape(str(target))}:\d+:\d+: \S", first), first
    expected = (path.with_suffix(".expect")).read_text().strip()
    assert expected in out.stderr, out.stderr
    assert (_tree_digest(work), _tree_digest(isolated_home)) == before  # nothing written anywhere


def test_error_positions_point_at_the_problem():
    text = (ROOT / "tests" / "malformed" / "unknown_value_gap.toml").read_text()
    with pytest.raises(LibraryError) as info:
        parse_test_case(text, "x.toml")
    problem = info.value.problems[0]
    line = text.splitlines()[problem.line - 1]
    assert line[problem.col - 1 :].startswith("{{anker}}")


@pytest.mark.parametrize(
    "case", list(load_library(include_user=False).values()), ids=lambda c: c.id
)
def test_load_save_load_is_structurally_identical(case, tmp_path):
    text = to_toml(case)
    again = parse_test_case(text)
    assert again == case
    assert to_toml(again) == text  # the canonical form is stable
    path = tmp_path / f"{case.id}.toml"
    path.write_text(text)
    assert load_test_case(path) == case


def test_save_never_overwrites_a_builtin(isolated_home):
    case = library.get_test_case("anchoring")
    with pytest.raises(PermissionError):
        library.save_test_case(case, case.path)
    copy = library.TestCase(**{**case.__dict__, "id": "anchoring_copy", "path": None})
    saved = library.save_test_case(copy)
    assert saved.parent == isolated_home / "biases"
    assert library.get_test_case("anchoring_copy").name == case.name


def test_random_decider_scores_zero_on_average_for_every_bias():
    means = {}
    for case in load_library(include_user=False).values():
        rng = random.Random(case.id)
        scores = []
        for _ in range(2000):
            params = case.metric_params(case.sample_values(rng))
            n = case.n_options
            scores.append(metrics.score_pair(rng.randrange(n), rng.randrange(n), params, n))
        means[case.id] = sum(scores) / len(scores)
    print("\nRandom decider, mean score over 2,000 pairs:")
    for bias, mean in means.items():
        print(f"  {bias:32} {mean:+.4f}")
    assert all(abs(m) <= 0.1 for m in means.values()), means


def test_scenarios_are_25_industry_groups_times_8_positions():
    scenarios = library.load_scenarios()
    assert len(scenarios) == 200
    assert len({s.industry_group for s in scenarios}) == 25
    assert len({(s.industry_group, s.position) for s in scenarios}) == 200
    assert scenarios[0].text.endswith(".")


def test_model_registry_has_the_builtins_and_the_papers_models():
    ids = [m.id for m in registry.load_models()]
    assert ids[:2] == ["random", "local/smollm2"]
    assert len(ids) >= 22


def test_a_number_of_thousands_of_digits_is_a_located_problem():
    text = 'id = "x"\nname = "X"\nlimit = ' + "9" * 5000 + "\n"
    with pytest.raises(LibraryError, match=r"big\.toml:3:9: this number has too many digits"):
        parse_test_case(text, "big.toml")
