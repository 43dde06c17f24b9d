"""A `Report` as one self-contained HTML file: inline CSS, charts as inline SVG, no script,
nothing fetched, every text escaped, keys redacted.

The file is meant to be mailed, archived and opened years later with the network off, so it
carries everything it shows. Untrusted text (test case, model and dataset names, citations,
notes) goes through `esc` here and nowhere else (`html.escape`, and the characters of
`safetext.UNSHOWN` escaped, so a right-to-left override cannot reverse what follows it); charts come from vl-convert as SVG,
which is parsed and rebuilt from a short list of drawing elements and attributes (no
script, no link, no event handler, no reference outside the chart), with its ids made unique
so that two charts on one page never borrow each other's gradients or clip paths. A
Content-Security-Policy forbids any fetch or script as a second lock.
"""

from __future__ import annotations

import html
import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from cogbias.core.redact import redactor
from cogbias.core.safetext import terminal_block
from cogbias.views.numbers import MISSING, fixed
from cogbias.views.report_methods import version
from cogbias.views.report_parts import Report, Section, Table

SVG_NS = "http://www.w3.org/2000/svg"
DRAWING = {
    "svg", "g", "path", "rect", "line", "text", "tspan", "defs", "linearGradient",
    "radialGradient", "stop", "clipPath", "circle", "ellipse", "polygon", "polyline", "title",
    "desc",
}  # fmt: skip
# a number (or an interval "-0.12 to +0.30") a page wrote as text: right-aligned, unbroken
NUMBER = r"[+\-−]?\d[\d.,]*(e[+\-]?\d+)?%?"
NUMERIC = re.compile(rf"^{NUMBER}( to {NUMBER})?$")
LOCAL_URL = re.compile(r"url\(#([^)\s]+)\)")
ZOOM = 1.25
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
:root { color-scheme: light; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; color: #212529; background: #f8f9fa; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 32px 40px 64px; background: #fff;
  box-shadow: 0 0 0 1px #e9ecef; }
h1 { font-size: 26px; margin: 0 0 8px; line-height: 1.25; overflow-wrap: anywhere; }
h2 { font-size: 20px; margin: 40px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #e9ecef;
  overflow-wrap: anywhere; }
h3 { font-size: 16px; margin: 24px 0 6px; overflow-wrap: anywhere; }
p, li { max-width: 80ch; overflow-wrap: anywhere; }
.summary { background: #f1f3f5; border-radius: 6px; padding: 12px 20px; margin: 16px 0; }
.summary ul { margin: 0; padding-left: 18px; }
nav ol { margin: 4px 0 0; padding-left: 22px; }
nav a { color: #1864ab; text-decoration: none; }
figure { margin: 16px 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
.table { overflow-x: auto; margin: 12px 0 20px; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 4px 0 6px; caption-side: top; }
th, td { border-bottom: 1px solid #dee2e6; padding: 4px 10px; text-align: left;
  vertical-align: top; overflow-wrap: break-word; max-width: 40ch; }
th { background: #f1f3f5; position: sticky; top: 0; }
td.num { text-align: right; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
footer { margin-top: 48px; color: #5c636a; font-size: 13px; }
@media print { body { background: #fff; } main { box-shadow: none; padding: 0; }
  h2 { break-after: avoid; } figure, table { break-inside: avoid; } }
"""


def esc(text: Any) -> str:
    """Text as HTML: markup escaped, and the characters no page shows raw (`safetext.UNSHOWN`:
    controls, bidi overrides, invisible marks) as `\\x07`, `\\u202e`."""
    return html.escape(terminal_block(str(text)), quote=True)


def cell(value: Any) -> tuple[str, bool]:
    """A table cell as text, and whether it is a number (right-aligned)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return MISSING, False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(value.dtype)):
        return str(int(value)), True
    if isinstance(value, float) or hasattr(value, "dtype"):
        try:
            return fixed(float(value), 3), True
        except (TypeError, ValueError):
            return str(value), False
    return str(value), bool(NUMERIC.match(str(value)))


def table_html(table: Table) -> str:
    frame = table.frame
    head = "".join(f"<th scope='col'>{esc(c)}</th>" for c in frame.columns)
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = []
        for value in values:
            text, number = cell(value)
            cells.append(f"<td class='num'>{esc(text)}</td>" if number else f"<td>{esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    name = f" data-table='{esc(table.name)}'" if table.name else ""
    return (
        f"<div class='table'><table{name}><caption>{esc(table.caption)}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def safe_svg(svg: str, prefix: str, label: str = "") -> str:
    """`svg` rebuilt from drawing elements and plain attributes only, ids prefixed; an image
    named `label` for a screen reader."""
    ET.register_namespace("", SVG_NS)
    root = ET.fromstring(svg)
    ids = {e.get("id") for e in root.iter() if e.get("id")}

    def local(match: re.Match[str]) -> str:
        return f"url(#{prefix}-{match.group(1)})" if match.group(1) in ids else "none"

    for parent in list(root.iter()):
        for child in list(parent):
            if _local(child.tag) not in DRAWING or not child.tag.startswith(f"{{{SVG_NS}}}"):
                parent.remove(child)
    for element in root.iter():
        for name in list(element.attrib):
            value = element.attrib[name]
            bare = _local(name).lower()
            if bare.startswith("on") or "href" in bare or bare == "style" and "url(" in value:
                del element.attrib[name]
            elif bare == "id":
                element.attrib[name] = f"{prefix}-{value}"
            elif "url(" in value:
                element.attrib[name] = LOCAL_URL.sub(local, value)
                if "url(" in element.attrib[name].replace(f"url(#{prefix}-", ""):
                    del element.attrib[name]
    for side in ("width", "height"):  # drawn for a screen page: a little larger reads better
        if (root.get(side) or "").replace(".", "", 1).isdigit():
            root.set(side, f"{float(root.get(side) or 0) * ZOOM:.0f}")
    root.set("role", "img")
    root.set("aria-label", label or "Chart")
    return ET.tostring(root, encoding="unicode")


def section_html(section: Section, anchor: str, charts: list[str], level: int = 2) -> str:
    parts = [f"<section id='{anchor}'><h{level}>{esc(section.heading)}</h{level}>"]
    parts += [f"<p>{esc(p)}</p>" for p in section.paragraphs]
    for svg in section.charts:
        charts.append(svg)
        label = f"Chart: {section.heading}" + (
            ". Its numbers are in the table below." if section.tables else ""
        )
        parts.append(f"<figure>{safe_svg(svg, f'chart{len(charts)}', label)}</figure>")
    parts += [table_html(t) for t in section.tables]
    if section.items:
        parts.append("<ul>" + "".join(f"<li>{esc(i)}</li>" for i in section.items) + "</ul>")
    return "".join(parts) + "</section>"


def render(report: Report, made_at: datetime | None = None) -> str:
    """The report as one HTML document (text): nothing in it loads anything."""
    made = (made_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    charts: list[str] = []
    body = [section_html(s, f"s{i}", charts) for i, s in enumerate(report.sections, 1)]
    methods = [section_html(s, f"m{i}", charts, 3) for i, s in enumerate(report.methods, 1)]
    toc = [
        f"<li><a href='#s{i}'>{esc(s.heading)}</a></li>" for i, s in enumerate(report.sections, 1)
    ]
    if methods:
        toc.append("<li><a href='#methods'>Methods</a></li>")
    summary = "".join(f"<li>{esc(line)}</li>" for line in report.summary)
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='generator' content='cogbias {esc(version())}'>"
        f"<title>{esc(report.title)}</title><style>{STYLE}</style></head><body><main>"
        f"<header><h1>{esc(report.title)}</h1><div class='summary'><ul>{summary}</ul></div>"
        f"<nav><strong>Contents</strong><ol>{''.join(toc)}</ol></nav></header>"
        + "".join(body)
        + (
            f"<div class='methods' id='methods'><h2>Methods</h2>{''.join(methods)}</div>"
            if methods
            else ""
        )
        + f"<footer>Made by cogbias {esc(version())} on {esc(made)}. A self-contained "
        "file: no script, nothing fetched; the charts are drawn in it.</footer>"
        "</main></body></html>"
    )
    return redactor()(page) or ""
