"""slurm_like_schedule: FIFO + EASY backfill on daily VC capacities never exceeds capacity."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics import schema
from sim.synthetic_queue.cluster_queues import DailyCapacity, schedule_vc, slurm_like_schedule

T0 = datetime(2020, 4, 1)


def test_fifo_with_backfill_on_a_hand_checked_trace():
    cap = DailyCapacity([8])
    # job 1 (8 GPUs) waits for job 0; job 2 (short) backfills; job 3 (long) must not delay job 1
    starts = schedule_vc([0, 1, 2, 3], [10, 5, 3, 30], [4, 8, 4, 4], cap)
    assert starts == [0, 10, 2, 15]


def test_capacity_change_at_midnight_blocks_and_releases_jobs():
    cap = DailyCapacity([4, 8])
    # an 8-GPU job submitted on day 0 can only start when day 1 gives 8 GPUs
    assert schedule_vc([100], [50], [8], cap) == [86_400]
    # a 4-GPU job spanning into a 2-GPU day must wait until it fits every day it runs
    assert schedule_vc([86_000], [1_000], [4], DailyCapacity([4, 2, 4])) == [2 * 86_400]


def test_jobs_that_can_never_fit_are_not_started():
    # 16 GPUs never fit an 8-GPU VC and do not block the 4-GPU job behind them; after the VC drops to 0 GPUs for
    # good, nothing starts any more, and a job still waiting then never starts.
    cap = DailyCapacity([8, 0])
    assert schedule_vc([0, 10, 20, 86_405], [100, 10, 10, 10], [8, 16, 4, 8], cap) == [0, -1, 100, -1]
    assert schedule_vc([0, 10], [86_000, 1_000], [8, 8], cap) == [0, -1]
    assert schedule_vc([0, 10], [100, 10], [16, 4], DailyCapacity([8])) == [-1, 10]


@st.composite
def traces(draw):
    n = draw(st.integers(1, 60))
    gaps = draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n))
    submit = np.cumsum(gaps)
    return (
        submit.tolist(),
        draw(st.lists(st.integers(0, 100_000), min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from([0, 1, 2, 4, 8, 16, 64]), min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from([0, 8, 16, 24]), min_size=3, max_size=12)),
    )


def frames(trace):
    submit, dur, gpu, caps = trace
    n = len(submit)
    jobs = schema.conform_jobs(
        pl.DataFrame(
            {
                "cluster": "C",
                "job_id": np.arange(n),
                "vc": "v",
                "gpu_num": gpu,
                "submit_time": [T0 + timedelta(seconds=s) for s in submit],
                "duration": dur,
            }
        )
    )
    vc_gpus = pl.DataFrame(
        {
            "cluster": "C",
            "vc": "v",
            "date": [date(2020, 4, 1) + timedelta(days=d) for d in range(len(caps))],
            "gpus": caps,
        }
    )
    return jobs, schema.conform_vc_gpus(vc_gpus)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces())
def test_usage_never_exceeds_daily_capacity(trace):
    jobs, vc_gpus = frames(trace)
    out = slurm_like_schedule(jobs, vc_gpus).join(jobs.select("job_id", "gpu_num", "submit_time"), on="job_id")
    assert out.height == jobs.height
    assert (out.get_column("queue").drop_nulls() >= 0).all()
    assert (out.filter(pl.col("gpu_num") == 0).get_column("queue") == 0).all()
    caps = trace[3]
    never = out.filter(pl.col("start_time").is_null())
    assert (never.get_column("gpu_num") > 0).all()
    assert never.get_column("queue").null_count() == never.height
    gpu_jobs = out.filter((pl.col("gpu_num") > 0) & pl.col("start_time").is_not_null())
    need = gpu_jobs.get_column("gpu_num").to_numpy()
    start = ((gpu_jobs.get_column("start_time") - T0).dt.total_seconds()).to_numpy()
    end = ((gpu_jobs.get_column("end_time") - T0).dt.total_seconds()).to_numpy()
    points = np.unique(np.concatenate([start, end]))
    for t in points:
        running = (start <= t) & (end > t)
        day = min(int(t // 86_400), len(caps) - 1)
        assert need[running].sum() <= caps[day]
