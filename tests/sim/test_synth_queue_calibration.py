"""sim.synthetic_queue.calibration: own-wait model, quota calibration, target reassignment, allowed VCs, schedule."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analytics.synth.build import SynthParams, generate
from sim.synthetic_queue.calibration import (
    _exempt,
    allowed_vcs,
    calibrate_quota,
    calibrated_schedule,
    own_wait_s,
    waiters_first,
)
from sim.synthetic_queue.cluster_queues import DailyCapacity


def test_own_wait_runs_jobs_first_come_first_served_within_the_quota():
    # quota 8: job 1 waits for job 0 (10 s), job 2 for job 1 (it may not pass it: 10 + 9 s), zero units run at once
    assert own_wait_s([0, 0, 1], [10, 10, 10], [8, 8, 8], 8) == 10 + 19
    assert own_wait_s([0, 0, 1], [10, 10, 10], [8, 0, 8], 8) == 9
    assert own_wait_s([0, 0], [10, 10], [16, 8], 8) == 10  # a job larger than the quota runs alone
    assert own_wait_s([0, 0, 1], [10, 10, 10], [8, 8, 8], math.inf) == 0


def test_calibrate_quota_returns_the_quota_whose_wait_is_closest():
    submit, dur, units = list(range(0, 200, 2)), [30] * 100, [1] * 100
    waits = {q: own_wait_s(submit, dur, units, q) for q in range(1, 40)}
    for target in (0, 500, 5_000, waits[3]):
        q = calibrate_quota(submit, dur, units, target)
        assert abs(waits[q] - target) == min(abs(w - target) for w in waits.values())


def test_waiters_first_gives_the_large_targets_to_users_who_wait_anyway():
    target = np.array([10.0, 50.0, 30.0, 0.0])
    base = np.array([0.0, 0.0, 0.0, 100.0])
    out = waiters_first(target, base)
    assert sorted(out) == sorted(target)  # a permutation: the shares of the curve are kept
    assert out.tolist() == [0.0, 30.0, 10.0, 50.0]  # user 3 waits 100 anyway: it takes the largest target


def test_exempt_share_is_spread_evenly_over_a_users_jobs():
    units = np.full(1000, 8)
    out = _exempt(units, 12.25)
    assert (out == 0).sum() == pytest.approx(250, abs=2)
    assert (out[:100] == 0).sum() == pytest.approx(25, abs=2)
    assert np.array_equal(_exempt(units, 12.0), units)


def test_allowed_vcs_prefer_vcs_where_a_job_needs_at_most_half_the_gpus():
    caps = {"a": DailyCapacity([8]), "b": DailyCapacity([32]), "c": DailyCapacity([16, 0])}
    sub, dur, gpus = np.array([0, 0, 0, 0]), np.array([10, 10, 90_000, 10]), np.array([4, 16, 4, 64])
    fits = allowed_vcs(caps, ["a", "b", "c"], sub, dur, gpus)
    assert fits == [[0, 1, 2], [1], [0, 1], [1]]  # 16 GPUs: only b; a run into c's empty day: not c; none: largest


@pytest.fixture(scope="module")
def small():
    jobs, vc_gpus = generate(SynthParams(scale=0.003, seed=5))
    return jobs.filter(pl.col("gpu_num") > 0), vc_gpus


def test_calibrated_schedule_is_deterministic_and_never_starts_before_submit(small):
    jobs, vc_gpus = small
    one = calibrated_schedule(jobs, vc_gpus, workers=1)
    two = calibrated_schedule(jobs, vc_gpus, workers=2)
    assert one.equals(two)
    assert one.height == jobs.height
    got = one.join(jobs.select("cluster", "job_id", "submit_time", "duration"), on=["cluster", "job_id"])
    ran = got.filter(pl.col("start_time").is_not_null())
    assert (ran["start_time"] >= ran["submit_time"]).all()
    assert (ran["queue"] == (ran["start_time"] - ran["submit_time"]).dt.total_seconds()).all()
    assert ran.filter(pl.col("vc").is_null()).height == 0
    assert one["user_gpu_quota"].drop_nulls().min() >= 1


def test_calibrated_schedule_of_no_jobs_is_empty(small):
    jobs, vc_gpus = small
    assert calibrated_schedule(jobs.head(0), vc_gpus).height == 0
