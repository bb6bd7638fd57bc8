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
from tests.waiting import DEADLINE_S, wait_for


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
        run_in_subprocess(_sleep, (3600,), settings=quick)  # sure to outlast the limit, however slow the machine


def test_a_host_runs_at_most_max_runs_at_once(settings):
    with run_slot(settings), pytest.raises(RunError, match="already running 1 long jobs"):
        run_in_subprocess(_sleep, (0,), settings=settings)
    assert run_in_subprocess(_sleep, (0,), settings=settings) == 0


LONG_S = 10 * DEADLINE_S  # a run that outlasts any wait of these tests: only a limit can end it first


def _spawned_runs(pid: int) -> list:
    """The run processes process pid spawned (not multiprocessing's resource tracker)."""
    import psutil

    return [p for p in psutil.Process(pid).children() if "spawn_main" in " ".join(p.cmdline())]


def _wait_in_child(cache_dir: str) -> None:
    run_in_subprocess(_sleep, (LONG_S,), settings=Settings(cache_dir=Path(cache_dir), run_timeout_s=2 * LONG_S))


def test_a_run_stops_when_the_job_waiting_for_it_is_killed(tmp_path):
    import multiprocessing

    import psutil

    job = multiprocessing.get_context("spawn").Process(target=_wait_in_child, args=(str(tmp_path),))
    job.start()
    runs = wait_for(lambda: _spawned_runs(job.pid), "the job's run process")
    job.kill()
    _, alive = psutil.wait_procs(runs, timeout=DEADLINE_S)  # the run itself would sleep ten times as long
    for process in alive:
        process.kill()
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

    quick = dataclasses.replace(settings, run_unpolled_s=2, run_timeout_s=int(DEADLINE_S))  # a broken check fails
    started = time.monotonic()
    with pytest.raises(RunError, match="nobody polled the run's result for 2 s"):
        run_in_subprocess(_sleep, (LONG_S,), settings=quick, caller=Caller("user:ada", "7001"))
    assert time.monotonic() - started >= quick.run_unpolled_s  # not before the limit
    # Polled 20 times per limit, a run three times as long as the limit goes on to its end.
    stop, gaps_s = threading.Event(), []

    def poll() -> None:
        last_s = time.monotonic()
        while not stop.wait(quick.run_unpolled_s / 20):
            heartbeats.beat(quick, "7002")
            gaps_s.append(time.monotonic() - last_s)
            last_s = time.monotonic()

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        ran_s = 3 * quick.run_unpolled_s
        assert run_in_subprocess(_sleep, (ran_s,), settings=quick, caller=Caller("user:ada", "7002")) == ran_s
    finally:
        stop.set()
        poller.join()
    assert max(gaps_s) < quick.run_unpolled_s  # it was polled within the limit all along: the premise held
    assert heartbeats.last_beat_s(quick, "7002") is None  # forgotten once the run ended


def test_a_run_cancelled_before_it_starts_never_starts(settings, monkeypatch):
    """A page may cancel before it has heard the job's id from the server; the run's token still stops it."""
    from components.server import runs

    monkeypatch.setattr(runs, "_run_limited", lambda *args: pytest.fail("a cancelled run was started"))
    token = run_token()
    heartbeats.request_cancel(settings, "user:ada", token)
    with pytest.raises(RunCancelled):
        run_in_subprocess(_sleep, (LONG_S,), settings=settings, caller=Caller("user:ada", "8001", "run", token))
    assert not heartbeats.cancel_requested(settings, "user:ada", token)  # forgotten once the run ended


def test_a_run_stops_at_its_first_check_after_its_client_cancels_it_and_not_for_another_client(settings, monkeypatch):
    import os
    import threading

    roomy = dataclasses.replace(settings, run_timeout_s=int(DEADLINE_S))  # a cancel that does not stop it fails
    token = run_token()
    answers: list[bool] = []  # each cancel check of the run, in order
    real = heartbeats.cancel_requested

    def checked(*args) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(heartbeats, "cancel_requested", checked)
    failures: list[BaseException] = []
    checked_for_bob = []

    def cancel() -> None:
        try:
            wait_for(lambda: _spawned_runs(os.getpid()), "the run's process")
            heartbeats.request_cancel(roomy, "user:bob", token)  # not bob's run
            seen = len(answers)
            wait_for(lambda: len(answers) >= seen + 3, "three checks of the run after bob's cancel")
            checked_for_bob.append(len(answers) - seen)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
        finally:
            heartbeats.request_cancel(roomy, "user:ada", token)  # the run's own client: it must stop

    canceller = threading.Thread(target=cancel)
    canceller.start()
    try:
        with pytest.raises(RunCancelled):
            run_in_subprocess(_sleep, (LONG_S,), settings=roomy, caller=Caller("user:ada", "8002", "run", token))
    finally:
        canceller.join()
    assert failures == []
    assert checked_for_bob[0] >= 3 and not any(answers[:-1])  # bob's cancel changed nothing, check after check
    assert answers[-1] is True  # and the first check that saw ada's cancel stopped the run
    assert _spawned_runs(os.getpid()) == []
