"""Benchmark: a paper-sized run, handed to a batch engine.

Synthesizes a Hub-format set of `--tests` test cases (the published fixture's rows, each
with its own scenario text), then measures the real `cogbias` commands a user runs, each as
a child process (wall time and its peak RSS):

  import    `cogbias import malberg2024-hub` of the set
  plan      `cogbias run dataset ... --models <--models models> --plan-only`: plan and store
  export    `cogbias batch export RUN --round decide`: every request file of the first round

and prints the database size and the size of the request file. The paper's scale is
30,000 test cases x 20 models (1.2 million decision requests in the first round).

    .venv/bin/python bench/scale.py [--tests 30000] [--models 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The published Hub format, as the tests own it (tests/fixtures/malberg2024-hub/README.md).
FIXTURE = Path(os.environ.get("COGBIAS_FIXTURES", ROOT / "tests" / "fixtures")) / "malberg2024-hub"


def synthesize(path: Path, tests: int) -> None:
    csv.field_size_limit(2**31 - 1)
    with (FIXTURE / "dataset.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = list(reader.fieldnames or []), list(reader)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        for i in range(tests):
            row = dict(rows[i % len(rows)])
            row["scenario"] = f"{row['scenario']} (case {i})"
            for half in ("control", "treatment"):  # distinct prompts, as in the real set
                row[half] = row[half].replace("Situation:\n", f"Situation:\nCase {i}. ", 1)
            writer.writerow(row)


def timed(*args: str) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one `cogbias` command."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cogbias", *args], cwd=ROOT, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"cogbias {' '.join(args)} failed:\n{err.read()}")
        return wall, usage.ru_maxrss / 1024, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=30_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="cogbias-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    data, db, requests = folder / "hub.csv", folder / "scale.db", folder / "decide.jsonl"
    try:
        synthesize(data, args.tests)
        models = ",".join(f"openai/model-{m:02d}" for m in range(1, args.models + 1))
        print(f"{args.tests:,} test cases x {args.models} models "
              f"= {args.tests * args.models:,} pairs, {2 * args.tests * args.models:,} decide requests")  # fmt: skip
        wall, rss, _ = timed("import", "malberg2024-hub", str(data), "--db", str(db))
        print(
            f"import   {wall:8.1f} s   peak RSS {rss:6.0f} MB   db {db.stat().st_size / 1e6:8.0f} MB"
        )
        wall, rss, out = timed(
            "run", "dataset", "malberg2024-hub", "--models", models,
            "--api-base", "http://127.0.0.1:9/v1", "--plan-only", "--db", str(db),
        )  # fmt: skip
        run_id = out.strip()
        print(f"plan     {wall:8.1f} s   peak RSS {rss:6.0f} MB   run {run_id}")
        wall, rss, _ = timed(
            "batch", "export", run_id, "--round", "decide", "-o", str(requests), "--db", str(db)
        )
        lines = sum(1 for _ in requests.open(encoding="utf-8"))
        print(
            f"export   {wall:8.1f} s   peak RSS {rss:6.0f} MB   {lines:,} requests, "
            f"{requests.stat().st_size / 1e6:,.0f} MB of JSONL, db {db.stat().st_size / 1e6:,.0f} MB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
