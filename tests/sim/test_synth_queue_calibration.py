"""sim.synthetic_queue.calibration and slurm_queue: the closed-loop queue on the one Slurm model, the recorded
target waits and the VC capacities it holds."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from analytics.synth.build import SynthParams, generate
from sim.synthetic_queue.calibration import calibrated_schedule
from sim.synthetic_queue.capacity import DailyCapacity
from sim.synthetic_queue.slurm_queue import gpu_steps, held_capacity, roomless_s


def _jobs(rows: list[tuple[int, int, int, int]]) -> pl.DataFrame:
    """GPU jobs of cluster C, VC a: (submit second, duration s, GPUs, target wait s)."""
    t0 = datetime(2020, 4, 1)
    return pl.DataFrame(
        {
            "cluster": ["C"] * len(rows),
            "job_id": list(range(1, len(rows) + 1)),
            "user": ["u"] * len(rows),
            "vc": ["a"] * len(rows),
            "gpu_num": [r[2] for r in rows],
            "duration": [r[1] for r in rows],
            "queue": [r[3] for r in rows],
        }
    ).with_columns((pl.lit(t0) + pl.duration(seconds=pl.Series([r[0] for r in rows]))).alias("submit_time"))


CAPS = pl.DataFrame({"cluster": ["C"], "vc": ["a"], "date": [date(2020, 4, 1)], "gpus": [8]})


def _starts_s(out: pl.DataFrame) -> list[int]:
    return (out["start_time"] - datetime(2020, 4, 1)).dt.total_seconds().to_list()


def test_a_light_job_that_would_wait_is_submitted_again_at_its_time_of_day_on_the_nearest_day_with_room():
    # job 2 (400 GPU-s) finds the VC full until job 1 ends at 100: it is submitted at 10 s the next day and waits 0
    out = calibrated_schedule(_jobs([(0, 100, 8, 0), (10, 50, 8, 0)]), CAPS).sort("job_id")
    assert out["queue"].to_list() == [0, 0]
    assert _starts_s(out) == [0, 86_410]
    assert out["submit_time"].to_list() == out["start_time"].to_list()


def test_a_light_job_of_a_vc_that_keeps_its_backlog_waits_on_its_day():
    # as above, but VC a keeps its backlog: job 2 stays and starts at 100, when job 1 ends
    jobs = _jobs([(0, 100, 8, 0), (10, 50, 8, 0)]).with_columns(pl.lit(True).alias("backlog"))
    out = calibrated_schedule(jobs, CAPS).sort("job_id")
    assert out["queue"].to_list() == [0, 0]
    assert _starts_s(out) == [0, 100]


def test_a_heavy_job_that_would_wait_is_submitted_again_when_it_starts():
    # job 2 holds 8 GPUs for an hour (above MOVABLE_MAX_GPU_S): it is submitted again at 100, when job 1 ends
    out = calibrated_schedule(_jobs([(0, 100, 8, 0), (10, 3_600, 8, 0)]), CAPS).sort("job_id")
    assert out["queue"].to_list() == [0, 0]
    assert _starts_s(out) == [0, 100]


def test_a_light_job_without_a_day_of_room_in_its_month_is_submitted_again_when_it_starts():
    # the trace starts on April 30, the last day of its month: no other day of it to move to
    day = 29 * 86_400
    out = calibrated_schedule(_jobs([(day, 100, 8, 0), (day + 10, 50, 8, 0)]), CAPS).sort("job_id")
    assert _starts_s(out) == [day, day + 100]


def test_the_recorded_wait_is_the_target_before_the_start():
    out = calibrated_schedule(_jobs([(0, 100, 8, 30), (500, 50, 4, 0)]), CAPS).sort("job_id")
    assert out["queue"].to_list() == [30, 0]
    assert ((out["start_time"] - out["submit_time"]).dt.total_seconds() == out["queue"]).all()


def test_a_job_no_vc_holds_never_starts():
    out = calibrated_schedule(_jobs([(0, 100, 16, 0)]), CAPS)
    assert out["start_time"].null_count() == 1 and out["queue"].null_count() == 1


@pytest.fixture(scope="module")
def small():
    jobs, vc_gpus = generate(SynthParams(scale=0.003, seed=5))
    return jobs.filter(pl.col("gpu_num") > 0), vc_gpus


def test_calibrated_schedule_is_deterministic_and_records_each_users_drawn_waits(small):
    jobs, vc_gpus = small
    one = calibrated_schedule(jobs, vc_gpus, workers=1)
    two = calibrated_schedule(jobs, vc_gpus, workers=2)
    assert one.equals(two)
    assert one.height == jobs.height
    drawn = jobs.select("cluster", "job_id", "user", "vc", pl.col("queue").alias("target"))
    got = one.join(drawn, on=["cluster", "job_id"])
    ran = got.filter(pl.col("start_time").is_not_null())
    keys = ["cluster", "vc_right", "user"]  # the waits move only between a user's jobs of a VC
    recorded = ran.group_by(keys).agg(pl.col("queue").sort()).sort(keys)
    wanted = ran.group_by(keys).agg(pl.col("target").sort().alias("queue")).sort(keys)
    assert recorded.equals(wanted)
    assert (ran["queue"] == (ran["start_time"] - ran["submit_time"]).dt.total_seconds()).all()
    assert (got["vc"] == got["vc_right"]).all()  # each job runs in its own VC


def test_calibrated_schedule_of_no_jobs_is_empty(small):
    jobs, vc_gpus = small
    assert calibrated_schedule(jobs.head(0), vc_gpus).height == 0


def test_the_slurm_model_deals_the_drawn_waits_to_the_jobs_that_had_no_room():
    # job 2 finds the 8-GPU VC full until job 1 ends, job 3 finds room: the longest drawn wait goes to job 2
    jobs = _jobs([(0, 7_200, 8, 0), (60, 3_600, 8, 500), (20_000, 60, 4, 900)])
    out = calibrated_schedule(jobs, CAPS).sort("job_id")
    assert _starts_s(out) == [0, 7_200, 20_000]
    assert out["queue"].to_list() == [0, 900, 500]


def test_roomless_time_counts_the_minutes_before_a_start_without_room():
    cap = DailyCapacity([8])
    start_s, duration_s = np.array([0, 600, 1_800]), np.array([600, 60, 60])
    got = roomless_s(start_s, duration_s, np.array([8, 8, 4]), np.zeros(3, dtype=np.int64), [cap])
    assert got.tolist() == [0, 600, 0]


def test_a_vcs_capacity_counts_its_drained_gpus_while_their_jobs_run_on():
    caps = pl.DataFrame(
        {
            "cluster": ["C"] * 4,
            "vc": ["a", "a", "b", "b"],
            "date": [date(2020, 4, 1), date(2020, 4, 2)] * 2,
            "gpus": [8, 0, 8, 8],
        }
    ).with_columns(pl.col("gpus").cast(pl.Int32))
    t0 = datetime(2020, 4, 1)
    jobs = pl.DataFrame(
        {
            "cluster": ["C", "C"],
            "vc": ["a", "b"],
            "gpu_num": [6, 8],
            "start_time": [t0.replace(hour=20), t0],
            "end_time": [t0.replace(hour=20) + timedelta(hours=6), t0],
        }
    )
    held = held_capacity(jobs, caps).sort("vc", "date")
    assert held["gpus"].to_list() == [8, 6, 8, 8]
    assert held.schema == caps.schema


def test_daily_capacities_become_steps_at_the_midnights_where_they_change():
    assert gpu_steps(DailyCapacity([8, 8, 16, 16, 0])) == ((0, 8), (2 * 86_400, 16), (4 * 86_400, 0))
