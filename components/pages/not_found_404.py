"""The page for a path that names no page (answered with HTTP 404 by components.pages.status)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import dcc, html

from components.shell import controls

dash.register_page(
    __name__, path="/404", name="Not found", title="Helios Dashboard · Not found", nav=False, charts=False
)


def layout(**_params: object) -> html.Div:
    """Say the page does not exist and link to the pages that do."""
    links = [html.Li(dcc.Link(name, href=path)) for path, name in controls.pages()]
    return html.Div(
        [
            controls.page_header("Page not found", "There is no page at this address."),
            dbc.Alert(["Start from the ", dcc.Link("overview", href="/", id="not-found-home"), "."], color="warning"),
            html.P("Or open one of the pages:", className="small mb-1"),
            html.Ul(links, className="small"),
        ],
        id="not-found",
    )
