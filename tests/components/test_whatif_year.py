"""A year-long what-if window, as the page runs it (a background job starting the scenario's own process): progress
keeps coming, and killing the job (what Cancel does) stops the simulation too, even when only the job dies."""

from __future__ import annotations

import multiprocessing
import time
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import psutil
import pytest

from analytics import store
from components.server.runs import run_in_subprocess
from sim.scenario import ScenarioConfig, open_request
from sim.scenario.run import HEARTBEAT_S, run_request
from tests.waiting import DEADLINE_S

N_JOBS = 300_000
YEAR = datetime(2021, 1, 1)
MAX_PROGRESS_GAP_S = 3 * HEARTBEAT_S  # the scenario repeats its progress every HEARTBEAT_S while it works
RUNNING = ("replaying the Slurm twin", "simulating")  # the stages that replay jobs: the baseline's, the policies'


def _year_jobs(seed: int = 1) -> pl.DataFrame:
    """GPU jobs of one cluster over 2021 on two VCs, busy enough that every policy queues."""
    rng = np.random.default_rng(seed)
    submit = YEAR + pl.Series(np.sort(rng.integers(0, 365 * 86_400, N_JOBS)) * 1_000_000).cast(pl.Duration("us"))
    duration = rng.integers(60, 20_000, N_JOBS)
    return pl.DataFrame(
        {
            "cluster": "C",
            "job_id": np.arange(N_JOBS),
            "user": [f"u{u}" for u in rng.integers(0, 50, N_JOBS)],
            "vc": rng.choice(["vcA", "vcB"], N_JOBS),
            "gpu_num": rng.choice([1, 1, 2, 4, 8], N_JOBS),
            "state": "COMPLETED",
            "submit_time": submit,
            "start_time": submit,
            "end_time": submit + pl.Series(duration * 1_000_000).cast(pl.Duration("us")),
            "duration": duration,
            "queue": 0,
        }
    )


def _capacity() -> pl.DataFrame:
    days = [YEAR.date() + timedelta(days=d) for d in range(366)]
    return pl.DataFrame({"cluster": "C", "vc": ["vcA"] * 366 + ["vcB"] * 366, "date": days * 2, "gpus": 32})


def _job(request, queue) -> None:
    """A background job as Dash runs one: the scenario in a process of its own, its progress forwarded."""
    run_in_subprocess(run_request, (request,), lambda fraction, message: queue.put((time.monotonic(), message)))


@pytest.mark.slow
def test_a_year_long_window_reports_progress_and_stops_with_its_job(tmp_path):
    store.write_dataset("year", _year_jobs(), _capacity(), {"clusters": ["C"]}, root=tmp_path)
    config = ScenarioConfig(
        dataset="year", cluster="C", start="2021-01-01", end="2021-12-31", policies=("fifo", "sjf", "srtf", "qssf")
    )
    request = open_request(config, tmp_path)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    job = ctx.Process(target=_job, args=(request, queue))
    job.start()
    try:
        reports = [queue.get(timeout=DEADLINE_S)]  # a spawned interpreter, the dataset opened
        while not reports[-1][1].startswith(RUNNING):
            reports.append(queue.get(timeout=DEADLINE_S))  # a late one fails the gaps' check below, by its gap
        watch_until = time.monotonic() + 2.0
        while time.monotonic() < watch_until:
            reports.append(queue.get(timeout=DEADLINE_S))
        running = reports[-1][1]
        scenario = psutil.Process(job.pid).children()
        assert scenario and all(p.is_running() for p in scenario)
    finally:
        job.kill()  # only the job: its scenario process must notice on its own
        job.join()
    gaps = [b[0] - a[0] for a, b in zip(reports, reports[1:], strict=False)]
    assert max(gaps) <= MAX_PROGRESS_GAP_S, (max(gaps), running)
    assert running.startswith(RUNNING) and "done" not in running  # killed mid-run, not after it
    _, alive = psutil.wait_procs(scenario, timeout=5)
    assert alive == []
