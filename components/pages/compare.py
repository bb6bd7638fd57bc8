"""Compare page: datasets and clusters side by side on the same figures, with the published Helios values."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, Input, Output, State, html, no_update

from analytics.filters import page_params, parse_query, to_query
from components.charts import reference
from components.charts import registry as charts
from components.datasets import access
from components.shell import controls
from components.shell.controls import figure_card, grid
from components.shell.layout import page_layout

dash.register_page(__name__, path="/compare", name="Compare", title="Helios Dashboard · Compare", order=4)

DATASETS = "compare-datasets"
OVERLAY = "compare-overlay"
FIGURES: tuple[str, ...] = tuple(charts.COMPARE_CHARTS)


def chosen(params: dict[str, Any], names: list[str]) -> tuple[list[str], bool]:
    """The datasets to compare (URL `cmp`, default the first four) and whether to overlay (`ref=1`)."""
    wanted = [n for n in str(params.get("cmp", "")).split(",") if n in names]
    return (wanted if "cmp" in params else names[:4]), params.get("ref") == "1"


def body(state: dict[str, Any], params: dict[str, Any]) -> list:
    """The dataset and overlay controls and the comparison cards for a filter state and the page's parameters."""
    names = access.dataset_names()
    picked, overlay = chosen(params, names)
    has_reference = bool(reference.load_reference())
    controls_row = dbc.Row(
        [
            dbc.Col(
                [
                    dbc.Label("Datasets", className="small text-muted mb-0"),
                    dbc.Checklist(id=DATASETS, options=names, value=picked, inline=True),
                ],
                xs=12,
                md=8,
            ),
            dbc.Col(
                dbc.Switch(
                    id=OVERLAY,
                    label="Overlay published Helios values",
                    value=overlay and has_reference,
                    disabled=not has_reference,
                ),
                xs=12,
                md=4,
                className="pt-md-3",
            ),
        ],
        className="mb-2",
    )
    return [controls_row, html.Div(cards(state, picked, overlay and has_reference))]


layout = page_layout(
    "Compare",
    "Every cluster of the chosen datasets on the same axes (job-kind, state and GPU filters apply; cluster, VC, "
    "user and date filters do not, since they differ between datasets). The overlay draws the values "
    "published for the real Helios trace (Hu et al., SC'21) as dashed lines.",
    body,
)


def cards(state: dict[str, Any], datasets: list[str], overlay: bool) -> list:
    """The comparison figure cards for the chosen datasets."""
    if not datasets:
        return [dbc.Alert("Choose at least one dataset to compare.", color="info")]
    extra = {"datasets": list(datasets), "overlay": bool(overlay)}
    made = [figure_card("cmp_" + name, state, extra=extra) for name in FIGURES]
    return [grid(made[i : i + 2]) for i in range(0, len(made), 2)]


def compare_url(datasets: list[str] | None, overlay: bool, search: str | None):
    """The URL query with the compared datasets and the overlay switch written into it (no update when the URL
    already says so: a new URL redraws the whole page)."""
    params = page_params(search)
    if (list(datasets or []), bool(overlay)) == chosen(params, access.dataset_names()):
        return no_update
    state, _ = parse_query(search)
    extra = {**params, "cmp": ",".join(datasets or [])}
    extra.pop("ref", None)
    if overlay:
        extra["ref"] = "1"
    return to_query(state, extra)


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    app.callback(
        Output(controls.URL, "search", allow_duplicate=True),
        Input(DATASETS, "value"),
        Input(OVERLAY, "value"),
        State(controls.URL, "search"),
        prevent_initial_call=True,
    )(compare_url)
