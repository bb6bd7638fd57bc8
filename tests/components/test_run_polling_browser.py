"""Runs in Chromium against gunicorn: a run whose page is closed stops once nobody polls it (a run whose page stays
open finishes), and one client runs at most HELIOS_MAX_RUNS_PER_USER at once.

Each run the limit is checked on is held (its process stopped with SIGSTOP once it has started, SIGCONT to let it
go on): it then outlasts the limit on any machine, however fast, while its page and the server behave as for a long
run. The server's watch of the run lives in the run's parent (the background job), which goes on as usual."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from components.server import heartbeats
from components.server.settings import Settings
from tests.waiting import DEADLINE_S, new_context, settle, wait_for

pytestmark = pytest.mark.browser

N_JOBS = 8_000  # a run the limits are checked on is held; one that finishes takes a few seconds
UNPOLLED_S = 10  # the polls of an open page come every 0.5 s: 20 per limit (the tests check the gaps they saw)
POLL_MS = 500
SCENARIO = "start=2020-04-01&end=2020-04-22&pol=fifo,sjf"


@pytest.fixture(scope="module")
def server(tmp_path_factory, chromium_path, write_small, gunicorn_app):
    """Gunicorn (1 worker) over a small dataset, stopping runs UNPOLLED_S after their last poll; yields its base URL
    and the settings of its cache folder (where the polls leave their heartbeats)."""
    root = tmp_path_factory.mktemp("run-polling")
    data = root / "data"
    write_small("helios-synth", data, n_jobs=N_JOBS)
    env = {
        **os.environ,
        "HELIOS_DATA_DIR": str(data),
        "HELIOS_CACHE_DIR": str(root / "cache"),
        "HELIOS_BG_INTERVAL_MS": str(POLL_MS),
        "HELIOS_RUN_UNPOLLED_S": str(UNPOLLED_S),
        "HELIOS_MAX_RUNS": "2",
        "HELIOS_MAX_RUNS_PER_USER": "1",
    }
    env.pop("HELIOS_REDIS_URL", None)
    with gunicorn_app(root / "server.log", env, timeout_s=120) as url:
        yield url, Settings(cache_dir=root / "cache")


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


def _wait_until_idle(url: str) -> None:
    """Wait for the runs of an earlier test to be gone (a finished run's process exits just after its result)."""
    wait_for(lambda: not _runs(url), "the runs of an earlier test ending", interval_s=0.2)


@contextmanager
def _held(url: str) -> Iterator[list[psutil.Process]]:
    """Wait for the server's run processes, stop them (SIGSTOP) and yield them; let them go on (SIGCONT) after."""
    runs = wait_for(lambda: _runs(url), "a run process", interval_s=0.05)
    for run in runs:
        run.suspend()
    try:
        yield runs
    finally:
        for run in runs:
            try:
                run.resume()
            except psutil.NoSuchProcess:
                continue


def _last_beat_s(settings: Settings, run: psutil.Process) -> float | None:
    """When the run's page last polled its job (the run's parent), by the heartbeat the poll left."""
    try:
        return heartbeats.last_beat_s(settings, str(run.ppid()))
    except psutil.NoSuchProcess:
        return None


def _beats_for(settings: Settings, run: psutil.Process, duration_s: float) -> list[float]:
    """The heartbeat times seen over duration_s of polling (one read every 0.1 s), each one once."""
    seen: list[float] = []
    end_s = time.monotonic() + duration_s
    while time.monotonic() < end_s:
        beat = _last_beat_s(settings, run)
        if beat is not None and (not seen or beat > seen[-1]):
            seen.append(beat)
        time.sleep(0.1)
    return seen


def _assert_polled_within_the_limit(beats: list[float]) -> None:
    gaps_s = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    assert len(beats) >= 3 and max(gaps_s) < UNPOLLED_S, f"the open page's polls came {gaps_s} s apart"


def _open(browser, url: str):
    context = new_context(browser)
    tab = context.new_page()
    tab.goto(url)
    return context, tab


def test_a_run_stops_when_its_page_is_closed_and_goes_on_while_it_is_open(browser, server):
    url, settings = server
    _wait_until_idle(url)
    context, tab = _open(browser, f"{url}/whatif?ds=helios-synth&cluster=Earth&{SCENARIO}&cap=1.25&run=1")
    with _held(url) as runs:
        beats = wait_for(lambda: _beats_for(settings, runs[0], 1.0), "a poll of the held run")
        context.close()
        last_beat = wait_for(lambda: _last_beat_s(settings, runs[0]), "the last poll's heartbeat")
        _, alive = psutil.wait_procs(runs, timeout=DEADLINE_S)  # held, the run would never end by itself
        stopped_after_s = time.time() - last_beat
    assert not alive, f"run still alive {stopped_after_s:.1f} s after its last poll"
    assert stopped_after_s >= UNPOLLED_S, f"stopped {stopped_after_s:.1f} s after its last poll, before the limit"
    print(f"run stopped {stopped_after_s:.1f} s after its page's last poll (limit {UNPOLLED_S} s; {len(beats)} polls)")
    assert not _runs(url)
    # A page that stays open keeps its run going, held for twice the limit, and then gets its result.
    context, tab = _open(browser, f"{url}/whatif?ds=helios-synth&cluster=Earth&{SCENARIO}&cap=1.5&run=1")
    try:
        with _held(url) as runs:
            beats = _beats_for(settings, runs[0], 2 * UNPOLLED_S)
            assert all(p.status() == psutil.STATUS_STOPPED for p in runs)  # not stopped by the server: still held
        _assert_polled_within_the_limit(beats)
        tab.wait_for_function(FINISHED)
        assert tab.locator("#whatif-error").inner_text() == ""
        assert tab.locator("#whatif-row-sjf").count() == 1
        print(f"an open page's run held {2 * UNPOLLED_S} s went on to its result ({len(beats)} polls meanwhile)")
    finally:
        context.close()


def test_one_client_runs_one_scenario_at_a_time_with_a_clear_message(browser, server):
    url, _ = server
    _wait_until_idle(url)
    first, tab = _open(browser, f"{url}/whatif?ds=helios-synth&cluster=Earth&{SCENARIO}&cap=1.75&run=1")
    second = None
    try:
        with _held(url):  # the first run is sure to be going when the second is asked for
            second, other = _open(browser, f"{url}/whatif?ds=helios-synth&cluster=Earth&{SCENARIO}&cap=2&run=1")
            try:
                other.wait_for_function(FINISHED)
            except Exception as exc:
                texts = {sel: other.locator(sel).all_inner_texts() for sel in ("#whatif-status", "#whatif-error")}
                raise AssertionError(f"{texts}, runs {_runs(url)}, url {other.url}") from exc
            message = other.locator("#whatif-error").inner_text()
            assert "HELIOS_MAX_RUNS_PER_USER" in message and "wait for it to finish or cancel it" in message
            assert len(_runs(url)) == 1  # the first run goes on, alone
            # Cancelled now, the first run does not go on for UNPOLLED_S after its page closes.
            tab.locator("#whatif-cancel").click()
            tab.wait_for_function("document.getElementById('whatif-status').innerText === 'cancelled'")
    finally:
        first.close()
        if second is not None:
            second.close()


def test_a_sweep_and_its_dask_workers_stop_when_its_page_is_closed(browser, server):
    url, settings = server
    _wait_until_idle(url)
    context, tab = _open(browser, f"{url}/whatif?ds=helios-synth&cluster=Earth")
    settle(tab)
    tab.locator("#whatif-sweep-x-values").fill("1,1.25,1.5,1.75,2")
    tab.locator("#whatif-sweep-y-values").fill("fifo,sjf,qssf")
    tab.locator("#whatif-sweep-run").click()
    runs = wait_for(lambda: _runs(url), "the sweep's run process", interval_s=0.05)
    workers = wait_for(lambda: [c for p in runs if p.is_running() for c in p.children()], "the sweep's Dask workers")
    with _held(url) as held:
        wait_for(lambda: _last_beat_s(settings, held[0]), "a poll of the held sweep")
        context.close()
        closed_at = time.monotonic()
        _, alive = psutil.wait_procs(held + workers, timeout=DEADLINE_S)
    assert not alive, f"{len(alive)} sweep processes alive {time.monotonic() - closed_at:.1f} s after its page closed"
