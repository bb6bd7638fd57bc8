"""Small, deterministic datasets and a test app for the dashboard tests."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from analytics import db, store
from tests import system
from tests.system import CHROMIUM
from tests.waiting import free_port, new_context, stop, wait_for, wait_until_serving

CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
)
CLUSTERS: tuple[str, ...] = ("Venus", "Earth")
VCS: dict[str, tuple[str, ...]] = {"Venus": ("vcA", "vcB"), "Earth": ("vcC", "vcD", "vcE")}
START = datetime(2020, 4, 1)
DAYS = 21


def make_jobs(n_jobs: int = 3000, seed: int = 7, clusters: tuple[str, ...] = CLUSTERS) -> pl.DataFrame:
    """A small Helios-like jobs table: CPU and GPU jobs, several users, VCs and final states."""
    rng = np.random.default_rng(seed)
    cluster = rng.choice(list(clusters), n_jobs)
    vc = [rng.choice(VCS.get(c, ("vc0",))) for c in cluster]
    gpu = rng.choice([0, 0, 1, 1, 1, 2, 4, 8, 16], n_jobs)
    submit_s = np.sort(rng.integers(0, DAYS * 86_400, n_jobs))
    queue_s = np.where(rng.random(n_jobs) < 0.6, 0, rng.integers(1, 4000, n_jobs))
    duration_s = rng.integers(1, 40_000, n_jobs)
    submit = [START + timedelta(seconds=int(s)) for s in submit_s]
    start = [t + timedelta(seconds=int(q)) for t, q in zip(submit, queue_s, strict=True)]
    end = [t + timedelta(seconds=int(d)) for t, d in zip(start, duration_s, strict=True)]
    return pl.DataFrame(
        {
            "cluster": cluster,
            "job_id": np.arange(1, n_jobs + 1),
            "user": [f"u{u:03d}" for u in rng.integers(0, 40, n_jobs)],
            "vc": vc,
            "gpu_num": gpu,
            "cpu_num": rng.integers(1, 16, n_jobs).astype(float),
            "node_num": np.maximum(1, gpu // 8),
            "state": rng.choice(["COMPLETED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"], n_jobs),
            "submit_time": submit,
            "start_time": start,
            "end_time": end,
            "duration": duration_s,
            "queue": queue_s,
        }
    )


def make_vc_gpus(clusters: tuple[str, ...] = CLUSTERS) -> pl.DataFrame:
    """Daily GPUs per VC for the small dataset (64 GPUs per VC)."""
    rows = [
        {"cluster": c, "vc": v, "date": date(2020, 4, 1) + timedelta(days=d), "gpus": 64}
        for c in clusters
        for v in VCS.get(c, ("vc0",))
        for d in range(DAYS + 1)
    ]
    return pl.DataFrame(rows)


def write_small(name: str, root, n_jobs: int = 3000, clusters: tuple[str, ...] = CLUSTERS) -> store.Dataset:
    """Write a small dataset under root."""
    meta = {
        "source": "test fixture",
        "format": "synthetic",
        "clusters": list(clusters),
        "period": {"start": "2020-04-01", "end": "2020-04-22"},
        "row_counts": {"jobs": n_jobs},
        "quality": {
            "rows_in": n_jobs + 2,
            "rows_out": n_jobs,
            "issues": {
                "negative_gpu_num": {
                    "count": 2,
                    "action": "dropped",
                    "examples": [{"file": "cluster_log.csv", "row": 17, "detail": "gpu_num = -1"}],
                }
            },
            "null_counts": {"job_name": n_jobs},
            "absent_columns": ["job_name"],
        },
        "attribution": "Made up for tests.",
    }
    return store.write_dataset(name, make_jobs(n_jobs, clusters=clusters), make_vc_gpus(clusters), meta, root=root)


@pytest.fixture(scope="session", name="write_small")
def write_small_fixture():
    """The write_small helper, for session-scoped fixtures elsewhere in this folder."""
    return write_small


def write_small_pair(root: Path) -> None:
    """Write `helios-synth` (two clusters) and `philly-mini` (one cluster) into root."""
    write_small("helios-synth", root)
    write_small("philly-mini", root, n_jobs=800, clusters=("Philly",))


@pytest.fixture
def small_data(data_root):
    """The data folder holding `helios-synth` (two clusters) and `philly-mini` (one cluster)."""
    write_small_pair(data_root)
    return data_root


@pytest.fixture
def dash_app(small_data, tmp_path):
    """A dashboard app over the small datasets with its own cache folder."""
    from app import create_app
    from components.server.settings import Settings

    return create_app(Settings(data_dir=small_data, cache_dir=tmp_path / "cache"))


# --- Driving the app through Dash's callback endpoint -------------------------------------------------

ROUTER_OUTPUT = ".._pages_content.children..._pages_store.data.."


def _sync_output() -> str:
    from components.shell.callbacks import SYNC_OUTPUTS

    return ".." + "...".join(f"{i}.{p}" for i, p in SYNC_OUTPUTS) + ".."


SYNC_OUTPUT = _sync_output()  # the filter callback's output key, as the browser posts it


def post_callback(client, output: str, outputs, inputs: list[dict], state: list[dict] | None = None) -> dict:
    """POST one callback request and return its decoded response (asserting HTTP 200 or 204)."""
    changed = [
        f"{json.dumps(i['id'], separators=(',', ':')) if isinstance(i['id'], dict) else i['id']}.{i['property']}"
        for i in inputs
    ]
    payload = {"output": output, "outputs": outputs, "inputs": inputs, "state": state or [], "changedPropIds": changed}
    resp = client.post("/_dash-update-component", json=payload)
    assert resp.status_code in (200, 204), resp.get_data(as_text=True)[:2000]
    return resp.get_json() if resp.status_code == 200 else {}


def render_page(client, path: str, search: str = "") -> Any:
    """The layout the pages router returns for a URL."""
    outputs = [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}]
    inputs = [
        {"id": "_pages_location", "property": "pathname", "value": path},
        {"id": "_pages_location", "property": "search", "value": search},
    ]
    return post_callback(client, ROUTER_OUTPUT, outputs, inputs)["response"]["_pages_content"]["children"]


def walk(node: Any) -> Iterator[dict]:
    """Every component (as JSON) in a layout tree."""
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
    elif isinstance(node, dict) and "props" in node:
        yield node
        for value in node["props"].values():
            yield from walk(value)


def find(layout: Any, component_id: Any) -> dict | None:
    """The props of the component with this id, or None."""
    return next((n["props"] for n in walk(layout) if n["props"].get("id") == component_id), None)


def graph_specs(layout: Any) -> list[dict]:
    """The data specs of every figure card in a layout."""
    return [
        n["props"]["data"]
        for n in walk(layout)
        if isinstance(n["props"].get("id"), dict) and n["props"]["id"].get("type") == "graph-spec"
    ]


def render_graph(client, spec: dict) -> dict:
    """The figure the MATCH render callback returns for a figure card spec (one laid out with its figure asked
    again, as a page drawn before it was cached would)."""
    from components.charts.registry import DRAWN
    from components.shell import controls

    spec = {k: v for k, v in spec.items() if k != DRAWN}
    request = controls.figure_request(spec)
    out = post_callback(client, request["output"], request["outputs"], request["inputs"])
    return controls.figure_of(out, spec["name"])


class DashClient:
    """A Flask test client plus the page and figure helpers above."""

    def __init__(self, client):
        self.client = client

    def page(self, path: str, search: str = "") -> Any:
        """The layout the pages router returns for a URL."""
        return render_page(self.client, path, search)

    def figure(self, spec: dict) -> dict:
        """The figure drawn for a card spec."""
        return render_graph(self.client, spec)

    def callback(self, output: str, outputs, inputs: list[dict], state: list[dict] | None = None) -> dict:
        """Any callback request."""
        return post_callback(self.client, output, outputs, inputs, state)

    specs = staticmethod(graph_specs)
    find = staticmethod(find)
    walk = staticmethod(walk)


@pytest.fixture
def ui(dash_app):
    """A DashClient over the small-data app, after the first request has set up the pages router."""
    client = dash_app.server.test_client()
    assert client.get("/").status_code == 200
    return DashClient(client)


@pytest.fixture(scope="module")
def _module_app(tmp_path_factory):
    """The dash_app of `ui`, built once per module (for modules whose tests change neither data nor settings)."""
    from app import create_app
    from components.server.settings import Settings

    root = tmp_path_factory.mktemp("ui-module")
    data = root / "data"
    data.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HELIOS_DATA_DIR", str(data))  # as data_root sets it for dash_app
        write_small_pair(data)
        app = create_app(Settings(data_dir=data, cache_dir=root / "cache"))
        assert app.server.test_client().get("/").status_code == 200  # the first request sets up the pages router
    return app, data


@pytest.fixture
def module_ui(_module_app, monkeypatch):
    """As `ui`, over an app shared by the module's tests: each test gets a fresh client (no cookies) and an empty
    query cache, so every query it causes runs (and reaches DuckDB) as on a fresh app."""
    from components.server import cache as query_cache

    app, data = _module_app
    monkeypatch.setenv("HELIOS_DATA_DIR", str(data))
    with app.server.app_context():
        query_cache.cache.clear()
    query_cache._local.clear()
    return DashClient(app.server.test_client())


# --- A real browser, shared by every browser test of the session ---------------------------------------


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Chromium's path; a missing browser skips the test, or fails the run when REQUIRE_BROWSER=1."""
    system.require("Chromium", None if shutil.which(CHROMIUM) else f"{CHROMIUM} not found")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium_path):
    """One headless Chromium (one sync Playwright in the main thread) for the whole session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=list(CHROMIUM_ARGS))
        yield b
        b.close()


DRAW_ALL_JS = "window.HELIOS_DRAW_ALL = true;"


@pytest.fixture
def page(browser, request):
    """A fresh 1440x900 tab that records console errors in page.errors. Figure cards and tables below the first
    screen ask for their content only once scrolled to, as for a user; a test marked `draw_all` gets every one at
    once (window.HELIOS_DRAW_ALL), as if scrolled through, to read content below the first screen
    (test_lazy_cards_draw_when_scrolled_into_view tests the scrolling itself)."""
    context = new_context(browser, accept_downloads=True)
    if request.node.get_closest_marker("draw_all") is not None:
        context.add_init_script(DRAW_ALL_JS)
    tab = context.new_page()
    tab.errors = []
    tab.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: tab.errors.append(str(e)))
    yield tab
    context.close()


# --- Serving the real app with gunicorn for browser tests ---------------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def _gunicorn(log_path: Path, env: dict[str, str], timeout_s: int = 60) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:server", "--workers", "1", "--threads", "4"]
    cmd += ["--bind", f"127.0.0.1:{port}", "--timeout", str(timeout_s)]
    url = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_until_serving(url + "/", proc, log_path)
            yield url
        finally:
            stop(proc)


@pytest.fixture(scope="session")
def gunicorn_app():
    """A context manager serving the real app with gunicorn and the project's gunicorn.conf.py (1 worker, 4 threads)
    on a free loopback port."""
    return _gunicorn


@pytest.fixture
def redis_url():
    """A throw-away redis-server on a free loopback port (skipped without redis-server unless REQUIRE_REDIS=1)."""
    system.require_program("Redis", "redis-server")
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _accepts(port), "redis-server accepting connections")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session", name="free_port")
def free_port_fixture():
    """The free_port helper (a TCP port free on 127.0.0.1), for fixtures that start servers."""
    return free_port


# --- Recording every SQL text DuckDB receives (the hostile-input tests) --------------------------------


class _RecordingCursor:
    """A DuckDB cursor that remembers every SQL text it is given."""

    def __init__(self, cursor, texts: list[str]):
        self._cursor, self._texts = cursor, texts

    def sql(self, query: str, params=None):
        self._texts.append(query)
        return self._cursor.sql(query, params=params)

    def execute(self, query: str, params=None):
        self._texts.append(query)
        return self._cursor.execute(query, params)

    def __getattr__(self, name: str):
        return getattr(self._cursor, name)


class _RecordingConnection:
    def __init__(self, conn, texts: list[str]):
        self._conn, self._texts = conn, texts

    def cursor(self) -> _RecordingCursor:
        return _RecordingCursor(self._conn.cursor(), self._texts)


@pytest.fixture
def sql_texts(monkeypatch) -> list[str]:
    """Every SQL text DuckDB receives during the test."""
    texts: list[str] = []
    real = db._connection
    monkeypatch.setattr(db, "_connection", lambda: _RecordingConnection(real(), texts))
    return texts
