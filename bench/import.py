"""Benchmark: import a synthetic set the size of the paper's (code output format).

30,000 test cases in `full_dataset.csv` and 20 models x 30,000 decisions in
`decision_results/`, written to a temporary folder, then imported by `cogbias import
malberg2024` in a child process (so its peak RSS is measured alone). Prints rows/s and peak
RSS. Target: the whole set in under 60 s on a 2-core machine.

    .venv/bin/python bench/import.py [--tests 30000] [--models 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIASES = [
    "Anchoring", "Framing Effect", "Loss Aversion", "Status-Quo Bias", "In-Group Bias",
    "Self-Serving Bias", "Not Invented Here", "Halo Effect", "Hindsight Bias", "Optimism Bias",
]  # fmt: skip
TEST_HEADER = [
    "id", "raw_control", "raw_treatment", "bias", "variant", "scenario", "generator",
    "temperature", "timestamp", "seed", "control", "treatment", "remarks",
]  # fmt: skip
DECISION_HEADER = [
    "id", "model", "temperature", "seed", "timestamp", "control_options", "control_option_order",
    "control_answer", "control_extraction", "control_decision", "treatment_options",
    "treatment_option_order", "treatment_answer", "treatment_extraction", "treatment_decision",
    "status", "error_message", "individual_score", "weight", "bias",
]  # fmt: skip
OPTIONS = [f"{p}%" for p in range(0, 101, 10)]
FILLER = "The team weighs costs, timelines and the expectations of stakeholders. " * 6


def prompt(i: int, extra: str) -> str:
    options = "\n".join(f"Option {n + 1}: {o}" for n, o in enumerate(OPTIONS))
    return (
        f"Situation:\nSuppose you are a manager at company {i}.\n{FILLER}\n\n"
        f"Prompt:\n{extra}Which allocation level do you choose?\n\nAnswer Options:\n{options}\n"
    )


def synthesize(folder: Path, tests: int, models: int) -> int:
    rng = random.Random(7)
    raw = "<template>" + "<option>x</option>" * 11 + FILLER + "</template>"
    with (folder / "full_dataset.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(TEST_HEADER)
        for i in range(tests):
            writer.writerow(
                [i, raw, raw, BIASES[i % len(BIASES)], "", f"scenario {i % 200}", "synthetic",
                 0.7, "2024-10-01 00:00:00", i, prompt(i, ""), prompt(i, f"More than {i % 100}%? "),
                 "{'note': 'synthetic'}" if i % 10 == 0 else ""]
            )  # fmt: skip
    results = folder / "decision_results"
    results.mkdir()
    orders = [list(range(11)), list(range(10, -1, -1))]
    answer = "After weighing the options I would choose a moderate allocation. " * 3
    for m in range(models):
        with (results / f"model-{m}.csv").open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(DECISION_HEADER)
            for i in range(tests):
                order = orders[rng.random() < 0.5]
                ok = rng.random() > 0.05
                c, t = rng.randrange(11), rng.randrange(11)
                writer.writerow(
                    [i, f"model-{m}", 0.0, 42, "2024-10-02 00:00:00", OPTIONS, order, answer,
                     f"Option {order.index(c) + 1}", float(c) if ok else "", OPTIONS, order,
                     answer, f"Option {order.index(t) + 1}", float(t) if ok else "",
                     "OK" if ok else "ERROR", "" if ok else "could not extract",
                     (c - t) / max(c, t, 1) if ok else "", 1.0,
                     BIASES[i % len(BIASES)].replace(" ", "").replace("-", "")]
                )  # fmt: skip
    return tests + tests * models


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=30_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="write the set and database here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        rows = synthesize(folder, args.tests, args.models)
        size = sum(p.stat().st_size for p in folder.rglob("*.csv"))
        print(
            f"synthesized {rows:,} rows ({size / 1e6:.0f} MB of CSV) in {time.monotonic() - started:.1f} s"
        )
        db = folder / "bench.db"
        db.unlink(missing_ok=True)
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cogbias",
                "import",
                "malberg2024",
                str(folder),
                "--db",
                str(db),
            ],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        seconds = time.monotonic() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mb, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        conn = sqlite3.connect(db)
        stored = sum(
            conn.execute(f"select count(*) from {t}").fetchone()[0]
            for t in ("instances", "decisions")
        )
        conn.close()
        print(f"imported {stored:,} rows in {seconds:.1f} s: {stored / seconds:,.0f} rows/s")
        print(f"CPU time of the import: {cpu:.1f} s (wall time also counts other load)")
        print(
            f"peak RSS of the import: {peak_mb:.0f} MB; database {db.stat().st_size / 1e6:.0f} MB"
        )
        if stored != rows:
            print(f"MISMATCH: expected {rows:,} rows", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
