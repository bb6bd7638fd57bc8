"""Browser tests: real headless Chromium against the app served by gunicorn on a free port over small datasets."""

from __future__ import annotations

import gzip
import os
import urllib.request

import pytest

from analytics.ingest.bundled import BUNDLED, PHILLY_JOBS, build
from tests.waiting import new_context, open_settled, settle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="session")
def server_url(tmp_path_factory, chromium_path, write_small, gunicorn_app) -> str:
    """Serve the app with gunicorn (1 worker, 4 threads) over small datasets; yields its base URL."""
    root = tmp_path_factory.mktemp("browser")
    data = root / "data"
    write_small("helios-synth", data)
    write_small("philly-mini", data, n_jobs=800, clusters=("Philly",))
    for name in BUNDLED:
        build(name, data)
    env = {**os.environ, "HELIOS_DATA_DIR": str(data), "HELIOS_CACHE_DIR": str(root / "cache")}
    env["HELIOS_ANONYMOUS_ROLE"] = "admin"  # as `make run` on loopback: the Data page offers uploads
    with gunicorn_app(root / "server.log", env) as url:
        yield url


PAGES: tuple[str, ...] = ("/", "/cluster", "/jobs", "/users", "/compare", "/data")
PLOTS = ".js-plotly-plot .main-svg"
CALLBACK_PATH = "/_dash-update-component"


def trace_names(tab, title: str) -> list[str]:
    """The trace names of the figure whose title is `title`."""
    plot = tab.locator(".js-plotly-plot", has=tab.locator(f"text.gtitle:text-is('{title}')"))
    return plot.evaluate("el => el.data.map(t => t.name)")


def _slot(tab, name: str):
    return tab.locator(f'div.figure-slot[id*=\'"name":"{name}"\']')


def test_lazy_cards_draw_when_scrolled_into_view(browser, server_url):
    """The first screen's figures draw at once; a card below it asks for its figure only once scrolled to."""
    context = new_context(browser)
    tab = context.new_page()
    posted: list[str] = []
    tab.on("request", lambda r: posted.append(r.post_data or "") if "_dash-update-component" in r.url else None)
    try:
        open_settled(tab, server_url + "/cluster")
        _slot(tab, "utilization").locator(".main-svg").first.wait_for()
        below = _slot(tab, "vc_util")
        assert below.locator(".main-svg").count() == 0
        assert not any('"vc_util"' in body for body in posted)
        below.scroll_into_view_if_needed()
        below.locator(".main-svg").first.wait_for()
        assert any('"vc_util"' in body and "graph-want" in body for body in posted)
        assert "Utilisation per virtual cluster" in below.locator("text.gtitle").text_content()
    finally:
        context.close()


@pytest.mark.parametrize(
    ("path", "grid", "rows_callback"),
    [("/jobs", "jobs-grid", "getRowsResponse"), ("/users", "users-board", "users-leaderboard")],
)
def test_a_table_below_the_first_screen_is_built_once_scrolled_to(browser, server_url, path, grid, rows_callback):
    """The job explorer and the leaderboard are not built, and their rows not asked for, until they come into view."""
    context = new_context(browser)
    tab = context.new_page()
    posted: list[str] = []
    tab.on("request", lambda r: posted.append(r.post_data or "") if "_dash-update-component" in r.url else None)
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        open_settled(tab, server_url + path)
        tab.locator(".js-plotly-plot .main-svg").first.wait_for()
        assert tab.locator(f"#{grid}").count() == 0
        assert not any(rows_callback in body for body in posted)
        tab.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        tab.locator(f"#{grid} .ag-row").first.wait_for()
        assert any(rows_callback in body for body in posted)
        assert errors == []
    finally:
        context.close()


@pytest.mark.draw_all
@pytest.mark.parametrize("path", PAGES)
def test_every_page_opens_without_console_errors(page, server_url, path):
    open_settled(page, server_url + path)
    assert page.locator(".navbar-brand").inner_text() == "Helios Dashboard"
    if path in ("/cluster", "/jobs", "/users", "/compare"):
        page.wait_for_function(f"document.querySelectorAll('{PLOTS}').length >= 4")
        assert page.locator("text=No jobs match the current filters.").count() == 0
    assert page.errors == []


# What each bundled dataset lacks, shown where a page needs it (the rest of the page still draws).
ABSENT_ON: dict[tuple[str, str], str] = {
    ("philly", "/cluster"): "Not in this trace: the Philly job list has no start times",
    ("philly", "/users"): "Not in this trace: the Philly job list has no users",
    ("philly", "/jobs"): "Not in this trace: the Philly job list has GPU jobs only",
    ("alibaba", "/users"): "Not in this trace: the Alibaba pod list has no users",
}


@pytest.mark.parametrize("dataset", ["philly", "alibaba"])
def test_bundled_datasets_say_what_they_lack_instead_of_zeros(page, server_url, dataset):
    for path in ("/", "/cluster", "/jobs", "/users"):
        open_settled(page, f"{server_url}{path}?ds={dataset}")
        if path == "/":
            page.wait_for_selector(".cluster-card")
            cell = page.locator(".cluster-card dd").nth(3 if dataset == "philly" else 4)
            page.wait_for_function("el => el.innerText !== '…'", arg=cell.element_handle())
            util = cell.inner_text()
            assert util == "not in this trace" if dataset == "philly" else util.endswith(" %"), util
            assert "GPU-hours\n0\n" not in page.locator(".cluster-card").inner_text()
            continue
        page.wait_for_function(f"document.querySelectorAll('{PLOTS}').length >= 2")
        expected = ABSENT_ON.get((dataset, path))
        if expected:
            page.wait_for_selector(f"text={expected}")
        assert page.locator("text=No jobs match the current filters.").count() == 0, (dataset, path)
    open_settled(page, f"{server_url}/data")
    assert page.locator(".works-with").count() >= 4
    assert page.errors == []


def test_changing_a_filter_updates_the_url_and_the_figures(page, server_url):
    open_settled(page, server_url + "/jobs")
    page.wait_for_selector("text.gtitle:text-is('CPU job duration CDF')")
    assert trace_names(page, "CPU job duration CDF") == ["Earth", "Venus"]
    page.locator("label:has-text('GPU jobs')").first.click()
    page.wait_for_url("**kind=gpu**")
    page.wait_for_selector("text=No jobs match the current filters.")  # CPU jobs are filtered out
    assert trace_names(page, "GPU job duration CDF") == ["Earth", "Venus", "all clusters"]  # with both pooled (Fig 1a)
    assert page.errors == []


def test_a_shared_url_restores_the_same_view(page, server_url):
    shared = server_url + "/jobs?ds=helios-synth&cluster=Venus&kind=gpu&gmin=2"
    open_settled(page, shared)
    page.wait_for_selector("text.gtitle:text-is('GPU job duration CDF')")
    assert trace_names(page, "GPU job duration CDF") == ["Venus"]
    assert page.locator("#f-clusters").inner_text().strip().startswith("Venus")
    assert page.locator("#f-gpu-min").input_value() == "2"
    page.reload()
    settle(page)
    assert page.url == shared
    assert trace_names(page, "GPU job duration CDF") == ["Venus"]
    assert page.locator("#nav-users").get_attribute("href") == "/users?ds=helios-synth&cluster=Venus&kind=gpu&gmin=2"
    assert "active" in page.locator("#nav-jobs").get_attribute("class")
    assert "active" not in page.locator("#nav-users").get_attribute("class")
    # a new filter reaches every page link
    page.evaluate("window.dash_clientside.set_props('f-clusters', {value: ['Earth']})")
    page.wait_for_function("document.querySelector('#nav-users').getAttribute('href').includes('cluster=Earth')")
    earth = "?ds=helios-synth&cluster=Earth&kind=gpu&gmin=2"
    assert page.locator("#nav-cluster").get_attribute("href") == "/cluster" + earth
    assert page.errors == []


def test_clicking_a_vc_drills_the_dashboard_down_to_it(page, server_url):
    open_settled(page, server_url + "/cluster")
    _slot(page, "vc_util").scroll_into_view_if_needed()  # a card below the first screen: drawn once scrolled to
    title = "Utilisation per virtual cluster (click a VC to filter)"
    page.wait_for_selector(f"text.gtitle:text-is('{title}')")
    plot = page.locator(".js-plotly-plot", has=page.locator(f"text.gtitle:text-is('{title}')"))
    plot.scroll_into_view_if_needed()
    settle(page)  # drawn to the end: plotly draws this chart again once its rotated labels have grown the margin
    plot.locator("g.trace.boxes path.box").first.click(force=True)
    page.wait_for_url("**vc=**")
    assert "vc=vcC" in page.url  # the largest VC comes first; all have 64 GPUs, so the first one is Earth/vcC
    settle(page)
    assert page.locator("#f-vcs").inner_text().strip().startswith("vcC")
    assert page.errors == []


SLOW_GRID_ROWS_JS = """() => {
    const fetch = window.fetch;
    window.__heliosSlowRows = 0;
    window.fetch = (url, options) => {
        if (!String(options?.body || "").includes("getRowsRequest")) return fetch(url, options);
        window.__heliosSlowRows += 1;
        return new Promise((resolve) => setTimeout(resolve, 1000)).then(() => fetch(url, options));
    };
}"""


@pytest.mark.draw_all
def test_the_job_explorer_pages_through_the_server(page, server_url):
    asked = []
    page.on("request", lambda r: asked.append(r) if "getRowsRequest" in (r.post_data or "") else None)
    open_settled(page, server_url + "/jobs?cluster=Earth")
    page.wait_for_selector("#jobs-grid .ag-row")
    assert len(asked) == 1  # the grid's own request for its first block, no empty initial call besides
    # the count comes with the rows' answer: wait for it too
    page.wait_for_function("document.querySelector('#jobs-status').innerText.trim().endsWith(' jobs')")
    status = page.locator("#jobs-status").inner_text()
    assert status.endswith(" jobs") and int(status.split()[0].replace(",", "")) > 100
    first = page.locator("#jobs-grid .ag-row[row-index='0'] [col-id='cluster']").inner_text()
    assert first == "Earth"
    # the next page's rows take a second to arrive: the count and export link stay in view meanwhile (the section's
    # spinner is for building it, not for a page of rows), and the rows arrive
    page.evaluate(SLOW_GRID_ROWS_JS)
    page.locator("#jobs-grid .ag-paging-button").filter(has=page.locator(".ag-icon-next")).click()
    page.wait_for_function("window.__heliosSlowRows === 1")
    page.wait_for_timeout(500)
    assert page.locator("#jobs-status").inner_text() == status and page.locator("#jobs-export").is_visible()
    page.wait_for_selector("#jobs-grid .ag-row[row-index='100']")
    assert page.errors == []


def test_the_compare_overlay_switch_draws_the_published_curves_and_lands_in_the_url(page, server_url):
    open_settled(page, server_url + "/compare")
    title = "GPU job duration CDF"
    page.wait_for_selector(f"text.gtitle:text-is('{title}')")
    assert not any(n.endswith("(published)") for n in trace_names(page, title))
    page.locator("#compare-overlay").check()
    page.wait_for_url("**ref=1**")
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.js-plotly-plot')).some("
        "el => (el.data || []).some(t => (t.name || '').endsWith('(published)')))"
    )
    assert "Helios Venus (published)" in trace_names(page, title)
    assert page.errors == []


@pytest.mark.parametrize("path", PAGES)
def test_pages_fit_a_phone_screen(browser, server_url, path):
    context = new_context(browser, 390, 844)
    tab = context.new_page()
    try:
        open_settled(tab, server_url + path)
        tab.wait_for_function("document.querySelectorAll('[data-dash-is-loading=true]').length === 0")
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390  # nothing sticks out sideways
        assert not tab.locator("#filter-collapse").is_visible()  # the filters start folded on a phone
        if path == "/data":  # a page without the filter bar (it lists every dataset)
            assert tab.locator("#filter-bar").is_hidden()
            return
        tab.locator("#filter-toggle").click()
        tab.wait_for_selector("#f-dataset", state="visible")
    finally:
        context.close()


def test_an_upload_through_the_data_page_is_ingested_and_reported(page, server_url, tmp_path):
    rows = gzip.decompress(PHILLY_JOBS.read_bytes()).decode().splitlines(keepends=True)[:301]
    trace = tmp_path / "philly-head.csv"
    trace.write_text("".join(rows))
    open_settled(page, server_url + "/data")
    page.locator("#data-upload-name input, input#data-upload-name").first.fill("uploaded-philly")
    page.locator("#data-upload-format").click()
    page.get_by_role("listbox").get_by_role("option", name="philly", exact=True).click()
    page.locator("#data-upload input[type=file]").set_input_files(str(trace))
    page.wait_for_selector("text=dataset uploaded-philly is ready")
    assert page.locator("text=Data quality").count() >= 1
    assert page.locator("text=300 rows read, 300 kept.").count() == 1
    assert page.errors == []


# --- Issue #37: how answers travel to a real browser ------------------------------------------------------------


def _wire(context, tab) -> dict[str, dict]:
    """Every request of tab by its CDP id: URL, body, and once answered its status, headers (lower-cased) and whether
    the browser's cache answered it."""
    seen: dict[str, dict] = {}
    cdp = context.new_cdp_session(tab)
    cdp.send("Network.enable")

    def sent(ev: dict) -> None:
        request = ev["request"]
        seen[ev["requestId"]] = {"url": request["url"], "asked": request.get("postData") or "", "cached": False}

    def received(ev: dict) -> None:
        r, row = ev["response"], seen.setdefault(ev["requestId"], {"url": ev["response"]["url"], "cached": False})
        row.update(status=r["status"], headers={k.lower(): v for k, v in r["headers"].items()})
        row["cached"] = row["cached"] or bool(r.get("fromDiskCache") or r.get("fromPrefetchCache"))

    def from_cache(ev: dict) -> None:
        seen.setdefault(ev["requestId"], {"url": "", "status": None, "headers": {}})["cached"] = True

    cdp.on("Network.requestWillBeSent", sent)
    cdp.on("Network.responseReceived", received)
    cdp.on("Network.requestServedFromCache", from_cache)
    return seen


def _drawn(tab, url: str) -> None:
    tab.goto(url)
    _slot(tab, "utilization").locator(".main-svg").first.wait_for()
    tab.wait_for_function("!!window.Plotly && !!window.Plotly.react", timeout=30_000)


def test_the_browser_gets_compressed_answers_and_keeps_versioned_bundles_a_year(browser, server_url):
    """The page, a callback's answer and plotly.js (the partial bundle standing for plotly.min.js) arrive compressed
    (Chromium asks gzip, deflate, br, zstd); a component bundle is immutable for a year; a revisit fetches no static
    file again; the layout and the callback list are not fetched at all."""
    from components.server import transfer
    from components.shell import controls

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    seen = _wire(context, tab)
    try:
        _drawn(tab, server_url + "/cluster")
        rows = list(seen.values())
        page = next(r for r in rows if r["url"] == server_url + "/cluster")
        # The utilisation figure's answer: its own callback's, or the pages router's when the server had it cached
        # (the page then comes as the bare shell, and the router's answer lays its first screen out with figures).
        asked = [r for r in rows if CALLBACK_PATH in r["url"]]
        own = [r for r in asked if controls.WANT in r.get("asked", "") and '"utilization"' in r["asked"]]
        callback = (own or [r for r in asked if "_pages_content" in r.get("asked", "")])[0]
        plotly = next(r for r in rows if transfer.PLOTLY_BUNDLE in r["url"])
        for answer in (page, callback, plotly):
            assert answer["headers"].get("content-encoding") in ("br", "gzip"), answer["url"]
        assert "?m=" in plotly["url"], "plotly.js by its versioned URL"
        assert not any(r["url"].split("?")[0].endswith("plotly.min.js") for r in rows)  # the partial bundle instead
        bundles = [r for r in rows if transfer.SUITES in r["url"] and r["status"] == 200] + [plotly]
        assert len(bundles) > 5 and all(r["headers"]["cache-control"] == transfer.IMMUTABLE for r in bundles)
        # Dash's layout and callback list came inside the page (components/server/preload.py), not by a request
        assert not [r["url"] for r in rows if r["url"].split("?")[0].endswith(("/_dash-layout", "/_dash-dependencies"))]
        assert page["headers"]["cache-control"] == callback["headers"]["cache-control"] == "no-store"
        static = {r["url"] for r in rows if transfer.SUITES in r["url"] or transfer.ASSETS in r["url"]}
        seen.clear()
        _drawn(tab, server_url + "/cluster")
        again = [r for r in seen.values() if r["url"] in static]
        assert again and all(r["cached"] for r in again), [r["url"] for r in again if not r["cached"]]
        # a page without figure cards is laid out for its URL in its HTML: neither the pages router nor the filter
        # callback is asked as it loads
        seen.clear()
        open_settled(tab, server_url + "/data?ds=helios-synth")
        asked = [r.get("asked", "") for r in seen.values() if CALLBACK_PATH in r["url"]]
        assert tab.locator("#_pages_content h4").inner_text() == "Data"
        assert not [a for a in asked if "_pages_content" in a or "filter-state" in a], asked
    finally:
        context.close()


def test_a_page_laid_out_for_another_url_than_the_browser_shows_is_not_used(page, server_url):
    """A proxy that rewrote the path would hand the browser a page laid out for another URL: assets/preload.js then
    lets Dash fetch the bare shell, which reads the browser's own URL (here a path no page has: the not-found page)."""
    data_page = urllib.request.urlopen(server_url + "/data").read()
    page.route("**/elsewhere", lambda route: route.fulfill(status=200, content_type="text/html", body=data_page))
    fetched = []
    page.on("request", lambda r: fetched.append(r.url) if r.url.endswith("/_dash-layout") else None)
    open_settled(page, server_url + "/elsewhere")
    page.wait_for_selector("#_pages_content h4")
    assert page.locator("#_pages_content h4").inner_text() == "Page not found" and fetched


POINTS_JS = "g => g._fullData.map(t => t.x.length)"  # the points of each trace, as plotly.js decoded them


def test_a_phone_gets_the_utilisation_series_thinned_to_its_width(browser, server_url):
    """The viewport cookie (assets/viewport.js) reaches the server before the first layout: a 390 px phone gets
    about two points per pixel of its chart."""
    from components.charts import decimate

    context = browser.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    try:
        _drawn(tab, server_url + "/cluster")
        assert {c["name"]: c["value"] for c in context.cookies()}[decimate.VIEWPORT_COOKIE] == "390"
        points = _slot(tab, "utilization").locator(".js-plotly-plot").evaluate(POINTS_JS)
        assert points and max(points) <= 2 * decimate.plot_width_px(390) + 4
        wide = browser.new_context(viewport={"width": 1920, "height": 900})
        wide_tab = wide.new_page()
        _drawn(wide_tab, server_url + "/cluster")
        wider = _slot(wide_tab, "utilization").locator(".js-plotly-plot").evaluate(POINTS_JS)
        wide.close()
        assert max(wider) > max(points)
    finally:
        context.close()
