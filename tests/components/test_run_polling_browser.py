"""Runs in Chromium against gunicorn: a run whose page is closed stops once nobody polls it (a run whose page stays
open finishes), and one client runs at most HELIOS_MAX_RUNS_PER_USER at once."""

from __future__ import annotations

import os
import time

import psutil
import pytest

pytestmark = pytest.mark.browser

N_JOBS = 150_000  # on this size the LightGBM ladder takes ~25 s and four policies ~15 s: longer than UNPOLLED_S
UNPOLLED_S = 5
SLOW = "est=lightgbm&ladder=1&cap=1.25"
FOUR_POLICIES = "pol=fifo,sjf,srtf,qssf&cap=1.5"


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


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    tab.goto(url)
    return context, tab


def test_a_run_stops_when_its_page_is_closed_and_goes_on_while_it_is_open(browser, server):
    context, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&run=1")
    runs = _wait_for_runs(server)
    time.sleep(2.0)  # polled for a while: the heartbeats are flowing
    assert all(p.is_running() for p in runs)
    context.close()
    closed_at = time.monotonic()
    gone, alive = psutil.wait_procs(runs, timeout=UNPOLLED_S + 10)
    stopped_after_s = time.monotonic() - closed_at
    assert not alive, f"run still alive {stopped_after_s:.1f} s after its page closed"
    assert stopped_after_s <= UNPOLLED_S + 10
    assert not _runs(server)
    # A page that stays open keeps its run going past the limit, up to its result.
    context, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{FOUR_POLICIES}&run=1")
    try:
        started = time.monotonic()
        tab.wait_for_selector("#whatif-row-qssf", timeout=180_000)
        assert time.monotonic() - started > UNPOLLED_S
        assert tab.locator("#whatif-error").inner_text() == ""
    finally:
        context.close()


def test_one_client_runs_one_scenario_at_a_time_with_a_clear_message(browser, server):
    first, tab = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=1.75&run=1")
    second = None
    try:
        _wait_for_runs(server)
        second, other = _open(browser, f"{server}/whatif?ds=helios-synth&cluster=Earth&{SLOW}&cap=2&run=1")
        other.wait_for_function(
            "document.getElementById('whatif-error').innerText.includes('already running')", timeout=60_000
        )
        message = other.locator("#whatif-error").inner_text()
        assert "HELIOS_MAX_RUNS_PER_USER" in message and "wait for it to finish or cancel it" in message
        assert len(_runs(server)) == 1  # the first run goes on, alone
    finally:
        first.close()
        if second is not None:
            second.close()
