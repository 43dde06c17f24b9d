"""The seed papers' printed model results (data/paper_results/): every number held to the paper.

Three holds, each of which fails on a changed digit: the papers' own text re-read and compared
cell by cell (where COGBIAS_PAPERS names the folder of the papers' text, as CI's copy of the
shared folder does; without it only that hold is skipped), an independent transcription of Appendix D kept with the token-bias tests,
and cells hard-coded here from the paper. Then the reader's checks (a slip in a file is named
by file, row and column), the command's listing and the views.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cogbias.cli.main import main
from cogbias.studies import paper_results
from cogbias.studies.paper_results import PaperResultError, load_paper_result
from cogbias.views import paper_results as shown

ROOT = Path(__file__).resolve().parent.parent
PAPERS = Path(os.environ.get("COGBIAS_PAPERS") or "/nonexistent")  # the papers' plain text
BIASBUSTER = PAPERS / "echterhoff2024-biasbuster.txt"
TOKEN_BIAS = PAPERS / "token-bias-peek-2024.txt"
FIXTURE = Path(__file__).parent / "fixtures" / "tokenbias-tables" / "appendix_d.tsv"
needs_papers = pytest.mark.skipif(
    not (BIASBUSTER.is_file() and TOKEN_BIAS.is_file()),
    reason="the seed papers' text is not in the repository: set COGBIAS_PAPERS to its folder",
)


def table3() -> pd.DataFrame:
    return paper_results.paper_result("biasbuster-table3").rows


def appendix_d() -> pd.DataFrame:
    return paper_results.paper_result("tokenbias-appendix-d").rows


# ------------------------------------------------------------------ the papers' text


def _printed(cell: str) -> tuple[float, bool]:
    return float(cell.rstrip("*")), cell.endswith("*")


@needs_papers
def test_table_3_is_the_papers_text_cell_by_cell_with_its_failure_marks() -> None:
    text = BIASBUSTER.read_text(encoding="utf-8")
    start = text.index("Model\tMitigation\tFraming")
    block = text[start : text.index("Table 3:", start)]
    printed, model = [], None
    for line in block.splitlines()[2:]:
        cells = line.split("\t")
        if len(cells) != 9:
            continue
        model = cells[0] or model
        printed.append((model, cells[1], [_printed(c) for c in cells[2:]]))
    assert len(printed) == 20
    rows = table3()
    assert len(rows) == len(printed)
    named = {"GP-3.5-turbo": "GPT-3.5-turbo"}  # the table's misprint, named in the TOML notes
    figures = ["framing_admit", "framing_reject", "framing_delta", "group_female",
               "group_male", "group_delta", "anchoring_d"]  # fmt: skip
    marks = {"framing_delta": "framing_failure", "group_delta": "group_failure",
             "anchoring_d": "anchoring_failure"}  # fmt: skip
    for row, (model, mitigation, cells) in zip(rows.itertuples(), printed, strict=True):
        assert (row.model, row.mitigation) == (named.get(model, model), mitigation)
        for column, (value, star) in zip(figures, cells, strict=True):
            assert getattr(row, column) == value, (model, mitigation, column)
            assert getattr(row, marks[column]) == star if column in marks else not star


@needs_papers
def test_appendix_d_is_the_papers_text_row_by_row() -> None:
    text = TOKEN_BIAS.read_text(encoding="utf-8")
    appendix = text[text.index("D Additional Experiment Results") :]
    printed, table = [], None
    for line in appendix.splitlines():
        if found := re.match(r"Table (\d):", line):
            table = int(found.group(1))
        cells = line.split("\t")
        if table and len(cells) == 8 and re.fullmatch(r"\d+", cells[2]):
            prompting = cells[1].split()[0]  # Table 3's first row prints "os os"
            printed.append((table, cells[0], prompting, *cells[2:]))
    rows = appendix_d()
    assert len(rows) == len(printed) == 324
    for row, cells in zip(rows.itertuples(), printed, strict=True):
        number, model, prompting, n12, n21, n_star, z, p, reject = cells
        assert (row.table, row.model, row.prompting) == (number, model, prompting)
        assert (row.n12, row.n21, row.n_star) == (int(n12), int(n21), int(n_star)), cells
        assert (row.z, row.p_value, row.reject) == (float(z), float(p), reject == "True"), cells


# ------------------------------------------------------------------ held without the papers


def test_appendix_d_agrees_with_the_token_bias_tests_own_transcription() -> None:
    fixture = pd.read_csv(FIXTURE, sep="\t")
    rows = appendix_d()
    assert len(rows) == len(fixture) == 324
    for column in ("table", "model", "prompting", "n12", "n21", "reject"):
        assert list(rows[column]) == list(fixture[column]), column
    assert list(rows["p_value"]) == list(fixture["p_adjusted"])


@pytest.mark.parametrize(
    ("model", "mitigation", "column", "value"),
    [
        ("GPT-4", "baseline (biased)", "framing_admit", 0.375),
        ("GPT-4", "baseline (biased)", "framing_reject", 0.780),
        ("GPT-4", "baseline (biased)", "framing_delta", -0.405),  # §5.1: 40.5 % more
        ("Llama-2-7b", "baseline (biased)", "group_delta", -0.321),  # §5.1: 32.1 % fewer
        ("GPT-3.5-turbo", "selfhelp", "framing_delta", -0.080),
        ("Llama-2-13b", "counterfactual", "framing_reject", 0.999),
        ("GPT-4", "counterfactual", "anchoring_d", 0.383),
        ("Llama-2-7b", "counterfactual", "anchoring_d", 0.000),
        ("Llama-2-7b", "counterfactual", "anchoring_failure", True),
        ("Llama-2-7b", "baseline (biased)", "framing_failure", True),
        ("GPT-3.5-turbo", "contrastive", "group_failure", True),
        ("Llama-2-7b", "contrastive", "framing_failure", False),  # unmarked in the paper
        ("GPT-4", "contrastive", "group_failure", False),
    ],
)
def test_table_3_cells_from_the_paper(model, mitigation, column, value) -> None:
    rows = table3().set_index(["model", "mitigation"])
    assert rows.loc[(model, mitigation), column] == value


def test_every_figure_is_held_by_its_columns_sums_taken_from_the_paper() -> None:
    """Sums of each column as printed (taken once from the papers' text): a changed digit
    anywhere changes one, in a clone without the papers' text as well."""
    sums = table3().select_dtypes("float").sum().round(3).to_dict()
    assert sums == {
        "framing_admit": 8.023, "framing_reject": 9.938, "framing_delta": -1.915,
        "group_female": 6.801, "group_male": 6.263, "group_delta": 0.538, "anchoring_d": 4.45,
    }  # fmt: skip
    rows = appendix_d()
    assert rows[["n12", "n21", "n_star"]].sum().to_dict() == {
        "n12": 6774, "n21": 24210, "n_star": 30984
    }  # fmt: skip
    assert round(rows["z"].sum(), 6) == 1126.731039
    assert round(rows["p_value"].sum(), 6) == 63.43552
    assert rows["reject"].sum() == 206


def test_table_3_marks_the_eight_figures_the_paper_stars() -> None:
    rows = table3()
    marks = rows[["framing_failure", "group_failure", "anchoring_failure"]].to_numpy().sum()
    assert marks == 8  # 6 group Δ, 1 framing Δ, 1 anchoring d
    assert rows["group_failure"].sum() == 6


@pytest.mark.parametrize(
    ("table", "model", "prompting", "figures"),
    [
        (2, "gpt-4o", "fs", (0, 1, 1, 1.0, 0.158655, False)),
        (2, "llama-2-70b-chat", "fs", (90, 115, 205, 1.746076, 0.042775, True)),
        (3, "gpt-4o", "os", (14, 18, 32, 0.707107, 0.760250, False)),
        (3, "gpt-3.5-turbo", "os", (164, 18, 182, -10.822240, 0.0, True)),
        (4, "gpt-4-turbo", "os", (0, 6, 6, 2.449490, 0.046875, True)),
        (5, "llama-2-70b-chat", "baseline", (0, 0, 0, 0.0, 1.0, False)),
        (6, "claude-3-opus-20240229", "os", (6, 29, 35, 3.887710, 0.000228, True)),
        (7, "gpt-4o", "fs", (2, 33, 35, 5.239956, 0.000002, True)),
        (8, "mistral-large-latest", "control-os-cot", (1, 209, 210, 14.353364, 0.0, True)),
    ],
)
def test_appendix_d_rows_from_the_paper(table, model, prompting, figures) -> None:
    rows = appendix_d().set_index(["table", "model", "prompting"])
    row = rows.loc[(table, model, prompting)]
    assert (row.n12, row.n21, row.n_star, row.z, row.p_value, row.reject) == figures


def test_appendix_d_tables_and_the_hypotheses_they_test() -> None:
    rows = appendix_d()
    counts = rows.groupby("table").size().to_dict()
    assert counts == {2: 54, 3: 18, 4: 54, 5: 54, 6: 54, 7: 54, 8: 36}
    tested = rows.groupby("table")["hypothesis"].unique().map(list).to_dict()
    assert tested == {2: ["H1"], 3: ["H2"], 4: ["H3"], 5: ["H4"], 6: ["H5"], 7: ["H5b"], 8: ["H6"]}
    assert rows["model"].nunique() == 9


def test_every_result_names_its_citation_and_place() -> None:
    table, appendix = paper_results.paper_result("biasbuster-table3"), appendix_d_result()
    assert "Echterhoff" in table.citation and "EMNLP 2024" in table.citation
    assert table.where.startswith("Table 3") and table.study == "biasbuster"
    assert "A Peek into Token Bias" in appendix.citation and appendix.where.startswith("Appendix D")
    assert appendix.study == "tokenbias"
    assert table.cited.endswith("Table 3, Section 5.1.")
    assert [r.id for r in paper_results.for_study("biasbuster")] == ["biasbuster-table3"]


def appendix_d_result() -> paper_results.PaperResult:
    return paper_results.paper_result("tokenbias-appendix-d")


# ------------------------------------------------------------------ the reader's checks


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    shutil.copytree(paper_results.PAPER_RESULTS_DIR, folder)
    return folder


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize(
    ("file", "old", "new", "said"),
    [
        ("biasbuster_table3.csv", "0.375,0.780,-0.405", "0.375,0.780,-0.450",
         r"row 11, column framing_delta: -0\.45 is not framing_admit - framing_reject"),
        ("biasbuster_table3.csv", "0.925,0.770", "1.925,0.770",
         r"row 2, column group_female: 1\.925 is outside 0 to 1"),
        ("biasbuster_table3.csv", "0.155,false", "0.155,no",
         r"row 2, column group_failure: 'no' is not true or false"),
        ("tokenbias_appendix_d.csv", "4,160,164,12.181553", "4,160,164,12.181535",
         r"row 2, column z: 12\.181535 is not \(n21 - n12\)"),
        ("tokenbias_appendix_d.csv", "4,160,164", "4,160,165",
         r"row 2, column n_star: 165 is not n12 \+ n21 = 164"),
        ("tokenbias_appendix_d.csv", "0.158655,false", "0.158655,true",
         r"column reject: True disagrees with p = 0\.158655"),
        ("tokenbias_appendix_d.csv", "zs-cot,19,218", "baseline,19,218",
         r"row 3: a second row for 2 · gpt-3\.5-turbo · baseline"),
        ("tokenbias_appendix_d.csv", "table,hypothesis", "tables,hypothesis",
         r"the header must be table,hypothesis"),
    ],
)  # fmt: skip
def test_a_slip_in_a_file_is_named_by_file_row_and_column(tmp_path, file, old, new, said) -> None:
    folder = _copy(tmp_path)
    _edit(folder / file, old, new)
    with pytest.raises(PaperResultError, match=said) as caught:
        paper_results.paper_results(folder)
    assert str(folder / file) in str(caught.value)


def test_a_result_file_without_its_citation_is_refused(tmp_path) -> None:
    folder = _copy(tmp_path)
    path = folder / "biasbuster_table3.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"(?m)^citation = .*$", "", text), encoding="utf-8")
    with pytest.raises(PaperResultError, match="needs the text field.s. citation"):
        load_paper_result(path)


def test_an_unknown_reference_is_refused_naming_the_ones_there_are() -> None:
    with pytest.raises(KeyError, match="biasbuster-table3, tokenbias-appendix-d"):
        paper_results.paper_result("table-9")


def test_the_built_in_study_and_the_import_map_onto_the_papers_hypotheses() -> None:
    assert paper_results.paper_hypothesis("tb_h5_authority") == "H5"
    assert paper_results.paper_hypothesis("H5b") == "H5b"
    assert paper_results.paper_hypothesis("linda_original") is None
    rows = shown.appendix_d_rows(appendix_d_result(), ["tb_h2_exemplar_name", "math_random"])
    assert set(rows["table"]) == {3} and len(rows) == 18


# ------------------------------------------------------------------ the command


def test_datasets_lists_the_built_in_reference_results_with_their_sources(tmp_path, capsys):
    assert main(["datasets", "--db", str(tmp_path / "empty.db")]) == 0
    out, err = capsys.readouterr()
    assert "no datasets yet" in err
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "reference results" in lines["biasbuster-table3"]
    assert "20 rows, 4 models" in lines["biasbuster-table3"]
    assert "Echterhoff et al. 2024, Table 3" in lines["biasbuster-table3"]
    assert "Jiang et al. 2024, Appendix D" in lines["tokenbias-appendix-d"]
    assert "324 rows, 9 models" in lines["tokenbias-appendix-d"]


def test_datasets_reference_prints_the_digits_as_the_paper_prints_them(tmp_path, capsys):
    assert main(["datasets", "--reference", "biasbuster-table3", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert "Source: Echterhoff, J." in err and "Table 3, Section 5.1." in err
    assert "\nGPT-4,baseline (biased),0.375,0.780,-0.405,False," in out
    assert main(["datasets", "--reference", "tokenbias-appendix-d"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"gpt-4o\s+fs\s+0\s+1\s+1\s+1\.000000\s+0\.158655\s+False", out)
    assert main(["datasets", "--reference", "table-9"]) != 0
    assert "no built-in reference result 'table-9'" in capsys.readouterr().err


# ------------------------------------------------------------------ the views


def test_table_3_shown_as_printed_and_a_run_beside_it() -> None:
    result = paper_results.paper_result("biasbuster-table3")
    run = pd.DataFrame(
        [
            {"test": "framing", "model": "random", "temperature": 0.7, "variant": "default",
             "mitigation": "none", "value": 0.05, "a": 0.55, "b": 0.5, "degenerate": False},
            {"test": "anchoring", "model": "random", "temperature": 0.7, "variant": "default",
             "mitigation": "none", "value": 0.0, "a": 0.0, "b": None, "degenerate": True},
        ]
    )  # fmt: skip
    beside = pd.concat([shown.table3_rows(result), shown.table3_of_run(run)], ignore_index=True)
    table = shown.table3_shown(beside).set_index(["source", "model", "mitigation"])
    paper = table.loc[("the paper", "GPT-4", "no mitigation")]  # the baseline in words
    assert (paper["framing: admit"], paper["framing Δ"]) == ("0.375", "-0.405")
    assert table.loc[("the paper", "Llama-2-7b", "counterfactual"), "anchoring d"] == "0.000*"
    ours = table.loc[("your run", "random", "no mitigation")]
    assert (ours["framing Δ"], ours["anchoring d"], ours["group Δ"]) == ("0.050", "0.000*", "–")
    chart = shown.table3_chart(beside).to_dict()
    assert chart["facet"]["column"]["field"] == "measure"


def test_a_run_at_two_temperatures_gets_a_row_for_each() -> None:
    cells = [
        {"test": "group_attribution", "model": "m", "temperature": t, "variant": "default",
         "mitigation": "selfhelp", "value": 0.1, "a": 0.6, "b": 0.5, "degenerate": False}
        for t in (0.2, 1.0)
    ]  # fmt: skip
    rows = shown.table3_of_run(pd.DataFrame(cells))
    assert list(rows["model"]) == ["m · T=0.2", "m · T=1"]
    assert list(rows["group_delta"]) == [0.1, 0.1] and rows["framing_delta"].isna().all()
    long = shown.table3_long(rows)
    assert set(long["model"]) == {"m · T=0.2 · your run", "m · T=1 · your run"}
    assert set(long["measure"]) == {"group attribution Δ (female − male)"}  # only what was asked
