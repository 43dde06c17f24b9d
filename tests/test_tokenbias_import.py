"""Importing the token-bias paper's synthetic data files (fixture: tokenbias-format)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cogbias.cli.main import main
from cogbias.datasets import DatasetError, import_peek
from cogbias.runs.pipeline import Instance
from cogbias.store import Store
from tests.dataset_helpers import TOKENBIAS_DIR, snapshot

FIXTURE = TOKENBIAS_DIR
GOLD = "synthetic_dataset_demo_original_gold.json"
RANDOM = "synthetic_dataset_demo_original_random.json"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    for name in (GOLD, RANDOM):
        shutil.copyfile(FIXTURE / name, folder / name)
    return folder


def _edit(path: Path, edit) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _instances(store: Store, dataset: str) -> list[Instance]:
    rows = store.query(
        "select * from instances where dataset = ? order by instance_index", (dataset,)
    )
    return [Instance.from_row(r) for r in rows]


def test_the_fixture_pair_imports_as_three_perturbation_pairs(tmp_path: Path):
    with Store(tmp_path / "r.db") as store:
        summary = import_peek(store, [FIXTURE])
        assert (summary.instances, summary.biases) == (3, ["demo_original"])
        pairs = _instances(store, "peek2024")
        gold = json.loads((FIXTURE / GOLD).read_text(encoding="utf-8"))
        perturbed = json.loads((FIXTURE / RANDOM).read_text(encoding="utf-8"))
        for pair in pairs:
            p, q = gold[str(pair.instance_index)], perturbed[str(pair.instance_index)]
            assert pair.variant == "pair" and pair.values["generation_mode"] == ["gold", "random"]
            # the question is kept verbatim, minus the option lines the pipeline renders itself
            assert pair.control.prompt in p["question"] and pair.treatment.prompt in q["question"]
            assert "(a)" not in pair.control.prompt
            # the correctness key points at target_answer, in each half
            c, t = pair.values["correct"]
            assert (pair.metric.y1, pair.metric.y2) == (c, t)
            assert pair.control.options[c] in p["target_answer"]
            assert pair.treatment.options[t] in q["target_answer"]
            assert pair.control.options[1 - c] in p["incorrect_answer"]
        assert pairs[0].control.options == ("No", "Yes")
        assert pairs[2].treatment.options == (
            "Oluwaseun is a bank clerk.",
            "Oluwaseun is a bank clerk and is active in an ocean conservation group.",
        )
        assert import_peek(store, [FIXTURE / GOLD, FIXTURE / RANDOM]).unchanged


def test_an_item_without_a_partner_is_reported_unpaired_and_in_no_table(tmp_path: Path):
    """Issue 19: a missing partner is no longer an error (nor a self-pair): it is unpaired."""
    folder = _copy(tmp_path)
    _edit(folder / RANDOM, lambda d: d["2"].update(question_idx=7))
    with Store(tmp_path / "r.db") as store:
        summary = import_peek(store, [folder])
        items = _instances(store, "peek2024")
    assert summary.pairs == {"demo_original": 2}
    assert summary.paired_items == {"demo_original": 4}
    assert summary.unpaired_items == {"demo_original": 2}  # gold 2 and random 7
    assert "family demo_original: 4 items in true pairs, 2 unpaired" in summary.describe()
    assert sorted((i.variant, i.test_case) for i in items) == [
        ("pair", "demo_original"),
        ("pair", "demo_original"),
        ("unpaired", "demo_original_gold"),
        ("unpaired", "demo_original_random"),
    ]


def test_a_partner_that_differs_only_where_the_model_does_not_look_is_unpaired(tmp_path: Path):
    """Issue 28: the Yes/No syllogism writes no options, so the model reads its question only;
    a partner whose question is the same and whose answers differ reads the same: no pair."""
    folder = _copy(tmp_path)
    gold = json.loads((folder / GOLD).read_text(encoding="utf-8"))
    _edit(
        folder / RANDOM,
        lambda d: d["0"].update(question=gold["0"]["question"], incorrect_answer="[Maybe]"),
    )
    with Store(tmp_path / "r.db") as store:
        summary = import_peek(store, [folder])
        items = _instances(store, "peek2024")
    assert summary.pairs == {"demo_original": 2}
    assert summary.unpaired_items == {"demo_original": 2}  # gold 0 and random 0
    unpaired = [i for i in items if i.variant == "unpaired" and i.instance_index == 0]
    assert sorted(i.control.options for i in unpaired) == [("Maybe", "No"), ("No", "Yes")]


def test_an_unpaired_file_imports_as_plain_reasoning_items(tmp_path: Path):
    folder = tmp_path / "files"
    folder.mkdir()
    shutil.copyfile(FIXTURE / GOLD, folder / "synthetic_dataset_demo_original_baseline.json")
    with Store(tmp_path / "r.db") as store:
        import_peek(store, [folder], name="plain")
        items = _instances(store, "plain")
    assert len(items) == 3
    assert all(i.variant == "unpaired" and i.control == i.treatment for i in items)


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        (
            RANDOM,
            lambda d: d["1"].pop("target_answer"),
            rf"{RANDOM}, row 2, column 'target_answer': \(item \"1\"\) is missing",
        ),
        (
            GOLD,
            lambda d: d["0"].update(question_idx="0"),
            rf"{GOLD}, row 1, column 'question_idx': .*expected a whole number",
        ),
        (
            GOLD,
            lambda d: d["2"].update(target_answer="(c) Maya is a nurse."),
            rf"{GOLD}, row 3, column 'target_answer': .*matches none of the options written",
        ),
        (
            GOLD,
            lambda d: d["2"].update(question_idx=1),
            rf"{GOLD}, row 3, column 'question_idx': question_idx 1 also appears in row 2",
        ),
        (
            GOLD,
            lambda d: d["0"].update(incorrect_answer="[No]"),
            r"column 'incorrect_answer': .*same as target_answer",
        ),
    ],
)
def test_malformed_files_name_file_row_and_field_and_write_nothing(
    tmp_path: Path, file, edit, message
):
    folder = _copy(tmp_path)
    db = tmp_path / "r.db"
    with Store(db) as store:
        import_peek(store, [FIXTURE], name="kept")
    before = snapshot(db)
    _edit(folder / file, edit)
    with Store(db) as store, pytest.raises(DatasetError, match=message):
        import_peek(store, [folder], name="broken")
    assert snapshot(db) == before


def test_invalid_json_is_located_by_line(tmp_path: Path, capsys):
    folder = _copy(tmp_path)
    (folder / GOLD).write_text('{\n "0": {\n  "question_idx": 0,,\n}', encoding="utf-8")
    code = main(["import", "peek2024", str(folder), "--db", str(tmp_path / "r.db")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{GOLD}, line 3: is not valid JSON" in err and "Traceback" not in err


def test_the_command_line_still_starts_without_pandas_or_scipy():
    """The importer and prompting methods are wired into the CLI without slowing its start."""
    import subprocess
    import sys

    code = (
        "import sys, cogbias.cli.main, cogbias.runs.executor, cogbias.runs.paired, cogbias.runs.study, cogbias.runs.summaries, cogbias.runs.prompting; cogbias.cli.main._parser(); "
        "print(sorted(m for m in ('pandas', 'scipy') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parent.parent  # `-c` puts the working directory first
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"


def test_tables_state_direction_and_explore_keeps_token_bias_rows_off_its_legend(tmp_path: Path):
    from cogbias.runs import executor, paired_plan
    from cogbias.studies import cells, tokenbias

    with Store(tmp_path / "r.db") as store:
        import_peek(store, [FIXTURE])
        for spec in (
            paired_plan.RunSpec(models=["random"], dataset="peek2024"),
            paired_plan.RunSpec(models=["random"], biases=["anchoring"], generator="examples"),
        ):
            assert executor.execute(paired_plan.plan(spec, store), store).status == "done"
        table = tokenbias.results(store, "peek2024")
        everything = cells.heatmap_summary(store)
        shown = cells.cognitive_bias_summary(store)
        only_tokens = cells.cognitive_bias_summary(store, dataset="peek2024")
    assert table["direction"].tolist() == ["two-sided: n12 != n21"]
    assert set(everything["bias"]) == {"anchoring", "demo_original"}
    assert set(shown["bias"]) == {"anchoring"} and only_tokens.empty


def test_h2_pairs_an_items_answers_across_two_prompting_runs(tmp_path: Path):
    """H2 perturbs the prompt: P is the item under one_shot, P' the same item under one_shot@Bob."""
    from cogbias.runs import executor, paired_plan
    from cogbias.studies import tokenbias
    from tests.dataset_helpers import FIXTURES

    with Store(tmp_path / "r.db") as store:
        summary = import_peek(store, [FIXTURES / "tokenbias-released-excerpt"])
        assert "H2" in summary.by_prompting
        table = tokenbias.results(store, "peek2024")
        assert "H2" not in set(table["hypothesis"])  # no run with both methods yet
        for method in ("one_shot", "one_shot@Bob"):
            spec = paired_plan.RunSpec(models=["random"], dataset="peek2024", prompting=method)
            assert executor.execute(paired_plan.plan(spec, store), store).status == "done"
        table = tokenbias.results(store, "peek2024")
    h2 = table[table["hypothesis"] == "H2"]
    # the P items of H1 (linda_variant_one_to) and H3 (linda_variant_four): 2 + 2 in the excerpt
    assert h2[["prompting", "n"]].values.tolist() == [["one_shot vs one_shot@Bob", 4]]
    assert h2["direction"].iloc[0] == "one-sided: n12 > n21 (the perturbation hurts)"
    assert "H6" not in set(table["hypothesis"])  # its methods were not run
