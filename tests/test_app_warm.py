"""The app's warm-up (`app_pages/_warm.py`) imports what the pages import, and never a page:
importing a page would run its script outside any session."""

from __future__ import annotations

import ast
from pathlib import Path

from app_pages import _warm

PAGES = Path(_warm.__file__).parent


def test_the_warm_up_imports_every_pages_modules_and_no_page():
    named = set(_warm.page_imports())
    pages = {f"app_pages.{p.stem}" for p in PAGES.glob("*.py") if not p.stem.startswith("_")}
    assert not named & pages
    for path in PAGES.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                assert node.module in named, (path.name, node.module)
    # the helpers a page takes from the package (`from app_pages import _factor`) and the
    # library's modules taken the same way (`from cogbias.runs import kinds`) are modules
    assert {"app_pages._tables", "app_pages._factor", "cogbias.runs.kinds"} <= named
    assert "cogbias.views.export.FORMATS" not in named  # a name in a module, not a module
