"""How long a live pair takes with the offline defaults (what Learn's "Run it live" does).

Each measurement runs `cogbias pair BIAS --scenario N --models random,local/smollm2` in a
fresh process with a fresh COGBIAS_HOME: the `examples` generator fills the gaps, then the
random baseline and the local model answer both halves. A fresh process is the worst case:
it pays Python and litellm imports and the local server's start, which the app pays once.
The script prints each wall time, the median, and the machine's load average (the machine is
shared; compare runs only at similar load).

    .venv/bin/python bench/live_pair.py                 # framing_effect, scenarios 1, 50, 120
    .venv/bin/python bench/live_pair.py --bias anchoring --scenarios 7 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_pair(bias: str, scenario: int, models: str) -> tuple[float, str]:
    """Wall time of one `cogbias pair` child process, and its output."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "COGBIAS_HOME": home, "PYTHONPATH": str(ROOT)}
        env.pop("COGBIAS_GENERATOR", None)  # the offline default
        env.pop("COGBIAS_LOCAL_API_BASE", None)  # start our own server, like a first click
        cmd = [sys.executable, "-m", "cogbias", "pair", bias, "--scenario", str(scenario)]
        cmd += ["--models", models]
        start = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cogbias pair failed ({done.returncode}):\n{done.stderr}")
    return elapsed, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bias", default="framing_effect")
    parser.add_argument("--scenarios", default="1,50,120", help="comma-separated numbers")
    parser.add_argument("--models", default="random,local/smollm2")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--show", action="store_true", help="print each pair's output")
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        for scenario in [int(s) for s in args.scenarios.split(",")]:
            load = os.getloadavg()[0]
            elapsed, out = one_pair(args.bias, scenario, args.models)
            times.append(elapsed)
            print(f"{args.bias} scenario {scenario}: {elapsed:5.1f} s  (load before {load:.1f})")
            if args.show:
                print(out)
    print(
        f"median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} "
        f"pair(s) on {os.cpu_count()} cores; load average now {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
