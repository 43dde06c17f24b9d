"""`cogbias report`: one self-contained HTML file per kind of result (a paired run, a study
run, a dataset, two models compared, a class session), checked against `cogbias results`
(`cogbias class results` for a session) and in a browser.

One database holds every kind: a paired run whose model and test case carry hostile names
(HTML, an event handler, Markdown) and whose name carries a key, a dataset with a hostile
name and a run on it, a study run of the classic experiments (the humans beside it) and
of BiasBuster (the paper's Table 3 beside it), and a class session whose question, option
and a model's name and answer are hostile. Every report is written by the real command
in a child process, whose environment holds the key.
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from cogbias.classroom import questions, sessions
from cogbias.library import testcases as library
from cogbias.runs import executor, kinds, paired_plan
from cogbias.runs.class_plan import ClassSpec
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.store.class_models import ModelAnswer
from cogbias.views import authoring, report_html
from tests.app_helpers import make_results_db
from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS, ROOT, SHOTS
from tests.class_helpers import hostile_question
from tests.dataset_helpers import HUB_CSV
from tests.study_helpers import study_run

SENTINEL = "sk-report-7d2c9e4a1f3b8e6d5c4b"
HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> **md** [l](https://evil.example/x)"
)
MODEL = f"evil {HOSTILE}"
CASE = f"Case {HOSTILE}"
DATASET = f"data {HOSTILE}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The database, its home, and the ids of what it holds."""
    home = tmp_path_factory.mktemp("report-home")
    db = home / "report.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COGBIAS_HOME", str(home))
        toml = authoring.BLANK_TEST_CASE.replace('"my_bias"', '"hostile_bias"')
        library.save_test_case(library.parse_test_case(toml.replace('"My Bias"', json.dumps(CASE))))
        paired = make_results_db(
            db,
            biases=("anchoring", "loss_aversion", "hostile_bias"),
            models=("random", MODEL),
            instances=6,
            name=f"paired {SENTINEL}",
        )
        failed = sqlite3.connect(db)  # two failed pairs, as a run with errors leaves them
        with failed:
            failed.execute(
                "update decisions set status = 'failed', score = null, error = 'timeout' "
                "where rowid in (select rowid from decisions where test_case = 'anchoring' "
                "and model = 'random' limit 2)"
            )
        failed.close()
        with Store(db) as store:
            store.refresh_run_counts(paired)
            from cogbias.datasets import import_hub

            import_hub(store, HUB_CSV, name=DATASET)
            spec = paired_plan.RunSpec(["random"], dataset=DATASET, per_bias=3)
            executor.execute(paired_plan.plan(spec, store), store)
        classics = study_run(db, StudySpec("classics", ["random"], repeats=4))
        biasbuster = study_run(
            db, StudySpec("biasbuster", ["random"], tests=["framing", "anchoring"], repeats=2)
        )
        with Store(db) as store:
            session = class_session(store)
    env = {**os.environ, "COGBIAS_HOME": str(home), "COGBIAS_TEST_API_KEY": SENTINEL}
    worlds = dict(paired=paired, classics=classics, biasbuster=biasbuster, session=session)
    return dict(db=db, env=env, **worlds)


TOKENS = [f"participant-token-{i:04d}" for i in range(7)]


def class_session(store: Store) -> str:
    """A revealed session of the theatre-ticket classic (the humans beside it) whose title,
    labels, texts and first option are hostile; seven participants, the random model sampled
    and read as probabilities, and a hostile model whose answer is hostile too."""
    code = sessions.open_session(store, hostile_question(HOSTILE))
    session = sessions.require_session(store, code)
    for i, token in enumerate(TOKENS):
        sessions.assign_condition(store, session, token)
        assert sessions.submit_answer(store, session, token, "ab"[i % 3 == 0]) == "saved"
    for spec in (
        ClassSpec(code, ("random",), samples=6),
        ClassSpec(code, ("random",), scoring="probabilities"),
    ):
        executor.execute(kinds.plan(spec, store), store)
    store.save_model_answers(
        [ModelAnswer(code, MODEL, c, "sample", 0.7, 0, f"A {HOSTILE}", option=0)
         for c in ("lost_ticket", "lost_bill")]
    )  # fmt: skip
    sessions.reveal_session(store, code)
    return code


def cogbias(world: dict[str, Any], *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *words, "--db", str(world["db"])],
        env=world["env"], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def results(world: dict[str, Any], *words: str) -> list[dict[str, Any]]:
    done = cogbias(world, "results", *words, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Tables(HTMLParser):
    """Every `<table data-table=NAME>`: its header and its rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._rows = self.tables.setdefault(dict(attrs).get("data-table") or "", [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._rows is not None:
            self._rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


class Tags(HTMLParser):
    """Every element name, and every attribute with its element."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes += [(tag, name, value or "") for name, value in attrs]


def records(page: str, name: str) -> list[dict[str, str]]:
    parser = Tables()
    parser.feed(page)
    header, *rows = parser.tables[name]
    return [dict(zip(header, row, strict=True)) for row in rows]


REPORTS = {  # kind -> the command's words (after `report`), given the world
    "run": lambda w: ["--run", w["paired"]],
    "study": lambda w: ["--run", w["classics"]],
    "dataset": lambda w: ["--dataset", DATASET],
    "compare": lambda w: ["--compare", "random", MODEL, "--run", w["paired"]],
    "paper": lambda w: ["--run", w["biasbuster"]],
    "class": lambda w: ["--class", w["session"]],
}


@pytest.fixture(scope="module")
def reports(world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reports")
    out = {}
    for kind, words in REPORTS.items():
        path = folder / f"{kind}.html"
        done = cogbias(world, "report", *words(world), "-o", str(path))
        assert done.returncode == 0, done.stderr
        assert path.is_file() and "wrote" in done.stderr
        out[kind] = path
    return out


def _same_scores(shown: list[dict[str, str]], expected: list[dict[str, Any]]) -> None:
    """The report's score table holds exactly `cogbias results`' cells and numbers."""
    got = {(r["id"], r["model"]): r for r in shown}
    assert set(got) == {(r["bias"], r["model"]) for r in expected}
    for row in expected:
        cell = got[(row["bias"], row["model"])]
        assert int(cell["n"]) == row["n"] and int(cell["failures"]) == row["failures"]
        if row["mean"] is None:
            assert cell["mean score"] == "–"
        else:  # three decimals shown, four in the JSON
            assert abs(float(cell["mean score"]) - row["mean"]) <= 0.0006, (cell, row)


def test_run_report_numbers_equal_results(world: dict, reports: dict) -> None:
    page = reports["run"].read_text()
    expected = results(world, "run", world["paired"])
    assert sum(r["failures"] for r in expected) == 2  # the failed pairs are counted, not scored
    _same_scores(records(page, "scores"), expected)


def test_dataset_report_numbers_equal_results(world: dict, reports: dict) -> None:
    page = reports["dataset"].read_text()
    expected = results(world, "dataset", DATASET)
    assert len(expected) > 2
    _same_scores(records(page, "scores"), expected)


def test_compare_report_numbers_equal_results(world: dict, reports: dict) -> None:
    page = reports["compare"].read_text()
    expected = results(world, "run", world["paired"])  # two models: the run's every cell
    _same_scores(records(page, "scores"), expected)
    differences = records(page, "compare")
    assert {r["id"] for r in differences} == {"anchoring", "loss_aversion", "hostile_bias"}
    shared = {r["id"]: int(r["n"]) for r in differences}  # instances both models scored
    assert shared == {"anchoring": 4, "loss_aversion": 6, "hostile_bias": 6}


def test_study_report_numbers_equal_results(world: dict, reports: dict) -> None:
    page = reports["study"].read_text()
    expected = results(world, "run", world["classics"])
    shown = records(page, "figures")
    assert len(shown) == len(expected) > 0
    for cell, row in zip(shown, expected, strict=True):
        assert (cell["test"], cell["model"], cell["mitigation"]) == (
            row["test"], row["model"], row["mitigation"],
        )  # fmt: skip
        assert int(cell["n"]) == row["n"]
        if row["value"] is None:
            assert cell["value"] == "–"
        else:
            assert abs(float(cell["value"]) - row["value"]) <= 0.0006, (cell, row)
    humans = records(page, "humans")  # the classic experiments' people beside the model
    assert humans and all(r["Humans"] not in ("", "–") for r in humans if r["Note"] == "")


def test_paper_beside_a_biasbuster_run(reports: dict) -> None:
    rows = records(reports["paper"].read_text(), "paper")
    sources = {r["source"] for r in rows}
    assert sources == {"your run", "the paper"}


def _close(shown: str, expected: float | None) -> bool:
    """A table's three decimals against the JSON's number (null shown as –)."""
    if expected is None:
        return shown == "–"
    return abs(float(shown) - expected) <= 0.0006


def test_class_report_numbers_equal_class_results(world: dict, reports: dict) -> None:
    page = reports["class"].read_text()
    done = cogbias(world, "class", "results", world["session"], "--format", "json")
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)
    labels = {row["label"]: row["condition"] for row in expected["class"]}
    klass = {row["condition"]: row for row in expected["class"]}
    humans = {row["condition"]: row for row in expected["humans"]}
    sampled = {(m["condition"], m["model"], m["mode"]): m for m in expected["models"]}
    rows = records(page, "reveal")
    assert {r["who"] for r in rows} == {
        "humans (original study)", "this class", "model random",
        "model random (probabilities)", f"model {MODEL} (T 0.7)",
    }  # fmt: skip  # the random baseline uses no temperature: none is named
    assert len(rows) == 2 * 5  # one option shown (its complement is the other), per condition
    for row in rows:
        condition = labels[row["condition"]]
        # each condition's option as the reveal names it (the original's neutral name here)
        option = expected["option_labels"][condition].index(row["option"])
        if row["who"] == "this class":
            want = klass[condition]
        elif row["who"].startswith("humans"):
            want = humans[condition]
        else:
            model, _, how = row["who"].removeprefix("model ").partition(" (")
            mode = "probabilities" if how == "probabilities)" else "sample"
            want = sampled[(condition, model, mode)]
        assert _close(row["share"], want["shares"][option]), (row, want)
        assert _close(row["95% low"], want["low"][option]) or want["low"][option] is None
        assert _close(row["95% high"], want["high"][option]) or want["high"][option] is None
        assert row["n"] == str(want["n"]), (row, want)
    answers = records(page, "class-answers")
    counted = {(labels[r["condition"]], r["option"]): int(r["answers"]) for r in answers}
    assert counted == {
        (c, option): klass[c]["counts"][i]
        for c in expected["conditions"] for i, option in enumerate(expected["options"][c])
    }  # fmt: skip
    assert sum(counted.values()) == len(TOKENS)
    assert "Tversky" in page  # the humans' citation
    asked = {(r["model"], r["asked"]): r for r in records(page, "asked")}
    sampled_random = asked[("random", "drawn at random (no temperature), 6 per condition")]
    assert sampled_random["readable answers"] == "12" and sampled_random["run"].startswith("run-")
    assert sampled_random["cost"] == "$0.0000"  # offline
    assert asked[(MODEL, "sampled at temperature 0.7")]["cost"] == "unknown"  # no run of it


def test_class_report_has_no_participant_and_says_how_it_ran(world: dict, reports: dict) -> None:
    page = reports["class"].read_text()
    code = world["session"]
    for token in TOKENS:  # neither a participant's token nor what the store keeps of it
        assert token not in page and sessions.token_hash(code, token) not in page
    for condition in ("lost_ticket", "lost_bill"):  # each condition's question, as text
        text = questions.classic_question("classics", "theatre_ticket").texts[condition]
        assert html.escape(text.splitlines()[0], quote=True) in page
    assert "Study classics, test theatre_ticket (study file version " in page
    assert "SHA-256 of the question as the session stored it: " in page
    assert "the next place in the session&#x27;s own balanced order" in page
    assert re.search(r"Opened \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, answers from \d{4}", page)
    assert re.search(r"locked \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
    assert "Answers per condition:" in page and "(total 7)" in page


def test_what_a_class_sessions_models_cost_is_read_back_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's cost of a model's answers is what its class run paid for them: the same
    requests rebuilt, their cost read from the response cache (offline models cost 0); and
    the report says "grammar" only for answers that were asked under one."""
    from cogbias.llm.costs import dollars
    from cogbias.runs import class_answers
    from cogbias.views.report import build
    from tests.fake_llm_server import FakeLLMServer

    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with Store(tmp_path / "c.db") as store, FakeLLMServer(lambda _: "A") as fake:
        code = sessions.open_session(store, questions.classic_question("classics", "linda"))
        spec = ClassSpec(code, ("openai/gpt-4o-mini", "random"), samples=3, scoring="sample",
                         api_base=fake.base_url)  # fmt: skip
        run = executor.execute(kinds.plan(spec, store), store)
        spent = class_answers.spent(store, kinds.stored(store, run.id))
        report = build("class", store, code=code)
    assert run.cost > 0
    assert spent["openai/gpt-4o-mini"] == pytest.approx(run.cost)
    assert spent["random"] == 0.0
    [models] = [s for s in report.methods if s.heading == "Models"]
    asked = models.tables[0].frame.set_index("model")
    assert asked.loc["random", "structured output"] == "none"  # no grammar was sent
    assert asked.loc["openai/gpt-4o-mini", "cost"] == dollars(run.cost)
    assert set(models.tables[1].frame["structured output"]) == {"none"}


@pytest.mark.parametrize("kind", list(REPORTS))
def test_report_is_self_contained_and_safe(reports: dict, kind: str) -> None:
    page = reports[kind].read_text()
    assert "<script" not in page.lower()
    parser = Tags()
    parser.feed(page)
    assert not parser.tags & {"script", "img", "iframe", "object", "embed", "link", "image"}
    assert "foreignobject" not in parser.tags
    for tag, name, value in parser.attributes:
        assert not name.startswith("on"), (tag, name, value)  # no event handler
        if name in ("src", "href", "xlink:href", "action", "srcset"):
            assert value.startswith("#"), (tag, name, value)  # only links within the page
    assert "url(http" not in page and "@import" not in page
    assert report_html.POLICY in page  # and a second lock: the page may fetch nothing
    assert SENTINEL not in page  # the run's name carried the key: redacted
    assert "Methods" in page and "cogbias 0." in page


def test_hostile_names_stay_text(reports: dict) -> None:
    escaped = html.escape(HOSTILE, quote=True)
    for kind in ("run", "compare", "class"):
        page = reports[kind].read_text()
        assert escaped in page  # in the tables, escaped
        assert HOSTILE not in page
    assert html.escape(DATASET, quote=True) in reports["dataset"].read_text()


def test_methods_say_what_ran(reports: dict, world: dict) -> None:
    page = reports["run"].read_text()
    models = records(page, "models")
    assert [m["model"] for m in models] == ["random", MODEL]
    cases = {r["id"]: r for r in records(page, "test-cases")}
    assert set(cases) == {"anchoring", "loss_aversion", "hostile_bias"}
    assert "seed 0" in page and "Decision temperature 0" in page
    assert "Units planned 36, done 36, failed 2: 2 transient" in page and "Tokens 0; cost" in page
    assert "Departures from the paper&#x27;s design" in page
    recorded = [d.what.strip() for b in ("anchoring", "loss_aversion")
                for d in library.get_test_case(b).departures]  # fmt: skip
    assert recorded and all(html.escape(what, quote=True) in page for what in recorded)
    study = reports["study"].read_text()
    (source,) = records(study, "study-file")
    assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])


def test_refusals_name_the_problem(world: dict, tmp_path: Path, cogbias_main) -> None:
    """In this process: the `reports` fixture runs the real command."""

    def cogbias(world: dict[str, Any], *words: str) -> subprocess.CompletedProcess[str]:
        return cogbias_main(*words, "--db", world["db"], env=world["env"])

    out = tmp_path / "r.html"
    cases = [
        (["--run", "run-nope"], "no run run-nope"),
        (["--run", world["paired"], "-o", str(tmp_path / "r.txt")], "HTML file"),
        ([], "say what to report"),
        (["--compare", "random", "nobody"], "no results of nobody"),
        (["--run", world["paired"], "--dataset", DATASET], "not both"),
        (["--class", "nope99"], "no class session with code 'NOPE99'"),
        (["--class", world["session"], "--run", world["paired"]], "give it alone"),
    ]
    for words, said in cases:
        args = words if "-o" in words else [*words, "-o", str(out)]
        done = cogbias(world, "report", *args)
        assert done.returncode != 0 and said in done.stderr, (words, done.stderr)
        assert "Traceback" not in done.stderr
    out.write_text("mine")
    done = cogbias(world, "report", "--run", world["paired"], "-o", str(out))
    assert done.returncode != 0 and "--force" in done.stderr and out.read_text() == "mine"


def _only(own: str, asked: list[str]) -> Any:
    """A route handler letting through the file itself and refusing (and noting) the rest.
    (One parameter: Playwright hands a second one, the request, to handlers that take two.)"""

    def route(r: Any) -> None:
        if r.request.url == own:
            r.continue_()
        else:
            asked.append(r.request.url)
            r.abort()

    return route


def _look(browser: Any, kind: str, path: Path) -> None:
    """Open one report offline, check it, and keep a screenshot of it."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    asked: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", _only(path.as_uri(), asked))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    assert errors == [] and asked == [], (kind, errors, asked)
    assert page.evaluate("document.scripts.length") == 0
    assert page.locator("img, iframe").count() == 0
    assert page.locator("svg").count() >= 1
    if kind in ("run", "compare", "class"):
        assert HOSTILE in page.inner_text("body")
    page.screenshot(path=str(SHOTS / f"report-{kind}.png"), full_page=True)
    context.close()


@pytest.mark.browser
def test_reports_open_offline_in_chromium(reports: dict) -> None:
    """Each report in headless Chromium with every request but the file itself refused: no
    console error, nothing asked of the network, no script, the hostile names as text."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)")
    sync = pytest.importorskip("playwright.sync_api")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        for kind, path in reports.items():
            _look(browser, kind, path)
        browser.close()


def test_pages_make_the_report_on_request_only(app_db: Path, monkeypatch: Any) -> None:
    """Explore, Compare, Studies and Class draw a "Make report" button; a click makes the
    report once, and later reruns show its download without making it again."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    made: list[str] = []
    render = report_html.render

    def counted(report: Any, *args: Any, **kwargs: Any) -> str:
        made.append(report.kind)
        return render(report, *args, **kwargs)

    monkeypatch.setattr(report_html, "render", counted)
    st.cache_data.clear()
    run_id = make_results_db(app_db, instances=4)
    study = study_run(app_db, StudySpec("classics", ["random"], tests=["linda"], repeats=2))

    def page(name: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        at.switch_page(f"app_pages/{name}.py")
        return at.run()

    def downloads(at: AppTest) -> list[str]:
        return [b.proto.label for b in at.get("download_button") if "report" in b.proto.label]

    at = page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{run_id}").run()
    assert not at.exception and downloads(at) == [] and made == []
    at.button(key="explore_report_make").click().run()
    assert not at.exception and downloads(at) == ["Download the report (HTML)"]
    at.radio(key="explore_view").set_value("n").run()  # a rerun: the same file, not made again
    assert downloads(at) == ["Download the report (HTML)"] and made == ["run"]

    at = page("compare")
    at.button(key="cmp_report_make").click().run()
    assert not at.exception and downloads(at) and made == ["run", "compare"]

    at = page("studies")
    at.selectbox(key="study_run").set_value(study).run()
    at.button(key="study_report_make").click().run()
    assert not at.exception and downloads(at) and made == ["run", "compare", "study"]
    at.run()
    assert downloads(at) and len(made) == 3

    with Store(app_db) as store:  # a revealed class session: the Class page offers its report
        code = class_session(store)
    at = page("classroom")
    at.selectbox(key="class_session").set_value(code).run()
    assert not at.exception and downloads(at) == []  # not made before it is asked for
    at.button(key="class_report_make").click().run()
    assert not at.exception and downloads(at) and made == ["run", "compare", "study", "class"]
    at.run()
    assert downloads(at) and len(made) == 4


def test_a_chart_is_rebuilt_from_drawing_elements_only() -> None:
    """Whatever an SVG brings, the page keeps shapes and text: no script, foreign HTML,
    handler, outside link or outside paint, and ids that no other chart on the page shares."""
    hostile = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'width="100" height="50" onload="alert(1)"><script>alert(2)</script>'
        '<defs><linearGradient id="g"><stop offset="0"/></linearGradient></defs>'
        '<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">x</div></foreignObject>'
        '<a href="https://evil.example/"><text>link</text></a>'
        '<image href="https://evil.example/i.png"/><use xlink:href="https://evil.example/#s"/>'
        '<rect fill="url(#g)" stroke="url(https://evil.example/p)" style="fill:url(http://e/x)"/>'
        "<text onclick='alert(3)'>&lt;b&gt;kept&lt;/b&gt;</text></svg>"
    )
    safe = report_html.safe_svg(hostile, "chart7")
    parser = Tags()
    parser.feed(safe)
    assert parser.tags == {"svg", "defs", "lineargradient", "stop", "rect", "text"}
    assert not any(name.startswith("on") or "href" in name for _, name, _ in parser.attributes)
    assert "evil.example" not in safe and "http://e/" not in safe and "alert" not in safe
    assert 'id="chart7-g"' in safe and 'fill="url(#chart7-g)"' in safe
    assert "&lt;b&gt;kept&lt;/b&gt;" in safe  # text stays text
    assert 'width="125"' in safe  # drawn a little larger for a screen page
