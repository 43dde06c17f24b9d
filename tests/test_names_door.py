"""Issue 45, point 1: names are data at every door.

A BEL in a test case or model name made `cogbias report` and `cogbias figure` abort inside
vl-convert (exit 134, a Rust panic, no `error:` line; in the app, the server died), and a
20,000-character name asked it for a 132 GB PNG. Names that cannot be drawn are now refused
where they are made (a test case file, `--models`, a study, a class's models), and those an old
database still holds reach every renderer escaped and cut: a chart, a report, a Hub card, a
class report. A chart that still cannot be drawn is an `error:` line."""

from __future__ import annotations

import dataclasses
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import altair as alt
import pandas as pd
import pytest
from batch_helpers import cogbias

from cogbias.classroom import questions, sessions
from cogbias.core.limits import MAX_NAME_CHARS
from cogbias.library import testcases as library
from cogbias.runs import class_plan, study_plan
from cogbias.store import Store
from cogbias.views import figures, svg
from tests.hostile_names import BEL_CASE, BEL_MODEL, LONG_CASE, LONG_MODEL, hostile_run_db

RAW = ("\x07", "\u202e")  # what no rendered file may hold raw


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("hostile") / "h.db"
    return db, hostile_run_db(db)


def svg_texts(path: Path) -> list[str]:
    return ["".join(t.itertext()) for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text")]


# ------------------------------------------------------------------ rendering what is stored


@pytest.mark.parametrize("name", ["explore-heatmap", "figure7-heatmap"])
def test_a_figure_of_hostile_names_is_drawn_escaped_and_bounded(
    hostile: tuple[Path, str], tmp_path: Path, name: str
) -> None:
    db, run_id = hostile
    for suffix in ("svg", "png"):
        out = tmp_path / f"f.{suffix}"
        done = cogbias("figure", name, "--run", run_id, "--db", db, "-o", out)
        assert done.returncode == 0, done.stderr[-2000:]  # was 134: vl-convert's panic
    text = (tmp_path / "f.svg").read_text(encoding="utf-8")
    assert not any(raw in text for raw in RAW)
    texts = svg_texts(tmp_path / "f.svg")
    assert any("m\\x07\\u202eodel" in t for t in texts)  # shown escaped, in order
    assert max(len(t) for t in texts) <= svg.MAX_DRAWN_CHARS
    for long in (LONG_CASE, LONG_MODEL):  # cut, not dropped
        assert any(t.startswith(long[:40]) and t.endswith(long[-20:]) for t in texts)
    width, height = struct.unpack(">II", (tmp_path / "f.png").read_bytes()[16:24])
    assert width * height <= svg.MAX_PNG_PIXELS


def test_a_report_of_hostile_names_is_written_escaped(
    hostile: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = hostile
    out = tmp_path / "r.html"
    done = cogbias("report", "--run", run_id, "--db", db, "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]  # was 134
    page = out.read_text(encoding="utf-8")
    assert not any(raw in page for raw in RAW)
    assert "hostile \\x07 run \\u202e" in page and "evil\\u202e case \\x07 bell" in page


def test_a_hub_card_shows_hostile_names_escaped(hostile: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = hostile
    done = cogbias("export", "--run", run_id, "--db", db, "--hub", tmp_path / "hub")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    assert not any(raw in card for raw in RAW)
    assert "evil\\\\u202e case \\\\x07 bell" in card  # Markdown-escaped: shows as \u202e


def test_a_class_report_shows_a_hostile_title_escaped(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    study, test, _ = questions.classic_choices()[0]
    question = questions.classic_question(study, test)
    first = question.conditions[0]
    labels = {**question.labels, first: "esc \x1b[2J c1 \x85 \u202eevil"}
    hostile = dataclasses.replace(question, title=f"bell \x07 {BEL_CASE}", labels=labels)
    with Store(db) as store:
        code = sessions.open_session(store, hostile)
        session = sessions.require_session(store, code)
        for n in range(6):  # six participants, each answering the first option
            sessions.assign_condition(store, session, f"token-{n}")
            answer = hostile.keys[0] if hostile.keys else str(hostile.low or 0)
            assert sessions.submit_answer(store, session, f"token-{n}", answer) == "saved"
    out = tmp_path / "class.html"
    done = cogbias("report", "--class", code, "--db", db, "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]
    page = out.read_text(encoding="utf-8")
    assert not any(raw in page for raw in (*RAW, "\x1b", "\x85"))
    assert "bell \\x07 evil\\u202e" in page and "esc \\x1b[2J c1 \\x85" in page


def test_a_png_past_the_pixel_bound_is_an_error_not_an_abort() -> None:
    chart = alt.Chart(pd.DataFrame({"x": ["a"], "y": [1]})).mark_bar().encode(x="x:N", y="y:Q")
    huge = chart.properties(width=60_000, height=60_000)
    with pytest.raises(svg.ChartError, match="pixels as a PNG, more than 100,000,000"):
        figures.figure_bytes(huge, "png")
    assert figures.figure_bytes(huge, "svg").startswith(b"<svg")  # an SVG has no pixels


@pytest.mark.parametrize(
    "text",
    ["\x00", "\x07", "\x1b", "\x85", "\ufffe", "\uffff", "\ud800", "\u202e", "\u2028", "x" * 5000],
)
def test_no_text_in_a_spec_can_abort_the_renderer(text: str) -> None:
    """Each of these aborted (or raised inside) vl-convert in a label, a title or a field;
    a title with a typed backslash escape put the character itself into the SVG's aria-label,
    which no PNG or report could then read."""
    rows = [{f"f{text}": f"a{text}b", "x": text, "y": 1}, {f"f{text}": "c", "x": "d", "y": 2}]
    for title in (text, "typed \\x07 and \\u202e"):
        chart = (
            alt.Chart(alt.Data(values=rows), title=title)
            .mark_text()
            .encode(x=alt.X("x:N", title=title), y="y:Q", text=f"f{text}:N")
        )
        drawn = svg.chart_svg(chart)
        assert not any(c in drawn for c in ("\x00", "\x07", "\x1b", "\x85", "\u202e"))
        ET.fromstring(drawn)  # XML a report can rebuild
        assert svg.chart_png(chart, scale=1).startswith(b"\x89PNG")


# ------------------------------------------------------------------ refusing where names are made


def test_library_check_refuses_a_test_case_name_that_cannot_be_shown(tmp_path: Path) -> None:
    source = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
    for name, message in (
        ("Anch\\u0007oring", "name holds a control or invisible character (\\x07) at character 5"),
        ("evil\\u202e", "name holds a control or invisible character (\\u202e)"),
        ("n" * 19_995, f"a name has at most {MAX_NAME_CHARS}"),
    ):
        path = tmp_path / "case.toml"
        path.write_text(source.replace('name = "Anchoring"', f'name = "{name}"'), "utf-8")
        done = cogbias("library", "check", path)
        assert done.returncode == 1 and message in done.stderr, done.stderr
        assert "ok" not in done.stdout


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (BEL_MODEL, "holds a control or invisible character (\\x07) at character 9"),
        (LONG_MODEL, f"is 3,007 characters long; a name has at most {MAX_NAME_CHARS}"),
        ("openai/zero\u200bwidth", "(\\u200b) at character 12"),
    ],
)
def test_a_model_that_cannot_be_shown_is_refused_before_any_work(
    tmp_path: Path, model: str, message: str
) -> None:
    db = tmp_path / "x.db"
    for mode in (["pairs", "--biases", "anchoring"], ["study", "mohr8"]):
        done = cogbias("run", *mode, "--models", f"random,{model}", "--plan-only", "--db", db)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: model '") and message in done.stderr
        assert "\x07" not in done.stderr
    with pytest.raises(class_plan.ClassAskError, match="model '"), Store(db) as store:
        question = questions.classic_question(*questions.classic_choices()[0][:2])
        code = sessions.open_session(store, question)
        class_plan.plan(class_plan.ClassSpec(code, (model,)), store)
    with pytest.raises(study_plan.StudyPlanError, match="a name"):
        study = study_plan.get_study("mohr8")
        study_plan.resolve(study_plan.StudySpec(study="mohr8", models=[model]), study)
    assert not Store(db).runs()


def test_library_list_prints_one_line_per_test_case(isolated_home: Path) -> None:
    """A name holding a newline printed across two lines; such a file is now a problem."""
    source = (library.BUILTIN_DIR / "anchoring.toml").read_text(encoding="utf-8")
    folder = isolated_home / "biases"
    folder.mkdir(parents=True)
    (folder / "two.toml").write_text(
        source.replace('id = "anchoring"', 'id = "two"').replace(
            'name = "Anchoring"', 'name = "two\\nlines"'
        ),
        "utf-8",
    )
    done = cogbias("library", "list")
    assert len([line for line in done.stdout.splitlines() if line]) == 30
    assert "two.toml:2:" in done.stderr and "(\\n)" in done.stderr
