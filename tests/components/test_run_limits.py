"""What-if runs are bounded on the server: a slot per run on the host, a memory and a time limit per run."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from components.server import heartbeats
from components.server.runs import Caller, RunCancelled, RunError, run_in_subprocess, run_slot, run_token, user_slot
from components.server.settings import Settings


def _allocate(n_bytes: int, report) -> int:
    report(0.5, "allocating")
    return int(np.ones(n_bytes // 8).sum())


def _sleep(seconds: float, report) -> float:
    time.sleep(seconds)
    return seconds


@pytest.fixture
def settings(tmp_path):
    return Settings(cache_dir=tmp_path / "cache", max_runs=1, run_memory_mb=512, run_timeout_s=10)


def test_a_run_within_its_limits_returns_its_value(settings):
    assert run_in_subprocess(_allocate, (64 * 1024**2,), settings=settings) == 8 * 1024**2


def test_a_run_over_its_memory_limit_is_stopped_with_a_clear_message(settings):
    with pytest.raises(RunError, match="more than 512 MB"):
        run_in_subprocess(_allocate, (2 * 1024**3,), settings=settings)


def test_a_run_over_its_time_limit_is_stopped(settings):
    quick = dataclasses.replace(settings, run_timeout_s=2)
    with pytest.raises(RunError, match="longer than 2 s"):
        run_in_subprocess(_sleep, (60,), settings=quick)


def test_a_host_runs_at_most_max_runs_at_once(settings):
    with run_slot(settings), pytest.raises(RunError, match="already running 1 long jobs"):
        run_in_subprocess(_sleep, (0,), settings=settings)
    assert run_in_subprocess(_sleep, (0,), settings=settings) == 0


def _wait_in_child(cache_dir: str) -> None:
    run_in_subprocess(_sleep, (120,), settings=Settings(cache_dir=Path(cache_dir)))


def test_a_run_stops_when_the_job_waiting_for_it_is_killed(tmp_path):
    import multiprocessing

    import psutil

    job = multiprocessing.get_context("spawn").Process(target=_wait_in_child, args=(str(tmp_path),))
    job.start()
    deadline = time.monotonic() + 60
    while not psutil.Process(job.pid).children() and time.monotonic() < deadline:
        time.sleep(0.1)
    runs = psutil.Process(job.pid).children()
    assert runs, "the run never started"
    job.kill()
    gone, alive = psutil.wait_procs(runs, timeout=10)
    assert not alive, alive


def test_a_user_runs_at_most_max_runs_per_user_and_others_still_may(settings):
    roomy = dataclasses.replace(settings, max_runs=4, max_runs_per_user=1)
    with user_slot(roomy, "user:ada"):
        with pytest.raises(RunError, match=r"you are already running 1 what-if run\(s\) \(HELIOS_MAX_RUNS_PER_USER"):
            run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("user:ada", "1"))
        with pytest.raises(RunError, match="your address is already running"), user_slot(roomy, "ip:10.0.0.9"):
            run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("ip:10.0.0.9", "2"))
        assert run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("user:bob", "3")) == 0
    assert run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("user:ada", "4")) == 0


def test_a_users_run_and_sweep_hold_separate_slots(settings):
    """A page's run and its sweep (a shared link starts both) do not refuse each other; a second sweep is refused."""
    roomy = dataclasses.replace(settings, max_runs=4, max_runs_per_user=1)
    with user_slot(roomy, "user:ada", "run"):
        assert run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("user:ada", "1", "sweep")) == 0
        refused = pytest.raises(RunError, match=r"you are already running 1 sweep\(s\) \(HELIOS_MAX_RUNS_PER_USER")
        with user_slot(roomy, "user:ada", "sweep"), refused:
            run_in_subprocess(_sleep, (0,), settings=roomy, caller=Caller("user:ada", "2", "sweep"))


def _hold_user_slot(cache_dir: str, client: str, ready, release) -> None:
    with user_slot(Settings(cache_dir=Path(cache_dir)), client):
        ready.set()
        release.wait(30)


def test_the_per_user_cap_holds_across_processes(settings):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_user_slot, args=(str(settings.cache_dir), "user:ada", ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(RunError, match="already running 1"):
            run_in_subprocess(_sleep, (0,), settings=settings, caller=Caller("user:ada", "5"))
    finally:
        release.set()
        holder.join(30)
    assert run_in_subprocess(_sleep, (0,), settings=settings, caller=Caller("user:ada", "6")) == 0


def test_a_run_nobody_polls_is_stopped_and_a_polled_one_is_not(settings):
    import threading

    quick = dataclasses.replace(settings, run_unpolled_s=2)
    started = time.monotonic()
    with pytest.raises(RunError, match="nobody polled the run's result for 2 s"):
        run_in_subprocess(_sleep, (60,), settings=quick, caller=Caller("user:ada", "7001"))
    assert time.monotonic() - started < 10
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.5):
            heartbeats.beat(quick, "7002")

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        assert run_in_subprocess(_sleep, (5,), settings=quick, caller=Caller("user:ada", "7002")) == 5
    finally:
        stop.set()
        poller.join()
    assert heartbeats.last_beat_s(quick, "7002") is None  # forgotten once the run ended


def test_a_run_cancelled_before_it_starts_never_starts(settings):
    """A page may cancel before it has heard the job's id from the server; the run's token still stops it."""
    token = run_token()
    heartbeats.request_cancel(settings, "user:ada", token)
    started = time.monotonic()
    with pytest.raises(RunCancelled):
        run_in_subprocess(_sleep, (60,), settings=settings, caller=Caller("user:ada", "8001", "run", token))
    assert time.monotonic() - started < 1.0  # refused before a child process was spawned
    assert not heartbeats.cancel_requested(settings, "user:ada", token)  # forgotten once the run ended


def test_a_run_stops_soon_after_its_client_cancels_it_and_not_for_another_client(settings):
    import threading

    token = run_token()

    def cancel() -> None:
        time.sleep(1.0)
        heartbeats.request_cancel(settings, "user:bob", token)  # not bob's run
        time.sleep(2.0)
        heartbeats.request_cancel(settings, "user:ada", token)

    canceller = threading.Thread(target=cancel)
    started = time.monotonic()
    canceller.start()
    try:
        with pytest.raises(RunCancelled):
            run_in_subprocess(_sleep, (60,), settings=settings, caller=Caller("user:ada", "8002", "run", token))
    finally:
        canceller.join()
    assert 3.0 <= time.monotonic() - started < 6.0
