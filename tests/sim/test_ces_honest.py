"""The honest forecasters never read a value after the decision time; the artifact's forecaster does."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
import pytest

from sim.ces.policy import PRESETS
from sim.ces.run import CesConfig, CesResult, run_ces
from sim.ces.series import NodeSeries

START, END = datetime(2020, 3, 1), datetime(2020, 3, 4)
DECISIONS = (150, 300)  # steps into the window after which everything is poisoned


def synthetic_series(seed: int = 7) -> NodeSeries:
    """Jan 10 .. Mar 4 2020 every 10 minutes: a daily wave of busy nodes plus noise, out of 100 nodes."""
    rng = np.random.default_rng(seed)
    first, last = np.datetime64("2020-01-10T00:00", "us"), np.datetime64("2020-03-04T00:00", "us")
    time = np.arange(first, last, np.timedelta64(10, "m"))
    step = np.arange(len(time))
    wave = 55 + 20 * np.sin(2 * np.pi * step / 144) + 8 * np.sin(2 * np.pi * step / 1008)
    active = np.clip(np.round(wave + rng.normal(0, 4, len(time))), 0, 100)
    return NodeSeries(time=time, active=active, total=np.full(len(time), 100.0))


def poisoned(series: NodeSeries, after: int, seed: int = 1) -> NodeSeries:
    """A copy of series with every value after position `after` replaced by garbage."""
    rng = np.random.default_rng(seed)
    active, total = series.active.copy(), series.total.copy()
    active[after + 1 :] = rng.integers(0, 100, len(active) - after - 1)
    total[after + 1 :] = 97.0
    return NodeSeries(time=series.time, active=active, total=total)


def _result(series: NodeSeries, mode: str) -> CesResult:
    return run_ces(series, CesConfig(mode=mode, start=START, end=END, policy=PRESETS["philly"]))


def _run(series: NodeSeries, mode: str) -> pl.DataFrame:
    return _result(series, mode).timeline


@pytest.fixture(scope="module")
def clean():
    return synthetic_series()


@pytest.fixture(scope="module")
def honest_clean(clean):
    return {mode: _result(clean, mode) for mode in ("honest", "recursive")}


@pytest.mark.parametrize("mode", ["honest", "recursive"])
@pytest.mark.parametrize("k", DECISIONS)
def test_honest_decisions_ignore_the_future(clean, honest_clean, k, mode):
    t = clean.index_of(START) + k
    dirty = _run(poisoned(clean, t), mode)
    assert dirty.head(k + 1).equals(honest_clean[mode].timeline.head(k + 1))
    assert not dirty.slice(k + 1).equals(honest_clean[mode].timeline.slice(k + 1))


def test_artifact_forecast_reads_the_future(clean):
    k = DECISIONS[0]
    t = clean.index_of(START) + k
    leaky = _run(clean, "artifact")["forecast_mean"]
    dirty = _run(poisoned(clean, t), "artifact")["forecast_mean"]
    assert leaky[k] != dirty[k]


def test_honest_mode_is_deterministic(clean, honest_clean):
    assert _run(clean, "honest").equals(honest_clean["honest"].timeline)


def test_honest_forecast_errors_reported(honest_clean):
    m = honest_clean["honest"].metrics
    assert 0 < m["rmse"] < 30 and 0 < m["smape"] < 60
    assert m["rmse_persistence"] > 0 and m["best_iteration"] >= 1
