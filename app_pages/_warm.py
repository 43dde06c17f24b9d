"""The app's warm-up, once per server process while a person reads the first page: what each
page's first visit would otherwise pay on the click.

- The local model starts (its own thread: llama.cpp loads outside the interpreter), so
  Learn's first live pair finds it running.
- Every page's modules are imported (Altair, SciPy, pandas, pyarrow and our views: 0.3–0.7 s
  of a page's first visit each), and Explore's heatmap is built once, which loads the
  Vega-Lite schema Altair validates against.
- Then the garbage collector's generations are frozen (`gc.freeze`): the ~180,000 objects
  those imports leave are alive for the whole process, yet every full collection walked them
  all again, 0.15–0.3 s that fell in whichever script ran then (a page switch). New objects
  are still collected as before.
"""

from __future__ import annotations

import ast
import gc
import importlib
from collections.abc import Iterator
from pathlib import Path

PAGES = Path(__file__).parent


def warm_up() -> None:
    """Start the local model, import what the pages import, then freeze what is loaded."""
    from cogbias.llm.local import warm_in_background
    from cogbias.llm.profiles import resolve

    if warm_in_background() is not None:
        resolve("local/smollm2").cache_extras()  # its file's hash, which a cache key needs
    for name in sorted(set(page_imports())):
        try:
            importlib.import_module(name)
        except Exception:  # a warm-up only: the page itself reports what fails
            continue
    from cogbias.studies import cells
    from cogbias.views import charts_explore

    cell = {"bias": "b", "model": "m", "n": 2, "s1": 0.5, "s2": 0.25, "sabs": 0.5}
    table = cells.summarize_aggregates([{**cell, "smin": 0.0, "smax": 0.5, "failures": 0}])
    charts_explore.explore_heatmap(table).to_dict()
    from streamlit import runtime

    if runtime.exists():  # a served app, not a test's AppTest: the process lives on
        gc.collect()
        gc.freeze()


def page_imports() -> Iterator[str]:
    """The modules the app's pages and their helpers import at their top level (absolute
    imports; `from x import y` gives `x` and, where it is a module, `x.y`). The pages
    themselves are never imported: importing one would run it."""
    for path in sorted(PAGES.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                yield node.module
                yield from (
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if _is_module(f"{node.module}.{alias.name}")
                )


def _is_module(name: str) -> bool:
    """Whether `name` is a module that can be imported (not a function or class in one)."""
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):
        return False
