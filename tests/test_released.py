"""Reproduction on the papers' real released data (never committed: see dataset_helpers.released).

Skipped, saying which variable to set, unless COGBIAS_RELEASED names the folder that holds
the released files (`.ci/run` sets it when CI has them beside the clone).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cogbias.datasets.mohr_format import import_mohr
from cogbias.runs import study_results
from cogbias.runs.study_plan import load_study
from cogbias.store import Store
from cogbias.studies.effect_tables import load_effects, mean_table
from tests.dataset_helpers import released


def test_the_thesis_bias_by_model_means_are_reproduced_from_its_released_effects(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")
    folder = tmp_path / "mohr"
    folder.mkdir()
    shutil.copy(source / "bias_detections.csv", folder)  # the effect sizes alone
    published = pd.read_csv(source / "bias_detections.csv")
    with Store(tmp_path / "r.db") as store:
        import_mohr(store, folder)
        frame = load_effects(store, "mohr2025")
    assert len(frame) == len(published) == 1599  # one combination is missing in the release
    expected = published.groupby(["bias", "model"])["bias_detected_mod"].mean()
    names = dict(zip(frame["bias"], frame["bias_name"], strict=True))
    got = mean_table(frame, by="model").stack().rename(index=names, level=0)
    pd.testing.assert_series_equal(
        got.sort_index(), expected.sort_index(), check_names=False, check_index_type=False
    )


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_thesis_folder_imports_with_its_prompts_and_runs_as_the_thesis_asked(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")  # read in place: biases.csv, bias_detections.csv, models.csv
    db = tmp_path / "t.db"
    imported = _cli("import", "mohr2025", source, "--db", db)
    assert imported.returncode == 0, imported.stderr
    said = imported.stdout + imported.stderr  # the summary goes where the command reports
    assert "1599 effect sizes of 10 model(s), 64 prompts, 50 model feature rows" in said
    assert "prompts: 64 from biases.csv (32 bias × scenario experiments" in said
    done = _cli("run", "study", "mohr2025", "--models", "random", "--repeats", "5", "--db", db)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        rows = store.query("select * from study_calls")
        study = load_study("mohr2025", store)
    assert len(rows) == 32 * 2 * 5 and {r["status"] for r in rows} == {"ok"}
    # §3.4.1 / Table 6: the treatment group is the part the thesis expects the bias in
    endowment = study.tests["endowment_effect__1_persona"]
    treatment = {c.name: c.prompt for c in endowment.conditions}["treatment"]
    assert "I hand you a mug" in treatment and "sell" in treatment
    assert study.tests["loss_aversion__0_normal"].target == "b"  # B = 1
    assert study.tests["transaction_utility__0_normal"].target == "b"
    radio = {c.name: c.prompt for c in study.tests["transaction_utility__0_normal"].conditions}
    assert "radio" in radio["treatment"] and "television" in radio["control"]
    assert study.tests["framing_effect__2_odd_numbers"].undirected  # Eq. 2: |d|
    assert not study.tests["anchoring__0_normal"].undirected
    # the persona is in the system message of every scenario except 0_normal
    assert "You are a customer with median income" in study.tests["anchoring__1_persona"].system
    assert "customer" not in study.tests["anchoring__0_normal"].system
    odd = {c.name: c.prompt for c in study.tests["anchoring__2_odd_numbers"].conditions}
    assert "{{" in odd["control"]  # the anchors are the thesis' own values (12 and 76)
    asked = {r["prompt"] for r in rows if r["test"] == "anchoring__2_odd_numbers"}
    assert any("higher or lower than 12 %" in p for p in asked)
    assert any("higher or lower than 76 %" in p for p in asked)


def test_the_thesis_regression_and_table_8_are_reproduced_from_its_detections(
    tmp_path: Path,
) -> None:
    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    ols = _cli("effects", "--db", db, "--view", "ols", "--format", "csv")
    assert ols.returncode == 0, ols.stderr
    assert "reference levels: bias = 'anchoring', model = 'claude-3-haiku', scenario = " \
        "'1_persona'" in ols.stderr  # fmt: skip
    coef = pd.read_csv(io.StringIO(ols.stdout)).set_index("term")["coef"]
    # Tables 4 / 10 (capped): the thesis' "1_no_persona" is the data's 0_normal
    assert f"{coef['Intercept']:.4f}" == "0.6241"
    assert f"{coef['C(scenario)[T.0_normal]']:.4f}" == "0.0081"
    assert f"{coef['C(scenario)[T.2_odd_numbers]']:.4f}" == "-0.0006"
    assert f"{coef['C(scenario)[T.3_large_numbers]']:.4f}" == "-0.0734"
    shown = _cli("effects", "--db", db, "--view", "ols")  # the table prints 3 decimals
    assert "Intercept  0.624" in shown.stdout and "-0.073" in shown.stdout
    raw = _cli("effects", "--db", db, "--view", "ols", "--uncapped", "--format", "csv")
    raw_coef = pd.read_csv(io.StringIO(raw.stdout)).set_index("term")["coef"]
    assert f"{raw_coef['Intercept']:.4f}" == "3.9224"  # Tables 4 / 9
    assert f"{raw_coef['C(scenario)[T.0_normal]']:.4f}" == "-2.1589"
    # Table 8: homogeneity of the capped detections, with the thesis' approximation of J
    for hedges, phi3, llama in (
        ("thesis", "0.90121", "0.493774"),
        ("exact", "0.90116", "0.493744"),
    ):
        table = _cli(
            "effects", "--db", db, "--view", "homogeneity", "--hedges", hedges, "--format", "csv"
        )
        assert f"Hedges' J in the sampling variance: {hedges}" in table.stderr
        row = pd.read_csv(io.StringIO(table.stdout)).set_index("bias").loc["anchoring"]
        assert (f"{row['phi3:medium']:.5f}", f"{row['llama3.1:70b']:.6f}") == (phi3, llama)


# The thesis' words around each question (Appendix C, Tables 1-2), written out here so that
# the test holds what is sent to the thesis itself, not to data/thesis_prompts.toml.
THESIS_SYSTEM = (
    "You will be asked to make choices. Please blank out that some information might be "
    "missing or that you might not be able to make a choice. I have initialized you in a way "
    "that you can only generate 2 tokens. The only valid answer is A SINGLE LETTER OR NUMBER."
)
THESIS_PERSONA = (
    "You are a customer with median income and average education. You are selected at random "
    "to participate in a survey. You can only choose one of the presented options or assign a "
    "value. Behave humanlike and choose instinctively. You can and are advised to make a "
    "subjective decision! There is no right or wrong, but you HAVE TO DECIDE."
)
THESIS_USER = (
    "You are forced to choose! Answer the experiment by only giving the letter of the answer "
    "options (e.g. A, B, C, ...) or a numerical value (80, 100, 1000, ...). Do not state "
    "anything else! Do not hallucinate."
)
THESIS_OUTPUT = {
    "choice": "Your output should only be a LETTER (A, B, C, ...).",
    "numerical": "Your output should only be a NUMBER (9, 80, 100, 1000, ...).",
}


def _released_messages(source: Path) -> set[tuple[str, str]]:
    """(system, user) of each of the 64 prompts of biases.csv as the thesis sent them: the
    content with each variable name replaced by its value as `variables` writes it."""
    sent = set()
    with (source / "biases.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            text = row["content"]
            variables = json.loads(row["variables"])
            for name in sorted(variables, key=len, reverse=True):  # no name is in another
                text = text.replace(name, str(variables[name]))
            system = THESIS_SYSTEM
            if row["scenario"] != "0_normal":
                system += " " + THESIS_PERSONA
            user = "\n----\n".join([THESIS_USER, text, THESIS_OUTPUT[row["response_type"]]])
            sent.add((system, user))
    return sent


def test_the_thesis_study_sends_the_released_prompts_byte_for_byte(tmp_path: Path) -> None:
    """Issue 28, point 1: every prompt as released, its numbers as `variables` writes them
    (833332, not 833,332), inside the thesis' template."""
    from tests.fake_llm_server import FakeLLMServer, _last_user_text

    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0

    def answer(request: dict) -> str:
        return "A" if "a LETTER" in _last_user_text(request) else "50"

    with FakeLLMServer(answer) as server:
        done = _cli("run", "study", "mohr2025", "--models", "openai/fake", "--api-base",
                    server.base_url, "--repeats", "1", "--db", db)  # fmt: skip
        assert done.returncode == 0, done.stderr
        requests = list(server.requests)
    sent = {
        (messages[0]["content"], messages[1]["content"])
        for messages in (r["messages"] for r in requests)
        if [m["role"] for m in messages] == ["system", "user"]
    }
    expected = _released_messages(source)
    assert len(expected) == 64 and len(requests) == 64
    assert sent == expected, sorted(sent ^ expected)[:2]
    assert any("833332" in user for _, user in sent)
    assert not any("833,332" in user for _, user in sent)


def _cells_at_least(table: pd.DataFrame, level: float) -> int:
    return int((table.drop(columns="homogeneity", errors="ignore") >= level).sum().sum())


def test_effects_opens_on_the_thesis_view_and_names_every_view(tmp_path: Path) -> None:
    """Issue 28, point 2: by default the thesis' Figure 2 (28 cells ≥ 0.5; framing ×
    claude-3.5-sonnet 0.718), named; the plain mean of capped d only when asked, named too."""
    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    shown = _cli("effects", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith("thesis view (the thesis' Figure 2): per bias × model, the "
                                   "inverse-variance weighted mean of Cohen's d")  # fmt: skip
    default = _cli("effects", "--db", db, "--format", "csv")
    table = pd.read_csv(io.StringIO(default.stdout)).set_index("bias")
    assert _cells_at_least(table, 0.5) == 28
    assert f"{table.loc['framing_effect', 'claude-3.5-sonnet']:.3f}" == "0.718"
    assert re.search(r"framing_effect +0\.053 +0\.718 ", shown.stdout)  # the same table
    mean = _cli("effects", "--db", db, "--view", "mean", "--format", "csv")
    assert mean.stderr.startswith("mean view: per bias × model, the plain mean of the capped d")
    means = pd.read_csv(io.StringIO(mean.stdout)).set_index("bias")
    assert _cells_at_least(means, 0.5) == 16  # another figure, which is why it is named
    for view, named in (
        ("homogeneity", "homogeneity view (the thesis' Figure 3 and Table 8)"),
        ("ols", "ols view (the thesis' Tables 4, 9 and 10)"),
        ("features", "features view (the thesis' Tables 5, 13 and 14)"),
    ):
        out = _cli("effects", "--db", db, "--view", view)
        assert out.returncode == 0 and out.stderr.startswith(named), (view, out.stderr)


def test_a_thesis_study_export_carries_the_thesis_coding(tmp_path: Path) -> None:
    """Issue 28, point 3: `coded` is §3.4.1's coding (sunk cost: the expensive Michigan trip,
    answer A, is 1), so Cohen's d recomputed from an export has the run's sign; from the
    letter's index (`value`, a = 0) it has the opposite one."""
    from tests.fake_llm_server import FakeLLMServer, _last_user_text

    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    asked = {"control": 0}

    def sunk_cost(request: dict) -> str:
        """The $100 Michigan trip (the treatment) always; the control half A, half B."""
        if "spent $ 100 on a ticket" in _last_user_text(request):
            return "A"
        asked["control"] += 1
        return "AB"[asked["control"] % 2]

    with FakeLLMServer(sunk_cost) as server:
        done = _cli("run", "study", "mohr2025", "--tests", "sunk_cost_fallacy__0_normal",
                    "--models", "openai/fake", "--api-base", server.base_url, "--repeats", "6",
                    "--db", db)  # fmt: skip
        assert done.returncode == 0, done.stderr
    with Store(db) as store:
        (run,) = study_results.study_runs(store)
    run_id = run.id
    figures = _cli("results", "run", run_id, "--db", db, "--format", "csv")
    assert figures.returncode == 0, figures.stderr
    cell = pd.read_csv(io.StringIO(figures.stdout)).iloc[0]
    run_d = json.loads(cell["details"])["d"]
    assert run_d > 0  # the bias the thesis expects: the sunk cost pulls towards Michigan

    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"turns.{fmt}"
        exported = _cli("export", "--run", run_id, "--db", db, "-o", out)
        assert exported.returncode == 0, exported.stderr
        turns = {
            "csv": pd.read_csv,
            "jsonl": lambda p: pd.read_json(p, lines=True),
            "parquet": pd.read_parquet,
        }[fmt](out)
        columns = list(turns.columns)
        assert len(turns) == 12 and columns.index("coded") == columns.index("value") + 1
        groups = [turns[turns["condition"] == c] for c in ("control", "treatment")]
        coded_d = _cohens_d(*(list(g["coded"].astype(float)) for g in groups))
        letter_d = _cohens_d(*(list(g["value"].astype(float)) for g in groups))
        assert coded_d == pytest.approx(run_d) and letter_d == pytest.approx(-run_d), fmt


def _cohens_d(control: list[float], treatment: list[float]) -> float:
    """Eq. 1 of the thesis: the difference of means over the pooled SD (n - 1 variances)."""
    n1, n2 = len(control), len(treatment)
    spread = (n1 - 1) * statistics.variance(control) + (n2 - 1) * statistics.variance(treatment)
    pooled = spread / (n1 + n2 - 2)
    return (statistics.fmean(treatment) - statistics.fmean(control)) / pooled**0.5


def test_the_thesis_effect_sizes_export_whole(tmp_path: Path) -> None:
    """`cogbias export --dataset mohr2025 -o x.csv`: the 1,599 published effect sizes the
    Datasets page browses, every one, no "None" or "nan" in a cell."""
    source = released("mohr2025")
    db = tmp_path / "t.db"
    assert _cli("import", "mohr2025", source, "--db", db).returncode == 0
    out = tmp_path / "x.csv"
    done = _cli("export", "--dataset", "mohr2025", "-o", out, "--db", db)
    assert done.returncode == 0, done.stderr
    assert f"wrote 1,599 rows to {out}" in done.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    published = pd.read_csv(source / "bias_detections.csv")
    assert len(rows) == len(published) == 1599
    assert [float(r["d"]) for r in rows] == pytest.approx(list(published["bias_detected"]))
    assert not [v for r in rows for v in r.values() if v.strip() in ("None", "nan", "NaN")]
