"""The app's warm-up (`app_pages/_warm.py`) imports what the pages import, and never a page:
importing a page would run its script outside any session."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from app_pages import _warm

PAGES = Path(_warm.__file__).parent


def test_the_warm_up_reads_every_pages_imports_and_imports_no_page(monkeypatch):
    listed = _warm.page_imports()
    for path in PAGES.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                assert {a.name for a in node.names} <= listed[node.module], path.name
    pages = {p.stem for p in PAGES.glob("*.py") if not p.stem.startswith("_")}
    assert not pages & listed["app_pages"]  # no page is imported from the package
    assert {"_tables", "_factor"} <= listed["app_pages"]
    imported: list[str] = []
    real = _warm._imported

    def counted(name: str):
        imported.append(name)
        return real(name)

    monkeypatch.setattr(_warm, "_imported", counted)
    _warm.warm_up(listed)  # the local model stays off in tests (COGBIAS_LOCAL_WARM=0)
    # a package's modules are imported (`from cogbias.runs import kinds`), a module's names
    # are not taken for modules (`from cogbias.views.export import FORMATS`)
    assert {"cogbias.runs.kinds", "cogbias.views.export"} <= set(imported)
    # the Streamlit-facing ones are left to the scripts (a component declared from the
    # warm-up's thread never drew its frame)
    assert all(name.split(".")[0] in _warm.WARMED for name in imported)
    assert "cogbias.views.export.FORMATS" not in imported
    assert all(name in sys.modules for name in imported)
