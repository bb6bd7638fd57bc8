"""How answers travel: text compressed with brotli or gzip as the client asks (flask-compress, above a size floor, never
an already-compressed format), static files under a versioned URL cached for a year as immutable, and named in the
page: the versioned URLs of the component packages' code-split chunks (assets/versioned_chunks.js uses them), and
plotly.js's with the pages that open without a chart (assets/lazy_figures.js loads it at once on every other)."""

from __future__ import annotations

import json
from pathlib import Path

import dash
import flask
from cachelib import SimpleCache
from dash import Dash, dash_table, dcc, html
from dash.fingerprint import check_fingerprint
from flask_compress import Compress

COMPRESSED_TYPES: tuple[str, ...] = (  # text only: images, fonts and archives are compressed formats already
    "text/html",
    "text/css",
    "text/plain",
    "text/csv",
    "text/javascript",
    "application/javascript",
    "application/x-javascript",
    "application/json",
    "image/svg+xml",
)
MIN_COMPRESSED_BYTES = 1024  # below about one packet, compressing saves no round trip and costs time
BROTLI_QUALITY = 5  # 0-11: plotly.min.js (4.8 MB) in 0.1 s to 1.29 MB; 11 gives 1.11 MB in 8.6 s
GZIP_LEVEL = 6
STATIC_CACHED_FILES = 64  # compressed versioned static files kept per process (plotly.min.js: 1.3 MB)
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"  # a static file under an unversioned URL: kept, but asked about again (ETag) every time
SUITES = "/_dash-component-suites/"
ASSETS = "/assets/"
FAVICON = "/_favicon.ico"
CHUNKS_META = "helios-chunk-urls"  # the <meta> naming each code-split chunk's versioned URL
# the <meta> naming the pages that draw no chart when they open (register_page(..., charts=False)): every other page
# starts loading plotly.js as the browser has read it (assets/lazy_figures.js)
CHART_FREE_META = "helios-chart-free-paths"
PLOTLY_META = "helios-plotly-url"  # the <meta> naming plotly.js's versioned URL, for loading it before Dash starts
VENDOR_DIR = "vendor"  # under assets/: files Dash does not put in the page (assets/vendor/README.md)
PLOTLY_BUNDLE = f"{VENDOR_DIR}/plotly-cartesian-4.1.1.min.js"  # every trace type drawn here, a third of plotly.min.js
PLOTLY_CHUNK = "plotly/package_data/plotly.min.js"  # the plotly.js dcc.Graph loads, under SUITES


def versioned_static(request: flask.Request) -> bool | None:
    """Whether a static file's URL carries its version (a fingerprinted component bundle, an asset's or the
    favicon's ?m= / ?v=); None when the request is for no static file."""
    path = request.path
    if path.startswith(SUITES):
        return check_fingerprint(path[len(SUITES) :])[1]
    if path.startswith(ASSETS):
        return bool(request.args.get("m"))
    if path == FAVICON:
        return bool(request.args.get("v"))
    return None


class StaticCompressed:
    """flask-compress's cache of compressed bodies, kept for versioned static files only (the same URL always
    serves the same bytes); every other answer is compressed afresh."""

    def __init__(self) -> None:
        self._kept = SimpleCache(threshold=STATIC_CACHED_FILES, default_timeout=0)

    def get(self, key: str) -> bytes | None:
        """The compressed body under key, None when absent or not a versioned static file."""
        return self._kept.get(key) if versioned_static(flask.request) else None

    def set(self, key: str, value: bytes) -> None:
        """Keep a versioned static file's compressed body under key."""
        if versioned_static(flask.request):
            self._kept.set(key, value)


def _cache_headers(response: flask.Response) -> flask.Response:
    """A year-long immutable cache for versioned static files, revalidation for unversioned ones; data answers keep
    the no-store that components.server.hardening gives them."""
    versioned = versioned_static(flask.request)
    if versioned is not None and response.status_code in (200, 304):
        response.headers["Cache-Control"] = IMMUTABLE if versioned else REVALIDATE
    return response


def _whole_static(response: flask.Response) -> flask.Response:
    """A static file read whole (Flask streams it from disk), so that it is compressed once, kept compressed and sent
    with its length rather than compressed again chunk by chunk on every request."""
    if versioned_static(flask.request) is not None and response.is_streamed:
        response.direct_passthrough = False
        response.make_sequence()
    return response


def chunk_urls(app: Dash) -> dict[str, str]:
    """The versioned URL of every code-split chunk the component packages load by an unversioned URL (dcc's async-*.js,
    AG Grid's), by its unversioned URL path; the fingerprints are Dash's own (package version and file time, as on its
    script tags); plotly.min.js's is the partial bundle's (PLOTLY_BUNDLE)."""
    # NOTE: Dash's private helpers, those that write the page's script tags (dcc, html and dash_table are listed
    # apart from the other packages there too): the same resources, the same fingerprints.
    scripts = app.scripts.get_all_scripts()
    for bundled in (dcc, html, dash_table):
        scripts += app.scripts._resources._filter_resources(bundled._js_dist)
    chunks = [r for r in scripts if r.get("dynamic") and str(r.get("relative_package_path", "")).endswith(".js")]
    prefix = app.config.requests_pathname_prefix + SUITES.lstrip("/")
    with app.server.app_context():
        versioned = app._collect_and_register_resources([{**r, "dynamic": False} for r in chunks])
    bare = [f"{prefix}{r['namespace']}/{r['relative_package_path']}" for r in chunks]
    return dict(zip(bare, versioned, strict=True)) | {prefix + PLOTLY_CHUNK: plotly_bundle_url(app)}


def chart_free_paths() -> list[str]:
    """The URL paths of the pages that draw no chart when they open (their register_page says charts=False)."""
    pages = dash.page_registry.values()
    return sorted(dash.get_relative_path(page["path"]) for page in pages if page.get("charts") is False)


def plotly_bundle_url(app: Dash) -> str:
    """The versioned URL of the partial plotly.js bundle (PLOTLY_BUNDLE), with its file time as Dash versions assets."""
    modified = (Path(app.config.assets_folder) / PLOTLY_BUNDLE).stat().st_mtime
    return f"{app.get_asset_url(PLOTLY_BUNDLE)}?m={modified}"


def install_transfer(app: Dash) -> None:
    """Compress app's text answers (brotli or gzip), cache versioned static files for a year, and name the chunks'
    versioned URLs in every page."""
    server = app.server
    server.config.update(
        COMPRESS_ALGORITHM=["br", "gzip"],
        COMPRESS_ALGORITHM_STREAMING=["br", "gzip"],  # the jobs CSV export streams
        COMPRESS_MIMETYPES=list(COMPRESSED_TYPES),
        COMPRESS_MIN_SIZE=MIN_COMPRESSED_BYTES,
        COMPRESS_BR_LEVEL=BROTLI_QUALITY,
        COMPRESS_LEVEL=GZIP_LEVEL,
        COMPRESS_CACHE_BACKEND=StaticCompressed,
        COMPRESS_CACHE_KEY=lambda request: request.full_path,
    )
    Compress(server)
    server.after_request(_whole_static)  # after-request functions run last-registered first: before compression
    server.after_request(_cache_headers)
    app.config.meta_tags.append({"name": CHUNKS_META, "content": json.dumps(chunk_urls(app), sort_keys=True)})
    app.config.meta_tags.append({"name": CHART_FREE_META, "content": json.dumps(chart_free_paths())})
    app.config.meta_tags.append({"name": PLOTLY_META, "content": plotly_bundle_url(app)})
