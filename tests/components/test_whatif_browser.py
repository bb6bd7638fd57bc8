"""What-if page in Chromium: fill the form, run with progress, cancel a run, reload the shared URL."""

from __future__ import annotations

import os
import time

import pytest

from tests.waiting import DEADLINE_S, open_settled, settle, wait_for

pytestmark = pytest.mark.browser

BIG_JOBS = 12_000  # enough that a run (the twin's replay, LightGBM, the predictor ladder) takes seconds


@pytest.fixture(scope="module")
def server(tmp_path_factory, chromium_path, write_small, gunicorn_app):
    """Gunicorn (1 worker, 4 threads) serving the app over a small dataset; yields (base URL, settings)."""
    from components.server.settings import Settings

    root = tmp_path_factory.mktemp("whatif-browser")
    data, cache = root / "data", root / "cache"
    write_small("helios-synth", data, n_jobs=BIG_JOBS)
    env = {
        **os.environ,
        "HELIOS_DATA_DIR": str(data),
        "HELIOS_CACHE_DIR": str(cache),
        "HELIOS_BG_INTERVAL_MS": "250",
    }
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(root / "server.log", env, timeout_s=120) as url:
        yield url, Settings(data_dir=data, cache_dir=cache)


WATCH_PROGRESS = """() => {
  window.__progress = {shown: false, values: []};
  const wrap = document.getElementById('whatif-progress-wrap');
  new MutationObserver(() => {
    if (wrap.style.display !== 'none') window.__progress.shown = true;
    const bar = wrap.querySelector('.progress-bar');
    if (bar) window.__progress.values.push(Number(bar.getAttribute('aria-valuenow')));
  }).observe(wrap, {attributes: true, childList: true, subtree: true});
}"""


def _table(page) -> list[str]:
    """The rows of the comparison table (the replay table above it has its own)."""
    return page.locator("#whatif-results tr[id^='whatif-row-']").all_inner_texts()


def _cached_key(url: str, settings):
    from analytics.filters import query_params
    from components.whatif.state import default_form, form_from_params, form_to_config
    from sim.scenario import open_request

    form, _ = form_from_params(query_params(url.split("?", 1)[1]), default_form())
    return open_request(form_to_config(form), settings.data_dir).key


def _explain(tab) -> str:
    texts = {sel: tab.locator(sel).all_inner_texts() for sel in ("#whatif-status", "#whatif-error")}
    return f"url {tab.url}; page {texts}; console errors {tab.errors}"


def test_run_watch_progress_cancel_and_reload_the_shared_scenario(page, server):
    try:
        _run_cancel_reload(page, server)
    except Exception as exc:
        raise AssertionError(f"{exc}\n{_explain(page)}") from exc


def _run_cancel_reload(tab, server):
    from components.whatif.run import results_cache

    base, settings = server
    open_settled(tab, f"{base}/whatif?ds=helios-synth&cluster=Earth")
    # Fill the form: two policies only, 1.5 x the VC capacity.
    tab.locator("#whatif-policies label:text-is('srtf')").click()
    tab.locator("#whatif-policies label:text-is('qssf')").click()
    tab.locator("#whatif-capacity").fill("1.5")
    tab.evaluate(WATCH_PROGRESS)
    tab.locator("#whatif-run").click()
    tab.wait_for_selector("#whatif-row-sjf")
    tab.wait_for_function("document.getElementById('whatif-status').innerText.startsWith('ran in')")
    progress = tab.evaluate("window.__progress")
    assert progress["shown"] and max(progress["values"], default=0) > 0
    shared = tab.url
    assert "pol=fifo,sjf" in shared and "cap=1.5" in shared and shared.endswith("run=1")
    first_table = _table(tab)
    assert [row.split("\t")[0] for row in first_table] == ["recorded", "twin", "fifo", "sjf"]
    tab.wait_for_selector("#whatif-graph-jct-cdf .main-svg")
    _assert_why_wait_shown(tab)
    tab.wait_for_selector("#whatif-run:not([disabled])")
    settle(tab)  # the check for a lost run (a clientside callback that waits for a result to land) has run
    assert tab.locator("#whatif-error").inner_text() == ""  # a finished run is not reported as lost
    # A second scenario (LightGBM + predictor ladder) is cancelled before its page has heard back from the server
    # that the job started: Dash's own cancel cannot name that job yet, so the run's token must stop it.
    tab.locator("#whatif-estimator").click()
    tab.locator(".Select-menu-outer, [role='listbox']").get_by_text("LightGBM", exact=False).first.click()
    tab.locator("#whatif-ladder").check()
    _cancel_before_the_server_hears(tab, "whatif", "whatif-config.data")
    tab.wait_for_function("document.getElementById('whatif-status').innerText === 'cancelled'")
    assert "est=lightgbm" in tab.url and "ladder=1" in tab.url
    assert _table(tab) == first_table
    settle(tab)
    assert tab.locator("#whatif-status").inner_text() == "cancelled"
    assert tab.locator("#whatif-error").inner_text() == ""  # a cancelled run is not reported as lost
    assert results_cache(settings).get(_cached_key(tab.url, settings)) is None  # the job was stopped
    # The shared link restores the first scenario, straight from the cache.
    tab.goto(shared)
    tab.wait_for_selector("#whatif-row-sjf")
    tab.wait_for_function("document.getElementById('whatif-status').innerText.startsWith('from cache')")
    assert _table(tab) == first_table
    assert tab.locator("#whatif-capacity").input_value() == "1.5"
    checked = tab.locator("#whatif-policies input:checked").evaluate_all("els => els.map(e => e.value)")
    assert checked == ["fifo", "sjf"]
    _assert_why_wait_shown(tab)
    assert tab.errors == []


def _assert_why_wait_shown(tab) -> None:
    """The result's downloads and its 'why wait' panel are shown, the longest wait chosen, drawn and explained."""
    tab.wait_for_selector("#whatif-wait-graph .main-svg")
    tab.wait_for_selector("#whatif-wait-table tr")
    assert tab.locator("#whatif-downloads").is_visible() and tab.locator("#whatif-wait").is_visible()
    assert tab.locator("#whatif-wait-job").inner_text().startswith("job ")


def _cancel_before_the_server_hears(tab, prefix: str, trigger: str) -> None:
    """Press <prefix>-run, hold back the request that starts its job (triggered by trigger), press <prefix>-cancel,
    then let the request through and wait for Run to come back."""
    held = _hold_first_start_of(tab, trigger)
    tab.locator(f"#{prefix}-run").click()
    tab.wait_for_selector(f"#{prefix}-cancel:not([disabled])")
    _wait_until(tab, lambda: held, "the request that starts the job")
    tab.locator(f"#{prefix}-cancel").click()
    tab.wait_for_function(f"document.getElementById('{prefix}-status').innerText === 'cancelled'")
    held[0].continue_()  # now the server hears of the run, after its cancel
    tab.wait_for_selector(f"#{prefix}-run:not([disabled])")


def _hold_first_start_of(tab, trigger: str) -> list:
    """Hold back the next request that starts the background callback triggered by trigger (not its polls); the list
    gets the held route, to be continued by the test."""
    held: list = []

    def route(request_route) -> None:
        request = request_route.request
        starts = "job=" not in request.url and f'"changedPropIds":["{trigger}"]' in (request.post_data or "")
        if starts and not held:
            held.append(request_route)
            return
        request_route.continue_()

    tab.route("**/_dash-update-component*", route)
    return held


def _wait_until(tab, condition, what: str) -> None:
    """Wait for condition while the tab's event handlers (its routes) keep running: Playwright's sync API runs them
    only while the test is inside one of its calls."""
    deadline_s = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline_s, f"{what}: not within {DEADLINE_S:g} s"
        tab.wait_for_timeout(50)


def test_sweep_mode_charts_a_metric_over_the_grid(page, server):
    _sweep(page, server)


def _sweep(tab, server) -> None:
    base, _ = server
    open_settled(tab, f"{base}/whatif?ds=helios-synth&cluster=Earth")
    tab.locator("#whatif-sweep-x-values").fill("1,2")
    tab.locator("#whatif-sweep-y-values").fill("fifo,sjf")
    # Cancelled before the server hears of it, the sweep never runs.
    _cancel_before_the_server_hears(tab, "whatif-sweep", "whatif-sweep-request.data")
    settle(tab)
    assert tab.locator("#whatif-sweep-status").inner_text() == "cancelled"
    assert tab.locator("#whatif-sweep-graph .js-plotly-plot").count() == 0  # its note only, no chart
    assert "Run a sweep" in tab.locator("#whatif-sweep-graph").inner_text()
    tab.unroute("**/_dash-update-component*")
    tab.locator("#whatif-sweep-run").click()
    tab.wait_for_selector("#whatif-sweep-progress .progress-bar-animated", state="attached")  # stripes while it runs
    tab.wait_for_function("document.getElementById('whatif-sweep-status').innerText.endsWith('rows')")
    names = tab.locator("#whatif-sweep-graph .js-plotly-plot").evaluate("el => el.data.map(t => t.name)")
    assert names == ["fifo", "sjf"]
    settle(tab)
    running = "document.getAnimations().filter(a => a.animationName).map(a => a.effect.target.className)"
    assert tab.evaluate(running) == []  # and only then
    assert tab.errors == []


def _workers(url: str) -> list:
    """The gunicorn worker processes (not the master, not their background jobs) serving url."""
    import psutil

    bind = url.removeprefix("http://")
    serving = [p for p in psutil.process_iter(["cmdline"]) if bind in " ".join(p.info["cmdline"] or [])]
    pids = {p.pid for p in serving}
    return [p for p in serving if p.ppid() in pids and p.parent().ppid() not in pids]


def test_a_worker_killed_mid_run_shows_a_clear_failure(page, server):
    try:
        _kill_mid_run(page, server)
    except Exception as exc:
        raise AssertionError(f"{exc}\n{_explain(page)}") from exc


def _kill_mid_run(tab, server) -> None:
    """Kill the serving workers and their children once the run's job has started (the job, the run's process): the
    page must say the run was lost, not stay "running…". (A job that outlives a worker killed alone is picked up by
    the retried poll of assets/poll_retry.js and shows its result.)"""
    base, _ = server
    open_settled(tab, f"{base}/whatif?ds=helios-synth&cluster=Earth&est=lightgbm&ladder=1&cap=1.25")
    tab.locator("#whatif-run").click()
    tab.wait_for_selector("#whatif-cancel:not([disabled])")
    workers = _workers(base)
    assert workers, "no gunicorn worker found"
    wait_for(lambda: any(_run_jobs(w) for w in workers), "a job of the run forked by a worker", interval_s=0.05)
    for worker in workers:
        for process in [*worker.children(recursive=True), worker]:
            process.kill()
    tab.wait_for_selector("#whatif-run:not([disabled])")
    tab.wait_for_function("document.getElementById('whatif-error').innerText.includes('without a result')")
    assert tab.locator("#whatif-status").inner_text() == "failed"
    assert tab.locator("#whatif-results table").count() == 0


def _run_jobs(worker) -> list:
    """The background jobs a gunicorn worker started: its forks (same command line), not helpers such as
    multiprocessing's resource tracker."""
    return [c for c in worker.children() if c.cmdline() == worker.cmdline()]


def test_a_progress_poll_cut_by_a_network_error_is_tried_again(page, server):
    """Dash ends a background run's poll chain on a network error; assets/poll_retry.js sends the poll again."""
    base, _ = server
    cut: list[str] = []

    def cut_twice(route):
        if len(cut) < 2:
            cut.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/_dash-update-component?*job=*", cut_twice)
    open_settled(page, f"{base}/whatif?ds=helios-synth&cluster=Earth&pol=fifo,sjf&cap=1.3")
    page.locator("#whatif-run").click()
    try:
        page.wait_for_selector("#whatif-row-sjf")
    except Exception as exc:
        raise AssertionError(f"{exc}\n{_explain(page)}") from exc
    assert len(cut) == 2
    assert page.locator("#whatif-status").inner_text().startswith("ran in")
    assert page.locator("#whatif-error").inner_text() == ""


SHARED_RUN_AND_SWEEP = (
    "/whatif?ds=helios-synth&cluster=Earth&pol=fifo,sjf&cap=1.1&run=1"
    "&sx=load_factor&sxv=1,1.2&sy=policy&syv=fifo,sjf&sm=avg_queue_s&sweep=1"
)


def test_a_shared_link_with_a_run_and_a_sweep_shows_both(page, server):
    """A page's run and its sweep hold separate per-user slots: opening a link that starts both refuses neither."""
    base, _ = server
    page.goto(base + SHARED_RUN_AND_SWEEP)
    try:
        page.wait_for_selector("#whatif-row-sjf")
        page.wait_for_function("document.getElementById('whatif-sweep-status').innerText.endsWith('rows')")
    except Exception as exc:
        raise AssertionError(f"{exc}\n{_explain(page)}") from exc
    assert page.locator("#whatif-error").inner_text() == ""
    assert "run=1" in page.url and "sweep=1" in page.url, page.url  # still the link to both
    assert "HELIOS_MAX_RUNS_PER_USER" not in page.locator("body").inner_text()
    names = page.locator("#whatif-sweep-graph .js-plotly-plot").evaluate("el => el.data.map(t => t.name)")
    assert names == ["fifo", "sjf"]
    assert page.errors == []
