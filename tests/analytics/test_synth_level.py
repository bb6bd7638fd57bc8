"""Unit tests of the synthetic trace's load levelling (analytics.synth.level)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

import analytics.synth.level
from analytics.synth.build import SynthParams, generate
from analytics.synth.level import (
    DAY_S,
    HEAVY_SHARE,
    HOUR_S,
    Jobs,
    fluid_run,
    hourly_busy,
    level_heavy_jobs,
    place_against_spill,
    place_on,
    run_by_day,
    unmovable_busy,
)
from analytics.synth.profiles import order_days

TWO_MONTHS = np.array([0, 30, 61])  # day 0..29 is month 0, day 30..60 is month 1
ONE_MONTH = np.array([0, 30])


def _month(submit_s: np.ndarray) -> np.ndarray:
    return np.searchsorted(TWO_MONTHS, submit_s // DAY_S, side="right") - 1


def _with_month_end_job(submit, duration, gpus):
    """The jobs plus a 1-GPU minute at the end of the 30-day month: level_heavy_jobs sizes its hour grid by the latest
    original end, so without a job running until the month's end, moving a heavy job later raises IndexError."""
    return (
        np.append(submit, 30 * DAY_S - 2 * HOUR_S),
        np.append(duration, 60),
        np.append(gpus, 1),
    )


def _mixed_trace() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """300 random jobs over the two toy months plus jobs whose runs span the month edge or the period end."""
    rng = np.random.default_rng(7)
    n = 300
    submit = rng.integers(0, 61 * DAY_S, n)
    duration = np.minimum(rng.lognormal(9, 1.5, n), 5 * DAY_S).astype(np.int64)
    gpus = rng.choice([1, 2, 4, 8, 16, 32, 64], n)
    spanning_submit = np.array([28 * DAY_S + 5 * HOUR_S, 29 * DAY_S, 59 * DAY_S + 3 * HOUR_S])
    spanning_duration = np.array([4 * DAY_S, DAY_S, 3 * DAY_S])  # the middle one ends exactly at day 30
    return (
        np.concatenate([submit, spanning_submit]),
        np.concatenate([duration, spanning_duration]),
        np.concatenate([gpus, [64, 64, 64]]),
    )


def test_hourly_busy_hand_checked_example():
    submit = np.array([1800, 3 * HOUR_S + 600, 2 * HOUR_S + 100])
    duration = np.array([5400, 1200, 0])
    gpus = np.array([2, 4, 8])
    busy = hourly_busy(submit, duration, gpus, 5)
    # 2 GPUs for the second half of hour 0 and all of hour 1; 4 GPUs for 20 min of hour 3; the 0 s job adds nothing
    np.testing.assert_allclose(busy, [1.0, 2.0, 0.0, 4 * 1200 / 3600, 0.0])


def test_hourly_busy_of_a_zero_duration_job_is_zero():
    np.testing.assert_allclose(hourly_busy(np.array([HOUR_S + 10]), np.array([0]), np.array([8]), 3), [0.0, 0.0, 0.0])


def test_fluid_run_hand_checked_example():
    demand = np.array([6.0, 2.0, 0.0, 5.0, 1.0])
    capacity = np.full(5, 4.0)
    # slot 0 runs 4 and leaves 2 waiting; slot 1 runs 2 + 2; slot 2 is idle; slot 3 runs 4, slot 4 the 1 left and 1
    np.testing.assert_allclose(fluid_run(demand, capacity), [4.0, 4.0, 0.0, 4.0, 2.0])


@given(
    st.lists(st.floats(0, 100), min_size=1, max_size=60),
    st.lists(st.floats(0, 100), min_size=60, max_size=60),
)
def test_fluid_run_stays_within_capacity_and_never_runs_more_than_was_asked(demand, capacity):
    asked, room = np.array(demand), np.array(capacity[: len(demand)])
    run = fluid_run(asked, room)
    assert (run >= -1e-9).all() and (run <= room + 1e-9).all()
    assert (np.cumsum(run) <= np.cumsum(asked) + 1e-6).all()
    waiting = np.cumsum(asked) - np.cumsum(run)
    assert np.all((waiting <= 1e-6) | (run >= room - 1e-6))  # a slot leaves work waiting only when it is full


def test_run_by_day_carries_what_a_full_vc_cannot_run_into_the_next_day():
    gpus_by_day = np.array([[8, 8, 8], [4, 4, 4]])
    submit = np.array([0, 0, 0])
    duration = np.array([DAY_S, DAY_S, DAY_S])
    gpus = np.array([8, 4, 2])
    vc = np.array([0, 0, 1])
    run = run_by_day(submit, duration, gpus, vc, gpus_by_day)
    # VC 0 is asked 12 GPUs on day 0: 8 run, the 4 left run on day 1; VC 1 runs its 2 GPUs on day 0
    np.testing.assert_allclose(run, [[8.0, 4.0, 0.0], [2.0, 0.0, 0.0]])


def test_unmovable_busy_counts_only_the_jobs_that_run_past_their_month():
    # VC 0: a 2-day 8-GPU job from noon of day 29 (into month 1) and a job inside month 0; VC 1: a job from day 59
    # past the period's end (day 61)
    submit = np.array([29 * DAY_S + DAY_S // 2, 3 * DAY_S, 59 * DAY_S])
    duration = np.array([2 * DAY_S, DAY_S, 4 * DAY_S])
    out = unmovable_busy(submit, duration, np.array([8, 64, 2]), np.array([0, 0, 1]), 2, TWO_MONTHS)
    assert out.shape == (2, 61)
    np.testing.assert_allclose(out[0, 29:32], [4.0, 8.0, 4.0])
    assert out[0].sum() == 16.0  # the job inside its month is not counted
    np.testing.assert_allclose(out[1, 59:], [2.0, 2.0])  # the time after the period is left out


def test_days_busy_with_unmovable_jobs_get_the_high_levels_and_the_month_keeps_its_box():
    month_of_day = np.repeat([4, 5], 5)
    gpus = np.full((2, 10), 10.0)
    busy = np.array([[0, 5, 10, 0, 5, 10, 0, 0, 5, 5], [1.0] * 10])
    unmovable = np.zeros((2, 10))
    unmovable[0, 3] = 12.0  # more GPUs busy in jobs that cannot move than the VC has: above any day without
    unmovable[0, 9] = 11.0
    unmovable[1, 0] = 9.0  # not a named VC: its days stay
    out = order_days(
        np.random.default_rng(0), busy, unmovable, gpus, np.array([True, False]), month_of_day, np.ones((2, 2))
    )
    assert out[0, 3] == 10.0 and out[0, 9] == 10.0  # each month's highest level goes to the day with such jobs
    for days in (slice(0, 5), slice(5, 10)):
        assert sorted(out[0, days]) == sorted(busy[0, days])  # each month keeps its levels
    np.testing.assert_array_equal(out[1], busy[1])


def test_days_are_ordered_into_stretches_as_long_as_the_vcs_jobs():
    month_of_day = np.full(30, 5)
    busy = np.arange(30, dtype=float)[None, :]  # a month of levels 0-29 of 30 GPUs
    gpus, unmovable, named = np.full((1, 30), 30.0), np.zeros((1, 30)), np.array([True])
    step = {}
    for run_days in (1, 5):
        days = [
            order_days(np.random.default_rng(s), busy, unmovable, gpus, named, month_of_day, np.array([[run_days]]))[0]
            for s in range(20)
        ]
        assert all(sorted(d) == list(range(30)) for d in days)  # the month keeps its levels
        step[run_days] = np.mean([np.abs(np.diff(d)).mean() for d in days])
    assert step[5] < 0.5 * step[1]  # over one-day stretches, a shuffle: about 10 levels a day


def test_level_heavy_jobs_keeps_hour_of_day_and_month_and_moves_by_whole_days():
    submit, duration, gpus = _mixed_trace()
    new = level_heavy_jobs(submit, duration, gpus, np.full(61, 64), TWO_MONTHS)
    assert (new != submit).any()  # something moved, so the checks below are not vacuous
    assert np.array_equal(new % DAY_S, submit % DAY_S)
    assert np.all((new - submit) % DAY_S == 0)
    assert np.array_equal(_month(new), _month(submit))
    moved = new != submit
    assert np.array_equal(_month(new[moved] + duration[moved]), _month(new[moved]))  # moved runs stay in the month


def test_a_job_running_into_the_next_month_holds_its_gpus_before_bigger_jobs_are_levelled():
    submit = np.array([27 * DAY_S, 29 * DAY_S + 12 * HOUR_S])  # a movable 22 GPU-day job, then one into month 1
    duration = np.array([66 * HOUR_S, 36 * HOUR_S])
    gpus = np.array([8, 8])
    new = level_heavy_jobs(submit, duration, gpus, np.full(61, 8), TWO_MONTHS)
    assert new[1] == submit[1]  # it cannot move
    assert new[0] + duration[0] <= submit[1] and _month(new[0:1])[0] == 0  # the bigger job moved off its hours


def test_level_heavy_jobs_never_moves_a_job_spanning_two_months():
    submit, duration, gpus = _mixed_trace()
    new = level_heavy_jobs(submit, duration, gpus, np.full(61, 64), TWO_MONTHS)
    spanning = _month(submit + duration) != _month(submit)
    assert spanning.sum() >= 3  # at least the three built-in spanning jobs
    assert np.array_equal(new[spanning], submit[spanning])


def test_light_jobs_never_move():
    rng = np.random.default_rng(8)
    n_big, n_small = 4, 200
    submit = np.concatenate([np.full(n_big, 5 * DAY_S + 10 * HOUR_S), rng.integers(0, 27 * DAY_S, n_small)])
    duration = np.concatenate([np.full(n_big, 3 * DAY_S), rng.integers(60, 1800, n_small)])
    gpus = np.concatenate([np.full(n_big, 64), np.ones(n_small, np.int64)])
    work = gpus * duration
    assert work[:n_big].sum() >= HEAVY_SHARE * work.sum()  # the big jobs alone hold the heavy share
    submit, duration, gpus = _with_month_end_job(submit, duration, gpus)
    new = level_heavy_jobs(submit, duration, gpus, np.full(30, 128), ONE_MONTH)
    assert np.array_equal(new[n_big:], submit[n_big:])
    assert len(np.unique(new[:n_big])) > 1  # the big jobs were spread out


def test_levelling_lowers_the_peak_and_keeps_gpu_time():
    n, cap = 20, 512
    submit = np.full(n, 10 * DAY_S + 9 * HOUR_S)
    duration = np.full(n, 2 * DAY_S)
    gpus = np.full(n, 256)
    submit, duration, gpus = _with_month_end_job(submit, duration, gpus)
    new = level_heavy_jobs(submit, duration, gpus, np.full(30, cap), ONE_MONTH)
    hours = 32 * 24
    before = hourly_busy(submit, duration, gpus, hours)
    after = hourly_busy(new, duration, gpus, hours)
    assert before.max() / cap == 10.0  # all 20 big jobs at once (the month-end minute is in another hour)
    assert after.max() / cap <= 0.2 * before.max() / cap  # 1.5 today: at most 3 of the 20 overlap
    assert after.sum() * HOUR_S == before.sum() * HOUR_S == (gpus * duration).sum()


def test_level_heavy_jobs_can_move_a_heavy_job_past_the_latest_original_end():
    submit = np.full(20, 10 * DAY_S + 9 * HOUR_S)
    new = level_heavy_jobs(submit, np.full(20, 2 * DAY_S), np.full(20, 256), np.full(30, 512), ONE_MONTH)
    assert np.array_equal(new % DAY_S, submit % DAY_S)
    assert new.max() > submit.max() and (new + 2 * DAY_S).max() <= 30 * DAY_S


def test_level_heavy_jobs_is_deterministic():
    submit, duration, gpus = _mixed_trace()
    a = level_heavy_jobs(submit, duration, gpus, np.full(61, 64), TWO_MONTHS)
    b = level_heavy_jobs(submit, duration, gpus, np.full(61, 64), TWO_MONTHS)
    assert np.array_equal(a, b)


def test_level_heavy_jobs_of_empty_input_is_empty():
    empty = np.zeros(0, np.int64)
    out = level_heavy_jobs(empty, empty, empty, np.full(30, 8), ONE_MONTH)
    assert out.shape == (0,)


def _gpu_job_counts(jobs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Counts of GPU jobs per (cluster, submit month) and per (cluster, submit hour of day)."""
    gpu = jobs.filter(pl.col("gpu_num") > 0)
    by_month = gpu.group_by("cluster", pl.col("submit_time").dt.month().alias("month")).len().sort("cluster", "month")
    by_hour = gpu.group_by("cluster", pl.col("submit_time").dt.hour().alias("hour")).len().sort("cluster", "hour")
    return by_month, by_hour


def test_generated_trace_keeps_monthly_and_hourly_gpu_job_counts(monkeypatch):
    params = SynthParams(scale=0.002, seed=3)
    levelled, _ = generate(params)
    monkeypatch.setattr(analytics.synth.level, "level_heavy_jobs", lambda submit, *a: submit)
    unlevelled, _ = generate(params)
    gpu = pl.col("gpu_num") > 0
    assert not levelled.filter(gpu)["submit_time"].sort().equals(unlevelled.filter(gpu)["submit_time"].sort())
    got_month, got_hour = _gpu_job_counts(levelled)
    want_month, want_hour = _gpu_job_counts(unlevelled)
    assert got_month.equals(want_month)
    assert got_hour.equals(want_hour)


def test_placing_against_the_spill_runs_less_beyond_the_envelope():
    rng = np.random.default_rng(5)
    n = 800  # about 90 % of the envelope's GPU-hours
    submit = rng.integers(0, 29, n) * DAY_S + rng.integers(0, DAY_S // 2, n)
    jobs = Jobs(submit, rng.integers(HOUR_S, 6 * HOUR_S, n), rng.choice([1, 2, 4], n), np.zeros(n, np.int64))
    gpus_by_day = np.full((1, 30), 16)
    envelope = np.where(np.arange(30) % 10 < 5, 16.0, 4.0)[None, :]  # five full days, then five quiet ones
    u, weekday = rng.random(n), np.ones(30)

    def error(placed):
        run = run_by_day(placed, jobs.duration_s, jobs.gpus, jobs.vc, gpus_by_day)
        return np.maximum(run - envelope, 0).sum()  # GPU-days run beyond the envelope

    once = place_on(u, jobs, envelope, envelope, ONE_MONTH)
    aimed = place_against_spill(u, jobs, envelope, weekday, gpus_by_day, ONE_MONTH)
    assert error(aimed) < 0.8 * error(once)  # measured: 2.07 GPU-days beyond it against 3.07
    assert np.array_equal(np.sort(aimed % DAY_S), np.sort(submit % DAY_S))  # whole days only
