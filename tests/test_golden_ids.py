"""Run ids, cache keys and row ids are pinned: a refactor of the engine must not change them.

Stored databases key every row on these values; a changed id would make a resumed run start
over and a changed cache key would pay again for answers already stored. The values below
were computed once on the engine before its redesign and are never to be edited.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cogbias.core import records
from cogbias.llm.client import LLMRequest, cache_key
from cogbias.llm.profiles import resolve
from cogbias.runs import paired_plan as runner  # RunSpec moved to runs.paired_plan
from cogbias.runs.study_plan import StudySpec

ROOT = Path(__file__).resolve().parent.parent

SPECS = {
    "run-066ddf665a36": runner.RunSpec(
        models=["random", "local/smollm2"],
        biases=["anchoring", "framing_effect"],
        scenarios=3,
        instances=2,
        generator="examples",
    ),
    "run-65a8ce6234b4": runner.RunSpec(
        models=["random"], biases=["anchoring"], generator="examples", prompting="zs_cot"
    ),
    "run-5f9bc19c0463": runner.RunSpec(
        models=["random"], dataset="malberg2024-hub", per_bias=50, generator="examples"
    ),
    "run-cb6c807ce0e3": runner.RunSpec(
        models=["random"], dataset="tokenbias", generator="examples"
    ),
    "run-426c73c2bc75": StudySpec(
        study="biasbuster", models=["random"], mitigations=["none", "awareness"], study_hash="abc"
    ),
}


@pytest.mark.parametrize("expected", list(SPECS))
def test_run_ids_are_pinned(expected: str) -> None:
    assert SPECS[expected].run_id == expected


MESSAGES = (("system", "You decide."), ("user", "Option 1 or Option 2?"))
FULL = dict(temperature=0.7, seed=3, max_tokens=64, grammar='root ::= "Option " [1-2]', repeat=2)
KEYS = [
    ("random", None, {}, "407d32833e9ee6645c9a7532c500c0f419eea742802b500ff9ba157a06669ef4"),
    ("random", None, FULL, "d1c3fb4538937ea610342322a8b59e6ad0cde6ddf8b57690909f44e751f90b4c"),
    ("local/smollm2", None, {}, "c054514c2978f12b171e9958d7518709f08519e01c0bad5ba19e98b7bd2dd638"),
    (
        "local/smollm2",
        None,
        FULL,
        "3e9f7dc255e7508843649809401d82cb514a33c3b55aeff3469c4623625a6c16",
    ),
    (
        "openai/gpt-4o-mini",
        None,
        {},
        "f068010b8ff0ec4e8b045d3d0a48a731ceab441e7163d92018e8acfd70af58a9",
    ),
    (
        "openai/gpt-4o-mini",
        None,
        FULL,
        "5db54b1a6f3ddedda730bec6400b56e1a581424423fe1e8691217ebaafe70aff",
    ),
    (
        "openai/my-model",
        "http://127.0.0.1:8000/v1",
        {},
        "a4d9dc7d4c2472a011bdf676a38a693d2e7b1430d74e97cd6020fd2999269425",
    ),
    (
        "openai/my-model",
        "http://127.0.0.1:8000/v1",
        FULL,
        "5bea5bde83ddd8f9953a984743db0e33d4565dbd7a95eed8905ec002b94a48eb",
    ),
]


@pytest.mark.parametrize(("model", "api_base", "options", "expected"), KEYS)
def test_cache_keys_are_pinned(
    model: str, api_base: str | None, options: dict, expected: str
) -> None:
    profile = resolve(model, api_base=api_base)
    assert cache_key(LLMRequest(model=model, messages=MESSAGES, **options), profile) == expected


def test_row_ids_are_pinned() -> None:
    assert records.instance_id("h", "scen", 1, "examples", 0, 0.7) == "af6149d76385b5bdf170"
    assert records.decision_id("run-x", "inst", "random", 0, 0.0) == "94baf5f86f4721dea800"
    assert (
        records.decision_id("run-x", "inst", "random", 0, 0.0, "zs_cot") == "adbb731ee96bcbdec49b"
    )


def test_the_demo_snapshot_runs_keep_their_ids() -> None:
    """A database made before the redesign: its stored specs still name the same runs."""
    snapshot = json.loads(gzip.decompress((ROOT / "data/demo/snapshot.json.gz").read_bytes()))
    assert snapshot["runs"]
    for run in snapshot["runs"]:
        assert runner.RunSpec.from_stored(run["spec"]).run_id == run["id"]
