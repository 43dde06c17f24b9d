"""Effort and intervention as experimental factors (issue 44, points 2-4): runs that differ in
one of them alone ask the same instances, and the factor's paired effect per bias × model is
recomputed here by hand from the stored decisions (scipy directly, not the module's helpers);
`--intervention self_help` stores both calls of each half."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder
from scipy import stats

from cogbias.cli.main import main
from cogbias.runs import factor_runs, kinds
from cogbias.store import Store
from cogbias.studies import interventions
from cogbias.views import factor_view, report, report_html
from tests.test_reasoning_runs import THINKER, register_thinker

BIASES = "anchoring,framing_effect"


def by_effort(request: dict[str, Any]) -> Any:
    """High effort answers the first option; low effort as the scripted default does."""
    answer = default_responder(request)
    if request.get("reasoning_effort") == "high" and answer.startswith("Option"):
        return {
            "content": "Option 1",
            "reasoning_content": "Thinking hard.",
            "reasoning_tokens": 900,
        }
    if request.get("reasoning_effort") == "low" and answer.startswith("Option"):
        return {"content": answer, "reasoning_content": "Quick.", "reasoning_tokens": 50}
    return answer


def run(db: Path, base: str, *extra: str, models: str = THINKER) -> None:
    code = main(
        ["run", "pairs", "--models", models, "--biases", BIASES, "--scenarios", "3",
         "--instances", "3", "--api-base", base, "--db", str(db), *extra]
    )  # fmt: skip
    assert code == 0


def results(db: Path, *extra: str, capsys: Any) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["results", "compare", "--db", str(db), "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def by_hand(db: Path, levels: dict[str, str], bias: str, model: str) -> dict[str, float]:
    """One cell recomputed from the stored decisions: per shared instance the level's mean
    score minus the reference's, their mean, the paired t-interval and Wilcoxon's p."""
    (reference, ref_run), (level, level_run) = levels.items()
    with Store(db) as store:
        rows = store.query(
            "select run_id, instance_id, score from decisions where test_case = ? and "
            "model = ? and status = 'ok' and score is not null",
            [bias, model],
        )
    means: dict[str, dict[str, list[float]]] = {ref_run: {}, level_run: {}}
    for row in rows:
        if row["run_id"] in means:
            means[row["run_id"]].setdefault(row["instance_id"], []).append(row["score"])
    shared = sorted(set(means[ref_run]) & set(means[level_run]))
    changes = np.array([np.mean(means[level_run][i]) - np.mean(means[ref_run][i]) for i in shared])
    half = stats.t.ppf(0.975, len(changes) - 1) * changes.std(ddof=1) / np.sqrt(len(changes))
    p = stats.wilcoxon(changes).pvalue if np.any(changes != 0) else 1.0
    return {
        "n": len(changes),
        "mean_change": float(changes.mean()),
        "ci_low": max(-2.0, float(changes.mean() - half)),
        "ci_high": min(2.0, float(changes.mean() + half)),
        "p_value": float(p),
    }


def test_low_and_high_effort_on_the_same_instances_give_the_paired_change(
    isolated_home, tmp_path, capsys
):
    db = tmp_path / "e.db"
    with FakeLLMServer(by_effort) as srv:
        register_thinker(isolated_home, srv.base_url)
        run(db, srv.base_url, "--reasoning-effort", "low,high")
        efforts = {
            r.get("reasoning_effort") for r in srv.requests if "Option" in _last_user_text(r)
        }
    assert efforts == {"low", "high"}  # every decision request carried its run's effort
    out = results(db, "--factor", "effort", capsys=capsys)
    with Store(db) as store:
        fset = factor_runs.found_set(kinds.records(store), "effort")
    assert list(fset.levels) == ["low", "high"] and fset.reference == "low"
    cells = {(c["bias"], c["model"]): c for c in out["effects"]}
    assert set(cells) == {("anchoring", THINKER), ("framing_effect", THINKER)}
    for bias in ("anchoring", "framing_effect"):
        cell, expected = cells[(bias, THINKER)], by_hand(db, fset.levels, bias, THINKER)
        assert cell["level"] == "high" and cell["n"] == expected["n"] == 9
        for key in ("mean_change", "ci_low", "ci_high", "p_value"):
            assert cell[key] == pytest.approx(expected[key], abs=1e-6), key
    # beside it, what each level cost in thinking (two halves a pair)
    thinking = {t["level"]: t for t in out["thinking"]}
    assert (
        thinking["high"]["thinking_per_pair"] == 1800
        and thinking["low"]["thinking_per_pair"] == 100
    )
    # the report holds the same table and the heatmap
    with Store(db) as store:
        page = report_html.render(report.build("factor", store, factor="effort", run_ids=[]))
        tables = factor_view.factor_tables(store, "effort")
    assert "data-table='factor'" in page and "data-table='thinking'" in page and "<svg" in page
    assert factor_view.heatmap_cells(tables)[1] == ["high"]


def self_help_responder(request: dict[str, Any]) -> str:
    """A rewrite request gets its question back, neutral words first; the rest as scripted."""
    asked = _last_user_text(request)
    if "[text starts]" in asked:
        question = asked.split("[text starts]\n", 1)[1].split("\n[text ends]", 1)[0]
        return f"{interventions.REWRITE_MARKER}\nPlease decide calmly. {question}"
    return default_responder(request)


def test_self_help_stores_both_calls_and_its_change_against_none_is_recomputed(
    isolated_home, tmp_path, capsys
):
    db = tmp_path / "s.db"
    with FakeLLMServer(self_help_responder) as srv:
        run(db, srv.base_url, "--intervention", "none,self_help", models="openai/plain")
        asked = [_last_user_text(r) for r in srv.requests]
    rewrites = [a for a in asked if "[text starts]" in a]
    on_rewrites = [a for a in asked if a.startswith("Please decide calmly.")]
    assert len(rewrites) == len(on_rewrites) == 2 * 2 * 9  # both halves of 18 pairs, twice
    with Store(db) as store:
        [helped] = [r for r in kinds.records(store) if r.spec.get("intervention") == "self_help"]
        pairs = store.pairs(run_id=helped.id)
        cached = store.query("select count(*) as n from llm_calls")[0]["n"]
    assert pairs and all(
        p.decision.control_rewrite.startswith("Please decide calmly.") for p in pairs
    )
    assert all(p.decision.treatment_rewrite for p in pairs)
    assert cached == len(asked)  # every call kept: each rewrite and each answer to it
    out = results(db, "--factor", "intervention", capsys=capsys)
    with Store(db) as store:
        fset = factor_runs.found_set(kinds.records(store), "intervention")
    assert fset.reference == "none"
    cell = next(c for c in out["effects"] if c["bias"] == "anchoring")
    expected = by_hand(db, fset.levels, "anchoring", "openai/plain")
    assert cell["level"] == "self_help" and cell["n"] == expected["n"]
    assert cell["mean_change"] == pytest.approx(expected["mean_change"], abs=1e-6)
    assert cell["p_value"] == pytest.approx(expected["p_value"], abs=1e-6)


def test_runs_that_differ_in_more_than_the_factor_are_refused_by_name(tmp_path, capsys):
    db = tmp_path / "m.db"
    for seed in ("1", "2"):
        assert main(["run", "pairs", "--models", "random", "--biases", "anchoring", "--seed",
                     seed, "--intervention", "awareness" if seed == "1" else "none",
                     "--db", str(db)]) == 0  # fmt: skip
    with Store(db) as store:
        ids = [r.id for r in kinds.records(store)]
    capsys.readouterr()
    code = main(["results", "compare", "--factor", "intervention", "--runs", ",".join(ids),
                 "--db", str(db)])  # fmt: skip
    assert code != 0
    assert "differ in more than the intervention" in capsys.readouterr().err


def test_compare_has_a_factor_mode_with_the_heatmap_and_the_numbers(app_db, capsys):
    from tests.test_app_pages import assert_clean, chart_specs, open_page

    assert main(["run", "pairs", "--models", "random", "--biases", "anchoring,framing_effect",
                 "--instances", "4", "--intervention", "none,awareness,cot",
                 "--db", str(app_db)]) == 0  # fmt: skip
    at = open_page("compare")
    at.radio(key="cmp_mode").set_value("factor").run()
    assert_clean(at)
    at.radio(key="cmp_factor").set_value("intervention").run()
    assert_clean(at)
    assert at.selectbox(key="cmp_reference").value == "none"
    [spec] = [s for s in chart_specs(at) if "mean change vs none" in json.dumps(s)]
    # a column per level against the reference, in the factor's order
    assert '"sort": ["awareness", "cot"]' in json.dumps(spec)
    numbers = next(d.value for d in at.dataframe if "mean change" in d.value.columns)
    assert set(numbers["intervention"]) == {"awareness", "cot"} and len(numbers) == 4
    at.selectbox(key="cmp_reference").set_value("cot").run()
    assert_clean(at)
    numbers = next(d.value for d in at.dataframe if "mean change" in d.value.columns)
    assert set(numbers["intervention"]) == {"none", "awareness"}


def test_the_run_page_sets_effort_intervention_and_a_spend_cap(app_db):
    from tests.test_app_pages import assert_clean, open_page, texts

    at = open_page("run")
    at.multiselect(key="run_biases").set_value(["anchoring"])
    at.multiselect(key="run_models").set_value(["random", "local/smollm2"])
    at.selectbox(key="run_intervention").set_value("awareness")
    at.selectbox(key="run_effort").set_value("high").run()
    assert_clean(at)
    assert "local/smollm2 is not known to" in texts(at)  # refused before any call, by name
    at.multiselect(key="run_models").set_value(["random"]).run()
    at.number_input(key="run_max_cost").set_value(0.5).run()
    assert_clean(at)
    assert "cannot be planned" not in texts(at)
    assert at.button(key="run_start") is not None
