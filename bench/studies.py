"""Study runs as a user runs them: the real `cogbias run study` command, as a subprocess.

    .venv/bin/python bench/studies.py [--concurrency 16,64] [--repeats 25]

  single     mohr8 (one temperature, one variant) on a local OpenAI-compatible server that
             answers after L = 1 s: independent decisions, so calls/s should approach C / L;
  sequence   biasbuster's anchoring test on the same server: conversations whose turns must
             wait for each other, so at most min(C, conversations) calls are in flight;
  random     the whole mohr8 study on the `random` model (32,000 units, no network): the
             runner's own cost per unit, then `cogbias results` over those 32,000 turns.
It prints, per measurement, calls (or units) per second, the ratio to the ideal, the process's
CPU milliseconds per call (start-up included) and its peak RSS. The server runs in its own
process; its CPU is not counted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
LATENCY = 1.0


def answer(request: dict) -> str:
    """A readable answer in every format the built-in studies ask for."""
    from fake_llm_server import _last_user_text

    text = _last_user_text(request).lower()
    if "admit or reject" in text:
        return "admit"
    if "yes or no" in text:
        return "yes"
    if "\na) " in text:  # options listed a), b), ...
        return "a"
    return "42"


def serve() -> None:
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer(answer, latency=LATENCY) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def measure(args: list[str], db: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stderr) of one `cogbias` child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", *args, "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"cogbias {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, done.stderr


def turns(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("select count(*) from study_calls").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve()
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    base_url = server.stdout.readline().strip()  # type: ignore[union-attr]
    print(f"{'what':<10} {'C':>4} {'calls':>6} {'wall s':>7} {'calls/s':>8} {'ideal':>7} "
          f"{'ratio':>6} {'CPU ms/call':>12} {'peak RSS MB':>12}")  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for c in [int(x) for x in options.concurrency.split(",")]:
                for what, extra, ideal_in_flight in (
                    ("single", ["study", "mohr8", "--variants", "0_normal"], c),
                    # 6 orders × repeats conversations, each one turn at a time
                    ("sequence", ["study", "biasbuster", "--tests", "anchoring"], None),
                ):
                    db = Path(tmp) / f"{what}-{c}.db"
                    args = ["run", *extra, "--models", "openai/fake", "--api-base", base_url,
                            "--temperatures", "0.7", "--repeats", str(options.repeats),
                            "--concurrency", str(c)]  # fmt: skip
                    wall, cpu, rss, _ = measure(args, db)
                    calls = turns(db)
                    in_flight = ideal_in_flight or min(c, 6 * options.repeats)
                    ideal = in_flight / LATENCY
                    print(f"{what:<10} {c:>4} {calls:>6} {wall:>7.1f} {calls / wall:>8.1f} "
                          f"{ideal:>7.1f} {calls / wall / ideal:>6.2f} {1000 * cpu / calls:>12.2f} "
                          f"{rss:>12.0f}")  # fmt: skip
            db = Path(tmp) / "random.db"
            wall, cpu, rss, _ = measure(["run", "study", "mohr8", "--models", "random"], db)
            units = turns(db)
            print(f"{'random':<10} {'-':>4} {units:>6} {wall:>7.1f} {units / wall:>8.0f} "
                  f"{'-':>7} {'-':>6} {1000 * cpu / units:>12.3f} {rss:>12.0f}")  # fmt: skip
            wall, cpu, rss, _ = measure(["results", "study", "mohr8", "--by", "temperature"], db)
            print(f"{'results':<10} {'-':>4} {units:>6} {wall:>7.1f} {units / wall:>8.0f} "
                  f"{'-':>7} {'-':>6} {1000 * cpu / units:>12.3f} {rss:>12.0f}")  # fmt: skip
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait()


if __name__ == "__main__":
    main()
