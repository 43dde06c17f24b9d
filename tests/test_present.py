"""Presentation helpers, user settings and the demo snapshot (pure code behind the pages)."""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cogbias.core.records import decode_filled
from cogbias.library import testcases as library
from cogbias.llm import keys, registry, settings
from cogbias.runs import pipeline
from cogbias.store import Store, demo
from cogbias.views import authoring, highlight, pair_tables, shown_pairs
from tests.app_helpers import make_results_db
from tests.run_helpers import decision_of


class _Nesting(HTMLParser):
    """Fails on tags that close out of order (the browser would silently re-nest them)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack}"
        self.stack.pop()


def well_formed(markup: str) -> bool:
    parser = _Nesting()
    parser.feed(markup)
    parser.close()
    return not parser.stack


def visible(markup: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_gaps_are_coloured_and_text_is_escaped() -> None:
    text = "Hi <b>[[a/an]]</b> {{x}} & [[say {{y}} twice]] ]] stray"
    out = highlight.highlight_gaps(text)
    assert "<b>" not in out and "&lt;b&gt;" in out
    assert out.count('class="gap-llm"') == 2 and out.count('class="gap-value"') == 2
    assert visible(out) == text and well_formed(out)


def test_diff_marks_only_the_sides_own_words_and_nests_properly() -> None:
    control = "You are [[a/an]] manager. The success rate is {{share}}%."
    treatment = (
        "You are [[a/an]] manager. The [[failure: opposite of success]] rate is {{opposite}}%."
    )
    out = highlight.diff_html(treatment, control, "treatment")
    assert well_formed(out) and visible(out) == treatment
    marked = re.findall(r"<mark[^>]*>(.*?)</mark>", out)
    assert marked and all("manager" not in visible(m) for m in marked)
    assert "opposite" in visible("".join(marked))
    with pytest.raises(ValueError):
        highlight.diff_html("a", "b", "both")


def test_every_builtin_renders_well_formed_halves() -> None:
    for case in library.load_library(include_user=False).values():
        for half in highlight.case_halves_html(case).values():
            assert all(well_formed(v) for v in half.values()), case.id


def test_filled_html_marks_every_insertion_with_its_source() -> None:
    case = library.get_test_case("framing_effect")
    scenario = library.load_scenarios()[0].text
    offline = pipeline.generate_offline(case, scenario, seed=3)
    out = highlight.filled_html(case, offline, "control")
    assert "ins-value" in out["situation"] and "gap-llm" in out["situation"]
    assert f">{offline.values['share']}<" in out["situation"]
    # as if a generator had filled the gaps: every LLM insertion is marked as such
    fills = {g.resolve(offline.values): f"FILL{i}" for i, g in enumerate(case.control.llm_gaps())}
    values = dict(offline.values, metric="FILL-metric")
    fills |= {g.resolve(values): "FILL-t" for g in case.treatment.llm_gaps()}
    offline.values = values
    offline.insertions += [{"gap": k, "source": "llm", "text": v} for k, v in fills.items()]
    for half in ("control", "treatment"):
        out = highlight.filled_html(case, offline, half)
        assert "gap-llm" not in out["situation"] and "ins-llm" in out["situation"]
        assert well_formed(out["situation"])
    frame = highlight.insertions_frame(offline)
    assert set(frame["source"]) == {"generator LLM", "value generator"}


def test_explain_score_in_one_sentence() -> None:
    case = library.get_test_case("framing_effect")
    inst = pipeline.generate_offline(case, "A scenario.", seed=1)
    row = decision_of(status="ok", score=0.5, control_choice=5, treatment_choice=2)
    text = shown_pairs.explain_score(inst, row)
    assert "“Bad” (option 6 in the test case's order)" in text  # order not recorded
    assert "“Somewhat good” (option 3 in the test case's order)" in text
    assert "+0.50" in text and "direction the bias predicts" in text
    assert "opposite effect" in shown_pairs.explain_score(inst, replace(row, score=-1.0))
    assert "no difference" in shown_pairs.explain_score(inst, replace(row, score=0.0))
    failed = shown_pairs.explain_score(inst, decision_of(status="failed", error="timeout"))
    assert failed == "This pair could not be scored: timeout."


def test_the_shown_pair_table_reads_at_face_value(tmp_path: Path) -> None:
    """No "None" for a missing error, two decimals for a score (never "0.3333" or "-0.00"),
    and each choice as its number in the test case's order beside the option's text."""
    db = tmp_path / "r.db"
    run_id = make_results_db(db, instances=2)
    with Store(db) as store:
        rows = store.pairs("anchoring", "random", run_id, limit=10)
    rows = [
        replace(rows[0], decision=replace(rows[0].decision, score=1 / 3, error=None)),
        replace(rows[1], decision=replace(
            rows[1].decision, score=-1e-17, status="failed", error="timeout after 60 s",
            treatment_choice=None,
        )),
    ]  # fmt: skip
    frame = pair_tables.shown_frame(rows)
    assert list(frame.columns) == pair_tables.SHOWN_COLUMNS
    assert "test case's numbering" in pair_tables.CONTROL_CHOICE
    assert list(frame["score"]) == ["+0.33", "0.00"]
    assert list(frame["error"]) == ["", "timeout after 60 s"]
    options = decode_filled(rows[0].control_half).options
    number = rows[0].decision.control_choice
    assert frame[pair_tables.CONTROL_CHOICE].iloc[0] == f"{number + 1} · {options[number]}"
    assert frame[pair_tables.TREATMENT_CHOICE].iloc[1] == "–"
    shown = frame.to_csv(index=False)
    assert "None" not in shown and "nan" not in shown and "0.3333" not in shown
    mixed = pair_tables.shown_frame(rows, with_cell=True)
    assert list(mixed.columns[:2]) == ["model", "bias"] and mixed["bias"].iloc[0] == "anchoring"


def test_missing_numbers_read_as_a_dash_and_zero_has_no_sign() -> None:
    from cogbias.views import numbers

    assert numbers.signed_or_dash(None) == "–" and numbers.signed_or_dash(float("nan")) == "–"
    assert numbers.signed_or_dash(-0.0001, 3) == "0.000"
    assert numbers.interval(float("nan"), 0.2, note="needs 2 scored pairs") == (
        "– (needs 2 scored pairs)"
    )
    assert numbers.interval(-0.001, 0.5) == "0.00 to +0.50"
    assert numbers.p_text(None) == "–" and numbers.p_text(0.012345) == "0.0123"
    assert numbers.text_or_blank(None) == "" and numbers.text_or_blank("x") == "x"
    assert numbers.number_or_dash(None) == "–" and numbers.number_or_dash(1265) == "1265"


def test_blank_skeleton_is_valid_and_copy_ids_are_free() -> None:
    case = library.parse_test_case(authoring.BLANK_TEST_CASE)
    assert case.id == "my_bias" and case.n_options == 7
    assert authoring.copy_id("anchoring", {"anchoring"}) == "anchoring_copy"
    assert (
        authoring.copy_id("anchoring", {"anchoring_copy", "anchoring_copy2"}) == "anchoring_copy3"
    )


# --------------------------------------------------------------------------- settings


def test_key_status_reports_names_never_values() -> None:
    env = {"OPENAI_API_KEY": "sk-secret-123456789", "MY_PROVIDER_API_KEY": "x" * 20, "HOME": "/"}
    status = settings.key_status(env)
    flat = json.dumps(status)
    assert "sk-secret" not in flat and "xxxx" not in flat
    by_name = {s["variable"]: s["present"] for s in status}
    assert by_name["OPENAI_API_KEY"] and by_name["MY_PROVIDER_API_KEY"]
    assert not by_name["ANTHROPIC_API_KEY"] and "HOME" not in by_name


def test_custom_models_are_added_replaced_and_removed() -> None:
    path = settings.add_custom_model("openai/llama3", "Llama", "http://127.0.0.1:8000/v1/")
    settings.add_custom_model(
        "openai/llama3", "Llama 3", "http://127.0.0.1:8001/v1", json_schema=True
    )
    settings.add_custom_model("openai/qwen", "Qwen", "https://example.org/v1")
    entries = tomllib.loads(path.read_text())["models"]
    assert [e["id"] for e in entries] == ["openai/llama3", "openai/qwen"]
    mine = {m.id: m for m in registry.load_models()}
    assert mine["openai/llama3"].api_base == "http://127.0.0.1:8001/v1"
    assert mine["openai/llama3"].json_schema and "random" in mine
    assert settings.remove_custom_model("openai/qwen")
    assert not settings.remove_custom_model("openai/qwen")


@pytest.mark.parametrize(
    ("model", "url", "message"),
    [
        ("openai/x", "ftp://host/v1", "not an http"),
        ("openai/x", "http://user:pw@host/v1", "must not hold"),
        ("openai/x", "http://host/v1?api_key=abc", "must not hold"),
        ("random", "http://host/v1", "not a usable model id"),
        ("local/mine", "http://host/v1", "not a usable model id"),
        ("has space", "http://host/v1", "not a usable model id"),
    ],
)
def test_custom_models_refuse_bad_input(model: str, url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings.add_custom_model(model, "x", url)
    assert not settings.user_models_path().exists()


# --------------------------------------------------------------------------- demo


def test_ensure_demo_loads_a_snapshot_once_and_only_into_an_empty_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source.db"
    make_results_db(source, instances=3, name="")
    snapshot = tmp_path / "snap.json.gz"
    with Store(source) as store:
        size = demo.write_snapshot(store, snapshot)
        expected = {t: len(rows) for t, rows in store.dump_tables().items()}
    assert size == snapshot.stat().st_size
    data = json.loads(gzip.decompress(snapshot.read_bytes()))
    assert data["runs"][0]["pid"] is None and data["runs"][0]["name"] == "demo"
    target = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DEMO", "1")
    assert demo.ensure_demo(target, snapshot)
    assert not demo.ensure_demo(target, snapshot)  # runs exist now: nothing more loaded
    with Store(target) as store:
        assert {t: len(r) for t, r in store.dump_tables().items()} == expected
    monkeypatch.setenv("COGBIAS_DEMO", "0")
    assert not demo.ensure_demo(tmp_path / "other.db", snapshot)


def test_a_malformed_snapshot_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'["not", "tables"]'))
    with pytest.raises(ValueError, match="not a cogbias snapshot"):
        demo.read_snapshot(bad)


def test_the_committed_demo_snapshot_is_small_real_and_loadable(tmp_path: Path) -> None:
    assert demo.SNAPSHOT.is_file(), "run scripts/make-demo"
    assert demo.SNAPSHOT.stat().st_size < 1_000_000
    data = demo.read_snapshot(demo.SNAPSHOT)
    assert len(data["runs"]) == 1 and data["decisions"]
    spec = json.loads(data["runs"][0]["spec"])
    assert {"random", "local/smollm2"} <= set(spec["models"]) and spec["generator"] == "examples"
    assert {d["test_case"] for d in data["decisions"]} == set(library.load_library(False))
    assert "llm_calls" not in data
    with Store(tmp_path / "d.db") as store:
        store.load_tables(data)
        assert store.score_aggregates()


def test_key_for_model_names_the_variable_or_none() -> None:
    assert keys.key_for_model("openai/gpt-4o") == "OPENAI_API_KEY"
    assert keys.key_for_model("deepinfra/meta-llama/x") == "DEEPINFRA_API_KEY"
    assert keys.key_for_model("random") is None
    assert keys.key_for_model("local/smollm2") is None
    assert keys.key_for_model("openai/mine", "http://127.0.0.1:8000/v1") is None
    assert keys.key_for_model("newco/model") == "NEWCO_API_KEY"


def test_a_score_that_rounds_to_zero_has_no_sign() -> None:
    from cogbias.views.numbers import signed

    assert [signed(v) for v in (-0.001, 0.0, -0.0, 0.004)] == ["0.00"] * 4
    assert (signed(0.16), signed(-0.5), signed(1.0)) == ("+0.16", "-0.50", "+1.00")
    assert signed(-0.0004, 3) == "0.000" and signed(-0.0006, 3) == "-0.001"
