"""AppTest for every page: empty database, real results, failing models, malformed input.

Pages run exactly as `streamlit run app.py` would run them (through app.py's navigation).
LLM calls go to the fake OpenAI-compatible server on 127.0.0.1, registered as a user model
the way the Models page registers one; runs start real worker processes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.library import testcases as library
from cogbias.llm import registry, settings
from cogbias.store import Store, demo
from cogbias.views import authoring
from tests.app_helpers import make_results_db
from tests.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["learn", "templates", "preview", "run", "explore", "settings", "projector"]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def fake_model(fake: FakeLLMServer) -> str:
    """An OpenAI-compatible endpoint registered in the user's models.toml."""
    settings.add_custom_model("openai/fake", "Fake model", fake.base_url, json_schema=True)
    return "openai/fake"


def open_page(page: str, timeout: float = 60) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.run()
    at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(at: AppTest) -> str:
    """Everything a reader sees as text (markdown, captions, alerts, expander labels)."""
    parts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error")
             for e in getattr(at, kind)]  # fmt: skip
    parts += [e.label for e in at.expander]
    return re.sub(r"\\(.)", r"\1", "\n".join(str(p) for p in parts))  # as a reader sees it


def shown_text(at: AppTest) -> str:
    """`texts` plus every plain-text element (answers, options)."""
    return texts(at) + "\n" + "\n".join(str(t.value) for t in at.text)


def chart_specs(at: AppTest) -> list[dict]:
    found = []
    for kind in ("arrow_vega_lite_chart", "vega_lite_chart"):
        for element in at.get(kind):
            found.append(json.loads(element.proto.spec))
    return found


# --------------------------------------------------------------------------- every page


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_on_an_empty_database_without_a_traceback(app_db: Path, page: str) -> None:
    at = open_page(page)
    assert at.title, f"{page} shows no title"
    if page == "explore":
        assert "no results yet" in texts(at)


def test_the_models_registry_shows_a_dash_for_an_unknown_size_or_score(app_db: Path) -> None:
    """Streamlit writes a missing number as "None": the local model has no arena score."""
    at = open_page("settings")
    registry_table = at.dataframe[0].value.set_index("id")
    assert registry_table.loc["local/smollm2", "arena score"] == "–"
    assert registry_table.loc["local/smollm2", "parameters (B)"] == "0.135"
    assert registry_table.loc["random", "parameters (B)"] == "–"
    assert not registry_table.isna().any().any()


def test_first_start_loads_the_committed_demo_results(app_db: Path, monkeypatch) -> None:
    monkeypatch.setenv("COGBIAS_DEMO", "1")
    assert demo.SNAPSHOT.is_file(), "run scripts/make-demo to create the demo snapshot"
    at = open_page("explore")
    (spec,) = chart_specs(at)
    with Store(app_db) as store:
        assert store.runs(), "the demo run was not loaded"
        assert {r["name"] for r in store.runs()} == {"demo"}
    assert "mean" in json.dumps(spec)


def test_a_broken_database_file_gets_a_message_not_a_traceback(app_db: Path) -> None:
    app_db.write_bytes(b"this is not a database" * 100)
    at = open_page("explore")
    assert any("cannot be opened" in e.value for e in at.error)


# --------------------------------------------------------------------------- explore


@pytest.fixture
def results(app_db: Path) -> str:
    return make_results_db(app_db, instances=30)


def test_explore_heatmap_is_diverging_over_minus_one_to_one(results: str) -> None:
    at = open_page("explore")
    (spec,) = chart_specs(at)
    scales = [
        layer["encoding"]["color"]["scale"]
        for layer in spec["layer"]
        if "color" in layer.get("encoding", {}) and "scale" in layer["encoding"]["color"]
    ]
    assert scales == [
        {"clamp": True, "domain": [-1, 1], "domainMid": 0, "reverse": True, "scheme": "redblue"}
    ]
    params = spec.get("params", []) + [
        p for layer in spec["layer"] for p in layer.get("params", [])
    ]
    assert [p["select"]["type"] for p in params if p["name"] == "cell"] == ["point"]
    assert "Click a cell" in texts(at)


def test_explore_views_filters_and_row_order(results: str, app_db: Path) -> None:
    at = open_page("explore")
    at.radio(key="explore_view").set_value("failure_rate").run()
    assert_clean(at)
    assert "failure rate" in json.dumps(chart_specs(at)[0])
    at.radio(key="explore_view").set_value("n").run()
    at.selectbox(key="explore_order").set_value("name").run()
    spec = chart_specs(at)[0]
    # rows sorted by id, labelled with display names
    assert spec["layer"][0]["encoding"]["y"]["sort"] == [
        "Anchoring",
        "Framing Effect",
        "Loss Aversion",
    ]
    at.selectbox(key="explore_source").set_value(f"run:{results}").run()
    assert_clean(at)
    assert chart_specs(at)


def test_explore_reads_the_runs_and_the_datasets_once_per_rerun(
    results: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page read `store.runs()` up to 3 times and `store.datasets()` up to 4 times per
    rerun (sources, other pages' datasets, the studies link, the runs behind the heatmap);
    it reads each once and passes it down."""
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{results}").run()  # summary cached
    calls = {"runs": 0, "datasets": 0}
    for name in calls:
        read = getattr(Store, name)

        def counted(self: Store, *args: object, _read=read, _name=name, **kw: object) -> object:
            calls[_name] += 1
            return _read(self, *args, **kw)

        monkeypatch.setattr(Store, name, counted)
    at.run()
    assert_clean(at)
    assert calls == {"runs": 1, "datasets": 1}


def test_explore_cell_lists_paired_responses_paginated_searchable_and_downloadable(
    results: str,
) -> None:
    at = open_page("explore")
    at.selectbox(key="explore_bias").set_value("anchoring")
    at.selectbox(key="explore_model").set_value("random").run()
    assert_clean(at)
    shown = texts(at)
    assert "Anchoring × random" in shown and "30 pair(s) · page 1 of 2" in shown
    pairs = [e for e in at.expander if e.label.startswith("Pair ")]
    assert len(pairs) == 20
    (frame,) = [d.value for d in at.dataframe if "score" in d.value.columns]
    assert list(frame.columns)[:2] == ["score", "status"] and len(frame) == 20
    at.number_input(key="explore_page").set_value(2).run()
    assert len([e for e in at.expander if e.label.startswith("Pair ")]) == 10
    at.text_input(key="explore_search").input("Energy").run()
    assert_clean(at)
    assert "page 1 of 1" in texts(at)
    (download,) = [b for b in at.get("download_button") if "pairs as CSV" in b.proto.label]
    assert download.proto.url, "the CSV download carries no file"  # not a request for one


# --------------------------------------------------------------------------- learn


def test_learn_shows_both_halves_with_the_difference_marked(app_db: Path) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("framing_effect").run()
    html = "\n".join(m.value for m in at.markdown)
    assert "Framing Effect" in [s.value for s in at.subheader]
    assert "<mark" in html and "gap-llm" in html and "gap-value" in html


def test_learn_lists_where_a_test_departs_from_the_papers_design(app_db: Path) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("planning_fallacy").run()
    assert_clean(at)
    case = library.get_test_case("planning_fallacy")
    (expander,) = [e for e in at.expander if e.label.startswith("How this test differs")]
    assert f"({len(case.departures)})" in expander.label and case.departures
    assert case.departures[0].what.strip()[:40] in texts(at)
    at.selectbox(key="learn_bias").set_value("framing_effect").run()  # a wording difference
    (expander,) = [e for e in at.expander if e.label.startswith("How this test differs")]
    assert "(1)" in expander.label and "Wording: The percentage is called the only" in texts(at)
    at.selectbox(key="learn_bias").set_value("anchoring").run()  # none: no expander
    assert not [e for e in at.expander if e.label.startswith("How this test differs")]


def test_learn_shows_a_filled_pair_first_and_the_template_one_click_away(app_db: Path) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("anchoring").run()
    assert_clean(at)
    situations = [m.value for m in at.markdown if m.value.startswith("*Situation:*")]
    filled, raw = situations[:2], situations[2:]  # the example pair, then the template
    assert len(filled) == 2 and len(raw) == 2
    for text in filled:
        assert "ins-scenario" in text and "ins-example" in text
        assert "&#91;&#91;" not in text and "gap-llm" not in text  # no raw [[gap]] left
    assert all("gap-llm" in text for text in raw)
    (expander,) = [e for e in at.expander if e.label.startswith("The template behind it")]
    assert not expander.proto.expanded


def test_learn_runs_the_pair_live_and_explains_the_score(app_db: Path, fake_model: str) -> None:
    at = open_page("learn")
    at.selectbox(key="learn_bias").set_value("framing_effect")
    at.selectbox(key="learn_generator").set_value(fake_model)
    at.selectbox(key="learn_model").set_value(fake_model).run()
    # a capable model is asked for a sampled answer first (the paper's reading), though its
    # profile lists log-probabilities; a sampled answer is what this test explains
    assert at.radio(key="learn_scoring").value == "choice"
    at.button(key="learn_run").click().run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    (explanation,) = [i.value for i in at.info if "Score" in i.value]
    assert "control" in explanation
    shown = shown_text(at)
    assert "◀ chosen" in shown and "Chose “" in shown  # options as presented, choice marked
    # switching the decision model hides the result instead of showing it under the new name
    at.selectbox(key="learn_model").set_value("random").run()
    assert not [i for i in at.info if "Score" in i.value] and "◀ chosen" not in shown_text(at)


def test_learn_says_which_generator_fill_copied_its_instruction(app_db: Path) -> None:
    # issue 21, 3: a fill that repeats its gap instruction gives way to an example fill, and
    # Learn says so in words (as Preview does), not only on hover
    def copying(request: dict) -> str:
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            keys = fmt["json_schema"]["schema"]["required"]
            return json.dumps({k: k for k in keys})  # every fill is its own instruction
        return "Option 1"

    with FakeLLMServer(responder=copying) as server:
        settings.add_custom_model("openai/copier", "Copier", server.base_url, json_schema=True)
        at = open_page("learn")
        at.selectbox(key="learn_bias").set_value("framing_effect")
        at.selectbox(key="learn_generator").set_value("openai/copier")
        at.selectbox(key="learn_model").set_value("random").run()
        at.button(key="learn_run").click().run()
        assert_clean(at)
    notes = [c.value for c in at.caption if c.value.startswith("Example fill for")]
    assert notes, [c.value for c in at.caption]


def test_learn_with_a_failing_model_says_what_to_do(app_db: Path) -> None:
    with FakeLLMServer(api_key="the-right-key") as server:
        settings.add_custom_model("openai/locked", "Locked", server.base_url)
        at = open_page("learn")
        at.selectbox(key="learn_generator").set_value("openai/locked").run()
        at.button(key="learn_run").click().run()
        assert_clean(at)
        (error,) = [e.value for e in at.error]
        assert "Filling the gaps failed" in error and "What to do" in error
        assert "the-right-key" not in error
        # shown in the open, not inside a collapsed "The pair could not be run" box
        assert all("could not be run" not in e.label for e in at.expander)
        at.selectbox(key="learn_generator").set_value("local/smollm2").run()
        assert not at.error, "a stale error survived the model switch"


# --------------------------------------------------------------------------- templates


def type_draft(at: AppTest, text: str) -> None:
    """What the editor sends once the author stops typing: the draft's new text (the editor
    itself, Ace in the browser, is driven by tests/test_browser_authoring.py)."""
    at.session_state["tpl_text"] = text
    at.run()


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_templates_validate_live_then_save_to_the_library(app_db: Path) -> None:
    at = open_page("templates")
    assert any("Valid: My Bias" in s.value for s in at.success)
    broken = authoring.BLANK_TEST_CASE.replace('kind = "likert7"', 'kind = "likert9"')
    type_draft(at, broken)
    assert_clean(at)
    line = _line_of(broken, 'kind = "likert9"')
    assert f"Line {line}, column" in texts(at) and "unknown scale kind" in texts(at)
    assert at.button(key="tpl_save").disabled
    (export,) = at.get("download_button")
    assert export.proto.disabled, "an invalid file must not be exportable"
    fixed = authoring.BLANK_TEST_CASE.replace('"my_bias"', '"peer_pressure"')
    type_draft(at, fixed)
    at.button(key="tpl_save").click().run()
    assert_clean(at)
    assert (library.user_dir() / "peer_pressure.toml").is_file()
    assert "peer_pressure" in texts(at)  # listed under "Your library"
    learn = open_page("learn")
    assert "peer_pressure" in learn.selectbox(key="learn_bias").options or any(
        "My Bias" in o for o in learn.selectbox(key="learn_bias").options
    )


def test_saving_a_built_in_makes_a_copy_under_a_new_id(app_db: Path) -> None:
    builtin = library.BUILTIN_DIR / "anchoring.toml"
    before = builtin.read_bytes()
    at = open_page("templates")
    at.selectbox(key="tpl_source").set_value("anchoring")
    at.button(key="tpl_load_copy").click().run()
    assert 'id = "anchoring"' in at.session_state["tpl_text"]
    at.button(key="tpl_save").click().run()
    assert_clean(at)
    assert builtin.read_bytes() == before
    assert (library.user_dir() / "anchoring_copy.toml").is_file()
    assert 'id = "anchoring_copy"' in at.session_state["tpl_text"]
    assert any("is built in, so this is a copy" in s.value for s in at.success)


def test_templates_report_broken_toml_and_export(app_db: Path) -> None:
    at = open_page("templates")
    type_draft(at, 'id = "x"\nname = [unclosed\n')
    assert_clean(at)
    assert "not valid TOML" in texts(at)
    at.button(key="tpl_blank").click().run()
    assert at.session_state["tpl_text"] == authoring.BLANK_TEST_CASE
    assert at.get("download_button")


# --------------------------------------------------------------------------- preview


def test_preview_fills_values_offline_and_decides_with_the_random_baseline(app_db: Path) -> None:
    at = open_page("preview")
    at.selectbox(key="pv_case").set_value("anchoring")
    at.selectbox(key="pv_generator").set_value("").run()
    at.button(key="pv_fill").click().run()
    assert_clean(at)
    html = "\n".join(m.value for m in at.markdown)
    assert "ins-value" in html and "gap-llm" in html  # values filled, LLM gaps still visible
    at.selectbox(key="pv_model").set_value("random")
    at.button(key="pv_decide").click().run()
    assert_clean(at)
    assert any("Score" in i.value or "could not be scored" in i.value for i in at.info)


def test_preview_marks_generator_insertions_and_regenerates(app_db: Path, fake_model: str) -> None:
    at = open_page("preview")
    at.selectbox(key="pv_case").set_value("framing_effect")
    at.text_input(key="pv_typed").input("A school principal choosing a new timetable.")
    at.selectbox(key="pv_generator").set_value(fake_model).run()
    at.button(key="pv_fill").click().run()
    assert_clean(at)
    html = "\n".join(m.value for m in at.markdown)
    assert "ins-llm" in html and "ins-value" in html
    assert "school principal" in texts(at)
    at.button(key="pv_regen").click().run()
    assert_clean(at)
    assert at.number_input(key="pv_seed").value == 1
    assert "seed 1" in texts(at)


def test_preview_uses_a_typed_scenario_and_names_who_filled_the_gaps(app_db: Path) -> None:
    at = open_page("preview")
    at.selectbox(key="pv_case").set_value("anchoring")
    typed = "A head teacher at a secondary school deciding on next year's budget"
    at.text_input(key="pv_typed").input(typed).run()
    at.button(key="pv_fill").click().run()  # the default generator: offline example fills
    assert_clean(at)
    html = "\n".join(m.value for m in at.markdown)
    assert ">head teacher</span>" in html and ">a secondary school</span>" in html
    assert "[[gaps]] from the scenario and example fills (offline)" in html
    assert "generator LLM" not in html
    assert "shape" not in texts(at) and "keep their defaults" not in texts(at)
    at.text_input(key="pv_typed").input("Budget season, somewhere cold").run()
    assert "keep their defaults" in texts(at)


def test_preview_fills_offline_at_once_and_follows_every_change(
    app_db: Path, fake_model: str
) -> None:
    """The offline example fills cost nothing: the page opens filled (it asked for a click),
    and a new scenario or seed refills it without one; a model's fill waits for Fill, and
    the offline fill is not left standing for it."""
    at = open_page("preview")
    assert_clean(at)
    assert not [i for i in at.info if "Fill" in i.value]  # no "Press Fill" on an empty page
    assert "seed 0" in texts(at)
    typed = "A head teacher at a secondary school deciding on next year's budget"
    at.text_input(key="pv_typed").input(typed).run()
    html = "\n".join(m.value for m in at.markdown)
    assert ">head teacher</span>" in html
    at.number_input(key="pv_seed").set_value(3).run()
    assert "seed 3" in texts(at)
    at.selectbox(key="pv_generator").set_value(fake_model).run()
    assert [i for i in at.info if "Press **Fill**" in i.value]
    assert "seed 3" not in texts(at)
    at.button(key="pv_fill").click().run()
    assert_clean(at)
    assert f"generator: {fake_model}" in texts(at)


# --------------------------------------------------------------------------- run


def test_run_page_plans_starts_shows_progress_and_explore_shows_results(
    app_db: Path, fake_model: str
) -> None:
    at = open_page("run")
    at.multiselect(key="run_biases").set_value(["framing_effect", "anchoring"])
    at.multiselect(key="run_models").set_value(["random"])
    at.selectbox(key="run_generator").set_value(fake_model)
    at.number_input(key="run_instances").set_value(3).run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pairs to decide"] == "6"
    assert metrics["LLM calls (at most)"] == "12"  # 2 generation requests per instance
    at.button(key="run_start").click().run()
    assert_clean(at)
    run_id = at.session_state["run_active"]
    with Store(app_db) as store:
        run = store.wait_for(run_id, timeout=90)
    assert run is not None and run["status"] == "done", run
    at.run()
    assert any("6 of 6 pairs" in s.value for s in at.success)
    with Store(app_db) as store:  # a run of two models, as stored by another page or the CLI
        store.create_run("run-two-models", {"models": ["random", "local/smollm2"]}, 0)
    at.run()
    (runs,) = [d.value for d in at.dataframe if "planned" in d.value.columns]
    seen = ["id", "name", "status", "created_at"]  # on a laptop, without scrolling sideways
    assert list(runs.columns)[:4] == seen
    shown = runs.set_index("id")["models"].to_dict()
    assert shown == {run_id: "random", "run-two-models": "random, local/smollm2"}
    at.selectbox(key="run_pick").set_value(run_id)
    at.button(key="run_explore").click().run()
    assert_clean(at)
    assert at.session_state["explore_source"] == f"run:{run_id}"
    assert chart_specs(at)


def test_run_page_cancel_and_resume(app_db: Path) -> None:
    # The server hangs on every call until the run is cancelled: cancel must not wait for it.
    with FakeLLMServer(latency=60) as slow:
        settings.add_custom_model("openai/slow", "Slow", slow.base_url, json_schema=True)
        at = open_page("run")
        at.checkbox(key="run_all").check()
        at.multiselect(key="run_models").set_value(["random"])
        at.selectbox(key="run_generator").set_value("openai/slow").run()
        at.button(key="run_start").click().run()
        run_id = at.session_state["run_active"]
        with Store(app_db) as store:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not store.run(run_id):
                time.sleep(0.1)
            at.run()
            at.button(key="run_cancel").click().run()
            assert_clean(at)
            assert "cancelling" in texts(at)
            run = store.wait_for(run_id, timeout=60)
            assert run is not None and run["status"] == "cancelled", run
            slow.latency = 0.05
            at.run()
            at.selectbox(key="run_pick").set_value(run_id).run()
            at.button(key="run_resume").click().run()
            assert_clean(at)
            assert "Starting run" in texts(at) or at.get("progress")
            deadline = time.monotonic() + 60  # the new worker takes the run over
            while time.monotonic() < deadline and store.run(run_id)["status"] == "cancelled":
                time.sleep(0.1)
            run = store.wait_for(run_id, timeout=120)
        assert run is not None and run["status"] == "done" and run["done"] == 30, run


def test_run_page_refuses_models_on_two_endpoints(app_db: Path, fake: FakeLLMServer) -> None:
    settings.add_custom_model("openai/one", "One", fake.base_url)
    settings.add_custom_model("openai/two", "Two", "http://127.0.0.1:9/v1")
    at = open_page("run")
    at.checkbox(key="run_all").check()
    at.multiselect(key="run_models").set_value(["openai/one", "openai/two"]).run()
    assert_clean(at)
    assert any("different endpoints" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "run_start"]


def test_run_page_records_the_chosen_reader_of_unclear_answers(
    app_db: Path, fake_model: str
) -> None:
    # the extraction model is a choice of its own (issue 20), as `--extractor` is on the CLI
    at = open_page("run")
    at.multiselect(key="run_biases").set_value(["framing_effect"])
    at.multiselect(key="run_models").set_value(["random"])
    at.selectbox(key="run_extractor").set_value(fake_model).run()
    assert_clean(at)
    at.button(key="run_start").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        run = store.wait_for(at.session_state["run_active"], timeout=90)
    assert run is not None and json.loads(run["spec"])["extractor"] == fake_model
    # probability scoring reads no answer, so no reader is offered
    at.radio(key="run_scoring").set_value("probabilities").run()
    assert not [s for s in at.selectbox if s.key == "run_extractor"]


def test_run_page_offers_the_paper_s_reading(app_db: Path, fake_model: str) -> None:
    # the Malberg paper's extraction call for every answer, beside cogbias' own reading
    at = open_page("run")
    at.multiselect(key="run_biases").set_value(["framing_effect"])
    at.multiselect(key="run_models").set_value([fake_model]).run()
    at.radio(key="run_scoring").set_value("choice").run()  # its default: probabilities
    assert at.radio(key="run_reading").value == "answer"
    at.radio(key="run_reading").set_value("extraction").run()
    assert_clean(at)
    at.button(key="run_start").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        run = store.wait_for(at.session_state["run_active"], timeout=90)
        extracted = store.query("select control_extraction from decisions")
    assert run is not None and run["status"] == "done", run
    assert json.loads(run["spec"])["reading"] == "extraction"
    assert extracted and all(
        "(extracted by openai/fake)" in r["control_extraction"] for r in extracted
    )
    # probability scoring reads no answer: no reading is offered
    at.radio(key="run_scoring").set_value("probabilities").run()
    assert not [r for r in at.radio if r.key == "run_reading"]


# --------------------------------------------------------------------------- settings


def test_settings_show_key_names_never_values(app_db: Path, monkeypatch) -> None:
    secret = "sk-this-must-never-be-shown-123456"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    at = open_page("settings")
    keys = at.dataframe[1].value
    row = keys[keys["variable"] == "OPENAI_API_KEY"].iloc[0]
    assert row["set"] == "✅ set"
    assert keys[keys["variable"] == "ANTHROPIC_API_KEY"].iloc[0]["set"] == "— not set"
    shown = texts(at) + "".join(df.value.to_string() for df in at.dataframe)
    assert secret not in shown


def test_settings_add_a_custom_endpoint(app_db: Path) -> None:
    at = open_page("settings")
    at.text_input(key="add_served").input("llama3.2")
    at.text_input(key="add_base").input("http://127.0.0.1:11434/v1")
    at.button(key="add_submit").click().run()
    assert_clean(at)
    assert any("openai/llama3.2" in s.value for s in at.success)
    assert "openai/llama3.2" in set(at.dataframe[0].value["id"])
    assert "openai/llama3.2" in {m.id for m in registry.load_models()}
    at.text_input(key="add_served").input("leaky")
    at.text_input(key="add_base").input("http://user:secret@127.0.0.1:1/v1")
    at.button(key="add_submit").click().run()
    assert any("must not hold a user, password" in e.value for e in at.error)


def test_a_missing_key_is_named_with_what_to_do(app_db: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = open_page("preview")
    at.selectbox(key="pv_generator").set_value("").run()
    at.button(key="pv_fill").click().run()
    at.selectbox(key="pv_model").set_value("openai/gpt-4o-mini-2024-07-18")
    at.button(key="pv_decide").click().run()
    assert_clean(at)
    (error,) = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]  # shown unescaped
    assert "OPENAI_API_KEY is not set" in error and ".streamlit/secrets.toml" in error
    assert "What to do" not in error  # the sentence says what to do; no advice on servers


def test_a_model_without_its_key_is_marked_in_the_picker_and_refused_at_once(
    app_db: Path, monkeypatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = open_page("learn")
    picker = at.selectbox(key="learn_model")
    model = "openai/gpt-4o-mini-2024-07-18"
    assert picker.format_func(model).startswith("GPT-4o mini — needs OPENAI_API_KEY (")
    assert "needs" not in picker.format_func("random")
    picker.set_value(model)
    at.button(key="learn_run").click().run()
    assert_clean(at)
    (error,) = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
    assert "needs an API key and OPENAI_API_KEY is not set" in error
    assert ".streamlit/secrets.toml" in error
    assert "litellm" not in error.lower() and "Provider said" not in error


def test_run_studies_and_datasets_refuse_a_model_without_its_key_before_starting(
    app_db: Path, monkeypatch
) -> None:
    # a run would fail on its first call; the pages say what to set and offer no Start
    from cogbias.datasets import import_hub
    from tests.dataset_helpers import HUB_CSV

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = "openai/gpt-4o-mini-2024-07-18"
    with Store(app_db) as store:
        import_hub(store, HUB_CSV)
    for page, picks, start in (
        ("run", {"run_biases": ["framing_effect"], "run_models": [model]}, "run_start"),
        ("studies", {"study_models": [model]}, "study_start"),
        ("datasets", {"ds_models": [model]}, "ds_start"),
    ):
        at = open_page(page)
        if page == "datasets":
            at.selectbox(key="ds_current").set_value("malberg2024-hub").run()
        for key, value in picks.items():
            at.multiselect(key=key).set_value(value)
        at.run()
        assert_clean(at)
        errors = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
        assert any(f"{model} needs an API key and OPENAI_API_KEY" in e for e in errors), page
        assert not [b for b in at.button if b.key == start and not b.disabled], page


def test_explore_offers_only_paired_results_and_says_where_the_others_are(app_db: Path) -> None:
    from cogbias.datasets import import_mohr

    with Store(app_db) as store:
        import_mohr(store, ROOT / "tests" / "fixtures" / "mohr2025-format")
    at = open_page("explore")
    assert not [b for b in at.selectbox if b.key == "explore_source"]  # nothing to pick here
    assert "mohr2025 is on the Datasets page (effect sizes)" in texts(at)
    assert "No decisions here yet" not in texts(at)


def test_explore_filters_by_an_imported_dataset(app_db: Path) -> None:
    from cogbias.datasets import import_hub
    from cogbias.runs import executor, paired_plan
    from tests.dataset_helpers import HUB_CSV

    if not HUB_CSV.is_file():
        pytest.skip(f"dataset fixture missing: {HUB_CSV}")
    with Store(app_db) as store:
        import_hub(store, HUB_CSV)
        spec = paired_plan.RunSpec(models=["random"], dataset="malberg2024-hub")
        executor.execute(paired_plan.plan(spec, store), store)
    at = open_page("explore")
    assert "Dataset malberg2024-hub" in at.selectbox(key="explore_source").options
    at.selectbox(key="explore_source").set_value("dataset:malberg2024-hub").run()
    assert_clean(at)
    assert chart_specs(at)
    biases = set(at.selectbox(key="explore_bias").options)  # the heatmap's rows
    assert biases == {"Anchoring", "Framing Effect", "Loss Aversion"}  # shown by display name


# --------------------------------------------------------------------------- compare, delete


def test_compare_two_models_on_shared_instances(results: str, app_db: Path) -> None:
    at = open_page("compare")
    at.selectbox(key="cmp_a").set_value("random_b").run()
    assert_clean(at)
    assert at.selectbox(key="cmp_b").value == "random"
    (spec,) = chart_specs(at)
    assert "mean score difference: random_b minus random" in json.dumps(spec)
    shown = texts(at)
    assert "Wilcoxon signed-rank" in shown
    assert [s.value for s in at.subheader] == ["Where they disagree most"]
    pairs = [e for e in at.expander if e.label.startswith("1. A ")]
    assert len(pairs) == 1, [e.label for e in at.expander]
    assert "**random_b** · score" in shown and "**Control**" in shown
    at.selectbox(key="cmp_bias").set_value("loss_aversion").run()
    assert_clean(at)


def test_compare_explains_when_there_is_nothing_to_compare(app_db: Path) -> None:
    make_results_db(app_db, models=("random",), instances=3)
    at = open_page("compare")
    assert "at least two models" in texts(at)


def test_explore_deletes_a_run_only_after_confirming(app_db: Path) -> None:
    keep = make_results_db(app_db, biases=("anchoring",), instances=3, name="keep")
    drop = make_results_db(app_db, biases=("loss_aversion",), instances=3, name="drop")
    at = open_page("explore")
    at.selectbox(key="explore_source").set_value(f"run:{drop}").run()
    at.button(key="explore_delete").click().run()
    assert f"Delete run {drop}" in texts(at) + "".join(w.value for w in at.warning).replace(
        "\\", ""
    )
    at.button(key="explore_delete_no").click().run()
    with Store(app_db) as store:
        assert {r["id"] for r in store.runs()} == {keep, drop}
    at.button(key="explore_delete").click().run()
    at.button(key="explore_delete_yes").click().run()
    assert_clean(at)
    with Store(app_db) as store:
        assert [r["id"] for r in store.runs()] == [keep]
        assert store.results(run_id=keep) and not store.results(run_id=drop)
    assert at.selectbox(key="explore_source").value == "all"
    assert f"Deleted run {drop}" in texts(at)


def test_a_runs_cost_line_is_text_not_latex() -> None:
    """Two costs in one caption ("$0.0000 ($0.0100 saved by the cache)") were read by
    Streamlit's Markdown as a LaTeX formula between the dollar signs; the line is escaped."""

    def progress_of_a_run() -> None:
        from app_pages import _progress
        from cogbias.core.run_record import Run

        _progress.bars(
            Run(id="run-x", status="done", planned=4, done=4, failed=1, tokens=120, cost=0.0,
                cost_saved=0.01, duration_s=3.0, waiting=2, wait_reason="rate *limit* $1 $2")
        )  # fmt: skip

    at = AppTest.from_function(progress_of_a_run, default_timeout=30).run()
    assert not at.exception, at.exception
    line, waiting = (c.value for c in at.caption)
    assert "\\$0.0100 saved by the cache" in line and "$0.0100" not in line.replace("\\$", "")
    assert "1 failed" in line
    assert waiting.endswith("rate \\*limit\\* \\$1 \\$2")  # markup and dollars as text
