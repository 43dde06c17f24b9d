"""`cogbias export --hub DIR`: a folder the Hugging Face Hub and `datasets` read.

A real store (a paired run on the scripted test server, one of whose models answers nothing
readable, a study run, an imported dataset with published decisions) is exported through the
real command; the folder is read back with `datasets` when it is installed, else with pyarrow
through the card's own `configs`, and every row and column is compared with what the store
holds: the rows `cogbias export` writes to JSONL (typed) and to CSV. The card's YAML header
is parsed (PyYAML) and held to the Parquet files; hostile names stay text.
"""

from __future__ import annotations

import csv
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from cogbias.core.outputs import replacing_folder
from cogbias.core.run_record import Run
from cogbias.core.safetext import csv_cell
from cogbias.datasets import import_malberg
from cogbias.runs import executor, paired_plan, paired_results, study_read
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.views import hub_card
from cogbias.views.hub_export import public_spec
from cogbias.views.report_parts import Section, Table
from cogbias.views.safe_text import escape_markdown
from tests.dataset_helpers import FORMAT_DIR
from tests.fake_llm_server import FakeLLMServer
from tests.study_helpers import study_run

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-hubexport-0123456789abcdef"
# a model that answers nothing readable: its pairs fail, as unparseable
MUDDLED = "openai/muddle---[link](http://evil.test)<script>alert(1)</script>"
RUN_NAME = "lab run\n---\nlicense: mit\n# Heading <script>alert(2)</script> [link](http://x.test)"
ANSWER = "I pick <b>none</b> ![img](http://evil.test/p.png)"


def cogbias(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": KEY}
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def answer(request: dict[str, Any]) -> str:
    if request.get("model", "").startswith("muddle"):
        return ANSWER
    return "Option 1. " + ANSWER


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A database with a paired run (one model failing), a study run and a dataset."""
    db = tmp_path_factory.mktemp("hub") / "x.db"
    with pytest.MonkeyPatch.context() as env, FakeLLMServer(answer) as server:
        env.setenv("OPENAI_API_KEY", KEY)
        spec = paired_plan.RunSpec(
            models=["random", "openai/fake", MUDDLED],
            biases=["anchoring", "framing_effect"],
            instances=2,
            generator="examples",
            api_base=server.base_url,
        )
        with Store(db) as store:
            paired = executor.execute(paired_plan.plan(spec, store), store, concurrency=4)
            # a provider error that echoed the key, stored before redaction existed
            store.update_run(paired.id, name=RUN_NAME, error=f"denied: {KEY}")
            import_malberg(store, FORMAT_DIR)
    study = study_run(db, StudySpec("biasbuster", ["random"], tests=["framing"], repeats=1))
    return {"db": db, "paired": paired.id, "study": study}


def front_matter(card: str) -> tuple[dict[str, Any], str]:
    """The card's YAML header, parsed, and its Markdown body."""
    lines = card.split("\n")
    assert lines[0] == "---"
    end = lines.index("---", 1)
    return yaml.safe_load("\n".join(lines[1:end])), "\n".join(lines[end + 1 :])


def load(folder: Path, header: dict[str, Any], config: str) -> list[dict[str, Any]]:
    """One config's rows as a reader of the published folder gets them: with `datasets` if
    it is installed, else with pyarrow from the file the card's `configs` name."""
    try:
        import datasets
    except ImportError:
        (entry,) = [c for c in header["configs"] if c["config_name"] == config]
        return pq.read_table(folder / entry["data_files"][0]["path"]).to_pylist()
    # a cache of this test's own: `datasets` may take another folder named alike for this one
    cache = folder.parent / "datasets-cache"
    found = datasets.load_dataset(str(folder), config, split="train", cache_dir=str(cache))
    return found.to_list()  # type: ignore[no-any-return]


def export_rows(db: Path, tmp: Path, *selection: str) -> tuple[list[dict], list[dict]]:
    """What `cogbias export` writes for the selection: its JSONL rows and its CSV rows."""
    out = []
    for suffix in ("jsonl", "csv"):
        path = tmp / f"reference.{suffix}"
        done = cogbias("export", "--db", db, *selection, "-o", path, "--force")
        assert done.returncode == 0, done.stderr
        with path.open(encoding="utf-8", newline="") as handle:
            rows = [json.loads(line) for line in handle] if suffix == "jsonl" else []
            rows = rows or list(csv.DictReader(handle))
        out.append(rows)
    return out[0], out[1]


def as_csv(value: Any) -> str:
    """A typed cell as `cogbias export` writes it to CSV (docs/datasets.md)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(csv_cell(value))


def export_hub(db: Path, folder: Path, *selection: str) -> tuple[dict[str, Any], str]:
    done = cogbias("export", "--db", db, *selection, "--hub", folder)
    assert done.returncode == 0, done.stderr
    assert "README.md" in done.stderr and "Traceback" not in done.stderr
    return front_matter((folder / "README.md").read_text(encoding="utf-8"))


def check_card_matches_files(folder: Path, header: dict[str, Any], configs: list[str]) -> None:
    """One config per table, each naming its file, its features the file's schema."""
    dtypes = {"string": "string", "int64": "int64", "double": "float64", "bool": "bool"}
    assert [c["config_name"] for c in header["configs"]] == configs
    assert header["configs"][0]["default"] is True
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet"))
    assert sorted(c["data_files"][0]["path"] for c in header["configs"]) == files
    assert [i["config_name"] for i in header["dataset_info"]] == configs
    for config, info in zip(header["configs"], header["dataset_info"], strict=True):
        schema = pq.read_schema(folder / config["data_files"][0]["path"])
        declared = [(f["name"], f.get("dtype") or {"list": f["list"]}) for f in info["features"]]
        actual = [
            (c.name, {"list": dtypes[str(c.type.value_type)]} if c.type.num_fields else
             dtypes[str(c.type)])
            for c in schema
        ]  # fmt: skip
        assert declared == actual
    assert header["license"] == "other"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "data"]


def test_a_paired_run_round_trips_every_row_and_column(store_path, tmp_path):
    db, run_id = store_path["db"], store_path["paired"]
    folder = tmp_path / "hub"
    header, body = export_hub(db, folder, "--run", run_id)
    check_card_matches_files(folder, header, ["pairs", "instances", "runs"])

    pairs = load(folder, header, "pairs")
    typed, texts = export_rows(db, tmp_path, "--run", run_id)
    with Store(db) as store:
        stored = store.query("select id from decisions where run_id = ? order by rowid", [run_id])
        run = store.run(run_id)
        pinned = store.pinned_test_cases(run_id)
    assert len(pairs) == len(stored) == 12 and pairs == typed
    assert [row["decision_id"] for row in pairs] == [r["id"] for r in stored]
    assert [{k: as_csv(v) for k, v in row.items()} for row in pairs] == texts
    failed = [row for row in pairs if row["status"] == "failed"]
    assert {row["model"] for row in failed} == {MUDDLED} and len(failed) == 4
    assert {row["failure_kind"] for row in failed} == {"unparseable"}
    assert any(ANSWER in (row["control_raw_answer"] or "") for row in pairs)

    instances = load(folder, header, "instances")
    shared = ["dataset", "instance_id", "bias", "scenario", "variant", "control_options",
              "treatment_options", "n_options", "k", "y1", "y2", "flip_control", "flip_treatment"]  # fmt: skip
    from_pairs = {json.dumps([row[c] for c in shared]) for row in pairs}
    assert len(instances) == 4 == len(from_pairs)
    assert {json.dumps([row[c] for c in shared]) for row in instances} == from_pairs

    (row,) = load(folder, header, "runs")
    assert row["run_id"] == run_id and row["kind"] == "paired" and row["name"] == RUN_NAME
    assert (row["status"], row["planned"], row["done"], row["failed"]) == (
        run["status"], run["planned"], run["done"], run["failed"]
    )  # fmt: skip
    assert row["models"] == ["random", "openai/fake", MUDDLED]
    assert json.loads(row["failure_kinds"]) == {"unparseable": 4}
    spec = json.loads(row["spec"])
    assert spec == json.loads(run["spec"]) and spec["api_base"].startswith("http://127.0.0.1:")

    assert f"Exported by cogbias {importlib.metadata.version('cogbias')} on " in body
    # the methods a report gives (views/report_methods.py): what ran, as Markdown
    assert "failed rows (4 unparseable)" in body and "Decision temperature 0.0" in body
    for case in ("anchoring", "framing_effect"):  # each test case with its pinned version
        shown = re.escape(escape_markdown(case))  # framing\_effect
        line = rf"\n\| {shown} \| [^|\n]+ \| {pinned[case][0]} \| [0-9a-f]{{64}} \|"
        assert re.search(line, body), case
    models = [line.split(" | ")[0] for line in body.splitlines() if line.startswith("| ")]
    assert {"| random", "| openai/fake"} <= set(models)
    assert any(m.startswith("| openai/muddle---\\[link\\]") for m in models)
    assert "Units planned 12, done 12, failed 4\\: 4 unreadable" in body  # `:` escaped
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()
    assert all(KEY not in json.dumps(r) for r in [*pairs, *instances, row])


def test_hostile_names_stay_text_in_the_card(store_path, tmp_path):
    folder = tmp_path / "hub"
    header, body = export_hub(store_path["db"], folder, "--run", store_path["paired"])
    card = (folder / "README.md").read_text(encoding="utf-8")
    # the header holds the whole name as one value, and has only its own two delimiters
    assert header["pretty_name"] == f"cogbias run {RUN_NAME}"
    assert set(header) == {"license", "pretty_name", "tags", "configs", "dataset_info"}
    assert card.split("\n").count("---") == 2
    # in the body no name makes a heading, a link, an image or a tag
    assert not re.search(r"(?<!\\)[<\[\]]", body), "an unescaped tag or link mark"
    assert "\n# Heading" not in body
    assert not [line for line in body.splitlines() if line.startswith("license:")]
    assert r"\<script\>alert(1)\</script\>" in body and r"\[link\]" in body
    assert body.count("\n# ") == 1 and body.startswith("\n# cogbias run lab run --- license")


def test_a_study_run_exports_its_turns(store_path, tmp_path):
    db, run_id = store_path["db"], store_path["study"]
    folder = tmp_path / "hub"
    header, body = export_hub(db, folder, "--run", run_id)
    check_card_matches_files(folder, header, ["turns", "runs"])
    turns = load(folder, header, "turns")
    typed, texts = export_rows(db, tmp_path, "--run", run_id)
    assert turns and turns == typed
    assert [{k: as_csv(v) for k, v in row.items()} for row in turns] == texts
    (row,) = load(folder, header, "runs")
    assert row["kind"] == "study" and row["models"] == ["random"]
    assert "a study run of biasbuster" in body and "Tests\\: framing" in body  # `:` escaped


def test_a_dataset_exports_its_pairs_test_cases_and_runs(store_path, tmp_path):
    db = store_path["db"]
    folder = tmp_path / "hub"
    header, body = export_hub(db, folder, "--dataset", "malberg2024")
    # no run of this database answered it: no `runs` config (`datasets` loads no empty one)
    check_card_matches_files(folder, header, ["pairs", "instances"])
    typed, _ = export_rows(db, tmp_path, "--dataset", "malberg2024")
    assert load(folder, header, "pairs") == typed and len(typed) == 12
    cases, _ = export_rows(db, tmp_path, "--dataset", "malberg2024", "--test-cases")
    assert load(folder, header, "instances") == cases and cases
    assert "12 rows are the dataset's published decisions" in body


def test_a_run_with_nothing_to_publish_is_refused_and_nothing_written(store_path, tmp_path):
    db = store_path["db"]
    with Store(db) as store:
        spec = paired_plan.RunSpec(models=["random"], biases=["anchoring"], generator="examples")
        run_id = executor.create(paired_plan.plan(spec, store), store)
    done = cogbias("export", "--db", db, "--run", run_id, "--hub", tmp_path / "hub")
    assert done.returncode != 0 and f"run {run_id} has no pairs yet" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_replaced_only_with_force(store_path, tmp_path):
    db, run_id = store_path["db"], store_path["paired"]
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    done = cogbias("export", "--db", db, "--run", run_id, "--hub", folder)
    assert done.returncode != 0 and "pass --force" in done.stderr
    assert "Traceback" not in done.stderr
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["hub"]  # no temporary folder left
    export_hub(db, folder, "--run", run_id, "--force")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "data"]
    assert [p.name for p in tmp_path.iterdir()] == ["hub"]


def test_a_folder_holding_the_database_is_refused_even_with_force(store_path, tmp_path):
    db, run_id = store_path["db"], store_path["paired"]
    before = db.read_bytes()
    done = cogbias("export", "--db", db, "--run", run_id, "--hub", db.parent, "--force")
    assert done.returncode != 0 and "holds the database" in done.stderr
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--test-cases"], "leave out --test-cases"),
        (["--format", "csv"], "leave out --format"),
        (["-o", "x.csv"], "not allowed with argument"),
    ],
)
def test_flags_that_do_not_apply_to_a_folder_are_refused(
    store_path, tmp_path, extra, message, cogbias_main
):
    db = store_path["db"]
    done = cogbias_main(
        "export", "--db", db, "--dataset", "malberg2024", "--hub", tmp_path / "h", *extra
    )
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "h").exists()


def test_a_published_spec_carries_no_user_password_or_query():
    spec = {"models": ["m"], "api_base": f"https://me:{KEY}@host.test:8443/v1?key={KEY}#x"}
    assert public_spec(spec) == {"models": ["m"], "api_base": "https://host.test:8443/v1"}
    assert public_spec({"api_base": "http://[::1]:9/v1"})["api_base"] == "http://[::1]:9/v1"
    assert public_spec({"api_base": "http://[bad"})["api_base"] is None


def test_a_tampered_spec_in_the_store_stays_text_in_the_methods():
    """The card's methods are the report's (views/report_methods.py, with the settings words
    of the runs' kinds) as Markdown: whatever a stored spec holds, it is shown as text."""
    hostile = "<img src=x onerror=alert(1)> [a](http://evil.test) | `x`"
    study = {"kind": "study", "study": hostile, "models": [hostile], "tests": [hostile],
             "temperatures": [0.5], "study_hash": hostile, "mitigations": ["none"]}  # fmt: skip
    run = Run(id=f"run`{hostile}", spec=study, status=hostile)
    paired = Run(id="run-1", spec={"models": ["m"], "temperature": hostile, "seed": hostile})
    sections = [
        Section("What was asked", items=study_read.settings(run)),
        Section(hostile, paragraphs=paired_results.settings(paired, "paired")),
        Section("Models", tables=(Table(hostile, pd.DataFrame([{hostile: hostile}])),)),
    ]
    text = "\n".join(hub_card.sections_markdown(sections))
    assert "Temperatures\\: 0.5" in text and hostile not in text
    assert not re.search(r"(?<!\\)[<\[\]`]", text), "an unescaped tag, link or code mark"
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 2 and all(re.sub(r"\\\|", "", r).count("|") == 2 for r in rows)


def test_one_models_rows_with_model(store_path, tmp_path):
    db, run_id = store_path["db"], store_path["paired"]
    folder = tmp_path / "hub"
    header, body = export_hub(db, folder, "--run", run_id, "--model", "random")
    typed, _ = export_rows(db, tmp_path, "--run", run_id, "--model", "random")
    pairs = load(folder, header, "pairs")
    assert pairs == typed and {row["model"] for row in pairs} == {"random"} and len(pairs) == 4
    answered = {row["instance_id"] for row in pairs}
    assert {row["instance_id"] for row in load(folder, header, "instances")} == answered
    assert "the decisions of model random only" in body


def test_a_failed_write_leaves_the_old_folder_and_no_temporary_one(tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "old.txt").write_text("kept", encoding="utf-8")
    with pytest.raises(RuntimeError), replacing_folder(folder, force=True) as temporary:
        (temporary / "README.md").write_text("half", encoding="utf-8")
        raise RuntimeError("interrupted")
    assert [p.name for p in tmp_path.iterdir()] == ["hub"]
    assert [p.name for p in folder.iterdir()] == ["old.txt"]
    with replacing_folder(folder, force=True) as temporary:
        (temporary / "README.md").write_text("new", encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["hub"]
    assert [p.name for p in folder.iterdir()] == ["README.md"]
