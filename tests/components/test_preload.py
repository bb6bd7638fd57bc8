"""The page HTML carries Dash's first two answers (components/server/preload.py)."""

from __future__ import annotations

import html
import json
import re

import pytest
from dash import html as dash_html

from components.server.preload import ENDPOINTS, PRELOAD_ATTR, URL_ATTR, PreloadingDash, browser_url
from components.shell import callbacks, controls
from tests.components.conftest import ROUTER_OUTPUT, SYNC_OUTPUT, find, post_callback, walk

SYNC_OUTPUTS = callbacks.SYNC_OUTPUTS

BLOCK = re.compile(rf'<script type="application/json" {PRELOAD_ATTR}="([^"]*)"[^>]*>(.*?)</script>', re.S)


def _blocks(page: str) -> dict[str, str]:
    return {html.unescape(path): text for path, text in BLOCK.findall(page)}


def _shell_after_load(client, pathname: str, search: str) -> dict:
    """The bare shell `_dash-layout` serves with the answers the callbacks that run as its Locations mount give for a
    URL (the pages router, the filter bar's, its style) applied, as the browser would hold it."""
    layout = client.get("/_dash-layout").get_json()
    location = [{"property": "pathname", "value": pathname}, {"property": "search", "value": search}]
    router = post_callback(
        client,
        ROUTER_OUTPUT,
        [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}],
        [{"id": "_pages_location", **i} for i in location],
    )["response"]
    filters = [{"id": controls.URL, "property": "search", "value": search}]
    filters += [{"id": controls.FILTER_RESET, "property": "n_clicks", "value": None}]
    filters += [{"id": i, "property": p, "value": None} for i, p in callbacks.FILTER_INPUTS]
    sync = post_callback(client, SYNC_OUTPUT, [{"id": i, "property": p} for i, p in SYNC_OUTPUTS], filters)["response"]
    style = post_callback(
        client,
        f"{controls.FILTER_BAR}.style",
        {"id": controls.FILTER_BAR, "property": "style"},
        [{"id": controls.URL, **location[0]}],
    )["response"]
    located = {i: {"pathname": pathname, "search": search} for i in (controls.URL, "_pages_location")}
    for cid, props in (*router.items(), *sync.items(), *style.items(), *located.items()):
        find(layout, cid).update(props)
    return layout


def _without_tokens(layout: dict) -> dict:
    """layout with the lazy-load tokens (new with every layout) blanked."""
    for node in walk(layout):
        if controls.LAZY_TOKEN in node["props"]:
            node["props"][controls.LAZY_TOKEN] = ""
    return layout


URLS = (
    ("/", ""),
    ("/cluster", "?cluster=Venus&range=7d"),
    ("/jobs", "?state=FAILED&gmin=8"),
    ("/data", ""),
    ("/whatif", "?pol=qssf"),
    ("/jobs/1", "?ds=helios-synth"),
    ("/no-such-page", ""),
    ("/users", "?cluster=nowhere&gmin=x"),
)


@pytest.mark.parametrize(("pathname", "search"), URLS)
def test_a_page_is_laid_out_in_its_html_as_the_callbacks_run_on_load_would_leave_the_shell(dash_app, pathname, search):
    client = dash_app.server.test_client()
    client.get(pathname + search)  # a dataset's first reads derive files (the data page names its size on disk)
    after_load = _without_tokens(_shell_after_load(client, pathname, search))
    blocks = _blocks(client.get(pathname + search).get_data(as_text=True))
    assert sorted(blocks) == sorted("/" + name for name in ENDPOINTS)
    assert json.loads(blocks["/_dash-dependencies"]) == client.get("/_dash-dependencies").get_json()
    preloaded = _without_tokens(json.loads(blocks["/_dash-layout"]))
    assert find(preloaded, "_pages_content")["children"] is not None  # not the bare shell
    assert preloaded == after_load


def test_a_layout_laid_out_for_its_url_names_it_and_the_bare_shell_names_none(dash_app, monkeypatch):
    client = dash_app.server.test_client()
    laid_out = client.get("/users?cluster=Venus&x=%3Cb%3E").get_data(as_text=True)
    assert f'{PRELOAD_ATTR}="/_dash-layout" {URL_ATTR}="/users?cluster=Venus&amp;x=%3Cb%3E">' in laid_out
    monkeypatch.setattr(dash_app, "requested_layout", lambda *_: None)
    bare = client.get("/users?cluster=Venus").get_data(as_text=True)
    assert f'{PRELOAD_ATTR}="/_dash-layout">' in bare and URL_ATTR not in bare


def test_the_callbacks_that_fill_the_shell_do_not_run_on_a_page_laid_out_for_its_url(dash_app):
    initial = {
        cb["output"]
        for cb in dash_app.server.test_client().get("/_dash-dependencies").get_json()
        if not cb.get("prevent_initial_call")
    }
    assert not {ROUTER_OUTPUT, SYNC_OUTPUT, f"{controls.FILTER_BAR}.style"} & initial


def test_a_page_whose_url_the_server_cannot_tell_gets_the_bare_shell(dash_app):
    client = dash_app.server.test_client()
    page = client.get("/cluster", environ_overrides={"RAW_URI": "http://elsewhere/cluster"}).get_data(as_text=True)
    assert json.loads(_blocks(page)["/_dash-layout"]) == client.get("/_dash-layout").get_json()


def test_a_page_that_fails_to_lay_out_gets_the_bare_shell_and_the_failure_is_logged(dash_app, monkeypatch, caplog):
    def broken(*_):
        raise RuntimeError("page layout broke")

    monkeypatch.setattr(dash_app, "requested_layout", broken)
    client = dash_app.server.test_client()
    page = client.get("/cluster")
    assert page.status_code == 200
    assert json.loads(_blocks(page.get_data(as_text=True))["/_dash-layout"]) == client.get("/_dash-layout").get_json()
    assert "laying out /cluster for its HTML failed" in caplog.text


def test_the_browser_url_moves_from_the_routes_prefix_to_the_requests_prefix():
    app = PreloadingDash(__name__, requests_pathname_prefix="/team/helios/", routes_pathname_prefix="/helios/")
    with app.server.test_request_context("/helios/jobs/a%20b?ds=x&q=%2F"):
        assert browser_url(app) == ("/team/helios/jobs/a%20b", "?ds=x&q=%2F")
    with app.server.test_request_context("/helios/cluster?"):
        assert browser_url(app) == ("/team/helios/cluster", "")


def test_a_layout_text_cannot_end_its_data_block():
    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    app = PreloadingDash(__name__, requests_pathname_prefix="/hx/", routes_pathname_prefix="/hx/")
    app.layout = dash_html.Div(hostile, id="hostile")
    page = app.server.test_client().get("/hx/").get_data(as_text=True)
    assert "<script>alert(1)" not in page
    blocks = _blocks(page)
    assert set(blocks) == {"/hx/_dash-layout", "/hx/_dash-dependencies"}  # under the app's path prefix
    assert json.loads(blocks["/hx/_dash-layout"])["props"]["children"] == hostile
