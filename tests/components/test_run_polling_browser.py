"""Runs in Chromium against gunicorn: a run whose page is closed stops once nobody polls it (a run whose page stays
open finishes), and one client runs at most HELIOS_MAX_RUNS_PER_USER at once."""

from __future__ import annotations

import os
import time

import psutil
import pytest

pytestmark = pytest.mark.browser

N_JOBS = 150_000  # on this size the SLOW scenario takes 15-30 s, longer than UNPOLLED_S
UNPOLLED_S = 10  # the polls of an open page (every 0.5 s), slowed down on a loaded machine, still come well within it
SLOW = "est=lightgbm&ladder=1&start=2020-04-01&end=2020-04-22&pol=fifo,sjf,qssf,srtf,las"  # outlasts UNPOLLED_S


@pytest.fixture(scope="module")
def server(tmp_path_factory, chromium_path, write_small, gunicorn_app):
    """Gunicorn (1 worker) over a dataset whose runs take longer than the unpolled limit; yields its base URL."""
    root = tmp_path_factory.mktemp("run-polling")
    data = root / "data"
    write_small("helios-synth", data, n_jobs=N_JOBS)
    env = {
        **os.environ,
        "HELIOS_DATA_DIR": str(data),
        "HELIOS_CACHE_DIR": str(root / "cache"),
        "HELIOS_BG_INTERVAL_MS": "500",
        "HELIOS_RUN_UNPOLLED_S": str(UNPOLLED_S),
        "HELIOS_MAX_RUNS": "2",
        "HELIOS_MAX_RUNS_PER_USER": "1",
    }
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(root / "server.log", env, timeout_s=120) as url:
        yield url


# The run ended: its result table or its error is on the page.
FINISHED = """() => document.getElementById('whatif-row-sjf') !== null
  || (document.getElementById('whatif-error')?.innerText || '').length > 0"""


def _runs(url: str) -> list[psutil.Process]:
    """The spawned run processes of the gunicorn serving url: master -> worker -> background job -> run (not the
    worker's warm-up child, nor resource trackers)."""
    bind = url.removeprefix("http://")
    serving = {p.pid: p for p in psutil.process_iter(["cmdline"]) if bind in " ".join(p.info["cmdline"] or [])}
    master = next(p for p in serving.values() if p.ppid() not in serving)  # workers and jobs are its forks
    found = []
    for worker in master.children():
        for job in worker.children():
            try:
                found += [p for p in job.children() if "spawn_main" in " ".join(p.cmdline())]
            except psutil.NoSuchProcess:
                continue
    return found


def _wait_for_runs(url: str, timeout_s: float = 60) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = _runs(url)
        if runs:
            return runs
        time.sleep(0.2)
    raise AssertionError("no run process started")


def _wait_until_idle(url: str, timeout_s: float = 60) -> None:
    """Wait for the runs of an earlier test to be gone (a finished run's process exits just after its result)."""
    deadline = time.monotonic() + timeout_s
    while _runs(url):
        assert time.monotonic() < deadline, "an earlier run is still going"
        time.sleep(0.2)


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    tab.goto(url)
    return context, tab


def test_a_run_stops_when_its_page_is_closed_and_goes_on_while_it_is_open(browser, server):
    _wait_until_idle(server)
    context, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=1.25&run=1")
    runs = _wait_for_runs(server)
    time.sleep(2.0)  # polled for a while: the heartbeats are flowing
    assert all(p.is_running() for p in runs)
    context.close()
    closed_at = time.monotonic()
    gone, alive = psutil.wait_procs(runs, timeout=UNPOLLED_S + 10)
    stopped_after_s = time.monotonic() - closed_at
    assert not alive, f"run still alive {stopped_after_s:.1f} s after its page closed"
    assert stopped_after_s <= UNPOLLED_S + 10
    print(f"run stopped {stopped_after_s:.1f} s after its page closed (limit {UNPOLLED_S} s)")
    assert not _runs(server)
    # A page that stays open keeps its run going past the limit, up to its result.
    context, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=1.5&run=1")
    try:
        started = time.monotonic()
        tab.wait_for_function(FINISHED, timeout=300_000)
        assert tab.locator("#whatif-error").inner_text() == ""
        assert tab.locator("#whatif-row-sjf").count() == 1
        ran_s = time.monotonic() - started
        print(f"an open page's run went on for {ran_s:.1f} s (limit {UNPOLLED_S} s)")
        assert ran_s > UNPOLLED_S
    finally:
        context.close()


def test_one_client_runs_one_scenario_at_a_time_with_a_clear_message(browser, server):
    _wait_until_idle(server)
    first, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=1.75&run=1")
    second = None
    try:
        _wait_for_runs(server)
        second, other = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=2&run=1")
        try:
            other.wait_for_function(FINISHED, timeout=120_000)
        except Exception as exc:
            texts = {sel: other.locator(sel).all_inner_texts() for sel in ("#whatif-status", "#whatif-error")}
            raise AssertionError(f"{texts}, runs {_runs(server)}, url {other.url}") from exc
        message = other.locator("#whatif-error").inner_text()
        assert "HELIOS_MAX_RUNS_PER_USER" in message and "wait for it to finish or cancel it" in message
        assert len(_runs(server)) == 1  # the first run goes on, alone
        # Cancelled now, the first run does not go on for UNPOLLED_S after its page closes (the next test waits).
        tab.locator("#whatif-cancel").click()
        tab.wait_for_function("document.getElementById('whatif-status').innerText === 'cancelled'")
    finally:
        first.close()
        if second is not None:
            second.close()


def test_a_sweep_and_its_dask_workers_stop_when_its_page_is_closed(browser, server):
    _wait_until_idle(server)
    context, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth")
    tab.wait_for_load_state("networkidle")
    tab.locator("#whatif-sweep-x-values").fill("1,1.25,1.5,1.75,2")
    tab.locator("#whatif-sweep-y-values").fill("fifo,sjf,qssf")
    tab.locator("#whatif-sweep-run").click()
    runs = _wait_for_runs(server)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.children() for p in runs if p.is_running()):
        time.sleep(0.2)
    workers = [child for p in runs for child in p.children()]
    assert workers, "the sweep started no Dask workers"
    context.close()
    closed_at = time.monotonic()
    _, alive = psutil.wait_procs(runs + workers, timeout=UNPOLLED_S + 10)
    assert not alive, f"{len(alive)} sweep processes alive {time.monotonic() - closed_at:.1f} s after its page closed"
