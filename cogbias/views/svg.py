"""Charts as files: SVG and PNG rendered offline.

Reports and saved figures must open with the network off and carry no script, so charts are
rendered here by vl-convert (a bundled Vega engine, no browser, no fetch) rather than embedded
as Vega-Lite for a browser to draw.

This is the one door to vl-convert, and what it is handed cannot take the process down. Its
text measurer aborts the whole process (a Rust panic, exit 134: the app's server with it) on
a character XML cannot hold, such as a BEL in a test case's name, and a label of 20,000
characters asked it for a 132 GB picture. So every text of a spec (`drawable`) has the
characters of `safetext.UNSHOWN` escaped (`\\x07`, `\\u202e`: shown, and no override reverses
what follows) and is cut to `MAX_DRAWN_CHARS`, and a PNG is drawn from the SVG only when its
size is known to be bounded (`MAX_PNG_PIXELS`). Whatever vl-convert still refuses is a
`ChartError`: the command says `error:`, the page shows the message.
"""

from __future__ import annotations

import re
from typing import Any

import altair as alt
import vl_convert

from cogbias.core.errors import UserError
from cogbias.core.safetext import clipped, terminal_block

# A drawn text past this is cut (its start and end kept): two made names fit whole (a name
# has at most 200 characters, `core.limits.MAX_NAME_CHARS`), a longer one cannot widen the
# chart by more than about 1,700 px.
MAX_DRAWN_CHARS = 300
# A PNG of at most this many pixels (400 MB as RGBA); a page-wide 30 x 10 heatmap at print
# resolution is about 7 million.
MAX_PNG_PIXELS = 100_000_000
# Keys whose text is a Vega expression, never drawn: escaped (the same as the data it reads),
# never cut.
_EXPRESSIONS = {"expr", "filter", "calculate", "test", "labelExpr"}
_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"')


class ChartError(UserError):
    """A chart vl-convert cannot draw as asked (too large, or a spec it refuses)."""


def drawable(node: Any, key: str = "") -> Any:
    """A copy of a Vega-Lite spec whose every text (keys too, so a field named after a model
    still matches its data) is safe to draw: unshown characters escaped, cut to
    MAX_DRAWN_CHARS (expressions only escaped)."""
    if isinstance(node, str):
        text = terminal_block(node)
        return text if key in _EXPRESSIONS else clipped(text, MAX_DRAWN_CHARS)
    if isinstance(node, dict):
        return {drawable(k): drawable(v, str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [drawable(item, key) for item in node]
    return node


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as a standalone SVG document, text as `<text>` elements (see the module
    docstring for what it is made safe from)."""
    try:
        drawn = vl_convert.vegalite_to_svg(drawable(chart.to_dict()))
    except ValueError as exc:  # vl-convert's refusals (a spec Vega cannot compile)
        raise ChartError(f"the chart cannot be drawn: {str(exc)[:300]}") from None
    # Vega-Lite writes titles into its aria-label expressions, which read a backslash escape
    # in them ("\\x07", typed in a name) as the character: escaped again here, so the SVG
    # stays XML that a PNG, a report and a browser can read.
    return terminal_block(drawn)


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0, ppi: float | None = None) -> bytes:
    """The chart as PNG; `scale` 2 gives print resolution at the chart's own size. `ppi`, if
    given, is written into the file so it prints at the size meant (else 72 per inch).
    Drawn from the SVG, once its size times the resolution is known to fit MAX_PNG_PIXELS
    (vl-convert scales by `ppi` / 72 on top of `scale`)."""
    svg = chart_svg(chart)
    factor = scale * (ppi or 72) / 72
    size = _SIZE.search(svg[:2000])
    width, height = (float(size.group(1)), float(size.group(2))) if size else (0.0, 0.0)
    if not size or width * height * factor**2 > MAX_PNG_PIXELS:
        raise ChartError(
            f"the chart would be {width * factor:,.0f} x {height * factor:,.0f} pixels as a PNG, "
            f"more than {MAX_PNG_PIXELS:,} in all; save it as SVG, or draw fewer rows or "
            "columns"
        )
    try:
        return vl_convert.svg_to_png(svg, scale=scale, ppi=ppi)
    except (ValueError, RuntimeError) as exc:  # resvg's refusals
        raise ChartError(f"the chart cannot be drawn as a PNG: {str(exc)[:300]}") from None
