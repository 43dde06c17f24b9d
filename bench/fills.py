"""How many of the local model's gap fills are used, and why the others are refused.

Runs the real `cogbias preview TEST --scenario N --generator local/smollm2` as a child process
for every built-in test case and each scenario of `--scenarios`, and reads the insertions it
prints: a gap the model filled is `[llm]` (accepted) or `[example]` with the note "the
model's fill … was rejected (REASON)" (refused; an example fill took its place). Prints the
share accepted, the share refused by reason, the previews that failed, and the machine's
load average (the machine is shared). One local server serves every child
(`COGBIAS_LOCAL_API_BASE`), as a worker shares its parent's.

The answers are kept in the database's response cache (`--db`, default a temporary file), so
a second run on the same file judges the same replies again without asking the model: that
is how a change to the checks is compared on equal replies.

    .venv/bin/python bench/fills.py                          # 30 tests x scenarios 1,41,81,121,161
    .venv/bin/python bench/fills.py --db /tmp/fills.db --tests anchoring,framing_effect
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GENERATOR = "local/smollm2"
# "  [llm] 'gap' -> 'text'" or "  [example] 'gap' -> 'text'  (the model's fill ... (REASON))"
INSERTION = re.compile(r"^  \[(?P<source>\w+)\] (?P<gap>'.*?'|\".*?\") -> ")
REFUSED = re.compile(r"(?:was rejected|gave no fill) \((?P<reason>.*)\)\)$")


def reason_class(reason: str) -> str:
    """A reason without its particulars (the copied words, the word it ends on, the limit's
    number)."""
    reason = re.sub(r",? (?:on )?'[^']*'$", "", reason)
    return re.sub(r"\d[\d,]*", "N", reason)


def preview(case: str, scenario: int, env: dict[str, str]) -> tuple[Counter[str], str]:
    """The fills of one preview as counts ('accepted' or 'refused: REASON'), and its error."""
    cmd = [sys.executable, "-m", "cogbias", "preview", case, "--scenario", str(scenario)]
    cmd += ["--generator", GENERATOR]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    counts: Counter[str] = Counter()
    if done.returncode != 0:
        return counts, (done.stderr.strip().splitlines() or ["?"])[-1]
    for line in done.stdout.splitlines():
        match = INSERTION.match(line)
        if match is None:
            continue
        if match["source"] == "llm":
            counts["accepted"] += 1
        elif match["source"] == "example" and (refused := REFUSED.search(line)):
            counts["refused: " + reason_class(refused["reason"])] += 1
    return counts, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", help="comma-separated test case ids (default: the built-ins)")
    parser.add_argument("--scenarios", default="1,41,81,121,161")
    parser.add_argument("--db", type=Path, help="keep the answers here (reuse them on a rerun)")
    parser.add_argument("--jobs", type=int, default=2, help="previews at once (default 2)")
    args = parser.parse_args()
    from cogbias.library import testcases as library
    from cogbias.llm.local import SHARED_SERVER_ENV, ensure_local_server

    cases = args.tests.split(",") if args.tests else list(library.load_library(include_user=False))
    scenarios = [int(s) for s in args.scenarios.split(",")]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "fills.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COGBIAS_HOME": str(Path(tmp) / "home")}
        env |= {"COGBIAS_DB": str(db), SHARED_SERVER_ENV: ensure_local_server()}
        started = time.perf_counter()
        jobs = [(c, s) for c in cases for s in scenarios]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda job: (job, *preview(*job, env)), jobs))
        elapsed = time.perf_counter() - started
    total: Counter[str] = Counter()
    failed: list[str] = []
    for (case, scenario), counts, error in results:
        total.update(counts)
        if error:
            failed.append(f"{case} scenario {scenario}: {error[:160]}")
    fills = sum(total.values())
    print(f"{len(cases)} test cases x scenarios {args.scenarios}: {len(jobs)} previews in "
          f"{elapsed:.0f} s; load average before {load:.1f}, after {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"previews that failed: {len(failed)}")
    for line in failed:
        print("  " + line)
    print(f"model fills in the previews that succeeded: {fills}")
    for what, n in total.most_common():
        print(f"  {n:4d}  {n / max(fills, 1):6.1%}  {what}")


if __name__ == "__main__":
    main()
