"""Benchmark: `cogbias library check` on a test case file with thousands of problems.

Writes a copy of the built-in anchoring test case with N unknown keys spread over three of
its tables (each one a located problem), runs `cogbias library check` on it in a child
process and prints the wall time. Validation should grow linearly with the file: a valid
file and one with a quarter of the problems are timed as well. Target: 8,000 problems < 2 s.

    .venv/bin/python bench/check.py [--problems 8000]
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


def problem_file(folder: Path, problems: int) -> Path:
    """The anchoring test case with `problems` unknown keys in [values.anchor], [control]
    and [metric], so the check reports exactly that many problems."""
    text = (ROOT / "data" / "biases" / "anchoring.toml").read_text(encoding="utf-8")
    thirds = [problems // 3, problems // 3, problems - 2 * (problems // 3)]
    for header, count in zip(
        ("[values.anchor]\n", "[control]\n", "[metric]\n"), thirds, strict=True
    ):
        keys = "".join(f"unknown_{header[1:4]}_{i} = {i}\n" for i in range(count))
        text = text.replace(header, header + keys, 1)
    path = folder / f"problems_{problems}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def time_check(path: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of one `cogbias library check` child process, and the problems
    it reported (CPU time is steadier than wall time when others share the machine)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "library", "check", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    reported = sum(1 for line in done.stderr.splitlines() if "unknown field" in line)
    return seconds, cpu, reported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=8000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = [
            time_check(problem_file(folder, n)) for n in (0, args.problems // 4, args.problems)
        ]
    for wall, cpu, reported in results:
        label = f"{reported:>5} problems" if reported else "a valid file"
        print(f"library check, {label}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    (_, base, _), _, (_, large, large_n) = results
    print(f"target: {large_n} problems in < 2 s")
    print(f"CPU spent on the {large_n} problems beyond start-up: {max(large - base, 0):.2f} s")


if __name__ == "__main__":
    main()
