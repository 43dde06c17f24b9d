"""`cogbias class ...` as a teacher types it: open prints a code, results print the class
beside the humans (text and JSON), close, reveal, list, export and delete do what they say."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cogbias.classroom import sessions
from cogbias.cli.main import main
from cogbias.store import Store


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


def opened(capsys: pytest.CaptureFixture[str], db: Path, *source: str) -> str:
    status, out, err = cli(capsys, "class", "open", *source, "--db", str(db))
    assert status == 0, err
    return out.strip()


def answer(db: Path, code: str, picks: dict[str, list[str]]) -> None:
    """Participants until each condition holds the given answers."""
    with Store(db) as store:
        session = sessions.get_session(store, code)
        for i in range(200):
            condition = sessions.assign_condition(store, session, f"p{i}")
            if picks.get(condition):
                sessions.submit_answer(store, session, f"p{i}", picks[condition].pop())
            if not any(picks.values()):
                return


def test_open_prints_a_code_and_where_to_join(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    status, out, err = cli(
        capsys, "class", "open", "--study", "classics", "--test", "theatre_ticket", "--db", str(db)
    )
    code = out.strip()
    assert status == 0 and len(code) == 6
    assert "cogbias class serve" in err  # no server yet: how to start one
    with Store(db) as store:
        store.set_class_join_url("http://10.0.0.5:8765")
    status, out, err = cli(capsys, "class", "open", "--test-case", "anchoring", "--db", str(db))
    assert status == 0 and f"http://10.0.0.5:8765/s/{out.strip()}" in err


def test_open_says_what_is_wrong(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    status, _, err = cli(capsys, "class", "open", "--db", db)
    assert status == 2 and "--study ID --test ID, or --test-case ID" in err
    status, _, err = cli(capsys, "class", "open", "--study", "classics", "--test", "x", "--db", db)
    assert status == 2 and "has no test 'x'" in err
    status, _, err = cli(capsys, "class", "open", "--test-case", "no_such_case", "--db", db)
    assert status != 0 and "no_such_case" in err and "Traceback" not in err


def test_results_as_json_and_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code = opened(capsys, db, "--study", "classics", "--test", "theatre_ticket")
    answer(db, code, {"lost_ticket": ["a", "b"], "lost_bill": ["a", "a", "a"]})
    status, out, _ = cli(
        capsys, "class", "results", code.lower(), "--format", "json", "--db", str(db)
    )
    data = json.loads(out)
    assert status == 0 and data["code"] == code and data["models"] == []
    assert [row["n"] for row in data["class"]] == [2, 3]
    assert data["class"][1]["shares"] == [1.0, 0.0]
    assert data["humans"][1]["shares"] == [0.88, 0.12]
    status, out, _ = cli(capsys, "class", "results", code, "--db", str(db))
    # each option by the original's neutral name for it (the reveal's words)
    assert "yes, pay $10 for a ticket: class 100%, humans 88% (n 183)" in out
    assert "lost the $10 ticket (lost_ticket): 2 answered" in out


def test_close_reveal_list_export_delete(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    first = opened(capsys, db, "--study", "classics", "--test", "linda")
    second = opened(capsys, db, "--study", "classics", "--test", "mug")
    answer(db, first, {"linda": ["b", "b", "a"]})
    assert cli(capsys, "class", "close", first, "--db", str(db))[0] == 0
    status, out, _ = cli(capsys, "class", "reveal", second, "--db", str(db))
    assert status == 0 and "revealed" in out
    status, out, _ = cli(capsys, "class", "list", "--db", str(db))
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert "locked" in lines[first] and "3 answers" in lines[first] and "Linda" in lines[first]
    assert "revealed" in lines[second]
    target = tmp_path / "linda.csv"
    status, _, _ = cli(capsys, "class", "export", first, "-o", str(target), "--db", str(db))
    rows = list(csv.DictReader(target.open(encoding="utf-8")))
    assert status == 0 and sorted(r["answer"] for r in rows) == ["a", "b", "b"]
    status, _, err = cli(capsys, "class", "export", first, "-o", str(target), "--db", str(db))
    assert status != 0 and "exists" in err
    status, out, _ = cli(capsys, "class", "delete", first, "--yes", "--db", str(db))
    assert status == 0 and "Deleted session" in out
    status, _, err = cli(capsys, "class", "results", first, "--db", str(db))
    assert status == 2 and f"no class session with code '{first}'" in err
    status, out, _ = cli(capsys, "class", "list", "--db", str(db))
    assert first not in out and second in out


def test_serve_refuses_a_bad_port_or_public_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(tmp_path / "c.db")
    status, _, err = cli(capsys, "class", "serve", "--port", "70000", "--db", db)
    assert status == 2 and "not a port" in err
    status, _, err = cli(capsys, "class", "serve", "--public-url", "ftp://x", "--db", db)
    assert status == 2 and "http:// or https://" in err


def test_the_join_address_is_the_lan_one_or_the_public_url() -> None:
    from cogbias.classroom.server import join_base, lan_address

    assert join_base("127.0.0.1", 8765) == "http://127.0.0.1:8765"
    assert join_base("0.0.0.0", 8765) == f"http://{lan_address()}:8765"
    assert join_base("0.0.0.0", 1, "https://class.example.org/") == "https://class.example.org"
    assert join_base("::1", 9) == "http://[::1]:9"


def test_results_put_the_models_beside_the_class(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from cogbias.store.class_models import ModelAnswer

    db = tmp_path / "c.db"
    code = opened(capsys, db, "--study", "classics", "--test", "theatre_ticket")
    answer(db, code, {"lost_ticket": ["a"], "lost_bill": ["a"]})
    with Store(db) as store:
        store.save_model_answers(
            [
                ModelAnswer(code, "random", condition, "sample", 0.7, i, "A", option=0)
                for condition in ("lost_ticket", "lost_bill")
                for i in range(4)
            ]
        )
    status, out, _ = cli(capsys, "class", "results", code, "--format", "json", "--db", str(db))
    models = json.loads(out)["models"]
    assert status == 0 and {m["condition"] for m in models} == {"lost_ticket", "lost_bill"}
    assert all(m["model"] == "random" and m["n"] == 4 for m in models)
    status, out, _ = cli(capsys, "class", "results", code, "--db", str(db))
    # the random baseline uses no temperature: none is shown (before: "(T 0.7)")
    assert out.count("model random: 100%, 0% (n 4)") == 2 and "T 0.7" not in out
    assert all(m["temperature"] is None for m in models)


def test_serve_stops_cleanly_on_sigterm_and_forgets_its_address(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    db = tmp_path / "c.db"
    command = [sys.executable, "-m", "cogbias", "class", "serve", "--port", "0", "--db", str(db)]
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert "Participants join at http://127.0.0.1:" in line
        with Store(db) as store:
            assert sessions.join_base(store) == line.split()[3]
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and "Traceback" not in err, (process.returncode, err)
    with Store(db) as store:
        assert sessions.join_base(store) is None
