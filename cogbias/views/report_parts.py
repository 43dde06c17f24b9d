"""What a report is made of, as data: a title, summary lines and sections, each section with
paragraphs, charts (SVG text), tables and a list.

Builders (`views/report.py`, `views/report_methods.py`) fill these with plain text and
frames; only `views/report_html.py` turns them into markup, so every text escapes in one
place. A new kind of report (a class session's) is one more builder returning a `Report`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cogbias.core.errors import UserError


class ReportError(UserError):
    """Nothing to report (no run, dataset or session of that name, no results yet); says
    what to do."""


@dataclass(frozen=True)
class Table:
    """A table of numbers or text; `name` marks it in the HTML (`data-table`) for readers
    and tests that look for one table."""

    caption: str
    frame: pd.DataFrame
    name: str = ""


@dataclass(frozen=True)
class Section:
    heading: str
    paragraphs: tuple[str, ...] = ()
    charts: tuple[str, ...] = ()  # SVG rendered offline (`views/svg.py`), made safe when shown
    tables: tuple[Table, ...] = ()
    items: tuple[str, ...] = ()  # a list below the paragraphs


@dataclass(frozen=True)
class Report:
    kind: str  # "run", "study", "dataset", "compare", "class", "factor" (the file name's hint)
    title: str
    summary: tuple[str, ...]
    sections: tuple[Section, ...]
    methods: tuple[Section, ...]
