"""What-if page: scheduling and CES scenarios over a window of the trace, compared with the recorded one."""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, html

from components.whatif import callbacks as whatif_callbacks

dash.register_page(__name__, path="/whatif", name="What-if", title="Helios Dashboard · What-if", order=6)


def layout(**params: Any) -> html.Div:
    """The what-if page for the URL's query parameters."""
    return whatif_callbacks.page_layout(params)


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    whatif_callbacks.register(app)
