"""The page HTML carries Dash's first two answers (components/server/preload.py)."""

from __future__ import annotations

import html
import json
import re

from dash import html as dash_html

from components.server.preload import ENDPOINTS, PRELOAD_ATTR, PreloadingDash

BLOCK = re.compile(rf'<script type="application/json" {PRELOAD_ATTR}="([^"]*)">(.*?)</script>', re.S)


def _blocks(page: str) -> dict[str, str]:
    return {html.unescape(path): text for path, text in BLOCK.findall(page)}


def test_every_page_carries_the_layout_and_callback_list_dash_would_fetch(dash_app):
    client = dash_app.server.test_client()
    for path in ("/", "/cluster", "/data", "/jobs/1"):
        blocks = _blocks(client.get(path).get_data(as_text=True))
        assert sorted(blocks) == sorted("/" + name for name in ENDPOINTS), path
        for name in ENDPOINTS:
            assert json.loads(blocks["/" + name]) == client.get("/" + name).get_json(), (path, name)


def test_a_layout_text_cannot_end_its_data_block():
    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    app = PreloadingDash(__name__, requests_pathname_prefix="/hx/", routes_pathname_prefix="/hx/")
    app.layout = dash_html.Div(hostile, id="hostile")
    page = app.server.test_client().get("/hx/").get_data(as_text=True)
    assert "<script>alert(1)" not in page
    blocks = _blocks(page)
    assert set(blocks) == {"/hx/_dash-layout", "/hx/_dash-dependencies"}  # under the app's path prefix
    assert json.loads(blocks["/hx/_dash-layout"])["props"]["children"] == hostile
