"""Runs score by option probabilities where their models give them, say so before they
start, and store what they asked; every free answer of the local model is held to a grammar;
answers that could not be read are counted with their reasons and the fix at the end of a
run, in `cogbias runs`, in Explore and in reports (issue 41). The local model is the scripted
server here (`COGBIAS_LOCAL_API_BASE`); bench/local_readable.py asks the real one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cogbias.cli.main import main
from cogbias.core.templates import LETTERED, QUESTION, Filled
from cogbias.llm import logprobs
from cogbias.llm.profiles import resolve
from cogbias.runs import decide, executor, grammars, kinds, paired_plan, study_answers
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.studies.study_catalog import get_study
from cogbias.views import charts_explore, explore, report_methods, unread_answers
from tests.fake_llm_server import FakeLLMServer

LOCAL = "local/smollm2"
TWO_OPTIONS = "I would choose Option 4: Very bad"  # what SmolLM2 wrote (issue 41)
NOTE = "scored by option probabilities, which local/smollm2 gives; choose --scoring choice"


def _spec(db: str, run_id: str) -> dict[str, Any]:
    with Store(db) as store:
        return json.loads(store.run(run_id)["spec"])


def _run_id(err: str) -> str:
    found = re.search(r"run (run-[0-9a-f]{12})", err)
    assert found is not None, err
    return found[1]


def test_a_run_of_the_local_model_scores_by_probabilities_says_so_and_stores_it(
    local_server: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.db")
    argv = ["run", "pairs", "--models", LOCAL, "--biases", "framing_effect", "--db", db]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert NOTE in err.split("\n[")[0]  # said with the plan, before the first pair
    run_id = _run_id(err)
    assert _spec(db, run_id)["scoring"] == "probabilities"
    named = paired_plan.RunSpec(models=[LOCAL], biases=["framing_effect"], scoring="probabilities")
    assert paired_plan.plan(named).spec.run_id == run_id  # the id of what was asked
    asked = list(local_server.requests)
    assert asked and all(r["top_logprobs"] == logprobs.TOP_LOGPROBS for r in asked)
    # the paper's reading is one flag away: a run of its own, sampled, held to "Option N"
    assert main([*argv, "--scoring", "choice"]) == 0
    err = capsys.readouterr().err
    assert NOTE not in err and _run_id(err) != run_id
    assert "scoring" not in _spec(db, _run_id(err))
    sampled = local_server.requests[len(asked) :]
    assert sampled and all(r["grammar"] == grammars.decision_grammar(7) for r in sampled)


def test_what_asks_for_sampled_answers_keeps_them(tmp_path: Path) -> None:
    def chosen(**fields: Any) -> str:
        spec = paired_plan.RunSpec(biases=["framing_effect"], scoring=None, **fields)
        with Store(tmp_path / "p.db") as store:
            planned = paired_plan.plan(spec, store)
        assert planned.spec.scoring == planned.chosen_scoring
        return str(planned.spec.scoring)

    assert chosen(models=[LOCAL]) == "probabilities"
    assert chosen(models=["random", LOCAL]) == "probabilities"  # random fits both
    assert chosen(models=["random"]) == "choice"  # its spread is the baseline's
    assert chosen(models=[LOCAL, "anthropic/claude-haiku-4-5"]) == "choice"  # no logprobs
    assert chosen(models=[LOCAL], prompting="zs_cot") == "choice"  # asks for more than a letter
    assert chosen(models=[LOCAL], reading="extraction") == "choice"  # reads a free answer
    assert chosen(models=[LOCAL], extractor=LOCAL) == "choice"
    # an all-random run is the run it always was: the same id as before the models chose
    spec = paired_plan.RunSpec(models=["random"], biases=["framing_effect"])
    unnamed = paired_plan.RunSpec(models=["random"], biases=["framing_effect"], scoring=None)
    assert paired_plan.plan(unnamed).spec.run_id == paired_plan.plan(spec).spec.run_id


def test_a_batch_and_a_stored_run_keep_sampled_answers(tmp_path: Path, capsys: Any) -> None:
    db = str(tmp_path / "b.db")
    argv = ["run", "pairs", "--models", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]
    argv += ["--biases", "framing_effect", "--db", db, "--plan-only"]
    assert main([*argv, "--batch"]) == 0  # a batch holds no log-probabilities
    batch_id = capsys.readouterr().out.strip()
    assert "scoring" not in _spec(db, batch_id)
    local = ["run", "pairs", "--models", LOCAL, "--biases", "framing_effect", "--db", db]
    assert main([*local, "--plan-only"]) == 0  # not a batch: the model's choice
    assert _spec(db, capsys.readouterr().out.strip())["scoring"] == "probabilities"
    # a run stored before the models chose names no scoring: it resumes as it was asked
    old = paired_plan.RunSpec(models=[LOCAL], biases=["framing_effect"], generator="examples")
    with Store(db) as store:
        run_id = executor.create(paired_plan.plan(old, store), store)
        replanned = kinds.replan_run(store, kinds.stored(store, run_id))
    assert replanned.spec.scoring == "choice" and replanned.spec.run_id == run_id


def test_the_run_page_shows_what_the_models_choose_until_the_reader_picks(app_db: Path) -> None:
    from tests.test_app_pages import open_page, texts

    at = open_page("run")
    assert at.radio(key="run_scoring").value == "choice"  # the random baseline's
    at.multiselect(key="run_biases").set_value(["framing_effect"])
    at.multiselect(key="run_models").set_value([LOCAL]).run()
    assert at.radio(key="run_scoring").value == "probabilities"
    captions = "\n".join(c.value for c in at.caption)
    assert "Scored by option probabilities, which local/smollm2 gives" in captions
    assert " 0 to extract the chosen option" in texts(at)
    at.radio(key="run_scoring").set_value("choice").run()  # the reader's pick stays
    at.multiselect(key="run_models").set_value(["random"]).run()
    at.multiselect(key="run_models").set_value([LOCAL]).run()
    assert at.radio(key="run_scoring").value == "choice"


def test_unreadable_pairs_are_counted_with_their_reason_and_the_fix_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "u.db")
    with FakeLLMServer(lambda request: TWO_OPTIONS) as server:
        argv = ["run", "pairs", "--models", "openai/vague", "--api-base", server.base_url]
        argv += ["--biases", "framing_effect", "--scenarios", "3", "--scoring", "choice"]
        assert main([*argv, "--db", db]) == 0
    said = (
        "3 of 3 pairs could not be read: the model named more than one option. To read them: "
        "score by option probabilities (--scoring probabilities), which need no answer to be "
        "read, use a stronger model or have a stronger model read the unclear answers "
        "(--extractor MODEL)."
    )
    err = capsys.readouterr().err
    assert f"note: {said}" in err
    run_id = _run_id(err)
    assert main(["runs", "--db", db]) == 0
    assert f"{run_id}: {said}" in capsys.readouterr().out
    with Store(db) as store:
        (counts,) = [
            s for s in report_methods.run_methods(store, run_id) if "Failures" in s.heading
        ]
        table = explore.with_unread(_summary(store, run_id), store.unreadable_errors(run_id=run_id))
        behind = kinds.records(store)
    assert any(
        "3 of 3 pairs could not be read" in p and "stronger model" in p for p in counts.paragraphs
    )
    assert "(--scoring" not in " ".join(counts.paragraphs)  # a report names no flag
    line = explore.unread_line(table, "framing_effect", "openai/vague", behind)
    assert line.startswith("3 of 3 pairs could not be read: the model named more than one option;")
    assert "score by option probabilities" in line
    frame = charts_explore.heatmap_frame(table)
    assert list(frame[explore.UNREAD]) == [line.split(";")[0]]


def _summary(store: Store, run_id: str) -> Any:
    from cogbias.studies import cells

    return cells.cognitive_bias_summary(store, run_id=run_id)


def test_the_reasons_read_as_a_teacher_reads_them() -> None:
    errors = [
        "control: no option could be extracted from the answer: the answer names several "
        "options (Option 4, Option 7)",
        "treatment: no option could be extracted from the answer: the answer names no option",
        "control: the log-probabilities are no distribution over the options: a position lists "
        "no token",
        "control: something no rule knows",
    ]
    assert [unread_answers.reason_of(e) for e in errors] == [
        "named more than one option",
        "named no option",
        "gave no usable option probabilities",
        unread_answers.UNKNOWN_REASON,
    ]
    said = unread_answers.count_sentence(errors[:2] * 2, 20)
    assert said == (
        "4 of 20 pairs could not be read: the model named more than one option (2), named no "
        "option (2)"
    )
    assert unread_answers.count_sentence([], 20) is None
    # scored by probabilities already: only a stronger model is left to try
    assert unread_answers.fix_sentence([LOCAL], None, "probabilities") == "use a stronger model"


def test_a_study_holds_the_local_model_to_each_format_and_its_bounds() -> None:
    study = get_study("mohr8")
    anchoring = study.tests["anchoring"]
    rule = study_answers.answer_grammar(anchoring, "decision")
    assert rule == grammars.grammar(grammars.number_within(0, 100))
    from cogbias.runs.study_plan import plan, resolve

    spec = StudySpec(study="mohr8", models=[LOCAL, "random"], tests=["anchoring"])
    notes = plan(resolve(spec, study), study).notes
    assert notes == [
        f"note: {LOCAL} answers under a grammar admitting only a number within the test's bounds"
    ]


def test_an_unbounded_number_is_bounded_in_length() -> None:
    from tests.test_class_runs import _regex

    number = _regex(grammars.NUMBER)
    assert number.fullmatch("123456789012345") and number.fullmatch("-0.1234")
    assert not number.fullmatch("1234567890123456") and not number.fullmatch("1.23456")


@pytest.mark.parametrize("layout", [LETTERED, QUESTION])
def test_a_study_layout_of_its_own_is_held_to_an_option_text(layout: str) -> None:
    filled = Filled("", "Is Linda a bank teller?", ('Yes, "surely"', "No"), layout)
    ask = decide.PairAsk(prompting="baseline")
    request = decide._decision_request(filled, [1, 0], LOCAL, ask, "", resolve(LOCAL))
    assert request.grammar == 'root ::= ("No" | "Yes, \\"surely\\"")'
    assert decide.OPTION_SUFFIX.strip() not in request.messages[-1][1]
