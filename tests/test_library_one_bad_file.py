"""Issue 45, point 2: one bad user file is one error. A choice whose weights are each finite
but add up to inf (`[1e308, 1e308]`) passed every check and then broke every command and
page that loads the library with "Total of weights must be finite", naming no file. Now the
library loads every good file and names the bad one by file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_helpers import cogbias
from streamlit.testing.v1 import AppTest

from cogbias.library import testcases as library

ROOT = Path(__file__).resolve().parent.parent
ANCHORING = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")


def user_case(home: Path, case_id: str, value: str) -> Path:
    """A copy of the built-in anchoring test under `case_id`, with `value` (a TOML table
    body) as one more value generator; returns the file."""
    text = ANCHORING.replace('id = "anchoring"', f'id = "{case_id}"')
    text = text.replace('name = "Anchoring"', f'name = "{case_id.title()}"')
    text = text.replace(
        "[values.anchor_index]", f"[values.extra]\n{value}\n\n[values.anchor_index]"
    )
    folder = home / "biases"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case_id}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.fixture
def weighty(isolated_home: Path) -> Path:
    return user_case(
        isolated_home, "weighty", 'type = "choice"\noptions = ["a", "b"]\nweights = [1e308, 1e308]'
    )


def test_library_list_lists_the_built_ins_and_names_the_bad_file_and_line(weighty: Path) -> None:
    done = cogbias("library", "list")
    assert done.returncode == 1  # a skipped file is worth an exit code
    assert "Total of weights" not in done.stderr and "Traceback" not in done.stderr
    listed = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(listed) == 30 and all(not line.endswith("(user)") for line in listed)
    line = line_of(weighty, "weights = [1e308")
    assert f"{weighty}:{line}:11: value 'extra': the weights add up to more than" in done.stderr


def test_every_command_that_loads_the_library_still_works(weighty: Path, tmp_path: Path) -> None:
    shown = cogbias("library", "show", "anchoring")
    assert shown.returncode == 0 and "Anchoring (anchoring)" in shown.stdout, shown.stderr
    planned = cogbias("run", "pairs", "--biases", "anchoring", "--models", "random",
                      "--plan-only", "--db", tmp_path / "x.db")  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    refused = cogbias("library", "show", "weighty")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "cannot be used until its file is fixed" in refused.stderr
    assert "the weights add up to more than" in refused.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('type = "float"\nmin = 0\nmax = 1' + "0" * 400, "max must be a finite number"),
        ('type = "choice"\noptions = ["a", "b"]\nweights = [1' + "0" * 400 + ", 1]",
         "weight 1 must be a finite number"),
        ('type = "choice"\noptions = ["a", "b"]\nweights = [1e308, 1e308, 0]', "3 weights for 2"),
    ],
)  # fmt: skip
def test_siblings_huge_integers_and_miscounted_weights_are_located(
    isolated_home: Path, value: str, message: str
) -> None:
    """An integer past the largest float raised OverflowError in the finiteness check."""
    path = user_case(isolated_home, "sibling", value)
    report = library.load_library_report()
    assert len(report.cases) == 30
    [problem] = report.problems
    assert problem.file == str(path) and message in problem.message
    assert problem.line > 1


@pytest.mark.parametrize("page", ["learn", "run", "templates", "preview", "classroom"])
def test_every_page_that_loads_the_library_shows_the_message(
    weighty: Path, app_db: Path, page: str
) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(f"app_pages/{page}.py")
    at.run()
    # the Class page lists the test cases among its questions when it is drawn
    assert not at.exception, [e.value for e in at.exception]
    shown = "\n".join(str(e.value) for e in [*at.warning, *at.code, *at.error])
    assert "the weights add up to more than" in shown and "weighty.toml" in shown
