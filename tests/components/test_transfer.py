"""How answers travel (issue #37): compressed text as the client asks, a year-long immutable cache for versioned
static files, no-store for data, and page HTML that carries layout, not data."""

from __future__ import annotations

import gzip
import html
import json
import re

import brotli
import pytest

from components.server import transfer
from components.shell import controls
from tests.components.conftest import find, graph_specs, post_callback, render_page, walk

BOTH = {"Accept-Encoding": "gzip, br"}
PAGE_HTML_BUDGET_BYTES = 150_000


def _decoded(resp) -> bytes:
    body = resp.get_data()
    encoding = resp.headers.get("Content-Encoding")
    return brotli.decompress(body) if encoding == "br" else gzip.decompress(body) if encoding == "gzip" else body


def _chunk_urls(page_html: str) -> dict[str, str]:
    found = re.search(rf'<meta name="{transfer.CHUNKS_META}" content="([^"]*)"', page_html)
    assert found, "the page names no chunk URLs"
    return json.loads(html.unescape(found.group(1)))


def _script_srcs(page_html: str) -> list[str]:
    return re.findall(r'<script src="([^"]+)"', page_html)


@pytest.fixture
def client(dash_app):
    client = dash_app.server.test_client()
    assert client.get("/").status_code == 200
    return client


@pytest.mark.parametrize(("accept", "expected"), [("gzip, br", "br"), ("gzip", "gzip"), ("br;q=0.5, gzip", "gzip")])
def test_the_page_is_compressed_as_the_client_asks(client, accept, expected):
    resp = client.get("/cluster", headers={"Accept-Encoding": accept})
    assert resp.headers["Content-Encoding"] == expected
    assert "Accept-Encoding" in resp.headers["Vary"]
    assert b"react-entry-point" in _decoded(resp)
    assert resp.headers["Cache-Control"] == "no-store"


def test_a_client_asking_for_no_compression_gets_none(client):
    resp = client.get("/cluster", headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in resp.headers
    assert b"react-entry-point" in resp.get_data()


def test_a_callback_answer_is_compressed_and_not_stored(client):
    spec = graph_specs(render_page(client, "/cluster"))[0]
    request = controls.figure_request(spec)
    resp = client.post("/_dash-update-component", json=request, headers=BOTH)
    assert resp.status_code == 200
    assert resp.headers["Content-Encoding"] == "br"
    assert resp.headers["Cache-Control"] == "no-store"
    figure = controls.figure_of(json.loads(_decoded(resp)), spec["name"])
    assert figure["data"], "the figure arrives whole after decompression"


def test_a_small_answer_stays_uncompressed(client):
    resp = client.get("/healthz", headers=BOTH)
    assert len(resp.get_data()) < transfer.MIN_COMPRESSED_BYTES
    assert "Content-Encoding" not in resp.headers


def test_versioned_bundles_are_immutable_for_a_year_and_compressed(client):
    page = client.get("/").get_data(as_text=True)
    bundles = [s for s in _script_srcs(page) if s.startswith(transfer.SUITES)]
    assert bundles
    for src in bundles:
        resp = client.get(src, headers=BOTH)
        assert resp.status_code == 200, src
        assert resp.headers["Cache-Control"] == transfer.IMMUTABLE, src
        assert resp.headers.get("Content-Encoding") == "br" or len(resp.get_data()) < transfer.MIN_COMPRESSED_BYTES


def test_assets_are_immutable_under_their_version_and_revalidated_without(client):
    page = client.get("/").get_data(as_text=True)
    css = re.search(r'href="(/assets/style\.css\?m=[^"]+)"', page).group(1)
    versioned = client.get(css, headers=BOTH)
    assert versioned.headers["Cache-Control"] == transfer.IMMUTABLE
    assert versioned.headers["Content-Encoding"] == "br"
    bare = client.get("/assets/style.css", headers=BOTH)
    assert bare.headers["Cache-Control"] == transfer.REVALIDATE


def test_compressed_formats_are_not_compressed_again(client):
    page = client.get("/").get_data(as_text=True)
    icon = re.search(r'href="(/assets/favicon\.ico\?m=[^"]+)"', page).group(1)
    resp = client.get(icon, headers=BOTH)
    assert resp.status_code == 200
    assert "Content-Encoding" not in resp.headers
    assert resp.headers["Cache-Control"] == transfer.IMMUTABLE


def test_every_code_split_chunk_has_a_versioned_url_that_is_served_immutable(client):
    chunks = _chunk_urls(client.get("/").get_data(as_text=True))
    plotly = transfer.SUITES + transfer.PLOTLY_CHUNK
    assert plotly in chunks and "/_dash-component-suites/dash/dcc/async-graph.js" in chunks
    assert "/_dash-component-suites/dash_ag_grid/async-community.js" in chunks
    for bare, versioned in chunks.items():
        if bare != plotly:
            assert versioned != bare and versioned.startswith(bare.rsplit("/", 1)[0] + "/")
    for bare in (transfer.SUITES + "dash/dcc/async-graph.js", plotly):
        resp = client.get(chunks[bare], headers=BOTH)
        assert resp.headers["Cache-Control"] == transfer.IMMUTABLE
        assert resp.headers["Content-Encoding"] == "br"
        unversioned = client.get(bare, headers=BOTH)
        assert unversioned.headers["Cache-Control"] == transfer.REVALIDATE


def test_the_charts_load_the_partial_plotly_bundle_of_plotlys_own_version(client):
    chunks = _chunk_urls(client.get("/").get_data(as_text=True))
    url = chunks[transfer.SUITES + transfer.PLOTLY_CHUNK]
    assert url.startswith(transfer.ASSETS + transfer.PLOTLY_BUNDLE + "?m=")
    resp = client.get(url, headers=BOTH)
    bundle = _decoded(resp)
    full = _decoded(client.get(transfer.SUITES + transfer.PLOTLY_CHUNK))
    version = re.compile(rb"plotly\.js (?:\(cartesian - minified\) )?(v\d+\.\d+\.\d+)")
    assert version.search(bundle[:300]).group(1) == version.search(full[:300]).group(1)
    assert len(bundle) < len(full) / 3 and len(resp.get_data()) < 500_000  # 1.5 of 4.8 MB; 454 KB as brotli
    page = client.get("/cluster").get_data(as_text=True)
    assert "plotly-cartesian" not in "".join(_script_srcs(page))  # loaded when a chart is drawn, not by the page


def test_every_trace_type_the_code_builds_is_in_the_partial_plotly_bundle():
    """A trace type missing from the bundle (scattergl, say) would not be drawn: the code's go.<Trace> classes are
    checked against the trace modules the bundle registers."""
    from pathlib import Path

    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType

    repo = Path(transfer.__file__).resolve().parents[2]
    bundle = (repo / "assets" / transfer.PLOTLY_BUNDLE).read_text(encoding="utf-8")
    registered = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    assert {"scatter", "bar", "box", "heatmap"} <= registered and "scattergl" not in registered
    sources = [
        p.read_text(encoding="utf-8") for d in ("components", "sim", "analytics") for p in (repo / d).rglob("*.py")
    ]
    names = {n for text in sources for n in re.findall(r"\bgo\.([A-Z]\w*)\b", text)}
    used = {n for n in names if isinstance(getattr(go, n, None), type) and issubclass(getattr(go, n), BaseTraceType)}
    assert used and {n.lower() for n in used} <= registered, sorted(n for n in used if n.lower() not in registered)


def test_the_same_versioned_file_is_compressed_once(client, monkeypatch):
    import flask_compress.flask_compress as library

    calls = []
    real = library._compress_data

    def counted(app, data, algorithm):
        calls.append(algorithm)
        return real(app, data, algorithm)

    monkeypatch.setattr(library, "_compress_data", counted)
    page = client.get("/").get_data(as_text=True)
    for src in (next(s for s in _script_srcs(page) if "dash_html_components" in s), transfer.ASSETS + "style.css?m=1"):
        calls.clear()
        first, second = client.get(src, headers=BOTH), client.get(src, headers=BOTH)
        assert first.get_data() == second.get_data() and first.headers["Content-Length"] == str(len(first.get_data()))
        assert calls == ["br"], src
    calls.clear()
    client.get("/_dash-layout", headers=BOTH)
    client.get("/_dash-layout", headers=BOTH)
    assert calls == ["br", "br"]  # a data answer is compressed afresh every time


def test_page_html_carries_no_figures_even_when_they_are_cached_at_start(small_data, tmp_path):
    """Dash's validation layout (every page's layout, in every page's HTML) was built with the first screen's
    cached figures: 1.35 MB of HTML per page once the cache was warm when a worker started."""
    from app import create_app
    from components.server.settings import Settings

    settings = Settings(data_dir=small_data, cache_dir=tmp_path / "cache")
    warm = create_app(settings).server.test_client()
    warm.get("/")
    for spec in graph_specs(render_page(warm, "/cluster")):  # fill the figure cache
        request = controls.figure_request(spec)
        post_callback(warm, request["output"], request["outputs"], request["inputs"])
    restarted = create_app(settings).server.test_client()
    for path in ("/", "/cluster", "/jobs", "/users", "/compare", "/data", "/whatif"):
        body = restarted.get(path, headers={"Accept-Encoding": "identity"}).get_data(as_text=True)
        assert len(body.encode()) <= PAGE_HTML_BUDGET_BYTES, path
        layout = json.loads(re.search(r'data-helios-preload="/_dash-layout"[^>]*>(.*?)</script>', body).group(1))
        kinds = [n["props"]["id"]["type"] for n in walk(layout) if isinstance(n["props"].get("id"), dict)]
        assert controls.GRAPH not in kinds, path  # no figure: a page whose first-screen figures are cached ...
        content = find(layout, "_pages_content")["children"]
        assert (content is None) == (path == "/cluster"), path  # ... gets the bare shell (the router brings them)
        config = json.loads(re.search(r'<script id="_dash-config"[^>]*>(.*?)</script>', body).group(1))
        assert "validation_layout" not in config, path  # tests/components/test_callback_ids.py checks the ids


def test_the_pages_that_open_without_a_chart_are_named_for_the_plotly_preload(client):
    page = client.get("/cluster").get_data(as_text=True)
    found = re.search(rf'<meta name="{transfer.CHART_FREE_META}" content="([^"]*)"', page)
    paths = json.loads(html.unescape(found.group(1)))
    assert paths == ["/", "/404", "/data", "/whatif"]
    bundle = re.search(rf'<meta name="{transfer.PLOTLY_META}" content="([^"]*)"', page).group(1)
    assert html.unescape(bundle) == _chunk_urls(page)[transfer.SUITES + transfer.PLOTLY_CHUNK]
