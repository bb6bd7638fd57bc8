"""The artifact-compatible CES mode on the real Philly node series: every printed number of spec §5.1/§6."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
import pytest

from sim.ces.forecast_artifact import artifact_features, fit_artifact
from sim.ces.policy import PRESETS
from sim.ces.rolling import rolling_std
from sim.ces.run import CesConfig, run_ces
from sim.ces.series import load_node_series

START, END = datetime(2017, 12, 1), datetime(2017, 12, 15)
PUBLISHED = {  # spec §6 / helios_reference.json ["ces"]["philly"]
    "original_used_pct": 68.97522203325774,
    "optimized_used_pct": 90.41233203565986,
    "poweroff_mean_nodes": 100.11061507936508,
    "daily_change_times": 2.7142857142857144,
    "daily_increase_times": 0.5,
    "increase_mean_nodes": 27.142857142857142,
    "change_mean_nodes": 9.81578947368421,
    "change_median_nodes": 4.5,
    "rmse": 22.62170192627383,
    "smape": 5.279039160518576,
}


@pytest.fixture(scope="module")
def philly(public_data_dir):
    return load_node_series(public_data_dir / "ces" / "philly_node_sequence.csv.gz")


@pytest.fixture(scope="module")
def artifact_predictions(public_data_dir):
    table = pl.read_csv(public_data_dir / "ces" / "ces_philly_artifact_predictions.csv", try_parse_dates=True)
    return table.with_columns(pl.col("time").cast(pl.Datetime("us")))


@pytest.fixture(scope="module")
def artifact_run(philly):
    return run_ces(philly, CesConfig(mode="artifact", start=START, end=END, policy=PRESETS["philly"]))


def _split(philly):
    lo = philly.index_of(START)
    return philly.slice(0, lo), philly.slice(lo, lo + 2016)


def test_resampled_grid_keeps_the_ten_hour_hole(philly):
    assert len(philly.time) == 10625
    hole = np.flatnonzero(np.isnan(philly.active))
    assert len(hole) == 59
    assert str(philly.time[hole[0]]) == "2017-10-25T14:10:00.000000"


def test_feature_missing_counts(philly):
    train, test = _split(philly)
    assert len(train.time) == 8496
    expected_train = [0] * 8 + [69, 69, 69, 75, 75, 75, 77, 80]
    expected_test = [0] * 8 + [8, 8, 8, 11, 11, 11, 18, 19]
    assert np.isnan(artifact_features(train)).sum(axis=0).tolist() == expected_train
    assert np.isnan(artifact_features(test)).sum(axis=0).tolist() == expected_test


def tiny(std: np.ndarray) -> int:
    """Windows of equal values whose std is a rounding residue instead of 0."""
    return int(((std > 0) & (std < 1e-4)).sum())


def test_rolling_std_rounding_noise_of_pandas_1_2_4(philly):
    train, test = _split(philly)
    lagged = np.r_[np.full(6, np.nan), train.active[:-6]]
    assert tiny(rolling_std(lagged, 3)) == 82
    assert tiny(rolling_std(lagged, 6)) == 2
    test_lagged = np.r_[np.full(6, np.nan), test.active[:-6]]
    assert tiny(rolling_std(test_lagged, 3)) + tiny(rolling_std(test_lagged, 6)) == 4


def test_rolling_std_close_to_exact_std():
    values = np.array([3.0, 5.0, np.nan, 4.0, 4.0, 4.0, 9.0, 1.0, 2.0])
    out = rolling_std(values, 3)
    assert np.isnan(out[:5]).all() and not np.isnan(out[5:]).any()
    assert out[5] < 1e-6
    assert np.isclose(out[8], np.std([9.0, 1.0, 2.0], ddof=1))


def test_fit_log_matches_the_artifact(philly):
    train, _ = _split(philly)
    fit = fit_artifact(train, np.datetime64(START, "us"))
    assert fit.train_rows == 4176
    assert round(fit.initial_score, 6) == 323.721743
    assert fit.best_iteration == 32
    assert round(fit.valid_rmse, 4) == 22.7462


def test_predictions_bit_identical_to_the_artifact(artifact_run, artifact_predictions):
    ours = artifact_run.timeline["prediction"].to_numpy()
    assert np.array_equal(ours, artifact_predictions["active"].to_numpy())
    assert np.floor(ours).sum() == 605301


def test_artifact_mode_printed_metrics(artifact_run):
    m = artifact_run.metrics
    for key, value in PUBLISHED.items():
        assert m[key] == pytest.approx(value, abs=1e-6), key
    assert (m["change_times"], m["increase_times"], m["best_iteration"]) == (38, 7, 32)
    assert (m["lack_steps"], m["lack_node_steps"], m["lack_max_nodes"]) == (7, 50, 29)
    assert round(m["mean_active_nodes"], 2) == 319.89
    assert round(m["node_hours_off"]) == 33637


def test_given_predictions_reproduce_every_step(philly, artifact_predictions, artifact_run):
    config = CesConfig(start=START, end=END, policy=PRESETS["philly"], predictions=artifact_predictions)
    given = run_ces(philly, config)
    assert given.timeline.height == 2016
    assert given.timeline.equals(artifact_run.timeline)
    for key, value in PUBLISHED.items():
        assert given.metrics[key] == pytest.approx(value, abs=1e-9), key


def test_artifact_mode_is_deterministic(philly, artifact_run):
    again = run_ces(philly, CesConfig(mode="artifact", start=START, end=END, policy=PRESETS["philly"]))
    assert again.timeline.equals(artifact_run.timeline)
