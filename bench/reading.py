"""Re-read stored answers with the reading step (no model calls) and compare with the stored
choices: how many answers name one option, how many name none or several, and how many
stored readings the reader would not give.

    .venv/bin/python bench/reading.py                  # the demo snapshot
    .venv/bin/python bench/reading.py --db FILE.db     # every decision of a database
    .venv/bin/python bench/reading.py --snapshot F.gz  # another snapshot (e.g. an older one)

Prints, per model: halves, read by the reader (and by which form), left unreadable (by
reason), stored choices that disagree with the reader's, and the time the reading took.
Pairs scored from option probabilities (`--scoring probabilities`) have no answer to read:
they are counted apart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cogbias.core.reading import read_option

ROOT = Path(__file__).resolve().parent.parent


def _rows(
    db: str | None, path: Path = ROOT / "data/demo/snapshot.json.gz"
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    if db is None:
        snapshot = json.loads(gzip.decompress(path.read_bytes()))
        return snapshot["decisions"], {i["id"]: i for i in snapshot["instances"]}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    decisions = [dict(r) for r in con.execute("select * from decisions")]
    instances = {r["id"]: dict(r) for r in con.execute("select * from instances")}
    return decisions, instances


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a cogbias database (default: the demo snapshot)")
    parser.add_argument("--snapshot", type=Path, help="a demo snapshot file (.json.gz)")
    args = parser.parse_args()
    decisions, instances = _rows(args.db, args.snapshot) if args.snapshot else _rows(args.db)
    stats: dict[str, Counter[str]] = {}
    started = time.perf_counter()
    halves = 0
    for row in decisions:
        instance = instances.get(row["instance_id"])
        if instance is None or row["control_order"] is None:
            continue
        count = stats.setdefault(row["model"], Counter())
        if row.get("control_distribution") or row.get("treatment_distribution"):
            count["probability-scored pairs (option probabilities, nothing to read)"] += 1
            continue
        order = json.loads(row["control_order"])
        for half in ("control", "treatment"):
            answer = row[f"{half}_answer"]
            if not answer:
                continue
            halves += 1
            options = json.loads(instance[half])["options"]
            reading = read_option(answer, [options[j] for j in order])
            count["halves"] += 1
            stored = row[f"{half}_choice"]
            if reading.choice is None:
                count["unreadable: " + (reading.problem or "").split(" (")[0]] += 1
                if stored is not None:
                    count["stored reading the reader does not give"] += 1
            else:
                count["read by " + "+".join(reading.how)] += 1
                if stored is not None and order[reading.choice] != stored:
                    count["stored reading that disagrees with the reader"] += 1
    spent = time.perf_counter() - started
    for model, count in sorted(stats.items()):
        print(f"{model}: {count['halves']} halves")
        for key, n in sorted(count.items()):
            if key != "halves":
                print(f"  {key}: {n}")
    print(f"read {halves} halves in {spent:.2f} s ({halves / max(spent, 1e-9):,.0f}/s)")


if __name__ == "__main__":
    main()
