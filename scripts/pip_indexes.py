"""Print pip's package indexes as uv options, one a line, for scripts/setup and scripts/lock.

uv reads no pip.conf: on a machine whose pip is set up with a mirror, extra indexes or a
folder of wheels, uv must be told the same to install what pip would. pip's own
`pip config list` (files and PIP_* variables alike) says where pip looks.
"""

from __future__ import annotations

import ast
import subprocess
import sys

FLAGS = {name: f"--{name}" for name in ("index-url", "extra-index-url", "find-links")}


def main() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    seen: list[tuple[str, str]] = []
    for line in listed.splitlines():
        key, _, quoted = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name not in FLAGS or not quoted:
            continue
        for value in str(ast.literal_eval(quoted)).split():
            if (name, value) not in seen:
                seen.append((name, value))
    for name, value in seen:
        print(FLAGS[name])
        print(value)
    if any(name == "extra-index-url" for name, _ in seen):
        # pip takes the best version from every index; uv's default would stop at the first
        print("--index-strategy")
        print("unsafe-best-match")


if __name__ == "__main__":
    main()
