"""The local model answers a class's question: the real `cogbias class ask`, timed.

For each measure a fresh database, a session opened with `cogbias class open`, then `cogbias
class ask CODE --models local/smollm2 --samples N` run as a child process, timed from its
start to its exit (the local model's server start included, as a teacher waits for it), and
the answers that could not be read counted from `cogbias class results --format json`:

  - the Asian disease, the default way (the local model lists its most probable tokens: its
    option probabilities, one call per condition);
  - the Asian disease, sampled answers under the grammar (`--scoring sample`);
  - the UN anchor question, sampled numbers under the bounded grammar (a number question is
    always sampled).

    .venv/bin/python bench/class_models.py [--samples 20] [--only asian_default,...]

Before issue 40 (the class's own executor, no grammar): 127 s for 40 answers on the Asian
disease with 23 unreadable, and 628 s for 20 on the UN anchor question.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURES = {
    "asian_default": ("asian_disease", []),
    "asian_sampled": ("asian_disease", ["--scoring", "sample"]),
    "un_sampled": ("un_anchor", []),
}


def cogbias(db: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *words, "--db", str(db)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=3600,
    )


def measure(test: str, extra: list[str], samples: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "class.db"
        opened = cogbias(db, "class", "open", "--study", "classics", "--test", test)
        if opened.returncode != 0:
            raise RuntimeError(opened.stderr)
        code = opened.stdout.strip()
        began = time.perf_counter()
        words = ["class", "ask", code, "--models", "local/smollm2", "--samples", str(samples)]
        asked = cogbias(db, *words, *extra)
        wall = time.perf_counter() - began
        if asked.returncode != 0:
            raise RuntimeError(asked.stderr)
        data = json.loads(cogbias(db, "class", "results", code, "--format", "json").stdout)
    rows = data["models"]
    return {
        "answers": sum(r["n"] + r["n_unreadable"] for r in rows),
        "unreadable": sum(r["n_unreadable"] for r in rows),
        "mode": rows[0]["mode"] if rows else "",
        "wall_s": wall,
        "reasons": [u for r in rows for u in r["unreadable"]],
        "figures": [
            f"{r['condition']}: "
            + (f"median {r['median']}" if r["median"] is not None else f"shares {r['shares']}")
            for r in rows
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--only", default=",".join(MEASURES))
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    for name in args.only.split(","):
        test, extra = MEASURES[name]
        result = measure(test, extra, args.samples)
        print(
            f"{name}: {result['mode']}, {result['answers']} answers, {result['unreadable']} "
            f"unreadable, {result['wall_s']:.1f} s (load now {os.getloadavg()[0]:.1f})"
        )
        for line in [*result["figures"], *result["reasons"]]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
