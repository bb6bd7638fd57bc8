"""Dash's first two requests answered inside the page: every page's HTML carries the answers its browser would fetch
next, the shell's layout (`_dash-layout`, for this request's reader) and the callback list (`_dash-dependencies`), as
JSON data blocks that assets/preload.js hands to Dash's renderer instead of fetching them — one round trip fewer before
anything is drawn (40 ms over the office link bench/pages.py emulates; more across a VPN)."""

from __future__ import annotations

import html

from dash import Dash

PRELOAD_ATTR = "data-helios-preload"  # on each data block: the URL path whose answer it holds
ENDPOINTS: tuple[str, ...] = ("_dash-layout", "_dash-dependencies")
# JSON inside a <script> element: "</script>" or "<!--" in a string (a dataset's name) must not end the element
JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class PreloadingDash(Dash):
    """Dash whose page HTML carries the answers to `_dash-layout` and `_dash-dependencies` (see the module)."""

    def interpolate_index(self, **parts: str) -> str:
        """Dash's page HTML with the preloaded answers after its config block."""
        return super().interpolate_index(**{**parts, "config": parts.get("config", "") + preload_html(self)})


def preload_html(app: Dash) -> str:
    """The data blocks of this request's `_dash-layout` and `_dash-dependencies` answers, as Dash serves them."""
    answers = {"_dash-layout": app.serve_layout(), "_dash-dependencies": app.dependencies()}
    prefix = app.config.requests_pathname_prefix
    return "".join(
        f'<script type="application/json" {PRELOAD_ATTR}="{html.escape(prefix + name)}">'
        f"{answers[name].get_data(as_text=True).translate(JSON_IN_HTML)}</script>"
        for name in ENDPOINTS
    )
