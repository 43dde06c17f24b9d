"""Charts as files: SVG and PNG rendered offline.

Reports and saved figures must open with the network off and carry no script, so charts are
rendered here by vl-convert (a bundled Vega engine, no browser, no fetch) rather than embedded
as Vega-Lite for a browser to draw.
"""

from __future__ import annotations

import altair as alt
import vl_convert


def chart_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as a standalone SVG document, text as `<text>` elements."""
    return vl_convert.vegalite_to_svg(chart.to_dict())


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0, ppi: float | None = None) -> bytes:
    """The chart as PNG; `scale` 2 gives print resolution at the chart's own size. `ppi`, if
    given, is written into the file so it prints at the size meant (else 72 per inch)."""
    return vl_convert.vegalite_to_png(chart.to_dict(), scale=scale, ppi=ppi)
