"""Study runs end to end: real `cogbias` processes, the random model, and a scripted
OpenAI-compatible server on 127.0.0.1 that checks what each turn was shown."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from dataset_helpers import MOHR_DIR
from fake_llm_server import FakeLLMServer, _last_user_text

from cogbias.runs import executor, study_plan, study_results
from cogbias.store import Store
from cogbias.views.charts_studies import column_text

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = MOHR_DIR


def cogbias(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def calls(db: Path, where: str = "1", params: tuple = ()) -> list[dict]:
    with Store(db) as store:
        return store.query(f"select * from study_calls where {where} order by rowid", params)


def pooled_d(control: list[float], treatment: list[float]) -> float:
    """Cohen's d with pooled SD, written out here independently of cogbias.studies.effects."""
    a, b = np.asarray(control, float), np.asarray(treatment, float)
    pooled = ((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2)
    return float((b.mean() - a.mean()) / np.sqrt(pooled))


# --------------------------------------------------------------------------- mohr8 on random


def test_mohr8_sweep_on_random_completes_offline_and_pivots_by_temperature(tmp_path):
    db = tmp_path / "s.db"
    done = cogbias(
        "run", "--study", "mohr8", "--models", "random", "--temperatures", "0.2,1.0",
        "--repeats", "20", "--db", db,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = calls(db)
    # 8 tests × 2 conditions × 2 temperatures × 4 variants × 20 repeats, each read at once
    assert len(rows) == 2560 and {r["status"] for r in rows} == {"ok"}
    assert {r["temperature"] for r in rows} == {0.2, 1.0}
    pivot = cogbias("results", "--study", "mohr8", "--by", "temperature", "--db", db)
    assert pivot.returncode == 0, pivot.stderr
    # the table's header: its row labels, then one column per temperature as written
    header = next(line for line in pivot.stdout.splitlines() if line.split()[:1] == ["test"])
    assert header.split()[-2:] == ["0.2", "1"]
    for test in ("anchoring", "endowment", "sunk_cost", "transaction_utility"):
        assert test in pivot.stdout
    # One cell recomputed from the stored answers: numbers as given, d capped to [0, 1].
    with Store(db) as store:
        run_id = study_results.study_runs(store, "mohr8")[0].id
        table = study_results.results(store, run_id)
    cell = [
        r for r in rows
        if (r["test"], r["temperature"], r["variant"]) == ("anchoring", 1.0, "0_normal")
    ]  # fmt: skip
    by = {
        c: [json.loads(r["value"]) for r in cell if r["condition"] == c]
        for c in ("control", "treatment")
    }
    expected = min(max(pooled_d(by["control"], by["treatment"]), 0.0), 1.0)
    got = table[
        (table.test == "anchoring") & (table.temperature == 1.0) & (table.variant == "0_normal")
    ]
    assert got["value"].item() == pytest.approx(expected) and got["n"].item() == 40
    # the thesis' tables and OLS work on a run of our own, as on published effect sizes
    thesis = cogbias(
        "effects", "--db", db, "--run", run_id, "--view", "thesis", "--by", "temperature"
    )
    assert thesis.returncode == 0, thesis.stderr
    assert thesis.stdout.split("\n")[0].split() == ["bias", "0.2", "1"]
    assert len(thesis.stdout.strip().splitlines()) == 1 + 8
    ols = cogbias("effects", "--db", db, "--run", run_id, "--view", "ols")
    assert ols.returncode == 0 and "n = 64" in ols.stderr, ols.stderr


def test_a_temperature_a_provider_refuses_is_left_out_with_a_note():
    study = study_plan.load_study("mohr8")
    spec = study_plan.resolve(
        study_plan.StudySpec("mohr8", ["anthropic/claude-3-5-sonnet-20240620", "random"]), study
    )
    plan = study_plan.plan(spec, study)
    claude = {u.temperature for u in plan.units if u.model.startswith("anthropic/")}
    assert claude == {0.2, 0.7, 1.0}
    assert {u.temperature for u in plan.units if u.model == "random"} == {0.2, 0.7, 1.0, 1.3, 1.8}
    assert any("1.3, 1.8 left out" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mitigations", "none,calm"], "unknown mitigation 'calm'"),
        (["--mitigations", "contrastive"], "test 'anchoring' has none"),
        (["--tests", "anchoring,priming"], "unknown test 'priming'"),
        (["--temperatures", "0.2,hot"], "'hot' is not a number"),
        (["--temperatures", "2.5"], "temperature 2.5 is outside 0..2"),
        (["--repeats", "99999"], "one run takes at most 2,000,000"),
        (["--max-attempts", "50"], "attempts must be between 1 and 20"),
    ],
)
def test_what_a_study_cannot_do_is_refused_by_name(tmp_path, args, message, cogbias_main):
    db = tmp_path / "s.db"  # in this process: the real one runs the studies below
    out = cogbias_main("run", "--study", "mohr8", "--models", "random", "--db", db, *args)
    assert out.returncode != 0 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_study_options_on_a_paired_run_are_refused(tmp_path):
    out = cogbias(
        "run", "--models", "random", "--mitigations", "awareness", "--db", tmp_path / "s.db"
    )
    assert out.returncode != 0 and "--mitigations only apply to studies" in out.stderr


# --------------------------------------------------------------------------- biasbuster


def admissions_responder(request: dict) -> str:
    """Scripted answers per turn kind: rewrites echo the prompt with a mark, decisions
    admit, say yes or pick b, the revision flips every earlier decision."""
    text = _last_user_text(request)
    if "[start of prompt]" in text:  # BiasBuster's self-help rewrite (§4.3)
        body = text.split("[start of prompt]\n", 1)[1].split("\n[end of prompt]", 1)[0]
        return "[start of revised prompt]\nREWRITTEN " + body
    if "Look at them side by side" in text:
        earlier = [m["content"] for m in request["messages"] if m["role"] == "assistant"]
        return "\n".join("reject" if a == "admit" else "admit" for a in earlier)
    if "Admit or reject" in text or "admit or reject" in text:
        return "admit"
    if "Reply yes or no" in text:
        return "yes"
    return "b) seems the best fit."


def test_biasbuster_mitigations_pivot_and_every_turn_sees_what_it_should(tmp_path):
    db = tmp_path / "s.db"
    with FakeLLMServer(admissions_responder) as server:
        done = cogbias(
            "run", "--study", "biasbuster", "--models", "openai/fake", "--api-base",
            server.base_url, "--mitigations", "none,awareness,selfhelp", "--repeats", "2",
            "--db", db,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        requests = list(server.requests)
    rows = calls(db)
    assert {r["status"] for r in rows} == {"ok"}
    study = study_plan.load_study("biasbuster")
    awareness = study.prompts["awareness"]
    # awareness: the note opens every first turn of that mitigation, and no other
    for r in rows:
        if r["turn"] == 0 and r["role"] != "rewrite":
            assert r["prompt"].startswith(awareness) == (r["mitigation"] == "awareness")
    # self-help: the decision is asked on the model's rewrite, the original kept beside it
    helped = [
        r
        for r in rows
        if r["mitigation"] == "selfhelp" and r["role"] == "decide" and r["test"] != "anchoring"
    ]
    assert helped and all(r["prompt"].startswith("REWRITTEN ") for r in helped)
    assert all(r["prompt"] == "REWRITTEN " + r["original"] for r in helped)
    # sequence: turn t is asked with all 2t earlier messages, the model's own answers included
    sequences = [r for r in requests if "Next applicant" in json.dumps(r["messages"])]
    lengths = sorted({len(r["messages"]) for r in sequences})
    assert lengths == [1, 3, 5, 7, 9, 11, 13]  # 6 turns, then the revision turn
    assert all(
        m["content"] == "admit"
        for r in sequences
        for m in r["messages"]
        if m["role"] == "assistant"
    )
    pivot = cogbias("results", "--study", "biasbuster", "--by", "mitigation", "--db", db)
    assert pivot.returncode == 0, pivot.stderr
    header = next(line for line in pivot.stdout.splitlines() if line.split()[:1] == ["test"])
    words = [column_text(m, "mitigation") for m in ("none", "awareness", "selfhelp")]
    assert " ".join(header.split()).endswith(" ".join(words))  # in the planned order
    with Store(db) as store:
        table = study_results.results(store, study_results.study_runs(store)[0].id)
        chats = study_results.conversations(store, table["run_id"][0])
    assert set(chats["test"]) == {"anchoring"}  # rewrite + decision pairs are not chats
    assert len(chats) == 2 * 6 * 6 * 3 + 2 * 6  # 2 repeats × 6 orders × 6 turns, 3 mitigations
    anchoring = table[table.test == "anchoring"].set_index("mitigation")
    assert anchoring.loc["none", "value"] == 0.0  # admitted everyone in every order
    assert anchoring.loc["selfhelp", "change_rate"] == 1.0  # the revision flipped them all
    framing = table[table.test == "framing"].set_index("mitigation")
    assert framing.loc["none", "value"] == 0.0 and framing.loc["none", "degenerate"]
    # the turns export as they were asked and answered, conversation by conversation
    out = tmp_path / "turns.csv"
    exported = cogbias("export", "--run", table["run_id"][0], "--db", db, "-o", out)
    assert exported.returncode == 0, exported.stderr
    with out.open(newline="") as handle:
        turns = list(csv.DictReader(handle))
    assert len(turns) == len(rows) and turns[0]["role"] in ("decide", "rewrite")
    assert [(t["conversation"], int(t["turn"])) for t in turns] == sorted(
        (r["conversation"], r["turn"]) for r in rows
    )
    revised = next(t for t in turns if t["role"] == "revise")
    assert json.loads(revised["value"]) == [False] * 6
    # `coded`, beside `value`: what the metric counts (an admission 1, a chosen option its
    # position), nothing for a revision or a rewrite
    assert revised["coded"] == "" and {t["coded"] for t in turns if t["role"] == "rewrite"} == {""}
    admitted = [t for t in turns if t["role"] == "decide" and t["value"] == "true"]
    assert admitted and {float(t["coded"]) for t in admitted} == {1.0}
    chosen = [t for t in turns if t["test"] in ("status_quo", "primacy") and t["role"] == "decide"]
    assert chosen and all(float(t["coded"]) == int(t["value"]) for t in chosen)
    status_quo = table[table.test == "status_quo"].set_index("mitigation")
    # always "b": the status quo (shown at each position once) is chosen 1 time in 4
    assert status_quo.loc["none", "value"] == pytest.approx(0.0)


def test_selfhelp_anchoring_is_scored_on_the_revised_decisions(tmp_path):
    """Table 3's self-help row: the anchoring distance of the decisions after revision."""
    import re

    def reviser(request: dict) -> str:
        text = _last_user_text(request)
        if "Admit or reject" in text:
            return "admit"  # every applicant admitted while deciding: distance 0
        # the revision: each applicant on their GPA alone, the same in every order
        shown = [m["content"] for m in request["messages"] if "Next applicant" in m["content"]]
        gpas = [float(re.search(r"GPA of ([0-9.]+)", t).group(1).rstrip(".")) for t in shown]
        return "\n".join("admit" if g >= 3.3 else "reject" for g in gpas)

    db = tmp_path / "s.db"
    with FakeLLMServer(reviser) as server:
        done = cogbias(
            "run", "--study", "biasbuster", "--models", "openai/fake", "--api-base",
            server.base_url, "--tests", "anchoring", "--mitigations", "none,selfhelp",
            "--repeats", "2", "--db", db,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    with Store(db) as store:
        table = study_results.results(store, study_results.study_runs(store)[0].id)
    cells = table.set_index("mitigation")
    assert cells.loc["none", "value"] == 0.0
    details = json.loads(cells.loc["selfhelp", "details"])
    assert details["distance_before_revision"] == 0.0  # the decisions themselves: all admit
    # after the revision each applicant keeps one decision in every order, so the distance
    # is the spread of the per-applicant rates around the overall one, computed here by hand
    revised: dict[str, list[int]] = {}
    for r in calls(db, "role = 'revise'"):
        order = json.loads(r["presented"])
        for position, value in enumerate(json.loads(r["value"])):
            revised.setdefault(f"{r['slot']}:{order[position]}", []).append(int(value))
    pooled = [v for values in revised.values() for v in values]
    overall = sum(pooled) / len(pooled)
    expected = sum(abs(sum(v) / len(v) - overall) for v in revised.values()) / len(revised)
    assert 0 < overall < 1 and expected > 0
    assert cells.loc["selfhelp", "value"] == pytest.approx(expected)
    assert cells.loc["selfhelp", "value"] != cells.loc["none", "value"]
    assert cells.loc["selfhelp", "change_rate"] == pytest.approx(1 - overall)
    # the six orders of one applicant set vary who comes before whom (Williams design): every
    # applicant is at every position once and follows every other applicant exactly once
    orders = {
        r["conversation"]: json.loads(r["presented"])
        for r in calls(db, "role = 'decide' and mitigation = 'none' and slot = 0")
    }
    assert len(orders) == 6
    assert all(sorted(o[i] for o in orders.values()) == list(range(6)) for i in range(6))
    follows = [(o[i], o[i + 1]) for o in orders.values() for i in range(5)]
    assert len(follows) == len(set(follows)) == 30


def test_unreadable_answers_are_asked_again_up_to_the_cap(tmp_path):
    db = tmp_path / "s.db"
    asked: dict[str, int] = {}

    def stubborn(request: dict) -> str:
        text = _last_user_text(request)
        asked[text] = asked.get(text, 0) + 1
        if "Africa" in text and "above or below 10%" in text:
            return "I cannot say."  # control of anchoring: never a number
        return "maybe" if asked[text] % 2 else "42"  # the rest: readable at the 2nd try

    with FakeLLMServer(stubborn) as server:
        done = cogbias(
            "run", "--study", "mohr8", "--tests", "anchoring,category_size", "--models",
            "openai/fake", "--api-base", server.base_url, "--temperatures", "0.7",
            "--variants", "0_normal", "--repeats", "3", "--max-attempts", "4",
            "--concurrency", "1", "--db", db,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "3 without a readable answer" in done.stderr
    rows = calls(db)
    control = [r for r in rows if (r["test"], r["condition"]) == ("anchoring", "control")]
    assert len(control) == 3 * 4 and {r["status"] for r in control} == {"unparseable"}
    others = [r for r in rows if r not in control]
    assert len(others) == 9 * 2  # 9 units, a failed and a readable attempt each
    assert sorted(r["status"] for r in others) == ["ok"] * 9 + ["unparseable"] * 9
    with Store(db) as store:
        table = study_results.results(store, study_results.study_runs(store)[0].id)
    anchoring = table[table.test == "anchoring"].iloc[0]
    assert anchoring["unreadable"] == 12 + 3  # control: 3 × 4 attempts; treatment: 3 × 1
    assert "no valid answers for condition 'control'" in anchoring["note"]


# --------------------------------------------------------------------------- kill and resume


def test_a_conversation_killed_midway_resumes_with_exactly_the_planned_turns(tmp_path):
    db = tmp_path / "s.db"
    with FakeLLMServer(admissions_responder, latency=0.2) as server:
        args = [
            "run", "--study", "biasbuster", "--tests", "anchoring", "--models", "openai/fake",
            "--api-base", server.base_url, "--mitigations", "none,selfhelp", "--repeats", "1",
            "--concurrency", "3", "--db", db,
        ]  # fmt: skip
        midway = False
        for stored in (5, 25, 45):  # kill -9 once this many turns are stored
            proc = subprocess.Popen([sys.executable, "-m", "cogbias", *map(str, args)], cwd=ROOT)
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                if db.exists() and len(calls(db)) >= stored:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            counts = Counter(r["conversation"] for r in calls(db))
            midway = midway or any(0 < n < 6 for n in counts.values())
        assert midway  # some conversation was killed between its turns
        partial = calls(db)
        with Store(db) as store:
            run_id = study_results.study_runs(store)[0].id
        final = cogbias("resume", run_id, "--db", db)
        assert final.returncode == 0, final.stderr
        requests = list(server.requests)
    rows = calls(db)
    # 6 orders × (6 turns without, 7 with the self-help revision)
    assert 0 < len(partial) < len(rows) == 6 * 6 + 6 * 7
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    by_conversation: dict[str, list[dict]] = {}
    for r in rows:
        by_conversation.setdefault(r["conversation"], []).append(r)
    study = study_plan.load_study("biasbuster")
    with Store(db) as store:
        spec = study_plan.StudySpec.from_stored(store.run(run_id)["spec"])
    planned_conversations: set[tuple[str, ...]] = set()
    for unit in study_plan.plan(spec, study).units:
        turns = sorted(by_conversation[unit.conversation(run_id)], key=lambda r: r["turn"])
        script = study_plan.compose(study, spec, unit)
        expected = script.turns + ([script.revise] if script.revise else [])
        assert [r["turn"] for r in turns] == list(range(len(expected)))
        assert [r["prompt"] for r in turns] == expected
        planned_conversations.add(tuple(expected))
    # every request, before and after the kills, carried its conversation so far: the planned
    # user turns in order, each answered by the model's own stored answer
    for request in requests:
        said = [m["content"] for m in request["messages"] if m["role"] == "user"]
        answers = [m["content"] for m in request["messages"] if m["role"] == "assistant"]
        assert len(answers) == len(said) - 1 and set(answers) <= {"admit"}
        assert any(list(p[: len(said)]) == said for p in planned_conversations)
    with Store(db) as store:
        assert store.run(run_id)["status"] == "done"


# --------------------------------------------------------------------------- thesis prompts


def test_the_thesis_experiments_import_and_run_offline_on_random(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(FIXTURE, folder)
    db = tmp_path / "s.db"
    imported = cogbias("import", "mohr2025", folder, "--db", db)
    assert imported.returncode == 0, imported.stderr
    done = cogbias(
        "run", "--study", "mohr2025", "--models", "random", "--repeats", "10", "--db", db
    )
    assert done.returncode == 0, done.stderr
    rows = calls(db)
    assert {r["test"] for r in rows} == {"anchoring__0_normal", "framing_effect__0_normal"}
    assert len(rows) == 2 * 2 * 10 and {r["status"] for r in rows} == {"ok"}
    shown = cogbias("results", "--study", "mohr2025", "--db", db)
    assert shown.returncode == 0 and "anchoring__0_normal" in shown.stdout
    framing = [r for r in rows if r["test"] == "framing_effect__0_normal"]
    assert {r["response"] for r in framing} <= {"yes", "no"}


# --------------------------------------------------------------------------- the local model


@pytest.mark.local_model
def test_biasbuster_in_miniature_on_the_local_model(tmp_path):
    pytest.importorskip("xllamacpp")
    study = study_plan.load_study("biasbuster")
    asked = study_plan.StudySpec(
        "biasbuster", ["local/smollm2"], tests=["framing", "anchoring"],
        mitigations=["none", "selfhelp"], repeats=1,
    )  # fmt: skip
    spec = study_plan.resolve(asked, study)
    with Store(tmp_path / "s.db") as store:
        outcome = executor.execute(study_plan.plan(spec, study), store, concurrency=4)
        assert outcome.status == "done", outcome.error
        rows = store.query("select * from study_calls")
        table = study_results.results(store, outcome.id)
    decisions = [r for r in rows if r["role"] == "decide"]
    # the grammar keeps the small model to the answer format
    assert {r["status"] for r in decisions} == {"ok"}
    assert {r["response"] for r in decisions} <= {"admit", "reject"}
    conversations = {r["conversation"] for r in rows if r["test"] == "anchoring"}
    assert len(conversations) == 12  # 6 orders × 2 mitigations
    assert sum(r["test"] == "anchoring" for r in rows) == 6 * 6 + 6 * 7
    rewrites = [r for r in rows if r["role"] == "rewrite"]
    assert len(rewrites) == 2 and all(r["response"] for r in rewrites)
    assert set(table["mitigation"]) == {"none", "selfhelp"}
    assert table[table.test == "anchoring"]["value"].notna().all()


def test_an_empty_answer_goes_back_into_the_conversation_as_a_visible_mark(tmp_path):
    def silent_third(request: dict) -> str:
        earlier = [m for m in request["messages"] if m["role"] == "assistant"]
        return "" if len(earlier) == 2 else "admit"

    db = tmp_path / "s.db"
    with FakeLLMServer(silent_third) as server:
        done = cogbias(
            "run", "--study", "biasbuster", "--tests", "anchoring", "--models", "openai/fake",
            "--api-base", server.base_url, "--repeats", "1", "--db", db,
        )  # fmt: skip
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr
    later = [r for r in requests if len(r["messages"]) >= 7]
    assert later and all(r["messages"][5]["content"] == "(no answer)" for r in later)
    third = [r for r in calls(db) if r["turn"] == 2]
    assert len(third) == 6 and {r["status"] for r in third} == {"unparseable"}
