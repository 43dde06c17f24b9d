"""How long a live pair takes with the offline defaults (what Learn's "Run it live" does).

One child process runs `cogbias pair BIAS --scenario 1,50,120 --models random,local/smollm2`
with a fresh COGBIAS_HOME and no keys: for each scenario the `examples` generator fills the
gaps, then the random baseline and the local model answer both halves. The first pair is
"cold": it pays Python and litellm imports and the local server's start, as the app's first
click does. The later pairs are "warm", as every further click in the app. The script prints
the process's wall time, each pair's time, and the machine's load average (the machine is
shared: compare runs only at similar load).

    .venv/bin/python bench/live_pair.py                       # framing_effect, 3 scenarios
    .venv/bin/python bench/live_pair.py --bias anchoring --scenarios 7,8,9,10
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pairs(bias: str, scenarios: str, models: str) -> tuple[float, list[float], str]:
    """Wall time of one `cogbias pair` child process, each pair's time, and its output."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "COGBIAS_HOME": home, "PYTHONPATH": str(ROOT)}
        env.pop("COGBIAS_GENERATOR", None)  # the offline default
        env.pop("COGBIAS_LOCAL_API_BASE", None)  # start our own server, like a first click
        cmd = [sys.executable, "-m", "cogbias", "pair", bias, "--scenario", scenarios]
        cmd += ["--models", models]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cogbias pair failed ({done.returncode}):\n{done.stderr}")
    times = [float(t) for t in re.findall(r"^pair time: ([\d.]+) s", done.stdout, re.MULTILINE)]
    return elapsed, times, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bias", default="framing_effect")
    parser.add_argument("--scenarios", default="1,50,120", help="comma-separated numbers")
    parser.add_argument("--models", default="random,local/smollm2")
    parser.add_argument("--show", action="store_true", help="print the pairs' answers")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    elapsed, times, out = pairs(args.bias, args.scenarios, args.models)
    if args.show:
        print(out)
    print(f"{args.bias}, models {args.models}, generator examples; load average before {load:.1f}")
    print(f"process wall time {elapsed:.1f} s for {len(times)} pair(s)")
    print(f"cold pair (process start, imports, local server start): {times[0]:.1f} s")
    if len(times) > 1:
        warm = times[1:]
        print(f"warm pairs: median {statistics.median(warm):.1f} s, max {max(warm):.1f} s")
    cold_total = elapsed - sum(times[1:])
    print(f"a first click as a fresh process (start-up + first pair): {cold_total:.1f} s")
    print(f"{os.cpu_count()} cores; load average after {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
