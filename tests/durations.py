"""Write tests/durations.json, the seconds each test file took, from the output of a run with
`--durations=0` (e.g. `./scripts/test --durations=0 | tee run.txt`, then
`python tests/durations.py run.txt`). conftest.py hands the longest files to the workers
first, so that no long file is left to run alone at the end."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(?:tests/)?([\w/.-]+\.py)::")


def per_file(text: str) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown summed) in a `--durations` report."""
    seconds: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        found = LINE.match(line)
        if found:
            seconds[Path(found.group(2)).name] += float(found.group(1))
    return {name: round(total, 1) for name, total in sorted(seconds.items())}


if __name__ == "__main__":
    measured = per_file(Path(sys.argv[1]).read_text(encoding="utf-8", errors="replace"))
    target = Path(__file__).with_name("durations.json")
    target.write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    print(f"{len(measured)} files, {sum(measured.values()):.0f} s in all -> {target}")
