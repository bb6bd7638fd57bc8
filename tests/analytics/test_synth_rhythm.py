"""Unit tests of the split of the hourly submission rhythm between long and short jobs (analytics.synth.level)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.synth.level import DAY_S, HOUR_S, remap_time_of_day, split_rhythm

RHYTHM = np.array([26, 19, 17, 11, 8, 6, 5, 6, 11, 23, 37, 42, 34, 37, 45, 48, 50, 50, 37, 38, 39, 39, 33, 30.0])
N_JOBS = 200_000


def _draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Submit seconds over 30 days with RHYTHM's hours, and durations of which about a fifth are 1 h or longer."""
    hour = rng.choice(24, n, p=RHYTHM / RHYTHM.sum())
    submit_s = rng.integers(0, 30, n) * DAY_S + hour * HOUR_S + rng.integers(0, HOUR_S, n)
    duration_s = np.where(rng.random(n) < 0.2, rng.integers(HOUR_S, 3 * DAY_S, n), rng.integers(1, HOUR_S, n))
    return submit_s, duration_s


def _hour_shares(submit_s: np.ndarray) -> np.ndarray:
    return np.bincount(submit_s % DAY_S // HOUR_S, minlength=24) / len(submit_s)


def test_remap_keeps_a_rhythm_onto_itself_and_moves_quantiles_onto_another():
    tod_s = np.arange(0, DAY_S, 7)
    assert np.abs(remap_time_of_day(tod_s, RHYTHM, RHYTHM) - tod_s).max() <= 1
    flat = remap_time_of_day(tod_s, np.ones(24), 2.0 * np.ones(24))
    assert np.abs(flat - tod_s).max() <= 1
    moved = remap_time_of_day(np.array([0, DAY_S // 2, DAY_S - 1]), np.ones(24), np.r_[np.ones(12), 3 * np.ones(12)])
    assert moved[0] == 0 and moved[-1] == DAY_S - 1
    assert abs(moved[1] - 16 * HOUR_S) <= 1  # the afternoon holds 3/4 of the new rhythm: its median is at 16:00


@pytest.mark.parametrize("exponent", [0.0, 0.5, 2.0])
def test_long_jobs_follow_the_powered_rhythm_and_all_jobs_keep_the_published_one(exponent):
    submit_s, duration_s = _draw(np.random.default_rng(1), N_JOBS)
    out = split_rhythm(submit_s, duration_s, RHYTHM, HOUR_S, exponent)
    assert np.array_equal(out // DAY_S, submit_s // DAY_S)
    long = duration_s >= HOUR_S
    want_long = RHYTHM**exponent / np.sum(RHYTHM**exponent)
    assert np.abs(_hour_shares(out[long]) - want_long).max() < 0.006
    assert np.abs(_hour_shares(out) - RHYTHM / RHYTHM.sum()).max() < 0.004
    assert not np.array_equal(out, submit_s)


def test_exponent_one_or_no_long_jobs_moves_nothing():
    submit_s, duration_s = _draw(np.random.default_rng(2), 1_000)
    assert np.array_equal(split_rhythm(submit_s, duration_s, RHYTHM, HOUR_S, 1.0), submit_s)
    assert np.array_equal(split_rhythm(submit_s, duration_s, RHYTHM, 10 * DAY_S, 0.5), submit_s)


def test_a_flatter_rhythm_for_long_jobs_moves_them_out_of_the_afternoon_peak():
    submit_s, duration_s = _draw(np.random.default_rng(3), N_JOBS)
    long = duration_s >= HOUR_S
    out = split_rhythm(submit_s, duration_s, RHYTHM, HOUR_S, 0.3)
    peak = slice(14, 18)
    assert _hour_shares(out[long])[peak].sum() < _hour_shares(submit_s[long])[peak].sum() - 0.03
    assert _hour_shares(out[~long])[peak].sum() > _hour_shares(submit_s[~long])[peak].sum()
