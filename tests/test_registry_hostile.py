"""A hand-edited models.toml with a wrong entry (issue 29's class of untrusted files).

The probe: `arena_score = inf` was kept and reached the figures, and an entry without an id
ended every command that names models in "unexpected TypeError". Now an entry without a
usable id is left out, any other wrong field takes its default or, for a capability, is left
unstated so the provider's holds (the entry keeps its endpoint, so the model is never sent
elsewhere), and the commands and the Models page say what was wrong where.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cogbias.llm import registry, settings
from tests.test_app_pages import assert_clean, open_page

ROOT = Path(__file__).resolve().parent.parent
BROKEN = """
[[models]]
id = "mine/fine"
name = "Fine"

[[models]]
id = "mine/odd"
name = "Odd\\nname"
api_base = "http://127.0.0.1:9/v1"
arena_score = inf
params_b = -3
max_temperature = nan
json_schema = "yes"

[[models]]
name = "no id"

[[models]]
id = ".."
"""


def write_user_models(text: str) -> Path:
    path = settings.user_models_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_wrong_fields_take_their_defaults_and_entries_without_an_id_are_left_out() -> None:
    path = write_user_models(BROKEN)
    found = {m.id: m for m in registry.load_models(path)}
    assert set(found) == {"mine/fine", "mine/odd"}
    odd = found["mine/odd"]
    assert odd.api_base == "http://127.0.0.1:9/v1"  # it keeps its endpoint
    assert (odd.name, odd.arena_score, odd.params_b) == ("mine/odd", None, None)
    assert (odd.max_temperature, odd.json_schema) == (None, None)  # the provider's (issue 31)
    problems = registry.registry_problems(path)
    assert f"{path}: entry 2: 'arena_score' must be a finite number >= 0" in problems[2]
    assert any("entry 3: 'id' is missing or no text; the entry is left out" in p for p in problems)
    assert any("entry 4: 'id' is only dots" in p for p in problems)
    assert len(problems) == 7


def test_a_file_that_is_no_toml_leaves_the_built_in_registry() -> None:
    write_user_models("[[models]\nid = ")
    assert len(registry.load_models()) == len(registry.load_models(registry.BUILTIN_MODELS))
    (problem,) = registry.registry_problems()
    assert "models.toml: cannot be read" in problem


def test_the_command_warns_and_plans(tmp_path: Path) -> None:
    write_user_models(BROKEN)
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "run", "pairs", "--models", "mine/fine",
         "--biases", "anchoring", "--dry-run", "--db", tmp_path / "r.db"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: " in done.stderr and "entry 3: 'id' is missing" in done.stderr
    assert "Traceback" not in done.stderr and "Odd\nname" not in done.stderr


def test_the_models_page_lists_what_was_wrong_as_text() -> None:
    write_user_models(BROKEN)
    at = open_page("settings")
    assert_clean(at)
    assert any("entries of the model registry" in w.value for w in at.warning)
    (listing,) = [c.value for c in at.code if "entry 2" in c.value]
    assert "'json_schema' must be true or false" in listing
