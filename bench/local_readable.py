"""How many of the local model's pairs cannot be read, by default and with sampled answers.

Runs the real `cogbias run pairs` as a child process on a temporary database, the way a
teacher with no API key runs it: `--models local/smollm2` with the default settings (the
models choose the scoring: option probabilities, which the local model gives), then with
`--scoring choice` (a sampled answer under its "Option N" grammar, read by cogbias). Each on
two sets: the 30 built-in test cases x 2 scenarios, and a test case written here for the
bench (seven options of our own, `CUSTOM`, in a temporary user library) x 2 scenarios x
`--custom-instances` instances. Prints, per setting and set, the pairs planned, the pairs
whose answers could not be read (a failed decision of kind `unparseable`) and their share,
the pairs that failed otherwise, and the wall time; the machine's load average before and
after (it is shared).

    .venv/bin/python bench/local_readable.py                       # both settings, both sets
    .venv/bin/python bench/local_readable.py --settings choice --custom-instances 3
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETTINGS = {"default": [], "choice": ["--scoring", "choice"]}
CUSTOM_ID = "contrast_after_weak_bid"
CUSTOM = '''id = "contrast_after_weak_bid"
name = "Contrast after a weak bid"
description = """A bench case of our own with seven options: the model rates one supplier's \
bid after having just read either a comparable bid or a clearly weaker one. A positive score \
means it rates the same bid higher after the weaker one."""

[scale]
kind = "custom"
options = [
    "Reject the bid",
    "Ask for a much better offer",
    "Ask for a somewhat better offer",
    "Put the bid on a shortlist",
    "Accept the bid after small changes",
    "Accept the bid as it stands",
    "Accept the bid and sign a longer contract",
]

[values.price]
type = "int"
min = 40
max = 90

[values.weak]
type = "derived"
expr = "price + 35"

[control]
situation = """You work as [[a/an]] [[type]] manager at [[organization]]. A first supplier \
has just offered the service you need for {{price}} thousand a year, with delivery in six \
weeks. A second supplier now offers the same service for {{price}} thousand a year, with \
delivery in five weeks."""
prompt = "What do you do with the second supplier's bid?"

[treatment]
situation = """You work as [[a/an]] [[type]] manager at [[organization]]. A first supplier \
has just offered the service you need for {{weak}} thousand a year, with delivery in six \
months. A second supplier now offers the same service for {{price}} thousand a year, with \
delivery in five weeks."""
prompt = "What do you do with the second supplier's bid?"

[metric]
k = 1
y1 = 0
y2 = 0
'''


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_pairs(db: Path, env: dict[str, str], flags: list[str]) -> tuple[str, float]:
    """One `cogbias run pairs` on the local model; (its run id, wall seconds)."""
    command = [sys.executable, "-m", "cogbias", "run", "pairs", "--db", str(db)]
    command += ["--models", "local/smollm2", *flags]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    found = re.search(r"run (run-[0-9a-f]{12})", done.stderr)
    if found is None:
        raise SystemExit(f"the run did not start:\n{done.stderr[-2000:]}")
    print("   ", done.stderr.strip().splitlines()[-1], file=sys.stderr)
    return found[1], wall


def counted(db: Path, run_id: str) -> tuple[Counter[str], list[str]]:
    """The run's pairs by outcome (ok, unreadable, failed otherwise), and the stored reasons
    of its unreadable ones."""
    from cogbias.core.records import DecisionStatus
    from cogbias.store import Store

    outcomes: Counter[str] = Counter()
    reasons: list[str] = []
    with Store(db) as store:
        for pairs in store.iter_pairs(run_id=run_id):
            for pair in pairs:
                d = pair.decision
                if d.status != DecisionStatus.FAILED:
                    outcomes["read"] += 1
                elif d.failure_kind == "unparseable":
                    outcomes["unreadable"] += 1
                    reasons.append(d.error or "")
                else:
                    outcomes["failed otherwise"] += 1
    return outcomes, reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="default,choice")
    parser.add_argument("--scenarios", type=int, default=2)
    parser.add_argument("--custom-instances", type=int, default=10)
    parser.add_argument("--keep", help="a folder to keep the database in (default: temporary)")
    args = parser.parse_args()
    from cogbias.library import testcases

    builtins = ",".join(testcases.load_library(include_user=False))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        (folder / "home" / "biases").mkdir(parents=True, exist_ok=True)
        (folder / "home" / "biases" / f"{CUSTOM_ID}.toml").write_text(CUSTOM)
        env = {**os.environ, "COGBIAS_HOME": str(folder / "home"), "PYTHONPATH": str(ROOT)}
        db = folder / "bench.db"
        sets = {
            "30 built-ins": ["--biases", builtins, "--scenarios", str(args.scenarios)],
            "7-option case": ["--biases", CUSTOM_ID, "--scenarios", str(args.scenarios)]
            + ["--instances", str(args.custom_instances)],
        }
        print(f"load average before: {load()}")
        rows = []
        for setting in args.settings.split(","):
            for name, flags in sets.items():
                print(f"{setting} / {name} …", file=sys.stderr)
                run_id, wall = run_pairs(db, env, [*flags, *SETTINGS[setting]])
                outcomes, reasons = counted(db, run_id)
                rows.append((setting, name, run_id, outcomes, wall))
                for reason in sorted(set(reasons))[:5]:
                    print(f"    unreadable: {reason[:160]}", file=sys.stderr)
        print(f"load average after: {load()}")
        print(f"{'setting':8} {'set':14} {'pairs':>5} {'unreadable':>10} {'share':>6} "
              f"{'other':>5} {'wall s':>7}  run")  # fmt: skip
        for setting, name, run_id, outcomes, wall in rows:
            total = sum(outcomes.values())
            share = outcomes["unreadable"] / total if total else 0.0
            print(
                f"{setting:8} {name:14} {total:5} {outcomes['unreadable']:10} {share:6.1%} "
                f"{outcomes['failed otherwise']:5} {wall:7.0f}  {run_id}"
            )


if __name__ == "__main__":
    main()
