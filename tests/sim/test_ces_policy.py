"""The CES power policy on hand-made series with known answers, and its invariants on random series."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.ces.energy import EnergyParams, account
from sim.ces.policy import PRESETS, PolicyParams, run_policy, window_means

SMALL = PolicyParams(  # history, future, thresholds (his, fut, de), buffer, keep, stable, warmup
    1, 2, 1, 0, 1, 2, 3, 0, 1
)
RUNNING = np.array([5, 5, 8, 7, 6, 5, 4, 4, 4])


def _run(running, prediction, params=SMALL, total=None):
    running = np.asarray(running, dtype=float)
    prediction = np.asarray(prediction, dtype=float)
    total = np.full(len(running), 20.0) if total is None else np.asarray(total, dtype=float)
    means = window_means(prediction, params.future), window_means(prediction, 2 * params.future)
    return run_policy(total, running, *means, params)


def test_hand_series_known_answer():
    trace = _run(RUNNING, RUNNING)
    assert trace.active.tolist() == [7, 7, 10, 10, 10, 7, 6, 6, 6]
    assert trace.change.tolist() == [0, 0, 3, 0, 0, -3, -1, 0, 0]
    assert trace.lack.tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0]


def test_keep_blocks_power_off_after_a_wake_up():
    long_keep = dataclasses.replace(SMALL, keep=5)
    trace = _run(RUNNING, RUNNING, long_keep)
    assert trace.active.tolist()[:7] == [7, 7, 10, 10, 10, 10, 10]
    assert trace.change[3:7].tolist() == [0, 0, 0, 0]


def test_no_power_off_when_forecast_rises():
    rising = [5, 5, 8, 7, 6, 5, 9, 12, 15]
    trace = _run(RUNNING, rising)
    assert (trace.change >= 0).all()
    assert trace.active[-1] == 10


def test_no_power_off_when_demand_rises():
    running = np.arange(10, 60, dtype=float)
    trace = _run(running, running)
    assert (trace.change >= 0).all()
    assert (np.diff(trace.active) >= 0).all()


def test_buffer_kept_after_wake_up_and_power_off():
    trace = _run(RUNNING, RUNNING)
    changed = np.flatnonzero(trace.change)
    assert (trace.active[changed] == RUNNING[changed] + SMALL.buffer).all()


def test_de_threshold_skips_small_power_offs():
    trace = _run(RUNNING, RUNNING, dataclasses.replace(SMALL, de_threshold=4))
    assert trace.active.tolist() == [7, 7, 10, 10, 10, 10, 6, 6, 6]
    assert trace.change.tolist() == [0, 0, 3, 0, 0, 0, -4, 0, 0]


def test_total_cap_lowers_active_without_recording_a_change():
    total = [20, 20, 20, 20, 9, 9, 9, 9, 9]
    trace = _run(RUNNING, np.full(9, 30.0), total=total)
    assert trace.active.tolist() == [7, 7, 10, 10, 9, 9, 9, 9, 9]
    assert trace.change.tolist() == [0, 0, 3, 0, 0, 0, 0, 0, 0]


def test_window_means_truncate_at_the_end():
    assert window_means(np.array([1.0, 2.0, 3.0, 4.0]), 3).tolist() == [2.0, 3.0, 3.5, 4.0]


def test_presets_match_the_artifact():
    assert PRESETS["philly"] == PolicyParams(2, 30, 0.1, 0, 1, 20, 10, 0)
    assert PRESETS["earth"] == PolicyParams(6, 18, 1, 1, 5, 5, 12, 1)
    assert set(PRESETS) == {"philly", "venus", "earth", "saturn", "uranus"}


series = st.integers(min_value=8, max_value=80).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 40), min_size=n, max_size=n),
        st.lists(st.floats(0, 60, allow_nan=False), min_size=n, max_size=n),
    )
)
params = st.builds(
    PolicyParams,
    history=st.integers(1, 6),
    future=st.integers(1, 20),
    his_threshold=st.floats(-2, 3),
    fut_threshold=st.floats(-2, 3),
    de_threshold=st.integers(0, 5),
    buffer=st.integers(0, 10),
    keep=st.integers(0, 12),
    stable=st.integers(0, 3),
    warmup=st.integers(1, 6),
)


@settings(max_examples=200, deadline=None)
@given(series, params)
def test_never_fewer_powered_nodes_than_running(data, p):
    running, prediction = data
    trace = _run(running, prediction, p, total=np.full(len(running), 40.0))
    assert (trace.active >= np.asarray(running)).all()
    assert (trace.active <= 40).all()
    diff = np.r_[0, np.diff(trace.active)]
    offs, wakes = trace.change < 0, trace.change > 0
    assert (diff[offs] == trace.change[offs]).all()
    assert (diff[wakes] <= trace.change[wakes]).all()  # the artifact records a wake-up before the total cap
    assert (
        trace.lack
        == np.maximum(np.asarray(running) - np.r_[trace.active[0], trace.active[:-1]], 0)
        * (np.arange(len(running)) >= p.warmup)
    ).all()


def test_energy_accounting_hand_numbers():
    params = EnergyParams(
        busy_kw=3, idle_kw=1, off_kw=0, wakeup_s=300, wakeup_kwh=0.5, price_per_kwh=0.2, co2_kg_per_kwh=0.5
    )
    total = np.array([10.0, 10.0, 10.0])
    running = np.array([4.0, 4.0, 4.0])
    active = np.array([6, 5, 6])
    out = account(total, running, active, params)
    assert out["node_hours_off"] == (4 + 5 + 4) / 6
    assert out["baseline_kwh"] == (3 * (12 + 6)) / 6
    assert np.isclose(out["energy_saved_kwh"], 13 / 6 - 0.5)
    assert np.isclose(out["cost_saved"], (13 / 6 - 0.5) * 0.2)
    assert np.isclose(out["co2_saved_kg"], (13 / 6 - 0.5) * 0.5)
