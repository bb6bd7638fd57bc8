"""Unit tests of the synthetic trace's sampling tools (analytics.synth.dist)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.reference import reference, summary_rows
from analytics.synth.dist import (
    assign_blocks,
    couple_by_rank,
    fit_tail_gamma,
    sample_categorical,
    sample_sorted_durations,
    shares_from_curve,
    split_counts,
    stratified_noise,
)

X_S = [2**k for k in range(22)]


@given(st.integers(0, 10_000), st.lists(st.floats(0.01, 100.0), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_split_counts_sums_to_total_and_follows_weights(total, weights):
    counts = split_counts(total, np.array(weights))
    assert counts.sum() == total
    assert (counts >= 0).all()
    exact = total * np.array(weights) / sum(weights)
    assert np.all(np.abs(counts - exact) < 1.0 + 1e-9)


def test_couple_by_rank_keeps_the_marginal_and_orders_by_score():
    rng = np.random.default_rng(0)
    values = np.sort(rng.integers(0, 1000, 500))
    score = rng.random(500)
    out = couple_by_rank(values, score)
    assert np.array_equal(np.sort(out), values)
    assert np.all(np.diff(out[np.argsort(score)]) >= 0)


@pytest.mark.parametrize("cluster", ["Venus", "Earth", "Saturn", "Uranus"])
@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_sampled_durations_follow_the_published_cdf_and_mean(cluster, kind):
    cdf = reference()[f"{kind}_job_duration_cdf"][cluster]
    mean_s = summary_rows()[cluster][f"avg_run_time_{kind}"]
    gamma = fit_tail_gamma(cdf, mean_s)
    durations = sample_sorted_durations(np.random.default_rng(1), 200_000, cdf, gamma)
    assert np.all(np.diff(durations) >= 0)
    got = [100 * np.mean(durations <= x) for x in X_S]
    assert max(abs(g - p) for g, p in zip(got, cdf, strict=True)) < 1.0
    assert durations.mean() == pytest.approx(mean_s, rel=0.15)


@pytest.mark.parametrize("n_users", [100, 111, 140, 200, 262])
def test_shares_from_curve_reproduce_the_curve(n_users):
    curve = reference()["user_gpu_time_cdf"]["Venus"]
    shares = shares_from_curve(curve, n_users)
    assert shares.sum() == pytest.approx(1.0)
    assert np.all(np.diff(shares) <= 0)  # descending
    at = np.interp(np.arange(101), np.linspace(0, 100, n_users), 100 * np.cumsum(shares))
    assert max(abs(at[p] - curve[p]) for p in (1, 5, 10, 20, 50)) < 0.3


@pytest.mark.parametrize("heavy_first", [None, 1.0])
def test_assign_blocks_gives_owners_their_weight_share(heavy_first):
    rng = np.random.default_rng(2)
    weights = rng.lognormal(0, 1, 50_000)
    shares = np.array([0.5, 0.3, 0.15, 0.05])
    owner = assign_blocks(rng, weights, shares, heavy_first=heavy_first)
    got = np.bincount(owner, weights=weights, minlength=4) / weights.sum()
    assert np.allclose(got, shares, atol=0.002)


def test_assign_blocks_count_mix_reaches_every_eligible_owner_only():
    rng = np.random.default_rng(3)
    weights = rng.lognormal(0, 2, 20_000)
    shares = np.array([0.9, 0.1, 0.0, 0.0, 0.0])
    floor = np.array([1, 1, 1, 1, 0])
    owner = assign_blocks(rng, weights, shares, count_mix=0.01, floor=floor)
    counts = np.bincount(owner, minlength=5)
    assert (counts[:4] > 0).all()
    assert counts[4] == 0


def test_stratified_noise_spreads_each_group_evenly():
    rng = np.random.default_rng(4)
    codes = np.repeat([0, 1, 2], [1000, 10, 5000])
    noise = stratified_noise(rng, codes)
    for code in (0, 2):
        part = noise[codes == code]
        assert abs(np.median(part)) < 0.05
    assert np.all(np.isfinite(noise))


def test_sample_categorical_frequencies():
    rng = np.random.default_rng(5)
    draws = sample_categorical(rng, np.array([1.0, 3.0, 0.0, 6.0]), 100_000)
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert np.allclose(freq, [0.1, 0.3, 0.0, 0.6], atol=0.01)
