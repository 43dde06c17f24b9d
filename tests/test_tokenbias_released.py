"""The token-bias paper's whole released folder: one import, true pairs only, a null that stays null.

Skipped, saying which variable to set, unless COGBIAS_RELEASED names the folder that holds the
released files (its `tokenbias/` subfolder); see tests/dataset_helpers.released.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd

from cogbias.cli.main import main
from cogbias.core.records import Instance
from cogbias.llm.factory import open_client
from cogbias.runs.decide import PairAsk, decide_pair
from cogbias.store import Store
from cogbias.studies import analysis, tokenbias
from cogbias.studies.tokenbias_hypotheses import load_hypotheses
from tests.dataset_helpers import released

PAPER_PAIRS = {"H1": 400, "H3": 100, "H4": 200, "H5": 200, "H5b": 200}


def _instances(store: Store) -> list[Instance]:
    rows = store.query("select * from instances where dataset = 'peek2024'")
    return [Instance.from_row(r) for r in rows]


def test_the_whole_released_folder_imports_in_one_command_and_reports_its_pairs(
    tmp_path: Path, capsys
):
    folder = released("tokenbias")
    db = tmp_path / "r.db"
    assert main(["import", "peek2024", str(folder), "--db", str(db)]) == 0
    out = capsys.readouterr().err  # the import's report goes where its progress goes
    for hypothesis, count in PAPER_PAIRS.items():
        assert f"  {hypothesis}: {count} true pairs" in out
    # linda_variant_three: gold and random pair (H1); its baseline file has no partner
    assert "family linda_variant_three: 200 items in true pairs, 100 unpaired" in out
    assert "family linda_variant_six: 200 items in true pairs, 0 unpaired" in out
    assert "H2: compares prompting methods" in out and "H6: compares prompting methods" in out
    with Store(db) as store:
        instances = _instances(store)
        assert len(instances) == 2109
        pairs = [i for i in instances if i.variant == "pair"]
        assert all(i.control != i.treatment for i in pairs)  # no self-pairs
        assert {i.n_options for i in instances} == {2, 3}
        # the random model answers everything; the tables count true pairs only
        assert main(["run", "dataset", "peek2024", "--models", "random", "--db", str(db)]) == 0
        table = tokenbias.results(store, "peek2024")
    counts = {i.test_case for i in pairs}
    assert set(table["hypothesis"]) == counts
    for hypothesis, count in PAPER_PAIRS.items():
        assert int(table.loc[table["hypothesis"] == hypothesis, "n"].iloc[0]) == count
    assert "linda_variant_three_baseline" not in set(table["hypothesis"])


def test_math_numbers_has_93_true_pairs_its_seven_horse_race_twins_read_the_same(tmp_path: Path):
    """Issue 28: seven items of math_original_numbers_random differ from their gold partner only
    in the incorrect answer, which the twenty-five-horses question never shows; the model reads
    the very same text, so by the docs' rule they are unpaired (100 - 7 = 93)."""
    from cogbias.datasets import import_peek

    with Store(tmp_path / "r.db") as store:
        summary = import_peek(store, [released("tokenbias")])
        unpaired = [
            i
            for i in _instances(store)
            if i.variant == "unpaired" and i.test_case == "math_original_numbers_random"
        ]
    assert summary.pairs["math_numbers"] == 93
    assert summary.pairs["math_random"] == summary.pairs["math_animals"] == 100
    assert summary.unpaired_items["math_original_numbers"] == 7
    assert sorted(i.instance_index for i in unpaired) == [1, 17, 39, 61, 83, 88, 91]
    assert {i.control.options for i in unpaired} == {("7", "Any animal other than 7")}


def _null_rejections(instances: list[Instance], alternatives: dict[str, str], seed: int) -> list:
    client = open_client(None)  # the random baseline answers through the client, uncached
    ask = PairAsk(run_id=f"null-{seed}", seed=seed)

    async def answer_all() -> list[dict]:
        return [(await decide_pair(client, i, "random", ask)).to_row() for i in instances]

    rows = asyncio.run(answer_all())
    frame = pd.DataFrame(
        {
            "hypothesis": [r["test_case"] for r in rows],
            "model": "random",
            "prompting": "baseline",
            "original_correct": [
                r["control_choice"] == int(i.metric.y1)
                for r, i in zip(rows, instances, strict=True)
            ],
            "perturbed_correct": [
                r["treatment_choice"] == int(i.metric.y2)
                for r, i in zip(rows, instances, strict=True)
            ],
        }
    )
    table = analysis.hypothesis_table(frame, alternatives)
    return list(table["reject"])


def test_the_random_model_rejects_at_most_alpha_of_the_released_hypotheses_over_20_seeds(
    tmp_path: Path, capsys
):
    """The null model stays null: no family's repeated question makes `random` look biased."""
    folder = released("tokenbias")
    from cogbias.datasets import import_peek

    with Store(tmp_path / "r.db") as store:
        import_peek(store, [folder])
        pairs = [i for i in _instances(store) if i.variant == "pair"]
    table = load_hypotheses()
    alternatives = {i.test_case: table[i.test_case].alternative for i in pairs}
    outcomes = [r for seed in range(20) for r in _null_rejections(pairs, alternatives, seed)]
    assert len(outcomes) == 20 * len(alternatives)
    rate = sum(outcomes) / len(outcomes)
    with capsys.disabled():
        print(
            f"\nrandom model: {sum(outcomes)} of {len(outcomes)} hypotheses rejected ({rate:.3f})"
        )
    assert rate <= analysis.ALPHA
