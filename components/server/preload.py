"""Dash's first two requests answered inside the page: every page's HTML carries the answers its browser would fetch
next, the layout (`_dash-layout`) and the callback list (`_dash-dependencies`), as JSON data blocks that
assets/preload.js hands to Dash's renderer instead of fetching them — one round trip fewer before anything is drawn
(40 ms over the office link bench/pages.py emulates; more across a VPN). The layout is the one laid out for the page's
URL (the app's requested_layout) when there is one: the callbacks that would fill the shell on load (the pages
router, the filter bar's) have nothing left to do, and the page's own callbacks go out at once — another round trip
and a redraw fewer."""

from __future__ import annotations

import html
import logging
from collections.abc import Callable

import flask
from dash import Dash
from dash.development.base_component import Component
from plotly.io.json import to_json_plotly

log = logging.getLogger(__name__)

PRELOAD_ATTR = "data-helios-preload"  # on each data block: the URL path whose answer it holds
URL_ATTR = "data-helios-url"  # on a layout laid out for its page's URL: that URL (pathname and search)
ENDPOINTS: tuple[str, ...] = ("_dash-layout", "_dash-dependencies")
# JSON inside a <script> element: "</script>" or "<!--" in a string (a dataset's name) must not end the element
JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class PreloadingDash(Dash):
    """Dash whose page HTML carries the answers to `_dash-layout` and `_dash-dependencies` (see the module); set
    requested_layout to lay each page out for its URL (pathname, search) in its HTML."""

    requested_layout: Callable[[str, str], Component | None] | None = None

    def interpolate_index(self, **parts: str) -> str:
        """Dash's page HTML with the preloaded answers after its config block."""
        return super().interpolate_index(**{**parts, "config": parts.get("config", "") + preload_html(self)})


def preload_html(app: Dash) -> str:
    """The data blocks of this request's `_dash-layout` and `_dash-dependencies` answers, as Dash serves them (the
    layout's block names the URL it was laid out for, if it was: assets/preload.js uses it only at that URL)."""
    layout, laid_for = layout_json(app)
    answers = {"_dash-layout": layout, "_dash-dependencies": app.dependencies().get_data(as_text=True)}
    prefix = app.config.requests_pathname_prefix
    url_attr = {"_dash-layout": f' {URL_ATTR}="{html.escape(laid_for)}"' if laid_for else ""}
    return "".join(
        f'<script type="application/json" {PRELOAD_ATTR}="{html.escape(prefix + name)}"{url_attr.get(name, "")}>'
        f"{answers[name].translate(JSON_IN_HTML)}</script>"
        for name in ENDPOINTS
    )


def layout_json(app: Dash) -> tuple[str, str | None]:
    """The layout for this page request as JSON and the URL (pathname and search) it was laid out for; the shell
    `_dash-layout` serves and None when the server cannot tell the URL as the browser has it, requested_layout gives
    none or laying it out fails (the browser's callbacks then fill it)."""
    url = browser_url(app)
    requested = getattr(app, "requested_layout", None)
    laid_out = None
    if url and requested:
        try:
            laid_out = requested(*url)
        except Exception:  # the pages router, run by the browser on the shell, reports it as it always has
            log.exception("laying out %s for its HTML failed; serving the bare shell", url[0][:200])
    if laid_out is None:
        return app.serve_layout().get_data(as_text=True), None
    return to_json_plotly(laid_out), "".join(url)


def browser_url(app: Dash) -> tuple[str, str] | None:
    """This request's pathname and search as the browser's location has them (the request line's own text, moved
    from the routes prefix to the requests prefix), or None when the request line does not give them."""
    raw = flask.request.environ.get("RAW_URI") or flask.request.environ.get("REQUEST_URI", "")  # gunicorn; uWSGI
    path, _, query = raw.partition("?")
    routes = app.config.routes_pathname_prefix
    if not path.startswith(routes):
        return None
    return app.config.requests_pathname_prefix + path[len(routes) :], f"?{query}" if query else ""
