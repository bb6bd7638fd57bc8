"""Per-VC load of the synthetic trace: Fig 4's shapes (analytics.synth.profiles), the VC of each job
(analytics.synth.assign) and the day each job runs on (analytics.synth.level.follow_envelope)."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from analytics.reference import reference
from analytics.synth.assign import Targets, assign_vcs, fitting_vcs, hold_named_mix
from analytics.synth.level import DAY_S, follow_envelope
from analytics.synth.profiles import (
    HEADROOM_PCT,
    envelope,
    largest_vcs,
    monthly_shifts,
    published_profiles,
    smooth_curve,
    top_levels,
    vc_profiles,
)
from analytics.synth.waits import fit_window_shares

PUBLISHED = reference()["earth_may_vc_utilization"]


def test_each_published_shape_has_the_published_mean():
    for name, profile in published_profiles().items():
        box = PUBLISHED[name]
        # vcvlY's box alone has a mean 0.9 pp below the published one; full days are capped by the headroom
        assert profile.mean_pct() == pytest.approx(box["mean_pct"], abs=2.0), name
        assert profile.quantiles(np.array([0.0, 1.0])).tolist() == pytest.approx(
            [0.0 if profile.idle_share else box["whisker_low_pct"], min(box["whisker_high_pct"], 100 - HEADROOM_PCT)]
        )


def test_a_shift_moves_the_mean_but_keeps_idle_and_full_time():
    mod = published_profiles()["vcMod"]  # a quarter of its time idle, a quarter full
    assert mod.mean_pct(1.0) > mod.mean_pct() > mod.mean_pct(-1.0)
    p = np.array([0.05, 0.9])
    assert mod.quantiles(p, 2.0).tolist() == mod.quantiles(p, -2.0).tolist() == [0.0, 100 - HEADROOM_PCT]


def test_earths_ten_keep_their_shapes_and_other_vcs_take_the_ten_in_turn():
    rng = np.random.default_rng(0)
    earth = ["vc6YE", "vchbv", "vcX", "vcY"]
    profiles, named = vc_profiles(rng, "Earth", earth)
    assert named.tolist() == [True, True, False, False]
    assert [p.name for p in profiles[:2]] == ["vc6YE", "vchbv"]
    profiles, named = vc_profiles(rng, "Venus", [f"vc{i}" for i in range(20)])
    assert not named.any() and {p.name for p in profiles} == set(PUBLISHED)


def test_monthly_shifts_reach_the_level_and_keep_earths_ten_in_may():
    profiles, named = vc_profiles(np.random.default_rng(1), "Earth", ["vc6YE", "vchbv", "vcX", "vcY"])
    gpu_days = np.array([[208.0, 208.0], [64.0, 64.0], [32.0, 32.0], [16.0, 16.0]]) * 30
    shifts = monthly_shifts("Earth", profiles, named, gpu_days, np.array([60.0, 70.0]), (4, 5))
    april = sum(p.mean_pct(s) * w for p, s, w in zip(profiles, shifts[:, 0], gpu_days[:, 0], strict=True))
    assert april / gpu_days[:, 0].sum() == pytest.approx(60.0, abs=0.1)
    assert shifts[named, 1].tolist() == [0.0, 0.0]  # May: the published shapes
    may = sum(p.mean_pct(s) * w for p, s, w in zip(profiles, shifts[:, 1], gpu_days[:, 1], strict=True))
    assert may / gpu_days[:, 1].sum() == pytest.approx(70.0, abs=0.1)


def test_the_envelope_gives_a_named_vc_its_box_over_the_days_and_the_others_their_mean():
    rng = np.random.default_rng(2)
    profiles, named = vc_profiles(rng, "Earth", ["vcMod", "vcX"])
    days = [date(2020, 5, 1) + timedelta(days=d) for d in range(31)]
    busy = envelope(rng, profiles, named, np.zeros((2, 1)), np.full((2, 31), 64.0), days, (5,))
    share = busy / 64 * 100
    assert share[0].mean() == pytest.approx(profiles[0].mean_pct(), abs=2)
    assert (share[0] == 0).sum() >= 7 and (share[0] == 100).sum() >= 7  # idle and full (every GPU busy) days
    assert np.ptp(share[1]) == 0  # every day the same


def test_a_smooth_curve_ranks_the_days_with_neighbouring_days_alike():
    curve = smooth_curve(np.random.default_rng(4), 31, 4)
    assert np.sort(curve).tolist() == (np.arange(31) / 30).tolist()  # ranks: each day its own place
    shuffled = np.random.default_rng(5).permutation(curve)
    assert np.abs(np.diff(curve)).mean() < 0.6 * np.abs(np.diff(shuffled)).mean()  # neighbouring days alike
    assert np.abs(np.diff(smooth_curve(np.random.default_rng(4), 31, 1))).mean() > np.abs(np.diff(curve)).mean()


def test_jobs_go_only_to_vcs_that_hold_them_and_vcs_get_their_share_of_gpu_time():
    rng = np.random.default_rng(3)
    n = 20_000
    gpus = rng.choice([1, 1, 1, 2, 4, 8, 16, 32], n)
    dur = rng.lognormal(7, 2, n).astype(np.int64) + 1
    month = rng.integers(0, 2, n)
    gpus = np.where((month == 0) & (rng.random(n) < 0.8), 1, gpus)  # month 0 is mostly 1-GPU jobs
    min_gpus = np.tile(np.array([64, 32, 16], dtype=np.int32), (n, 1))
    share = np.array([[0.6, 0.7], [0.3, 0.2], [0.1, 0.1]])
    named = np.array([True, False, False])
    targets = Targets(share, named, np.array([9.0, 0, 0]), np.array([0.0, 0, 0]), mix_month=1)
    vc = assign_vcs(rng, targets, month, gpus, dur, fitting_vcs(min_gpus, gpus))
    assert fitting_vcs(min_gpus, gpus)[np.arange(n), vc].all()
    assert (gpus[vc == 2] <= 8).all()  # a 16-GPU VC holds jobs of at most half its GPUs
    work = gpus * dur.astype(float)
    for m in (0, 1):
        got = np.bincount(vc[month == m], weights=work[month == m], minlength=3) / work[month == m].sum()
        assert got == pytest.approx(share[:, m], abs=0.05)
    assert gpus[(vc == 0) & (month == 1)].mean() == pytest.approx(9.0, rel=0.1)  # the job mix of month 1


def test_drawn_in_the_months_they_run_in_small_vcs_get_their_share_of_each_calendar_month():
    # a large VC alone holds the 64-GPU jobs; the long jobs of a few GPUs fit anywhere and many run into month 1
    rng = np.random.default_rng(5)
    n = 20_000
    gpus = np.where(rng.random(n) < 0.05, 64, rng.choice([1, 2, 4, 8], n))
    dur = np.minimum(rng.lognormal(8, 2, n), 20 * DAY_S).astype(np.int64) + 1
    submit = rng.integers(0, 60 * DAY_S, n)
    month = submit // (30 * DAY_S)
    edges = np.array([0, 30, 60]) * DAY_S
    end = submit + dur
    overlap = np.minimum(end[:, None], edges[None, 1:]) - np.maximum(submit[:, None], edges[None, :-1])
    run_work = np.maximum(overlap, 0) * gpus[:, None].astype(float)
    min_gpus = np.tile(np.array([256, 32, 32, 16], dtype=np.int32), (n, 1))
    share = np.array([[0.7, 0.6], [0.1, 0.2], [0.15, 0.1], [0.05, 0.1]])
    targets = Targets(share, np.zeros(4, dtype=bool), np.zeros(4), np.zeros(4), mix_month=0)
    vc = assign_vcs(rng, targets, month, gpus, dur, fitting_vcs(min_gpus, gpus), run_work)
    assert fitting_vcs(min_gpus, gpus)[np.arange(n), vc].all()
    for m in (0, 1):
        got = np.bincount(vc, weights=run_work[:, m], minlength=4) / run_work[:, m].sum()
        assert got == pytest.approx(share[:, m], rel=0.1)


def _normalised_means(vc: np.ndarray, dur: np.ndarray, named: np.ndarray) -> np.ndarray:
    mean_s = np.array([dur[vc == v].mean() for v in np.flatnonzero(named)])
    return 100 * (mean_s - mean_s.min()) / (mean_s.max() - mean_s.min())


def test_holding_the_named_mix_puts_their_drawn_mean_durations_on_the_published_line():
    # four named VCs drawn at random from heavy-tailed jobs stray from their published normalised durations (the few
    # longest jobs hold most seconds); moving short jobs between them and the unnamed VC brings them back, keeping
    # the published mean GPUs per job and (nearly) every VC's GPU time
    rng = np.random.default_rng(11)
    n = 10_000
    month = np.where(rng.random(n) < 0.9, 0, 1)
    named = np.array([True, True, True, True, False])
    pct = np.array([0.0, 20.0, 50.0, 100.0, 0.0])
    per_job = np.array([1.5, 3.0, 2.0, 2.5, 0.0])
    vc = rng.choice(5, n, p=[0.3, 0.04, 0.04, 0.02, 0.6])
    # in expectation, the published mean GPUs per job (1 or 4 GPUs) and mean durations on the published line
    gpus = np.where(vc == 4, rng.choice([1, 2, 4, 8], n), np.where(rng.random(n) < (4 - per_job[vc]) / 3, 1, 4))
    log_mean = 6 + np.log1p(9 * pct / 100)
    dur = np.minimum(rng.lognormal(log_mean[vc], 2.5), 20 * DAY_S).astype(np.int64) + 1
    min_gpus = np.tile(np.array([64, 64, 64, 64, 256], dtype=np.int32), (n, 1))
    fits = fitting_vcs(min_gpus, gpus)
    targets = Targets(np.full((5, 2), 0.2), named, per_job, pct, mix_month=0)
    held = hold_named_mix(targets, vc, month, gpus, dur, fits)
    mix = month == 0
    before = _normalised_means(vc[mix], dur[mix], named)
    after = _normalised_means(held[mix], dur[mix], named)
    assert np.abs(before - pct[named]).max() > 5  # the draw strays ...
    assert after == pytest.approx(pct[named], abs=1.0)  # ... and is held on the line
    for v in (1, 2, 3):
        assert gpus[mix & (held == v)].mean() == pytest.approx(per_job[v], rel=0.05)
    work = gpus * dur.astype(float)
    moved = held != vc
    assert (month[moved] == 0).all() and fits[np.arange(n), held].all()
    for v in range(5):
        assert work[held == v].sum() == pytest.approx(work[vc == v].sum(), rel=0.02)


def test_a_job_no_other_vc_may_hold_is_not_given_away():
    # VC 1's mean (762 s) is under its line (2,006 s): it gives away its shortest jobs, at most half of them. The
    # shortest need 8 GPUs, which the VC not named cannot hold, so it gives its eight 1-GPU jobs of 20 s instead
    # (counting the 8-GPU ones as given, it moved four and stopped)
    dur = np.array([10] * 4 + [10] * 4 + [20] * 8 + [3000] * 4 + [2505] * 4 + [5000] * 4 + [10] * 20)
    gpus = np.array([1] * 4 + [8] * 4 + [1] * 8 + [1] * 4 + [1] * 8 + [1] * 20)
    vc = np.array([0] * 4 + [1] * 16 + [2] * 4 + [3] * 4 + [4] * 20)
    n = len(vc)
    min_gpus = np.tile(np.array([64, 64, 64, 64, 2], dtype=np.int32), (n, 1))
    fits = fitting_vcs(min_gpus, gpus)
    named = np.array([True, True, True, True, False])
    per_job, pct = np.array([1.0, 1.0, 1.0, 1.0, 0.0]), np.array([0.0, 40.0, 50.0, 100.0, 0.0])  # 8-GPU jobs go first
    held = hold_named_mix(Targets(np.full((5, 1), 0.2), named, per_job, pct, 0), vc, np.zeros(n), gpus, dur, fits)
    assert (held[4:8] == 1).all()  # the 8-GPU jobs stay
    given = np.flatnonzero((vc == 1) & (held != 1))
    assert given.tolist() == list(range(8, 16)) and (held[given] == 4).all()
    assert dur[held == 1].mean() == 1505.0


def test_follow_envelope_keeps_time_of_day_and_month_and_avoids_days_without_weight():
    rng = np.random.default_rng(4)
    months = np.array([0, 30, 61])
    n = 2_000
    submit = rng.integers(0, 61 * DAY_S, n)
    duration = rng.integers(0, 3 * DAY_S, n)
    vc = rng.integers(0, 2, n)
    weight = np.ones((2, 61))
    weight[0, :15] = 0.0  # VC 0 is empty for the first half of month 0
    out = follow_envelope(rng.random(len(submit)), submit, duration, vc, weight, months)
    assert (out % DAY_S == submit % DAY_S).all()
    month_of = np.searchsorted(months, submit // DAY_S, side="right")
    assert (np.searchsorted(months, out // DAY_S, side="right") == month_of).all()
    moved = out != submit
    assert ((out[moved] + duration[moved]) // DAY_S < months[month_of[moved]]).all()  # still ends in its month
    assert not ((vc == 0) & moved & (out // DAY_S < 15)).any()


def test_swapping_users_shares_gives_the_vcs_their_normalised_mean_queue():
    # three VCs, one user each in the window plus an idle-in-window user; the biggest share starts in the wrong VC
    user = np.repeat(np.arange(4), 10)
    vc = np.repeat([0, 1, 2, 3], 10)
    raw = np.ones(40)
    submit = np.where(user < 3, 100.0, 10_000.0)  # user 3's jobs are outside the window
    target = np.array([50.0, 10.0, 0.0, 5.0])
    got = fit_window_shares(target, user, raw, vc, submit, (0, 1000, ()), {0: 0.0, 1: 10.0, 2: 100.0}, 1e9)
    assert sorted(got.tolist()) == sorted(target.tolist())  # the shares are kept, only their holders change
    mean = np.array([got[u] / 10 for u in range(3)])
    norm = 100 * (mean - mean.min()) / (mean.max() - mean.min())
    assert norm == pytest.approx([0.0, 10.0, 100.0])
    # a swap that would push one job past the cap is not made: the share of 50 (5 per job) stays with user 0
    capped = fit_window_shares(target, user, raw, vc, submit, (0, 1000, ()), {0: 0.0, 1: 10.0, 2: 100.0}, 4.0)
    assert capped[0] == 50.0 and sorted(capped.tolist()) == sorted(target.tolist())


def test_a_clusters_largest_vcs_take_the_ten_shapes_once_each_with_their_spread():
    days = [date(2020, 5, 1) + timedelta(days=d) for d in range(31)]
    gpus = np.array([400, 300, 200, 100, 90, 80, 70, 60, 50, 48, 48, 16, 8], dtype=float)
    top = largest_vcs(np.repeat(gpus[:, None], 31, axis=1), days)
    assert top.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, -1, -1]  # two VCs tie for the tenth place
    vcs = [f"vc{i}" for i in range(len(gpus))]
    profiles, _ = vc_profiles(np.random.default_rng(0), "Saturn", vcs, top, busy_first=True)
    means = sorted((b["mean_pct"] for b in PUBLISHED.values()), reverse=True)
    assert [p.mean_pct() for p in profiles[:9]] == pytest.approx(means[:9], abs=2.0)  # busiest on the largest
    assert profiles[9] is profiles[10]  # the tied VCs share the last shape
    gpu_days = (gpus * 31)[:, None]
    levels = top_levels(profiles, top, gpu_days, np.array([75.0]))
    held = top >= 0
    moved = levels[held, 0] - np.array([p.mean_pct() for p in np.array(profiles)[held]])
    assert np.ptp(moved) == pytest.approx(0.0, abs=1e-9)  # all moved by the same points: the spread is kept
    shifts = monthly_shifts("Saturn", profiles, np.zeros(13, bool), gpu_days, np.array([75.0]), (5,), levels)
    busy = envelope(
        np.random.default_rng(1),
        profiles,
        np.zeros(13, bool),
        shifts,
        np.repeat(gpus[:, None], 31, 1),
        days,
        (5,),
        levels,
    )
    assert busy.sum() / (gpus.sum() * 31) * 100 == pytest.approx(75.0, abs=0.5)  # the cluster keeps its level


def test_in_the_random_order_the_largest_vc_takes_the_shape_of_the_figures_largest():
    days = [date(2020, 5, 1) + timedelta(days=d) for d in range(31)]
    gpus = np.array([48, 368, 104, 80, 64, 48, 48, 40, 40, 32, 32, 16], dtype=float)  # Venus-like: one VC holds most
    top = largest_vcs(np.repeat(gpus[:, None], 31, axis=1), days)
    vcs = [f"vc{i}" for i in range(len(gpus))]
    largest_first = next(iter(PUBLISHED))
    for seed in range(5):
        profiles, _ = vc_profiles(np.random.default_rng(seed), "Venus", vcs, top)
        assert profiles[1].name == largest_first  # only it holds the cluster's largest jobs
        names = [p.name for p, t in zip(profiles, top, strict=True) if t >= 0]
        assert set(names) == set(PUBLISHED)  # every shape once among the largest
