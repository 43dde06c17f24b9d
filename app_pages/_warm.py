"""The app's warm-up, once per server process while a person reads the first page: what each
page's first visit would otherwise pay on the click.

- The local model starts (its own thread: llama.cpp loads outside the interpreter), so
  Learn's first live pair finds it running.
- The pages' modules of ours and pandas (`WARMED`) are imported (with them Altair, SciPy and
  pyarrow: 0.3–0.7 s of a page's first visit each), and Explore's heatmap is built once,
  which loads the Vega-Lite schema Altair validates against.
- Then the garbage collector's generations are frozen (`gc.freeze`): the ~180,000 objects
  those imports leave are alive for the whole process, yet every full collection walked them
  all again, 0.15–0.3 s that fell in whichever script ran then (a page switch). New objects
  are still collected as before.

The imports go one module at a time, each when no page's script is running
(`script_running`, around every run in app.py): Python runs one thread at a time, so on a
busy machine, where the warm-up takes several seconds, a click would otherwise wait for it.
"""

from __future__ import annotations

import ast
import gc
import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

PAGES = Path(__file__).parent
# The packages imported ahead (ours pull in Altair, SciPy and pyarrow). Streamlit-facing ones
# are left to the scripts that use them: a custom component declared from this thread (the
# Templates editor, streamlit_ace) never drew its frame.
WARMED = ("cogbias", "pandas")
# How long the warm-up waits for the scripts to end before it goes on anyway (a page that
# keeps its script running must not keep the others cold).
PATIENCE = 10.0
_idle = threading.Condition()
_running = 0  # page scripts running now, in any session


@contextmanager
def script_running() -> Iterator[None]:
    """Around a page's script run: the warm-up waits while any runs."""
    global _running
    with _idle:
        _running += 1
    try:
        yield
    finally:
        with _idle:
            _running -= 1
            _idle.notify_all()


def _when_idle() -> None:
    with _idle:
        _idle.wait_for(lambda: _running == 0, timeout=PATIENCE)


def warm_up(imports: dict[str, set[str]]) -> None:
    """Start the local model, import `imports` (`page_imports()`, read by the caller in a
    script's thread), then freeze what is loaded."""
    from cogbias.llm.local import warm_in_background
    from cogbias.llm.profiles import resolve

    if warm_in_background() is not None:
        resolve("local/smollm2").cache_extras()  # its file's hash, which a cache key needs
    for module, names in sorted(imports.items()):
        if module.split(".")[0] not in WARMED:
            continue
        loaded = _imported(module)
        if loaded is None or not hasattr(loaded, "__path__"):
            continue  # `from a.module import a_name`: nothing more to import
        for name in sorted(names):  # `from a.package import a_module`
            if not hasattr(loaded, name) or isinstance(getattr(loaded, name), ModuleType):
                _imported(f"{module}.{name}")
    from cogbias.studies import cells
    from cogbias.views import charts_explore

    _when_idle()
    cell = {"bias": "b", "model": "m", "n": 2, "s1": 0.5, "s2": 0.25, "sabs": 0.5}
    table = cells.summarize_aggregates([{**cell, "smin": 0.0, "smax": 0.5, "failures": 0}])
    charts_explore.explore_heatmap(table).to_dict()
    from streamlit import runtime

    if runtime.exists():  # a served app, not a test's AppTest: the process lives on
        gc.collect()
        gc.freeze()


def _imported(name: str) -> ModuleType | None:
    """`name` imported once no page's script runs; None if it cannot be (a warm-up only:
    the page that needs it says what fails)."""
    _when_idle()
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def page_imports() -> dict[str, set[str]]:
    """What the app's pages and their helpers import at their top level, read from their
    source without importing anything: each absolute module with the names taken from it
    (none for `import module`). The pages themselves are never imported: importing one
    would run it. Called in a script's thread, never the warm-up's: Python 3.11's parser
    is not safe beside another thread's (Streamlit parses every script it runs), and a
    parse in the warm-up's thread failed with "AST constructor recursion depth mismatch"."""
    found: dict[str, set[str]] = {}
    for path in sorted(PAGES.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name, set())
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.setdefault(node.module, set()).update(a.name for a in node.names)
    return found
