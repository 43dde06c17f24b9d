"""The demo database: a committed snapshot of a real offline run, loaded into an empty store.

A fresh install should open on results, not on an empty page, yet a first start must not
spend many minutes running the local model. So `scripts/make-demo` runs the real pipeline
once (`cogbias run` with the random baseline and the local model), and the rows it wrote are
committed as `data/demo/snapshot.json.gz`; `ensure_demo` copies them into a database that has
no runs yet. Set `COGBIAS_DEMO=0` to start with an empty database instead, or
`COGBIAS_DEMO_SNAPSHOT` to load another snapshot (e.g. a course's own results).

    python -m cogbias.store.demo snapshot results.db data/demo/snapshot.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cogbias.library.testcases import DATA_DIR
from cogbias.store import Store

SNAPSHOT = DATA_DIR / "demo" / "snapshot.json.gz"
DEMO_RUN_NAME = "demo"


def demo_enabled() -> bool:
    return os.environ.get("COGBIAS_DEMO", "1").strip().lower() not in ("0", "false", "no", "off")


def snapshot_path() -> Path:
    configured = os.environ.get("COGBIAS_DEMO_SNAPSHOT")
    return Path(configured) if configured else SNAPSHOT


def ensure_demo(db_path: str | Path, snapshot: Path | None = None) -> bool:
    """Load the snapshot into `db_path` when it holds no runs; True when rows were loaded."""
    snapshot = snapshot or snapshot_path()
    if not demo_enabled() or not snapshot.is_file():
        return False
    with Store(db_path) as store:
        if store.has_runs():
            return False
        store.load_tables(read_snapshot(snapshot))  # one transaction; existing keys win
    return True


def read_snapshot(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The tables of a snapshot file (plain JSON data; nothing in it is ever executed)."""
    data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path} is not a cogbias snapshot (expected tables of rows)")
    return data


def write_snapshot(store: Store, path: Path) -> int:
    """Dump the store's tables (never the LLM cache) to gzipped JSON; returns the size in bytes."""
    data = store.dump_tables()
    for run in data.get("runs", []):
        run["pid"] = None  # a process id means nothing on another machine
        run["name"] = run.get("name") or DEMO_RUN_NAME
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    blob = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)  # reproducible bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return len(blob)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cogbias.store.demo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("snapshot", help="write a database's results as a demo snapshot")
    p.add_argument("db", type=Path)
    p.add_argument("out", type=Path, nargs="?", default=SNAPSHOT)
    args = parser.parse_args(argv)
    if not args.db.is_file():
        print(f"error: {args.db} does not exist", file=sys.stderr)
        return 2
    with Store(args.db) as store:
        runs = store.runs()
        size = write_snapshot(store, args.out)
    print(f"wrote {args.out} ({size / 1024:.0f} KiB) from {len(runs)} run(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
