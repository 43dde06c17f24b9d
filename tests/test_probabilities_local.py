"""`--scoring probabilities` on the real local model (SmolLM2 via llama.cpp): 5 test cases ×
4 scenarios, every half a stored distribution, every score the expectation recomputed here from
the export, and a second run asked afresh (`--no-cache`) scoring identically."""

from __future__ import annotations

import csv
import json
import urllib.request

import pytest

from cogbias.cli.main import main
from cogbias.core import metrics
from cogbias.core.metrics import MetricParams
from cogbias.llm import ensure_local_server, logprobs

pytestmark = pytest.mark.local_model

BIASES = "anchoring,framing_effect,loss_aversion,halo_effect,status_quo_bias"


def _exported(db: str, run_id: str, path) -> list[dict]:
    assert main(["export", "--db", db, "--run", run_id, "-o", str(path)]) == 0
    return sorted(csv.DictReader(path.open()), key=lambda r: r["decision_id"])


def test_probability_scoring_on_the_local_model(tmp_path, capsys):
    pytest.importorskip("xllamacpp")
    base = ensure_local_server().removesuffix("/v1")
    for label in logprobs.LABELS:  # each label, with or without a space, is one token
        for text in (label, " " + label):
            request = urllib.request.Request(
                base + "/tokenize", data=json.dumps({"content": text}).encode()
            )
            with urllib.request.urlopen(request, timeout=60) as answer:
                assert len(json.load(answer)["tokens"]) == 1, text
    db = str(tmp_path / "local.db")
    args = ["run", "pairs", "--db", db, "--biases", BIASES, "--scenarios", "4"]
    args += ["--models", "local/smollm2", "--scoring", "probabilities", "--concurrency", "2"]
    assert main([*args, "--plan-only"]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["resume", run_id, "--db", db]) == 0
    rows = _exported(db, run_id, tmp_path / "first.csv")
    assert len(rows) == 20
    for row in rows:
        assert row["status"] == "ok", row["error"]
        n = int(row["n_options"])
        params = MetricParams(
            k=float(row["k"]), y1=float(row["y1"]), y2=float(row["y2"]),
            flip_control=row["flip_control"] == "true", flip_treatment=row["flip_treatment"] == "true",
        )  # fmt: skip
        dist = {h: json.loads(row[f"{h}_distribution"]) for h in ("control", "treatment")}
        for half in dist.values():
            assert len(half["p"]) == n and sum(half["p"]) == pytest.approx(1.0)
            assert 0.0 <= half["unlisted"] <= half["outside"] <= 1.0
        expected = sum(
            dist["control"]["p"][i]
            * dist["treatment"]["p"][j]
            * metrics.score_pair(i, j, params, n)
            for i in range(n)
            for j in range(n)
        )
        assert float(row["score"]) == pytest.approx(expected, abs=1e-9)
    # the same run asked afresh, not from the cache
    assert main(["delete", "run", run_id, "--db", db, "--yes"]) == 0
    assert main([*args, "--no-cache"]) == 0
    again = _exported(db, run_id, tmp_path / "again.csv")
    assert [r["decision_id"] for r in again] == [r["decision_id"] for r in rows]
    assert all(r["cached"] == "false" for r in again)
    for half in ("control_distribution", "treatment_distribution", "score"):
        assert [r[half] for r in again] == [r[half] for r in rows]  # identical, not close
