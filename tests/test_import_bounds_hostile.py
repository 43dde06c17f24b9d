"""Imports bounded as docs/datasets.md says, and names that are names (issue 29, points 9, 10).

Each test first builds the probe's hostile file (just past the bound, so the test stays
quick), imports it and asserts a refusal that names the file, the row and the field, with the
database exactly as it was. Before the fix these files were imported (a 10 MB prompt, an item
with 10,001 options, a family `..` giving the empty hypothesis id), kept the second of two
keys "0" silently, or ended in "unexpected" (OverflowError, statsmodels' MissingDataError) or
a misleading "collinear".
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cogbias.core.limits import (
    MAX_NAME_CHARS,
    MAX_OPTION_CHARS,
    MAX_PROMPT_CHARS,
    MAX_SAMPLE_SIZE,
    loads_json,
)
from cogbias.datasets import (
    ColumnMapping,
    DatasetError,
    import_generic,
    import_hub,
    import_malberg,
    import_mohr,
    import_peek,
)
from cogbias.datasets.malberg_format import MAX_RAW_CHARS, _insertions
from cogbias.datasets.peek_items import _inline_options
from cogbias.store import Store
from cogbias.studies.analysis import capability_frame
from cogbias.studies.questions import study_from_prompts
from cogbias.studies.regression import feature_frame, feature_ols
from cogbias.studies.tokenbias_hypotheses import HypothesisTableError, load_hypotheses
from tests.dataset_helpers import (
    HUB_CSV,
    MOHR_DIR,
    TOKENBIAS_DIR,
    edited_csv,
    format_copy,
    read_rows,
    snapshot,
)
from tests.test_bounds import cogbias, no_traceback


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database that already holds an import, so "unchanged" is not trivially true."""
    path = tmp_path / "x.db"
    with Store(path) as store:
        import_hub(store, HUB_CSV, name="existing")
    return path


def refused(db: Path, do_import: Callable[[Store], Any], *fragments: str) -> str:
    """The refusal's message (each fragment in it); the database byte for byte as it was."""
    before = snapshot(db)
    with Store(db) as store, pytest.raises(DatasetError) as caught:
        do_import(store)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert snapshot(db) == before
    return message


def mohr_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "mohr"
    shutil.copytree(MOHR_DIR, folder)
    (folder / "experiments.csv").unlink()  # biases.csv alone: one prompt file to edit
    return folder


def edit(path: Path, change: Callable[[list[str], list[dict[str, str]]], None]) -> None:
    edited_csv(path, path, change)


def peek_file(folder: Path, name: str, items: dict[str, Any] | str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(items if isinstance(items, str) else json.dumps(items), encoding="utf-8")
    return path


ITEM = {
    "question_idx": 0,
    "question": "How many?",
    "target_answer": "1",
    "incorrect_answer": "2",
    "generation_mode": "gold",
}


# --------------------------------------------------------------- point 9: the thesis' data


def test_a_thesis_prompt_past_the_bound_is_refused_at_import(tmp_path: Path, db: Path) -> None:
    folder = mohr_copy(tmp_path)
    long = "x" * (MAX_PROMPT_CHARS - 20) + " Yes or no? __ "  # past the bound by a little
    edit(folder / "biases.csv", lambda h, rows: rows[2].update(content=long + "x" * 10))
    refused(
        db,
        lambda store: import_mohr(store, folder),
        "biases.csv, row 3 (line 4), column 'content': is 20,005 characters long; "
        "at most 20,000 are allowed",
    )


def test_a_thesis_prompt_at_the_bound_imports_and_becomes_a_study(tmp_path: Path) -> None:
    folder = mohr_copy(tmp_path)
    tail = " Do you choose it? Answer yes or no."
    at_bound = "x" * (MAX_PROMPT_CHARS - len(tail)) + tail
    edit(folder / "biases.csv", lambda h, rows: rows[2].update(content=at_bound))
    with Store(tmp_path / "ok.db") as store:
        import_mohr(store, folder)
        rows = [dict(r) for r in store.study_prompts("mohr2025")]
    assert max(len(r["content"]) for r in rows) == MAX_PROMPT_CHARS
    study = study_from_prompts(rows, "mohr2025")
    assert study.tests


def test_a_stored_prompt_past_the_bound_is_refused_before_toml(tmp_path: Path) -> None:
    # a database imported before the bound: the study says so instead of escaping 10 MB
    folder = mohr_copy(tmp_path)
    with Store(tmp_path / "old.db") as store:
        import_mohr(store, folder)
        rows = [dict(r) for r in store.study_prompts("mohr2025")]
    framing = next(r for r in rows if r["source_row"] == 3)
    framing["content"] = "yes or no " * 100_000  # 1 MB: 18 s of tomlkit before the fix
    with pytest.raises(
        ValueError, match=r"rows 3, 4 .* longer than 50,000 characters \(1,000,000\)"
    ):
        study_from_prompts(rows, "mohr2025")


@pytest.mark.parametrize(
    ("file", "column", "value", "expected"),
    [
        ("bias_detections.csv", "sample_size_1", "1e300",
         "expected a whole number from 1 to 10,000,000, found 1e+300"),
        ("bias_detections.csv", "sample_size_2", str(MAX_SAMPLE_SIZE + 1),
         "expected a whole number from 1 to 10,000,000, found 10000001"),
        ("biases.csv", "parts_total", "1000000000",
         "expected a whole number from 2 to 100, found 1000000000"),
        ("models.csv", "number_parameters", "1e308", "must lie in [0, 1e+13], found 1e+308"),
        ("models.csv", "temperature", "7", "must lie in [0, 2], found 7"),
        ("models.csv", "chatbot_arena", "inf", "expected a finite number, found 'inf'"),
        ("models.csv", "mmlu", "1000001", "must lie in [-1e+06, 1e+06], found 1000001"),
        ("models.csv", "model_architecture", "t" * (MAX_OPTION_CHARS + 1),
         "is 2,001 characters long; at most 2,000 are allowed"),
        ("biases.csv", "variables", '{"anchor_value": 1e999}',
         "'anchor_value' must be a finite number within ±1e+15"),
        ("biases.csv", "variables", '{"anchor_value": 900, "anchor_value": 150}',
         'repeats the key "anchor_value" in one object'),
    ],
)  # fmt: skip
def test_thesis_numbers_out_of_range_are_refused_naming_the_cell(
    tmp_path: Path, db: Path, file: str, column: str, value: str, expected: str
) -> None:
    folder = mohr_copy(tmp_path)

    def change(header: list[str], rows: list[dict[str, str]]) -> None:
        if column not in header:
            header.append(column)
        rows[0][column] = value

    edit(folder / file, change)
    message = refused(
        db, lambda store: import_mohr(store, folder), f"{file}, row 1 (line 2), column '{column}'"
    )
    assert expected in message, message


def test_the_sample_size_probe_on_the_command_line_says_what_is_wrong(tmp_path: Path) -> None:
    folder = mohr_copy(tmp_path)
    edit(folder / "bias_detections.csv", lambda h, rows: rows[0].update(sample_size_1="1e300"))
    done = cogbias("import", "mohr2025", folder, "--db", tmp_path / "c.db")
    assert done.returncode == 2
    assert (
        "error: bias_detections.csv, row 1 (line 2), column 'sample_size_1': expected a whole "
        "number from 1 to 10,000,000, found 1e+300"
    ) in done.stderr
    no_traceback(done.stderr)


# --------------------------------------------------------------- point 9: statistics


def feature_rows(parameters: list[float], capability: list[float]) -> pd.DataFrame:
    """Six models' features joined to five temperatures each, d_capped from temperature."""
    models = pd.DataFrame(
        {
            "model": [f"m{i}" for i in range(6)],
            "number_parameters": parameters,
            "capability": capability,
            "release_date": ["2024-01-10", "2024-07-23", "2024-06-27", "2024-06-27",
                             "2024-05-21", "2024-05-13"],
        }
    )  # fmt: skip
    effects = pd.DataFrame(
        [{"model": m, "temperature": t} for m in models["model"] for t in (0.2, 0.7, 1.0, 1.8)]
    )
    joined = feature_frame(effects.assign(d_capped=0.0), models)
    noise = np.random.default_rng(7).normal(0, 0.01, len(joined))
    joined["d_capped"] = 0.1 + 0.07 * joined["temperature"] + noise
    return joined


CAPABILITY = [1150.0, 1250.0, 1180.0, 1220.0, 1160.0, 1290.0]
PARAMETERS = [7.0, 70.0, 9.0, 27.0, 14.0, 400.0]


def test_an_infinite_capability_in_the_store_is_named_not_unexpected() -> None:
    # what a database imported before the bound holds: statsmodels said MissingDataError
    frame = feature_rows(PARAMETERS, [math.inf, *CAPABILITY[1:]])
    with pytest.raises(ValueError, match=r"^capability of model 'm0' is inf, not a finite number"):
        feature_ols(frame)


def test_huge_parameters_in_the_store_are_named_not_called_collinear() -> None:
    frame = feature_rows([1e308, *PARAMETERS[1:]], CAPABILITY)
    with pytest.raises(ValueError, match=r"^number_parameters of model 'm0' is 1e\+308") as caught:
        feature_ols(frame)
    assert "collinear" not in str(caught.value)


def test_parameter_counts_written_out_fit_as_the_same_regression_in_billions() -> None:
    # raw counts (7e11 ... 4e13) hid the other columns from a rank check relative to the
    # largest singular value: "collinear (4 independent of 5)" before the fix
    billions = feature_ols(feature_rows(PARAMETERS, CAPABILITY))
    counts = feature_ols(feature_rows([p * 1e11 for p in PARAMETERS], CAPABILITY))
    assert counts.coef("temperature") == pytest.approx(billions.coef("temperature"), rel=1e-9)
    assert counts.coef("number_parameters") * 1e11 == pytest.approx(
        billions.coef("number_parameters"), rel=1e-6
    )
    assert counts.r_squared == pytest.approx(billions.r_squared, rel=1e-9)


def test_an_infinite_registry_score_counts_as_unknown_in_the_capability_figure() -> None:
    class Info:
        def __init__(self, id: str, arena_score: float) -> None:
            self.id, self.name, self.arena_score, self.params_b = id, id, arena_score, 7.0

    summary = pd.DataFrame({"model": ["a", "b", "c"], "mean_abs": [0.1, 0.2, 0.3]})
    frame = capability_frame(summary, [Info("a", math.inf), Info("b", 1200), Info("c", 1300)])
    assert frame["arena_imputed"].tolist() == [True, False, False]
    assert frame["arena_score"].tolist() == [1250.0, 1200.0, 1300.0]


# --------------------------------------------------------------- point 9: token-bias files


def test_an_item_past_the_option_bound_is_refused(tmp_path: Path, db: Path) -> None:
    # the probe had 100,000 incorrect answers (> 60 s) and 10,001 options (imported, run)
    path = peek_file(
        tmp_path / "tb",
        "synthetic_dataset_count_gold.json",
        {"0": {**ITEM, "incorrect_answer": [str(n) for n in range(2, 102)]}},  # 101 options
    )
    refused(
        db,
        lambda store: import_peek(store, [path]),
        "synthetic_dataset_count_gold.json, row 1, column 'incorrect_answer': (item \"0\") "
        "lists 100 answers; an item has 2 to 100 options in all",
    )


def test_an_item_at_the_option_bound_imports(tmp_path: Path) -> None:
    path = peek_file(
        tmp_path / "tb",
        "synthetic_dataset_count_gold.json",
        {"0": {**ITEM, "incorrect_answer": [str(n) for n in range(2, 101)]}},  # 100 options
    )
    with Store(tmp_path / "ok.db") as store:
        assert import_peek(store, [path]).instances == 1


def test_an_empty_list_of_incorrect_answers_is_refused(tmp_path: Path, db: Path) -> None:
    path = peek_file(
        tmp_path / "tb", "synthetic_dataset_one_gold.json", {"0": {**ITEM, "incorrect_answer": []}}
    )
    refused(db, lambda store: import_peek(store, [path]), "row 1, column 'incorrect_answer'")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("question", "(a) x " * 3_334, "is 20,004 characters long; at most 20,000 are allowed"),
        ("target_answer", "y" * (MAX_OPTION_CHARS + 1), "is 2,001 characters long"),
        ("incorrect_answer", ["2", "n" * (MAX_OPTION_CHARS + 1)], "is 2,001 characters long"),
        ("generation_mode", "g" * (MAX_NAME_CHARS + 1), "is 201 characters long"),
    ],
)
def test_token_bias_texts_past_their_bounds_are_refused(
    tmp_path: Path, db: Path, field: str, value: Any, expected: str
) -> None:
    item = {**ITEM, field: value}
    path = peek_file(tmp_path / "tb", "synthetic_dataset_long_gold.json", {"0": item})
    message = refused(db, lambda store: import_peek(store, [path]), f"row 1, column '{field}'")
    assert expected in message, message


def lines_run(function: Callable[[str], Any], argument: str) -> int:
    """How many lines of `function` itself run for `argument`: its work, counted, not timed."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code is function.__code__:
            if event == "line":
                count += 1
            return trace
        return None

    sys.settrace(trace)
    try:
        function(argument)
    finally:
        sys.settrace(None)
    return count


def test_inline_options_of_the_probe_question_are_read_in_one_pass() -> None:
    # the probe: 120 KB of "(a) x " took 30 s (each "(a)" rescanned every later label)
    body, options = _inline_options("(a) x " * 20_000)
    assert options == [] and body.startswith("(a) x (a) x")
    # the work doubles with the question, where it grew fourfold
    small, large = (lines_run(_inline_options, "(a) x " * n) for n in (400, 800))
    assert large < 2.2 * small, (small, large)
    # and the rule is the one documented: the last (a) followed by (b), (c) in order
    question = "Pick (a) one (b) two. Then: (a) red (c) skip (b) blue (c) green"
    assert _inline_options(question) == ("Pick (a) one (b) two. Then:", ["red (c) skip", "blue", "green"])  # fmt: skip
    assert _inline_options("Q? (a) (b) two (a) one (b) two") == ("Q? (a) (b) two", ["one", "two"])


def test_a_repeated_item_key_is_refused_at_its_row(tmp_path: Path, db: Path) -> None:
    # json.loads kept the second "0" silently: its item replaced the first unseen
    second = {**ITEM, "question_idx": 1, "question": "How many more?"}
    text = f'{{"0": {json.dumps(ITEM)}, "0": {json.dumps(second)}}}'
    path = peek_file(tmp_path / "tb", "synthetic_dataset_dup_gold.json", text)
    refused(
        db,
        lambda store: import_peek(store, [path]),
        'synthetic_dataset_dup_gold.json, row 2: (item "0") repeats the key "0" in one object',
    )


def test_a_repeated_field_inside_an_item_is_refused_at_its_row_and_field(
    tmp_path: Path, db: Path
) -> None:
    text = json.dumps({"0": ITEM}).replace('"question": "How many?"', '"question": "A", "question": "B"')  # fmt: skip
    path = peek_file(tmp_path / "tb", "synthetic_dataset_dup_gold.json", text)
    refused(
        db,
        lambda store: import_peek(store, [path]),
        "synthetic_dataset_dup_gold.json, row 1, column 'question': (item \"0\") repeats the "
        'key "question"',
    )


def test_repeated_keys_are_refused_in_jsonl_lines_and_python_literals(
    tmp_path: Path, db: Path
) -> None:
    header, rows = read_rows(HUB_CSV)
    lines = [json.dumps(r) for r in rows[:2]]
    lines[1] = lines[1].replace('{"bias":', '{"bias": "Anchoring", "bias":', 1)
    jsonl = tmp_path / "two.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    mapping = ColumnMapping({"bias": "bias", "control": "control", "treatment": "treatment"})
    refused(
        db,
        lambda store: import_generic(store, jsonl, mapping),
        'two.jsonl, row 2 (line 2): repeats the key "bias" in one object',
    )
    hub = edited_csv(
        HUB_CSV, tmp_path / "hub.csv",
        lambda h, rows: rows[0].update(metric_params="{'k': 1, 'x_1': 3, 'x_2': 3, 'k': -1}"),
    )  # fmt: skip
    refused(
        db,
        lambda store: import_hub(store, hub, name="hub"),
        "hub.csv, row 1 (line 2), column 'metric_params': repeats the key \"k\" in one object",
    )


def test_loads_json_refuses_a_repeated_key_anywhere() -> None:
    with pytest.raises(ValueError, match='repeats the key "a"'):
        loads_json('{"x": [{"a": 1, "a": 2}]}')
    assert loads_json('{"a": {"a": 1}}') == {"a": {"a": 1}}  # the same key in two objects


# --------------------------------------------------------------- point 9: paired formats


def test_a_hub_prompt_past_the_bound_is_refused(tmp_path: Path, db: Path) -> None:
    def grow(header: list[str], rows: list[dict[str, str]]) -> None:
        rows[1]["control"] = "Situation:\n" + "w" * MAX_PROMPT_CHARS + "\n" + rows[1]["control"]

    hub = edited_csv(HUB_CSV, tmp_path / "hub.csv", grow)
    refused(
        db,
        lambda store: import_hub(store, hub, name="hub"),
        "hub.csv, row 2 (line ",
        "column 'control': is 2",
        "at most 20,000 are allowed",
    )


def test_a_generic_option_past_the_bound_is_refused(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "g.jsonl"
    record = {"b": "anchoring", "c": "Pick one.", "t": "Pick one!", "o": ["yes", "n" * 2_001]}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    mapping = ColumnMapping(
        {"bias": "b", "control": "c", "treatment": "t", "control_options": "o",
         "treatment_options": "o"}
    )  # fmt: skip
    refused(
        db,
        lambda store: import_generic(store, path, mapping),
        "g.jsonl, row 1 (line 1), column 'o': is 2,001 characters long",
    )


def test_raw_templates_are_bounded_and_their_insertions_read_in_one_pass(
    tmp_path: Path, db: Path
) -> None:
    unclosed = '<insertion origin="user" instruction="x">'
    # 100,000 characters of unclosed tags took 15 s: each rescanned the rest for its end
    assert _insertions(unclosed * (MAX_RAW_CHARS // len(unclosed))) == []
    closed = '<insertion origin="llm" instruction="a &amp; b">v</insertion>'
    assert _insertions(closed + unclosed, closed) == [
        {"gap": "a & b", "source": "llm", "text": "v"}
    ]
    folder = format_copy(tmp_path / "fmt")
    edited_csv(
        folder / "full_dataset.csv", folder / "full_dataset.csv",
        lambda h, rows: rows[0].update(raw_control="r" * (MAX_RAW_CHARS + 1)),
    )  # fmt: skip
    refused(
        db,
        lambda store: import_malberg(store, folder),
        "full_dataset.csv, row 1 (line 2), column 'raw_control': is 100,001 characters long",
    )


# --------------------------------------------------------------- point 10: names


def test_a_file_name_with_a_newline_is_refused_as_a_dataset_name(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "a\nb.csv"
    shutil.copy(HUB_CSV, path)
    mapping = ColumnMapping({"bias": "bias", "control": "control", "treatment": "treatment"})
    message = refused(
        db,
        lambda store: import_generic(store, path, mapping),
        "a\\nb.csv: the dataset name 'a\\nb' holds a control or invisible character (\\n) at "
        "character 2; a name is one line of visible text; choose another with --name",
    )
    assert "\n" not in message


def test_the_newline_file_on_the_command_line_is_printed_escaped(tmp_path: Path) -> None:
    path = tmp_path / "a\nb.csv"
    shutil.copy(HUB_CSV, path)
    done = cogbias(
        "import", "generic", path, "--map", "bias=bias", "--map", "control=control",
        "--map", "treatment=treatment", "--db", tmp_path / "c.db",
    )  # fmt: skip
    assert done.returncode == 2
    assert "error: a\\nb.csv: the dataset name 'a\\nb' holds a control" in done.stderr
    assert "a\nb" not in done.stderr
    no_traceback(done.stderr)


@pytest.mark.parametrize("mode", [("pairs", "--biases", "anchoring"), ("study", "biasbuster")])
def test_a_run_label_with_a_newline_is_refused_before_anything_is_stored(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    """A run's `--name` is shown in every runs list, as a dataset's name is."""
    done = cogbias("run", *mode, "--models", "random", "--name", "a\nb", "--db", tmp_path / "r.db")
    assert done.returncode == 2
    assert "--name: the label holds a control or invisible character (\\n)" in done.stderr
    assert not (tmp_path / "r.db").exists()
    no_traceback(done.stderr)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("..", "is only dots, which is no name"),
        (" . . ", "is only dots"),
        ("", "is empty"),
        ("\u200b", "holds a control or invisible character (\\u200b)"),
        ("evil\u202egnp.csv", "holds a control or invisible character (\\u202e) at character 5"),
        ("x" * (MAX_NAME_CHARS + 1), "is 201 characters long; a name has at most 200"),
    ],
)
def test_dataset_names_that_are_no_names_are_refused(db: Path, name: str, problem: str) -> None:
    message = refused(db, lambda store: import_hub(store, HUB_CSV, name=name))
    assert message.startswith("dataset.csv: the dataset name ") and problem in message, message


def test_a_family_named_dots_is_refused_not_an_empty_hypothesis(tmp_path: Path, db: Path) -> None:
    # the probe: synthetic_dataset_.._gold/_random.json paired as hypothesis "" (a blank row)
    folder = tmp_path / "tb"
    peek_file(folder, "synthetic_dataset_.._gold.json", {"0": ITEM})
    peek_file(folder, "synthetic_dataset_.._random.json", {"0": {**ITEM, "question": "How?"}})
    refused(
        db,
        lambda store: import_peek(store, [folder]),
        "synthetic_dataset_.._gold.json, column 'family (in the file name)': is only dots",
    )


@pytest.mark.parametrize(
    ("family", "problem"),
    [
        ("!!", "'!!' has no letter or digit (a-z, 0-9) to make an id of"),
        ("a\x1b[2Jb", "holds a control or invisible character (\\x1b) at character 2"),
    ],
)
def test_family_names_without_an_id_or_with_controls_are_refused(
    tmp_path: Path, db: Path, family: str, problem: str
) -> None:
    folder = tmp_path / "tb"
    peek_file(folder, f"synthetic_dataset_{family}_gold.json", {"0": ITEM})
    message = refused(db, lambda store: import_peek(store, [folder]), problem)
    assert "\x1b" not in message, message


@pytest.mark.parametrize(
    ("file", "column", "value", "problem"),
    [
        ("bias_detections.csv", "bias", "..", "is only dots"),
        ("bias_detections.csv", "bias", "偏差", "has no letter or digit"),
        ("bias_detections.csv", "model", "model\nb", "holds a control or invisible character (\\n)"),
        ("bias_detections.csv", "scenario", "\u2066s", "(\\u2066)"),
        ("biases.csv", "bias_id", "...", "is only dots"),
        ("biases.csv", "variables", '{"a\\u001bb": 1}', "the variable name 'a\\x1bb' holds"),
        ("models.csv", "model", "\u200b", "holds a control or invisible character (\\u200b)"),
    ],
)  # fmt: skip
def test_thesis_names_are_checked_naming_the_cell(
    tmp_path: Path, db: Path, file: str, column: str, value: str, problem: str
) -> None:
    folder = mohr_copy(tmp_path)
    edit(folder / file, lambda h, rows: rows[0].update({column: value}))
    message = refused(
        db, lambda store: import_mohr(store, folder), f"{file}, row 1 (", f"column '{column}'"
    )
    assert problem in message and "\n" not in message, message


def test_bias_and_model_names_of_paired_formats_are_checked(tmp_path: Path, db: Path) -> None:
    hub = edited_csv(HUB_CSV, tmp_path / "hub.csv", lambda h, rows: rows[2].update(bias="?!"))
    refused(
        db,
        lambda store: import_hub(store, hub, name="hub"),
        "hub.csv, row 3 (line",
        "column 'bias': '?!' has no letter or digit",
    )
    mapping = ColumnMapping(
        {"bias": "bias", "control": "control", "treatment": "treatment"},
        {"model": "a\nb", "control_answer": "0", "treatment_answer": "1"},
    )
    refused(
        db,
        lambda store: import_generic(store, HUB_CSV, mapping, name="g"),
        "dataset.csv, row 1 (line 2), column 'model (constant)': holds a control",
    )
    folder = format_copy(tmp_path / "fmt")
    model_file = next((folder / "decision_results").glob("*.csv"))
    edited_csv(model_file, model_file, lambda h, rows: rows[4].update(model=".."))
    refused(
        db,
        lambda store: import_malberg(store, folder),
        f"{model_file.name}, row 5 (line",
        "column 'model': is only dots",
    )


def test_a_hypothesis_table_id_that_is_no_name_is_refused(tmp_path: Path, db: Path) -> None:
    table = tmp_path / "h.toml"
    table.write_text(
        '[[hypotheses]]\nid = ".."\ntitle = "t"\noriginal = ["demo_original_gold"]\n'
        'perturbed = ["demo_original_random"]\nalternative = "two_sided"\n',
        encoding="utf-8",
    )
    with pytest.raises(HypothesisTableError, match=r"hypotheses\[0\]\.id: is only dots"):
        load_hypotheses(table)


def test_the_released_shaped_fixtures_still_import(tmp_path: Path) -> None:
    # every bound sits far above real data: the fixtures in the papers' layouts go through
    with Store(tmp_path / "ok.db") as store:
        import_mohr(store, MOHR_DIR)
        import_peek(store, [TOKENBIAS_DIR])
        import_malberg(store, format_copy(tmp_path / "fmt"))
        import_hub(store, HUB_CSV)
        assert {d["name"] for d in store.datasets()} == {
            "mohr2025", "peek2024", "malberg2024", "malberg2024-hub"
        }  # fmt: skip
