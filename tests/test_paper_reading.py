"""The Malberg paper's reading as a named choice (`--reading extraction`): every half asks
the extraction call and its first "Option N" is the choice, unchecked; the default reading
(cogbias reads the answer first) keeps every existing run's id."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLMServer, _last_user_text

from cogbias.cli.main import main
from cogbias.core.reading import READ_ANSWER, READ_EXTRACTION, first_option
from cogbias.runs import executor, paired_plan
from cogbias.runs.decide import EXTRACT_PROMPT
from cogbias.store import Store

BIASES = ["anchoring", "framing_effect", "loss_aversion"]


@pytest.mark.parametrize(
    ("reply", "n", "expected"),
    [
        ("Option 2", 4, 1),
        ("option 3.", 4, 2),
        ("Option 1 or Option 2", 4, 0),  # the first one, as the paper's expression finds it
        ("I think Option 4: Very good", 4, 3),
        ("No option selected", 4, None),
        ("Option 5", 4, None),  # no such option
        ("Option 0", 4, None),
        ("OPTION 2", 4, None),  # the paper reads "Option" or "option" only
        ("Option2", 4, None),
        ("Option 12345678901", 4, None),
    ],
)
def test_the_paper_reads_the_first_option_n_of_the_extraction_reply(reply, n, expected):
    assert first_option(reply, n) == expected


def _is_extraction(request: dict[str, Any]) -> bool:
    return _last_user_text(request).startswith(EXTRACT_PROMPT[:40])


def responder(request: dict[str, Any]) -> str:
    """Every decision answers Option 2 plainly (the reader needs no extraction), each in its
    own words; every extraction says Option 1, so the two readings choose differently."""
    if _is_extraction(request):
        return "Option 1"
    note = hashlib.sha256(_last_user_text(request).encode()).hexdigest()[:8]
    return f"I choose Option 2. (note {note})"


def _run(server: FakeLLMServer, db: Path, reading: str) -> tuple[str, list[dict[str, Any]]]:
    spec = paired_plan.RunSpec(
        models=["random", "openai/fake"], biases=BIASES, scenarios=2, generator="examples",
        temperature=0.7, api_base=server.base_url, reading=reading,
    )  # fmt: skip
    with Store(db) as store:
        plan = paired_plan.plan(spec, store)
        outcome = executor.execute(plan, store, concurrency=4)
        assert outcome.status == "done", outcome
        rows = store.query("select * from decisions where run_id = ?", [plan.spec.run_id])
    return plan.spec.run_id, rows


def test_a_run_reading_by_extraction_asks_the_extraction_for_every_half(tmp_path: Path) -> None:
    with FakeLLMServer(responder) as server:
        default_id, default_rows = _run(server, tmp_path / "a.db", READ_ANSWER)
        assert not [r for r in server.requests if _is_extraction(r)]  # read from the answers
        server.reset_counts()
        paper_id, paper_rows = _run(server, tmp_path / "b.db", READ_EXTRACTION)
        extractions = [r for r in server.requests if _is_extraction(r)]
    fake = [r for r in paper_rows if r["model"] == "openai/fake"]
    assert len(fake) == len(BIASES) * 2 and {r["status"] for r in paper_rows} == {"ok"}
    # one extraction per half of every pair the language model decided; the random baseline
    # answers with an option already and is not extracted
    assert len(extractions) == 2 * len(fake)
    assert {r["temperature"] for r in extractions} == {0.7}  # the decision's, as the paper's
    for row in fake:
        order = json.loads(row["control_order"])
        for half in ("control", "treatment"):
            assert row[f"{half}_choice"] == order[0]  # "Option 1" as presented, unchecked
            assert row[f"{half}_extraction"] == "Option 1 (extracted by openai/fake)"
    for row in (r for r in default_rows if r["model"] == "openai/fake"):
        order = json.loads(row["control_order"])
        assert row["control_choice"] == row["treatment_choice"] == order[1]  # the answer's
    assert paper_id != default_id


def test_the_reading_is_in_the_spec_only_when_it_is_the_paper_s() -> None:
    base = dict(models=["random"], biases=["anchoring"], generator="examples")
    default = paired_plan.RunSpec(**base)  # type: ignore[arg-type]
    assert "reading" not in default.canonical()
    assert paired_plan.RunSpec(**base, reading=READ_ANSWER).run_id == default.run_id  # type: ignore[arg-type]
    paper = paired_plan.RunSpec(**base, reading=READ_EXTRACTION)  # type: ignore[arg-type]
    assert paper.canonical()["reading"] == READ_EXTRACTION and paper.run_id != default.run_id
    # a stored spec with the reading reads back as the same run
    assert paired_plan.RunSpec.from_stored(json.dumps(paper.canonical())).run_id == paper.run_id


def test_the_cli_offers_the_paper_s_reading(tmp_path: Path, capsys) -> None:
    db = tmp_path / "c.db"
    with FakeLLMServer(responder) as server:
        common = ["--models", "openai/fake", "--api-base", server.base_url, "--db", str(db)]
        assert main(["run", "pairs", "--biases", "anchoring", "--reading", "extraction",
                     "--extractor", "openai/reader", *common]) == 0  # fmt: skip
        assert "every answer read by an extraction call to openai/reader" in capsys.readouterr().err
        extractions = [r for r in server.requests if _is_extraction(r)]
        assert len(extractions) == 2 and {r["model"] for r in extractions} == {"reader"}
        server.reset_counts()
        assert main(["pair", "anchoring", "--reading", "extraction", *common]) == 0
        shown = capsys.readouterr().out
        assert len([r for r in server.requests if _is_extraction(r)]) == 2
    with Store(db) as store:
        (run,) = store.runs()
    assert json.loads(run["spec"])["reading"] == "extraction"
    # both halves are read by the extraction, whatever the answer said
    for half in ("control", "treatment"):
        assert f"{half}: extraction 'Option 1 (extracted by openai/fake)'" in shown, shown


def test_the_paper_s_reading_needs_a_sampled_answer(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "d.db")
    argv = ["--reading", "extraction", "--scoring", "probabilities", "--models", "local/smollm2"]
    assert main(["run", "pairs", "--biases", "anchoring", *argv, "--db", db]) == 2
    assert "--reading extraction reads a sampled answer" in capsys.readouterr().err
    assert main(["pair", "anchoring", *argv, "--db", db]) == 2
    assert "--scoring choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # a study reads its own way: not its flag
        main(["run", "study", "mohr8", "--models", "random", "--reading", "extraction"])
    assert refused.value.code == 2
