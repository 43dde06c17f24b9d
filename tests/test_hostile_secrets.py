"""Issue 29, points 1 and 6: a key a provider echoes into a study's self-help rewrite reaches
no stored turn, cache entry or turn export; and redaction never corrupts what it redacts (a
short secret in the environment once turned cached log-probability JSON into invalid JSON).
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_llm_server import FakeLLMServer, _last_user_text, default_responder

from cogbias.core.records import Turn
from cogbias.core.redact import redactor, secret_values
from cogbias.core.run_record import Run
from cogbias.runs import deletion, executor, paired_plan
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store, migrations
from cogbias.views import export
from tests.study_helpers import study_run

KEY = "sk-probe-9Fh3Ka7Qz2Lm5Xw8Rt4"
# what a provider tricked into revealing the key writes into its rewrite (the probe's forms)
FORMS = {
    "plain": KEY,
    "reversed": KEY[::-1],
    "upper": KEY.upper(),
    "base64": base64.b64encode(f"the key is {KEY}".encode()).decode(),
    "split by a newline": f"{KEY[:11]}\n{KEY[11:]}",
    "split by CR LF": f"{KEY[:7]}\r\n{KEY[7:]}",
}


# any 8 characters in a row of the key's random part, as they are, reversed or upper-cased:
# half a key split by a newline is a leak too
RANDOM = KEY.removeprefix("sk-probe-")
PIECES = {p[i : i + 8] for p in (RANDOM, RANDOM[::-1], RANDOM.upper()) for i in range(len(p) - 7)}


def leaks(data: str | bytes) -> list[str]:
    """Which forms of the key `data` holds, whole or in part, as they are or escaped inside
    JSON."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    found = [n for n, form in FORMS.items() if form in text or json.dumps(form)[1:-1] in text]
    return found + sorted(piece for piece in PIECES if piece in text)


def echoing_rewrites(form: str):
    """A model whose self-help rewrite carries the key in `form`, and which then decides."""

    def answer(request: dict) -> str:
        text = _last_user_text(request)
        if "[start of prompt]" in text:  # BiasBuster's self-help rewrite (§4.3)
            body = text.split("[start of prompt]", 1)[1].split("[end of prompt]", 1)[0]
            return f"[start of revised prompt]\nMy key: {form}\n{body.strip()}"
        return f"admit (again, my key: {form})"

    return answer


def _study_rows(db: Path) -> dict[str, list[dict]]:
    with Store(db) as store:
        return {
            "study_calls": store.query("select * from study_calls"),
            "llm_calls": store.query("select * from llm_calls"),
            "runs": store.query("select * from runs"),
        }


@pytest.mark.parametrize("name", list(FORMS))
def test_a_self_help_rewrite_echoing_the_key_reaches_no_turn_cache_or_export(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "s.db"
    with FakeLLMServer(echoing_rewrites(FORMS[name])) as server:
        spec = StudySpec("biasbuster", ["openai/echo"], tests=["framing"],
                         mitigations=["selfhelp"], repeats=1, api_base=server.base_url)  # fmt: skip
        run_id = study_run(db, spec)
        rewrites = [r for r in server.requests if "[start of prompt]" in _last_user_text(r)]
        decisions = [r for r in server.requests if r not in rewrites]
        assert rewrites and decisions  # each decision was asked on its rewritten prompt
        # which was redacted before it became that prompt (as it is stored, as a resume asks)
        assert leaks(json.dumps(decisions)) == [] and "***" in json.dumps(decisions)
    stored = _study_rows(db)
    turns = stored["study_calls"]
    assert {t["role"] for t in turns} == {"rewrite", "decide"}
    rewrite = next(t for t in turns if t["role"] == "rewrite")
    decide = next(t for t in turns if t["role"] == "decide")
    # the rewrite was read and became the next prompt, key redacted in both and in the value
    assert json.loads(rewrite["value"]) == decide["prompt"]
    assert "My key: " in decide["prompt"] and "***" in decide["prompt"]
    assert "***" in rewrite["response"]
    for table, rows in stored.items():
        assert leaks(json.dumps(rows, ensure_ascii=False)) == [], table
    for path in tmp_path.glob("s.db*"):  # the file and its WAL
        assert leaks(path.read_bytes()) == [], path
    with Store(db) as store:
        for fmt in ("csv", "jsonl", "parquet"):
            out = tmp_path / f"turns.{fmt}"
            assert export.export(store, out, run_id=run_id) == len(turns)
            data = (
                out.read_bytes() if fmt != "parquet" else json.dumps(pq.read_table(out).to_pylist())
            )
            assert leaks(data) == [], fmt
            assert "***" in (data if isinstance(data, str) else data.decode()), fmt


def test_the_disguised_forms_are_caught_in_every_text_the_redactor_guards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    clean = redactor()
    for name, form in FORMS.items():
        assert leaks(clean(f"before {form} after") or "") == [], name
    # inside JSON (a gap fill, a cached request, an instance's insertions) the escaped forms too
    from cogbias.core.redact import redact_json

    for name, form in FORMS.items():
        text = json.dumps({"fill": f"a {form}", "n": 12}, ensure_ascii=True)
        cleaned = redact_json(text, clean) or ""
        assert leaks(cleaned) == [], name
        assert json.loads(cleaned)["n"] == 12


# --------------------------------------------------------------------------- paired runs


def echoing_fills(request: dict) -> str:
    """Gap fills and answers that carry the key split by a newline (JSON escapes it)."""
    split = FORMS["split by a newline"]
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"].get("properties", {})
        return json.dumps({key: f"fill {split} \u200b{KEY[::-1]}" for key in keys})
    return f"{default_responder(request)} (my key:\n{split})"


def test_a_paired_run_whose_fills_echo_the_key_split_stores_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "p.db"
    with FakeLLMServer(echoing_fills) as server, Store(db) as store:
        spec = paired_plan.RunSpec(["openai/echo"], biases=["anchoring"], generator="openai/echo",
                                   api_base=server.base_url, instances=2)  # fmt: skip
        run = executor.execute(paired_plan.plan(spec, store), store)
        assert run.status == "done", run
        rows = {
            table: store.query(f"select * from {table}")
            for table in ("instances", "decisions", "llm_calls")
        }
    for table, stored in rows.items():
        assert stored, table
        assert leaks(json.dumps(stored, ensure_ascii=False)) == [], table
    for row in rows["instances"]:  # the JSON columns stay JSON
        for column in ("control", "treatment", "insertions", "values_json"):
            json.loads(row[column])
    assert any("fill ***" in r["insertions"] for r in rows["instances"])
    for path in tmp_path.glob("p.db*"):
        assert leaks(path.read_bytes()) == [], path


# --------------------------------------------------------------------------- migration


def test_the_migration_scrubs_study_turns_stored_by_an_older_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "old.db"
    with FakeLLMServer(echoing_rewrites(FORMS["split by a newline"])) as server:
        spec = StudySpec("biasbuster", ["openai/echo"], tests=["framing"],
                         mitigations=["selfhelp"], repeats=1, api_base=server.base_url)  # fmt: skip
        run_id = study_run(db, spec)
    # as an older version stored them: the key (split by a newline, upper-cased, reversed) in
    # the prompt, the value, the response, the error, and escaped in the cached request
    echoed = f"My key: {FORMS['split by a newline']} and {KEY.upper()} and {KEY[::-1]}"
    before = 9  # the version before migration 10
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "update study_calls set prompt = ?, original = ?, response = ?, value = ?, error = ?",
            (echoed, echoed, echoed, json.dumps(echoed), f"HTTP 401: bad key {KEY}"),
        )
        conn.execute(
            "update llm_calls set request = ?, response = ?",
            (json.dumps({"messages": [{"content": echoed}], "n": 0.5}), echoed),
        )
        conn.execute("update meta set value = ? where key = 'schema_version'", (str(before),))
    conn.close()
    assert leaks(db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("old.db-*")))
    with Store(db) as store:
        assert store.schema_version == migrations.SCHEMA_VERSION
        turns = store.turns(run_id)
        calls = store.query("select request, response from llm_calls")
        out = tmp_path / "turns.jsonl"
        export.export(store, out, run_id=run_id)
    assert turns and calls
    for turn in turns:
        assert turn.prompt == turn.original == turn.response == "My key: *** and *** and ***"
        assert json.loads(turn.value or "") == turn.prompt
        assert turn.error == "HTTP 401: bad key ***"
    for call in calls:
        assert json.loads(call["request"]) == {"messages": [{"content": turns[0].prompt}], "n": 0.5}
    assert leaks(json.dumps([t.to_row() for t in turns]) + json.dumps(calls)) == []
    assert leaks(out.read_bytes()) == []


def test_the_migration_without_the_key_in_the_environment_scrubs_what_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened by a shell that has no key: the key-shaped forms still go (plain, upper case,
    reversed); other disguises need the key (docs/runs.md)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "old.db"
    with Store(db) as store:
        store.save_study_calls([Turn(id="t1", run_id="r", conversation="c", turn=0,
                                     role="rewrite", test="framing")])  # fmt: skip
    echoed = f"plain {KEY} upper {KEY.upper()} reversed {KEY[::-1]}"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("update study_calls set response = ?, value = ?", (echoed, json.dumps(echoed)))
        before = 9  # the version before migration 10
        conn.execute("update meta set value = ? where key = 'schema_version'", (str(before),))
    conn.close()
    with Store(db) as store:
        [turn] = store.query("select response, value from study_calls")
    expected = "plain *** upper *** reversed ***"
    assert turn["response"] == expected and json.loads(turn["value"]) == expected


# --------------------------------------------------------------------------- point 6

# the password of a database, digits only: it turns up inside the log-probabilities' numbers
PASSWORD = "12345678"
LISTED = {"A": -0.1234567891, "B": -2.4123456789}


def logprob_answers(request: dict) -> object:
    """Log-probabilities whose digits contain PASSWORD; the gap fills as the default server's."""
    if not request.get("logprobs"):
        return default_responder(request)
    top = [{"token": t, "logprob": lp} for t, lp in LISTED.items()]
    content = [{"token": "A", "logprob": LISTED["A"], "top_logprobs": top}]
    return {"content": "A", "logprobs": {"content": content}}


def _probability_run(store: Store, base_url: str) -> Run:
    spec = paired_plan.RunSpec(["openai/fake"], biases=["framing_effect"], generator="openai/fake",
                               api_base=base_url, scoring="probabilities", instances=1)  # fmt: skip
    return executor.execute(paired_plan.plan(spec, store), store)


def _logprob_entries(store: Store) -> list[str]:
    return [
        r["response"]
        for r in store.query("select request, response from llm_calls")
        if '"top_logprobs":' in r["request"]
    ]


def test_a_short_digit_secret_leaves_cached_log_probabilities_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_PASSWORD", PASSWORD)
    with FakeLLMServer(logprob_answers) as server, Store(tmp_path / "p.db") as store:
        first = _probability_run(store, server.base_url)
        assert first.status == "done" and first.failed == 0, first
        entries = _logprob_entries(store)
        assert len(entries) == 2  # control and treatment
        for entry in entries:
            assert [lp for _, lp in json.loads(entry)["positions"][0]] == list(LISTED.values())
        # the same run again reads every answer from the cache, and reads them right
        server.reset_counts()
        deletion.apply(store, deletion.plan_run(store, first.id))
        again = _probability_run(store, server.base_url)
        assert again.status == "done" and again.failed == 0 and server.calls == 0, again
        [pair] = store.query("select control_distribution from decisions")
    p = sorted(json.loads(pair["control_distribution"])["p"], reverse=True)
    expected = [math.exp(lp) for lp in LISTED.values()]
    assert p[:2] == pytest.approx([x / sum(expected) for x in expected]) and sum(p[2:]) == 0


def test_a_long_secret_inside_the_numbers_still_leaves_the_json_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever counts as a secret, the redactor replaces text inside JSON strings only."""
    monkeypatch.setenv("DB_PASSWORD", "1234567891")  # digits and long enough to count
    monkeypatch.setenv("SERVICE_TOKEN", "A-very-secret-token")
    from cogbias.core.redact import redact_json

    clean = redactor()
    text = json.dumps({"text": "A-very-secret-token", "positions": [[["A", -0.1234567891]]]})
    cleaned = json.loads(redact_json(text, clean) or "")
    assert cleaned == {"text": "***", "positions": [[["A", -0.1234567891]]]}


def test_numbers_are_not_secrets_but_keys_and_passwords_are(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DB_PASSWORD", PASSWORD)
    monkeypatch.setenv("PIN_SECRET", "0000-1111-2222")
    monkeypatch.setenv("SESSION_TOKEN_EXPIRES", "2025-01-01")
    monkeypatch.setenv("MAIL_PASSWORD", "hunter22")
    monkeypatch.setenv("SHORT_KEY", "abc1234")
    values = secret_values()
    assert "hunter22" in values
    assert not {PASSWORD, "0000-1111-2222", "2025-01-01", "abc1234"} & set(values)
    clean = redactor()
    assert clean("an estimate of 0.12345678 and 12345678 euros") == (
        "an estimate of 0.12345678 and 12345678 euros"
    )
    assert clean("the password is hunter22") == "the password is ***"
    # key shapes without the key: upper-cased (with a digit) and reversed; names stay
    ordinary = "HF_HUB_OFFLINE=1, a risk-free SK-II cream, task_force-ks"
    assert clean(ordinary) == ordinary
    assert clean(f"{KEY.upper()} / {KEY[::-1]}") == "*** / ***"


def test_a_cache_entry_that_no_longer_parses_is_a_miss_removed_and_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache an older version corrupted (`-0.***91`): the run asks again, never crashes."""
    with FakeLLMServer(logprob_answers) as server, Store(tmp_path / "p.db") as store:
        first = _probability_run(store, server.base_url)
        assert first.status == "done", first
        conn = store.db.conn
        with store.atomic():
            conn.execute(
                "update llm_calls set response = replace(response, '1234567891', '***91') "
                "where instr(request, '\"top_logprobs\":') > 0"
            )
        assert all("***91" in e for e in _logprob_entries(store))
        server.reset_counts()
        deletion.apply(store, deletion.plan_run(store, first.id))
        again = _probability_run(store, server.base_url)
        assert again.status == "done" and again.failed == 0, again
        assert server.calls == 2  # both halves asked afresh
        for entry in _logprob_entries(store):
            assert json.loads(entry)["positions"][0][0] == ["A", LISTED["A"]]
