"""Measure the dashboard's speed budgets on a dataset (default: the full-scale `helios-synth`) and print the figures.

Budgets (issue #3): every page's callbacks answer in <= 300 ms p95 warm and <= 2 s cold; a page is interactive
in Chromium <= 3 s after navigation. Callbacks are timed through the real Dash endpoint (`server.test_client()`),
cold on an empty query cache in a worker that has loaded the dataset's columns (as gunicorn.conf.py's warm-up does
at worker start; the load time is printed), warm over repeated calls; `--browser` also times page loads in headless
Chromium against gunicorn (2 workers, 4 threads): each page's first visit on an empty cache, then a second (warm) visit.

    python bench/dashboard.py [--dataset helios-synth] [--data-dir DIR] [--warm-runs 20] [--browser]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from components.shell import controls  # noqa: E402

PAGES: tuple[str, ...] = ("/", "/cluster", "/jobs", "/users", "/compare", "/data")
WARM_BUDGET_MS = 300.0
COLD_BUDGET_MS = 2000.0
BROWSER_BUDGET_S = 3.0
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def _post(client, output: str, outputs: Any, inputs: list[dict], state: list[dict] | None = None) -> dict:
    changed = [
        f"{json.dumps(i['id'], separators=(',', ':')) if isinstance(i['id'], dict) else i['id']}.{i['property']}"
        for i in inputs
    ]
    payload = {"output": output, "outputs": outputs, "inputs": inputs, "state": state or [], "changedPropIds": changed}
    resp = client.post("/_dash-update-component", json=payload)
    if resp.status_code not in (200, 204):
        raise RuntimeError(f"callback {output} failed with HTTP {resp.status_code}")
    return resp.get_json() if resp.status_code == 200 else {}


def _walk(node: Any):
    if isinstance(node, list):
        for item in node:
            yield from _walk(item)
    elif isinstance(node, dict) and "props" in node:
        yield node
        for value in node["props"].values():
            yield from _walk(value)


def page_callbacks(client, path: str, clusters: list[str]) -> list[tuple[str, Any]]:
    """The router call plus every data callback a page fires when it opens, as (label, thunk) pairs."""
    router_out = [{"id": "_pages_content", "property": "children"}, {"id": "_pages_store", "property": "data"}]
    router_in = [
        {"id": "_pages_location", "property": "pathname", "value": path},
        {"id": "_pages_location", "property": "search", "value": ""},
    ]

    def router():
        return _post(client, ".._pages_content.children..._pages_store.data..", router_out, router_in)

    layout = router()["response"]["_pages_content"]["children"]
    calls: list[tuple[str, Any]] = [("router", router)]
    for node in _walk(layout):
        cid, props = node["props"].get("id"), node["props"]
        if isinstance(cid, dict) and cid.get("type") == "graph-spec":
            calls.append((cid["name"], _graph_call(client, props["data"])))
        elif cid in ("overview-spec", "users-spec"):
            calls.append((cid, _store_call(client, cid, props["data"])))
            if cid == "overview-spec":
                calls.append(("overview-util", _util_call(client, props["data"], clusters)))
        elif cid == "jobs-spec":
            calls.append(("jobs-grid", _grid_call(client, props["data"])))
    return calls


def _graph_call(client, spec: dict):
    request = controls.figure_request(spec)
    return lambda: _post(client, request["output"], request["outputs"], request["inputs"])


def _store_call(client, cid: str, state: dict):
    if cid == "overview-spec":
        outs = [("overview-cards", "children"), ("overview-table", "columnDefs"), ("overview-table", "rowData")]
    else:
        outs = [("users-board", "rowData")]
    output = ".." + "...".join(f"{i}.{p}" for i, p in outs) + ".." if len(outs) > 1 else f"{outs[0][0]}.{outs[0][1]}"
    outputs = (
        [{"id": i, "property": p} for i, p in outs] if len(outs) > 1 else {"id": outs[0][0], "property": "rowData"}
    )
    inputs = [{"id": cid, "property": "data", "value": state}]
    return lambda: _post(client, output, outputs, inputs)


def _util_call(client, state: dict, clusters: list[str]):
    outputs = [{"id": {"cluster": c, "type": "overview-util"}, "property": "children"} for c in clusters]
    inputs = [{"id": "overview-cards", "property": "children", "value": []}]
    state_in = [{"id": "overview-spec", "property": "data", "value": state}]
    output = '{"cluster":["ALL"],"type":"overview-util"}.children'
    return lambda: _post(client, output, outputs, inputs, state_in)


def _grid_call(client, state: dict):
    outs = [("jobs-grid", "getRowsResponse"), ("jobs-export", "href"), ("jobs-status", "children")]
    output = ".." + "...".join(f"{i}.{p}" for i, p in outs) + ".."
    request = {"startRow": 0, "endRow": 100, "sortModel": [{"colId": "duration", "sort": "desc"}], "filterModel": {}}
    inputs = [{"id": "jobs-grid", "property": "getRowsRequest", "value": request}]
    state_in = [{"id": "jobs-spec", "property": "data", "value": state}]
    return lambda: _post(client, output, [{"id": i, "property": p} for i, p in outs], inputs, state_in)


def _timed_ms(thunk) -> float:
    t0 = time.perf_counter()
    thunk()
    return (time.perf_counter() - t0) * 1000


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]


def bench_callbacks(app, warm_runs: int, clusters: list[str]) -> list[dict[str, Any]]:
    """Time every page's callbacks cold (empty cache, first call) and warm (repeated), per callback."""
    from components.server import cache as query_cache

    client = app.server.test_client()
    client.get("/")
    rows = []
    for path in PAGES:
        with app.server.app_context():
            query_cache.cache.clear()  # each page starts cold
        calls = page_callbacks(client, path, clusters)
        for label, thunk in calls:
            cold = _timed_ms(thunk) if label != "router" else None
            warm = [_timed_ms(thunk) for _ in range(warm_runs)]
            rows.append(
                {
                    "page": path,
                    "callback": label,
                    "cold_ms": cold,
                    "warm_p50_ms": statistics.median(warm),
                    "warm_p95_ms": _p95(warm),
                }
            )
            print(
                f"  {path:9} {label:18} cold {'-' if cold is None else f'{cold:7.0f}'} ms   "
                f"warm p50 {statistics.median(warm):6.1f} ms  p95 {_p95(warm):6.1f} ms",
                flush=True,
            )
    return rows


def bench_zoom(app, warm_runs: int) -> dict[str, float]:
    """Time the utilisation zoom (a one-day window at one-minute resolution), cold then warm."""
    from analytics.filters import empty_state

    client = app.server.test_client()
    client.get("/")
    spec = {"name": "utilization", "state": empty_state(app.server.config["HELIOS_SETTINGS"].default_dataset)}
    gid = {"name": "utilization", "type": "graph"}
    relayout = {"xaxis.range[0]": "2020-06-10 00:00:00", "xaxis.range[1]": "2020-06-10 23:00:00"}
    deps = client.get("/_dash-dependencies").get_json()
    output = next(d["output"] for d in deps if d["output"].startswith('{"name":"utilization","type":"graph"}.figure@'))

    def call():
        return _post(
            client,
            output,
            {"id": gid, "property": "figure"},
            [{"id": gid, "property": "relayoutData", "value": relayout}],
            [{"id": {"name": "utilization", "type": "graph-spec"}, "property": "data", "value": spec}],
        )

    cold = _timed_ms(call)
    warm = [_timed_ms(call) for _ in range(warm_runs)]
    return {"cold_ms": cold, "warm_p95_ms": _p95(warm)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What "interactive" means per page: everything on its first screen drawn: the figures in view (the cards below ask
# for theirs as they scroll into view, assets/lazy_figures.js), the tables in view filled, nothing in view waiting on a
# callback. What is below the first screen is timed by scroll_through_s.
def in_view_js(selector: str) -> str:
    """JS: the elements matching selector that are at least partly inside the window."""
    return (
        f"[...document.querySelectorAll({selector!r})]"
        ".filter(e => { const r = e.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; })"
    )


SLOTS_JS = "[...document.querySelectorAll('.figure-slot')]"
GRIDS_JS = "[...document.querySelectorAll('.ag-root-wrapper')]"
ROWS_JS = in_view_js(".ag-root-wrapper") + ".every(g => g.querySelector('.ag-row'))"
ALL_ROWS_JS = GRIDS_JS + ".every(g => g.querySelector('.ag-row'))"


def plots_js(at_least: int) -> str:
    """At least that many figures drawn, and every figure card on the screen drawn."""
    drawn = f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {at_least}"
    return f"{drawn} && {in_view_js('.figure-slot')}.every(e => e.querySelector('.main-svg'))"


ALL_DRAWN_JS = SLOTS_JS + ".every(e => e.querySelector('.main-svg')) && " + ALL_ROWS_JS
READY_JS: dict[str, str] = {
    "/": "document.querySelectorAll('.cluster-card').length > 0 && !document.body.innerText.includes('…')",
    "/cluster": plots_js(2),
    "/jobs": plots_js(2) + " && " + ROWS_JS,
    "/users": plots_js(2) + " && " + ROWS_JS,
    "/compare": plots_js(2),
    "/data": "document.querySelectorAll('.card').length > 0",
}
NOT_LOADING_JS = "document.querySelectorAll('[data-dash-is-loading=true]').length === 0"
NOT_LOADING_IN_VIEW_JS = in_view_js("[data-dash-is-loading=true]") + ".length === 0"
TITLES: dict[str, str] = {
    "/": "Overview",
    "/cluster": "Cluster",
    "/jobs": "Jobs",
    "/users": "Users",
    "/compare": "Compare",
    "/data": "Data",
}


def _ready_js(path: str) -> str:
    title = f"(document.querySelector('#_pages_content h4') || {{}}).innerText === '{TITLES[path]}'"
    return f"{title} && ({READY_JS[path]}) && {NOT_LOADING_IN_VIEW_JS}"


def settle_first_page(tab) -> None:
    """Wait, as a reader of the first page does before clicking on, until plotly.js has loaded in the idle time
    after it (assets/lazy_figures.js)."""
    tab.wait_for_function("window.Plotly && typeof window.Plotly.newPlot === 'function'", timeout=60_000)


def scroll_through_s(tab) -> float:
    """Seconds to scroll a drawn page down card by card, each drawn before the next, then to its tables until they are
    filled (a reader going through it)."""
    t0 = time.perf_counter()
    slots = tab.locator(".figure-slot")
    for i in range(slots.count()):
        slot = slots.nth(i)
        slot.scroll_into_view_if_needed()
        slot.locator(".main-svg").first.wait_for(timeout=180_000)
    tab.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the tables at the end
    tab.wait_for_function(ALL_DRAWN_JS + " && " + NOT_LOADING_JS, timeout=180_000, polling=50)
    tab.evaluate("window.scrollTo(0, 0)")
    return time.perf_counter() - t0


def _load_s(tab, url: str, path: str) -> float:
    """Seconds to draw a page after a full page load (JS bundles from the browser cache)."""
    t0 = time.perf_counter()
    tab.goto(url + path)
    tab.wait_for_function(_ready_js(path), timeout=120_000, polling=50)
    return time.perf_counter() - t0


def _click_s(tab, path: str) -> float:
    """Seconds to draw a page after clicking its navbar link (the app's own navigation, no reload)."""
    t0 = time.perf_counter()
    tab.locator(f"#nav-{TITLES[path].lower()}").click()
    tab.wait_for_function(_ready_js(path), timeout=120_000, polling=50)
    return time.perf_counter() - t0


def bench_browser(data_dir: Path, cache_dir: Path) -> list[tuple[str, float, float, float]]:
    """Seconds until each page is drawn in headless Chromium: navbar click on a cold cache, then warm, then reload."""
    from playwright.sync_api import sync_playwright

    shutil.rmtree(cache_dir, ignore_errors=True)
    port = _free_port()
    env = {**os.environ, "HELIOS_DATA_DIR": str(data_dir), "HELIOS_CACHE_DIR": str(cache_dir)}
    cmd = [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "gunicorn.conf.py",  # the production settings (Procfile), incl. the per-worker warm-up
        "app:server",
        "--workers",
        "2",
        "--threads",
        "4",
        "--bind",
        f"127.0.0.1:{port}",
        "--timeout",
        "120",
    ]
    log_path = Path(tempfile.gettempdir()) / "helios-bench-gunicorn.log"
    print(f"  (server log: {log_path})")
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    results = []
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(url + "/data", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            tab = browser.new_page(viewport={"width": 1440, "height": 900})
            _load_s(tab, url, "/data")  # the browser caches the JS bundles once, as a returning user has them
            settle_first_page(tab)
            for path in PAGES:
                cold = _click_s(tab, path)
                _click_s(tab, "/data" if path != "/data" else "/")
                warm = _click_s(tab, path)
                reload = _load_s(tab, url, path)
                results.append((path, cold, warm, reload))
                print(
                    f"  {path:9} drawn {cold:5.2f} s after the click (cold), {warm:5.2f} s (warm); "
                    f"{reload:5.2f} s after a full reload (warm)",
                    flush=True,
                )
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return results


def _warm_up_s(args: argparse.Namespace) -> float:
    """Load the dataset's column store as each gunicorn worker does at start; return the seconds it took."""
    from analytics import store
    from analytics.queries import colstore

    t0 = time.perf_counter()
    colstore.columns(store.open_dataset(args.dataset, args.data_dir))
    return time.perf_counter() - t0


def main() -> int:
    """Run the benchmark and print the figures and the verdict against the budgets."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="helios-synth")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("HELIOS_DATA_DIR", REPO / "data")))
    parser.add_argument("--warm-runs", type=int, default=20)
    parser.add_argument("--browser", action="store_true", help="also time page loads in headless Chromium")
    args = parser.parse_args()
    if not (args.data_dir / args.dataset / "meta.json").is_file():
        print(f"dataset {args.dataset!r} not found under {args.data_dir}: run `helios demo` first", file=sys.stderr)
        return 2
    os.environ["HELIOS_DATA_DIR"] = str(args.data_dir)
    from app import create_app
    from components.server.settings import Settings

    cache_dir = Path(tempfile.mkdtemp(prefix="helios-bench-cache-"))
    try:
        settings = Settings(data_dir=args.data_dir, cache_dir=cache_dir, default_dataset=args.dataset)
        meta = json.loads((args.data_dir / args.dataset / "meta.json").read_text())
        print(
            f"## dashboard callbacks on {args.dataset} ({meta.get('row_counts', {}).get('jobs', '?'):,} jobs), "
            f"cold = empty cache, warm = {args.warm_runs} repeats"
        )
        print(f"  worker warm-up (column store load, gunicorn.conf.py at worker start): {_warm_up_s(args):.2f} s")
        rows = bench_callbacks(create_app(settings), args.warm_runs, list(meta.get("clusters", [])))
        zoom = bench_zoom(create_app(settings), args.warm_runs)
        print(
            f"  /cluster  zoom to 1 day (1-min) cold {zoom['cold_ms']:7.0f} ms   warm p95 {zoom['warm_p95_ms']:6.1f} ms"
        )
        print("## per page: slowest cold callback, slowest warm p95")
        ok = True
        for path in PAGES:
            mine = [r for r in rows if r["page"] == path]
            cold = max((r["cold_ms"] for r in mine if r["cold_ms"] is not None), default=0.0)
            warm = max(r["warm_p95_ms"] for r in mine)
            good = cold <= COLD_BUDGET_MS and warm <= WARM_BUDGET_MS
            ok &= good
            print(f"  {path:9} cold max {cold:7.0f} ms  warm p95 max {warm:6.1f} ms  {'OK' if good else 'OVER BUDGET'}")
        if args.browser:
            print("## page drawn in Chromium after navigation (gunicorn 2 workers x 4 threads; budget on warm)")
            loads = bench_browser(args.data_dir, cache_dir)
            ok &= all(warm <= BROWSER_BUDGET_S for _, _, warm, _ in loads)
        print("ALL BUDGETS MET" if ok else "SOME BUDGETS MISSED")
        return 0 if ok else 1
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
