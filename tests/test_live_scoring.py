"""A live pair (`cogbias pair`, Learn, Preview's Decide) is scored by option probabilities
where the model gives them, and says so; sampled answers stay one choice away, and a model
that takes a grammar is then held to "Option N"; answers that could not be read are counted,
explained and given a fix (issue 41, points 1-2). The local model is the scripted server
here (`COGBIAS_LOCAL_API_BASE`, as a worker shares its parent's); tests/test_live_local.py
asks the real one."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.cli.main import PAIR_BY_PROBABILITIES, main
from cogbias.llm import logprobs, settings
from cogbias.runs import decide, grammars
from cogbias.runs.scorers import default_for_models
from tests.fake_llm_server import FakeLLMServer, _last_user_text

ROOT = Path(__file__).resolve().parent.parent
TWO_OPTIONS = "I would choose Option 4: Very bad"  # what SmolLM2 wrote (issue 41)


def test_the_default_scoring_follows_the_models_profiles() -> None:
    assert default_for_models(["local/smollm2"], None, True) == "probabilities"
    assert default_for_models(["random", "local/smollm2"], None, True) == "probabilities"
    assert default_for_models(["random"], None, True) == "choice"  # writes no text
    assert default_for_models(["local/smollm2"], None, False) == "choice"  # nothing to letter
    claude = "anthropic/claude-haiku-4-5"  # no log-probabilities
    assert default_for_models(["local/smollm2", claude], None, True) == "choice"
    assert default_for_models(["hosted_vllm/m"], "http://127.0.0.1:9/v1", True) == "choice"
    assert default_for_models(["local/nope"], None, True) == "choice"  # asking it says why
    # a capable model that gives probabilities keeps the paper's reading (a sampled answer)
    assert default_for_models(["openai/gpt-4o-mini"], None, True) == "choice"
    assert default_for_models(["openai/fake"], "http://127.0.0.1:9/v1", True) == "choice"


def test_pair_on_the_local_model_prints_a_score_by_probabilities_and_says_so(
    local_server: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["pair", "framing_effect", "--scenario", "12", "--models", "local/smollm2"]
    assert main([*args, "--db", str(tmp_path / "p.db")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == PAIR_BY_PROBABILITIES
    assert out.count("option probabilities 1: 60%") == 2
    score = next(line for line in out.splitlines() if line.startswith("score: "))
    assert score != "score: None" and "error" not in score
    asked = local_server.requests
    assert len(asked) == 2 and all(r["top_logprobs"] == logprobs.TOP_LOGPROBS for r in asked)
    assert all(r["grammar"] == logprobs.label_grammar(7) for r in asked)


def test_sampled_answers_of_the_local_model_are_held_to_option_n_by_its_grammar(
    local_server: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["pair", "framing_effect", "--scenario", "12", "--models", "local/smollm2"]
    assert main([*args, "--scoring", "choice", "--db", str(tmp_path / "p.db")]) == 0
    out = capsys.readouterr().out
    assert PAIR_BY_PROBABILITIES not in out
    assert "score: None" not in out and "could not be read" not in out
    asked = local_server.requests
    assert len(asked) == 2  # no extraction call: "Option N" is read by its number
    for request in asked:
        assert request["grammar"] == grammars.decision_grammar(7)
        assert request["grammar"] == 'root ::= "Option " ("7" | "6" | "5" | "4" | "3" | "2" | "1")'
        assert _last_user_text(request).endswith(decide.OPTION_SUFFIX.strip())


def test_the_papers_reading_asks_the_local_model_freely(
    local_server: FakeLLMServer, tmp_path: Path
) -> None:
    """`--reading extraction` reads a free answer by an extraction call: the answer is not
    held (the extraction is, by its own grammar, as before)."""
    args = ["pair", "framing_effect", "--models", "local/smollm2", "--reading", "extraction"]
    assert main([*args, "--db", str(tmp_path / "p.db")]) == 0
    answers = [r for r in local_server.requests if "Select exactly one" in _last_user_text(r)]
    assert len(answers) == 2 and all("grammar" not in r for r in answers)
    assert all(_last_user_text(r).endswith(decide.LOCAL_DEC_SUFFIX.strip()) for r in answers)


def test_a_model_without_a_grammar_is_asked_as_before(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        args = ["pair", "framing_effect", "--models", "openai/fake", "--scoring", "choice"]
        args += ["--api-base", server.base_url, "--db", str(tmp_path / "p.db")]
        assert main(args) == 0
    assert server.requests and all("grammar" not in r for r in server.requests)
    assert not any(decide.OPTION_SUFFIX.strip() in _last_user_text(r) for r in server.requests)


def test_pair_says_how_many_answers_could_not_be_read_why_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeLLMServer(lambda request: TWO_OPTIONS) as server:
        args = ["pair", "framing_effect", "--scenario", "12,13", "--models", "openai/fake"]
        args += ["--scoring", "choice", "--api-base", server.base_url]
        assert main([*args, "--db", str(tmp_path / "p.db")]) == 0
    out = capsys.readouterr().out
    assert (
        "openai/fake: The answers to 4 of 4 halves could not be read: 4 named more than one "
        f"option (such as {TWO_OPTIONS!r})."
    ) in out
    assert "--scoring probabilities" in out and "--extractor MODEL" in out


def _learn() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/learn.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_learn_scores_by_the_models_default_until_the_reader_picks(app_db: Path) -> None:
    at = _learn()
    assert at.selectbox(key="learn_model").value == "local/smollm2"
    assert at.radio(key="learn_scoring").value == "probabilities"
    assert "Scored by option probabilities" in _captions(at)
    at.selectbox(key="learn_model").set_value("random").run()
    assert at.radio(key="learn_scoring").value == "choice"
    assert "Scored by option probabilities" not in _captions(at)
    at.selectbox(key="learn_model").set_value("local/smollm2").run()
    at.radio(key="learn_scoring").set_value("choice").run()  # the reader's pick stays
    at.selectbox(key="learn_model").set_value("random").run()
    at.selectbox(key="learn_model").set_value("local/smollm2").run()
    assert at.radio(key="learn_scoring").value == "choice"


def test_learn_counts_the_answers_it_could_not_read_and_offers_the_fix(app_db: Path) -> None:
    with FakeLLMServer(lambda request: TWO_OPTIONS) as server:
        settings.add_custom_model("openai/vague", "Vague", server.base_url)
        at = _learn()
        at.selectbox(key="learn_bias").set_value("framing_effect")
        at.selectbox(key="learn_model").set_value("openai/vague").run()
        at.radio(key="learn_scoring").set_value("choice").run()
        at.button(key="learn_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (warning,) = [w.value.replace("\\", "") for w in at.warning]
    assert warning.startswith("The answers to 2 of 2 halves could not be read: 2 named more")
    assert TWO_OPTIONS in warning and "Option probabilities" in warning


def test_preview_decides_the_local_model_by_probabilities_and_says_so(
    local_server: FakeLLMServer, app_db: Path
) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/preview.py").run()
    at.selectbox(key="pv_case").set_value("framing_effect").run()
    at.selectbox(key="pv_model").set_value("local/smollm2")
    at.button(key="pv_decide").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Scored by option probabilities" in _captions(at)
    assert len(at.get("progress")) == 14  # both halves' bars
    assert all(r["top_logprobs"] for r in local_server.requests)
