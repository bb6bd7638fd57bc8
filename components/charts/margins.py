"""A figure's bottom margin fitted to the width it is drawn at: the template's legend sits at the figure's foot and
wraps into more rows on a narrower plot; plotly's automargin then grows the margin inside the first draw and draws
the figure again (twice the drawing time of a chart). Given the rows the legend will take, plotly draws it once.
The rows are counted as plotly's legend lays out its entries, from text widths in DejaVu Sans scaled to the reader's
own font (the browser measures a sample text in the charts' font: assets/viewport.js), taken a little narrow: a
count that comes out short leaves plotly to grow the margin as before, while one too long would leave a gap below
the axis title."""

from __future__ import annotations

import json
import math
from typing import Any

from components.charts import decimate, figures

# plotly.js's horizontal legend (src/components/legend/draw.js, computeLegendDimensions): an entry is its symbol
# (itemwidth 30) and two item gaps of 5 before its text, and one gap of 5 after it; the entries share one row when
# they fit the plot's width, else each takes the widest one's width.
ENTRY_PAD_PX = 40
ENTRY_GAP_PX = 5
# A legend taller than half its figure scrolls. The smallest figure card is 380 px high (controls.figure_card):
# beyond the rows that fit half of it, plotly is left to grow the margin itself.
SMALLEST_FIGURE_PX = 380
# DejaVu Sans's advance widths of the printable ASCII characters in hundredths of an em (measured in Chromium).
DEJAVU_EM100: dict[str, int] = {
    char: width
    for width, chars in (
        (27, "'"), (28, "ijl"), (29, "IJ"), (32, " ,."), (34, "/:;\\|"), (35, "f"), (36, "-"), (39, "()[]t"),
        (40, "!"), (41, "r"), (46, '"'), (50, "*_`"), (52, "sz"), (53, "?"), (55, "c"), (56, "L"), (58, "Fk"),
        (59, "vxy"), (60, "P"), (61, "TYao"), (62, "e"), (63, "ESbdghnpqu"), (64, "0123456789${}"), (66, "K"),
        (68, "AV"), (69, "BRXZ"), (70, "C"), (73, "U"), (75, "HN"), (77, "DG"), (78, "&"), (79, "OQ"), (82, "w"),
        (84, "#+<=>^~"), (86, "M"), (95, "%"), (97, "m"), (99, "W"), (100, "@"),
    )
    for char in chars
}  # fmt: skip
OTHER_EM100 = 63  # any other character: a lowercase letter's width
# The text the browser measures at 100 px in the charts' font (<meta name="helios-text-sample">): its width against
# DejaVu Sans's scales every estimate to the reader's font.
TEXT_SAMPLE = "Helios Earth Saturn Venus (published) 0123456789 %"
TEXT_SAMPLE_META = "helios-text-sample"
TEXT_SCALE_BOUNDS = (0.6, 1.4)
NARROW = 0.98  # the estimate a little narrow: a shape that differs from DejaVu Sans's costs a second draw, no gap
TEXT_COOKIE = "helios-text-sample"  # the width the browser set TEXT_SAMPLE in (assets/viewport.js)


def text_sample_meta() -> dict[str, str]:
    """The <meta> naming the text and font the browser measures for text_scale."""
    font = figures.TEMPLATE.layout.font.family
    return {"name": TEXT_SAMPLE_META, "content": json.dumps({"text": TEXT_SAMPLE, "font": font})}


def text_scale(sample_px: Any) -> float:
    """The reader's font's width against DejaVu Sans's, from the width the browser measured TEXT_SAMPLE at 100 px
    (bounded); the narrowest bound when unmeasured or unreadable (no row counted that a narrow font would not take)."""
    low, high = TEXT_SCALE_BOUNDS
    try:
        measured = float(str(sample_px)[:12])
    except (TypeError, ValueError):
        return low
    if not math.isfinite(measured):
        return low
    return min(max(measured / (text_px(TEXT_SAMPLE, 100.0)), low), high)


def text_px(text: str, font_px: float, scale: float = 1.0) -> float:
    """The width text takes in DejaVu Sans of font_px, times scale (the reader's font against it)."""
    return sum(DEJAVU_EM100.get(c, OTHER_EM100) for c in text) / 100 * font_px * scale


def legend_rows(text_widths_px: list[float], plot_px: float) -> int:
    """The rows plotly lays a horizontal legend's entries (their text widths) out in across a plot plot_px wide."""
    entries = [ENTRY_PAD_PX + w for w in text_widths_px]
    if not entries:
        return 0
    one_row = sum(entries) + (len(entries) - 1) * ENTRY_GAP_PX < plot_px
    widest = max(entries)
    rows, x_px = 1, 0.0
    for entry in entries:
        step = (entry if one_row else widest) + ENTRY_GAP_PX
        if x_px > 0 and x_px + step - ENTRY_GAP_PX >= plot_px:
            rows, x_px = rows + 1, 0.0
        x_px += step
    return rows


def card_plot_width_px(viewport_px: Any, wide: bool) -> int:
    """The plot area's width of a figure card (wide: the whole row; else half of it from the lg breakpoint on) in a
    viewport of viewport_px (bounded; the default when unreadable)."""
    return decimate.card_plot_px(decimate.viewport_width(viewport_px), 1.0 if wide else 0.5)


def _foot_legend(layout: dict[str, Any]) -> dict[str, Any] | None:
    """The figure's legend settings when it is the template's, at the figure's foot, below a margin that leaves it a
    row (figures.bottom_margin_px: not below a range slider, which makes its own room); else None."""
    template = (layout.get("template") or {}).get("layout") or {}
    legend = {**(template.get("legend") or {}), **(layout.get("legend") or {})}
    at_foot = legend.get("orientation") == "h" and legend.get("yref") == "container" and legend.get("y") == 0
    slider = ((layout.get("xaxis") or {}).get("rangeslider") or {}).get("visible")
    return legend if at_foot and not slider else None


def _entries(figure: dict[str, Any], legend: dict[str, Any]) -> list[str]:
    """The names plotly lists in figure's legend, or none when it draws no legend or groups its entries (a grouped
    legend wraps by another rule)."""
    traces = [{"showlegend": None, "visible": None, **t} for t in figure.get("data") or []]
    listed = [t for t in traces if figures.listed(t)]
    grouped = "grouped" in str(legend.get("traceorder") or "") or any(t.get("legendgroup") for t in listed)
    drawn = figures.legend_drawn((figure.get("layout") or {}).get("showlegend"), len(listed))
    return [str(t.get("name") or "") for t in listed] if drawn and not grouped else []


def _font_px(layout: dict[str, Any], legend: dict[str, Any]) -> float:
    template = (layout.get("template") or {}).get("layout") or {}
    for font in (legend.get("font"), layout.get("font"), template.get("font")):
        if isinstance(font, dict) and font.get("size"):
            return float(font["size"])
    return 12.0  # plotly's default


def fitted(figure: dict[str, Any], plot_px: int, scale: float = 1.0) -> dict[str, Any]:
    """figure (a plotly JSON dict, not changed) with its bottom margin grown by the legend rows beyond the first that
    its foot legend takes across a plot plot_px wide, in a font scale times as wide as DejaVu Sans (figures.style
    leaves room for one row)."""
    layout = figure.get("layout") or {}
    legend = _foot_legend(layout)
    names = _entries(figure, legend) if legend is not None else []
    if not names:
        return figure
    font_px = _font_px(layout, legend)
    line_px = figures.legend_row_px(font_px)
    rows = legend_rows([text_px(name, font_px, scale * NARROW) for name in names], plot_px)
    if rows <= 1 or rows * line_px + 2 * ENTRY_GAP_PX > SMALLEST_FIGURE_PX / 2:
        return figure
    margin = dict(layout.get("margin") or {})
    bottom_px = margin.get("b", figures.TEMPLATE.layout.margin.b)
    margin["b"] = bottom_px + math.ceil((rows - 1) * line_px)
    return {**figure, "layout": {**layout, "margin": margin}}
