"""Cluster page: utilisation and jobs over time, diurnal and weekly patterns, monthly trends, per-VC utilisation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dash
from dash import Dash, Input, Output, State, dcc, no_update

from components.charts import figures
from components.charts import registry as charts
from components.datasets import access
from components.shell import controls
from components.shell.controls import figure_card, grid, wide_row
from components.shell.layout import page_layout

dash.register_page(__name__, path="/cluster", name="Cluster", title="Helios Dashboard · Cluster", order=1)

UTIL = "utilization"
VC = "vc_util"
FIG4 = "vc_fig4"
ZOOM = "utilization-zoom"  # the x-range changes of the utilisation chart (its other relayout events stay here)


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """The cluster page's figures for a filter state."""
    return [
        dcc.Store(id=ZOOM),
        wide_row(UTIL, state, 420, lazy=False),
        wide_row("running_queued", state, lazy=False),
        grid([figure_card("diurnal_util", state), figure_card("diurnal_submit", state)]),
        grid([figure_card("heatmap", state), figure_card("monthly", state)]),
        wide_row(FIG4, state, 620),
        wide_row(VC, state, 440),
    ]


layout = page_layout(
    "Cluster",
    "GPU utilisation and load over time (drag the range slider to zoom), daily and weekly rhythms, monthly "
    "trends and utilisation per virtual cluster: as the paper's Fig 4 draws it (May 2020 without May 10, the 10 "
    "largest VCs, the published values beside), then every VC in the window you chose. Click a VC to filter the "
    "whole dashboard to it.",
    body,
)


def visible_window(relayout: dict[str, Any] | None) -> tuple[datetime | None, datetime | None] | None:
    """The x window a relayout event asks for: (x0, x1), (None, None) to reset, or None when x did not change."""
    if not relayout:
        return None
    if relayout.get("xaxis.autorange"):
        return (None, None)
    bounds = relayout.get("xaxis.range") or [relayout.get("xaxis.range[0]"), relayout.get("xaxis.range[1]")]
    if not bounds or bounds[0] is None or bounds[1] is None:
        return None
    x0, x1 = (datetime.fromisoformat(str(b).replace("T", " ")[:19]) for b in bounds)
    return (x0, x1) if x0 < x1 else None


def zoom_utilization(relayout: dict[str, Any] | None, spec: dict[str, Any]):
    """Redraw the utilisation series at the resolution the zoomed window needs, keeping the zoom."""
    window = visible_window(relayout)
    if window is None:
        return no_update
    try:
        df = charts.utilization_window(spec, *window)
    except access.USER_ERRORS as exc:
        return figures.empty_figure(str(exc))
    fig = figures.utilization_figure(charts.thinned_utilization(df, spec, None if window[0] is None else window))
    if window[0] is not None:
        fig.update_xaxes(range=[window[0], window[1]])
    return fig


# A click on a VC's box or marker filters the dashboard to it (its customdata names the VC); in the browser, so that
# the chart's appearance on the page (which Dash reports as an input of this callback) costs no request.
DRILL_TO_VC_JS = """function (click) {
    var points = (click || {}).points;
    var vc = points && points.length ? points[0].customdata : null;
    return typeof vc === "string" ? [vc] : window.dash_clientside.no_update;
}"""


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    # Plotly reports every drawing (autosize) as a relayout: only a change of the x range goes to the server.
    app.clientside_callback(
        """function (relayout) {
            var keys = Object.keys(relayout || {});
            var x = keys.some(function (k) { return k.indexOf("xaxis.range") === 0 || k === "xaxis.autorange"; });
            return x ? relayout : window.dash_clientside.no_update;
        }""",
        Output(ZOOM, "data"),
        Input({"type": controls.GRAPH, "name": UTIL}, "relayoutData"),
        prevent_initial_call=True,
    )
    # the spec the card asked its figure with (at the viewport's width), else the one it was laid out with
    app.callback(
        Output({"type": controls.GRAPH, "name": UTIL}, "figure", allow_duplicate=True),
        Input(ZOOM, "data"),
        State({"type": controls.WANT, "name": UTIL}, "data"),
        State({"type": controls.SPEC, "name": UTIL}, "data"),
        prevent_initial_call=True,
    )(lambda relayout, asked, spec: zoom_utilization(relayout, asked or spec))
    app.clientside_callback(
        DRILL_TO_VC_JS,
        Output(controls.VCS, "value", allow_duplicate=True),
        Input({"type": controls.GRAPH, "name": VC}, "clickData"),
        prevent_initial_call=True,
    )
