"""An honest multi-step busy-node forecaster: a forecast made at step t reads only values up to t.

One LightGBM model predicts the change y[t+h] - y[t] for every horizon h (a direct multi-horizon forecast):
features are the horizon, the current level and recent changes, the calendar slot of the target step, and the
change over the same horizon one day and one week earlier (both end at or before t).
"""

from __future__ import annotations

from dataclasses import dataclass

import lightgbm as lgb
import numpy as np

from sim.ces.forecast_artifact import NEEDS_HISTORY, split_rows
from sim.ces.rolling import rolling_mean, rolling_std, shift
from sim.ces.series import STEP, STEPS_PER_DAY, WEEK_STEPS, NodeSeries

HONEST_PARAMS = {
    "objective": "l1",  # robust to the bursty changes of busy-node counts
    "metric": "rmse",
    "learning_rate": 0.1,
    "num_leaves": 31,
    "min_data_in_leaf": 500,
    "bagging_fraction": 0.85,
    "bagging_freq": 1,
    "deterministic": True,
    "force_col_wise": True,
    "num_threads": 1,
    "verbose": -1,
}
NUM_BOOST_ROUND = 1_000
EARLY_STOPPING_ROUNDS = 50
TRAIN_HORIZONS = 12


@dataclass(frozen=True)
class HonestModel:
    """A fitted direct multi-horizon model."""

    booster: lgb.Booster
    horizon: int
    best_iteration: int


def origin_features(y: np.ndarray) -> np.ndarray:
    """Per-origin features built from y[:t+1] only: level, recent changes, recent mean gaps and spread."""
    return np.column_stack(
        [
            y,
            y - shift(y, 1),
            y - shift(y, 3),
            y - shift(y, 6),
            y - rolling_mean(y, 6),
            y - rolling_mean(y, 18),
            rolling_std(y, 6),
            y - shift(y, STEPS_PER_DAY),
        ]
    )


def _slot_of_day(times: np.ndarray) -> np.ndarray:
    return ((times - times.astype("datetime64[D]")) // np.timedelta64(STEP)).astype(np.float64)


def _day_of_week(times: np.ndarray) -> np.ndarray:
    return ((times.astype("datetime64[D]").astype(np.int64) + 3) % 7).astype(np.float64)


def horizon_rows(y: np.ndarray, times: np.ndarray, base: np.ndarray, origins: np.ndarray, h: int):
    """Feature rows for forecasts of step t+h made at each origin t, reading y only at positions <= t."""
    target_times = times[origins] + h * np.timedelta64(STEP)
    seasonal = []
    for lag in (STEPS_PER_DAY, WEEK_STEPS):
        past_target, past_origin = origins + h - lag, origins - lag
        ok = (h <= lag) & (past_origin >= 0)
        value = np.full(len(origins), np.nan)
        value[ok] = y[past_target[ok]] - y[past_origin[ok]]
        seasonal.append(value)
    return np.column_stack(
        [np.full(len(origins), float(h)), base[origins], _slot_of_day(target_times)]
        + [_day_of_week(target_times), *seasonal]
    )


def _training_horizons(horizon: int) -> list[int]:
    return sorted({int(round(h)) for h in np.geomspace(1, horizon, TRAIN_HORIZONS)})


def _stack(y: np.ndarray, times: np.ndarray, base: np.ndarray, mask: np.ndarray, horizon: int):
    xs, labels = [], []
    for h in _training_horizons(horizon):
        origins = np.flatnonzero(mask[: len(y) - h] & mask[h:])
        label = y[origins + h] - y[origins]
        keep = ~np.isnan(label) & ~np.isnan(y[origins])
        xs.append(horizon_rows(y, times, base, origins[keep], h))
        labels.append(label[keep])
    return np.vstack(xs), np.concatenate(labels)


def fit_honest(history: NodeSeries, test_start: np.datetime64, horizon: int) -> HonestModel:
    """Fit the direct model on the series before test_start (validated on the month before)."""
    y, times = history.active, history.time
    base = origin_features(y)
    is_train, is_valid = split_rows(history, test_start)
    if not is_train.any() or not is_valid.any():
        raise ValueError(NEEDS_HISTORY)
    x_train, y_train = _stack(y, times, base, is_train, horizon)
    x_valid, y_valid = _stack(y, times, base, is_valid, horizon)
    dtrain = lgb.Dataset(x_train, y_train)
    dvalid = lgb.Dataset(x_valid, y_valid, reference=dtrain)
    booster = lgb.train(
        HONEST_PARAMS,
        dtrain,
        num_boost_round=NUM_BOOST_ROUND,
        valid_sets=[dvalid],
        callbacks=[lgb.early_stopping(EARLY_STOPPING_ROUNDS, verbose=False)],
    )
    return HonestModel(booster=booster, horizon=horizon, best_iteration=booster.best_iteration)


def forecast_matrix(model: HonestModel, series: NodeSeries, origins: np.ndarray) -> np.ndarray:
    """Forecasts made at each origin for steps 1..horizon ahead (rows: origins, columns: h-1), >= 0."""
    y, times = series.active, series.time
    base = origin_features(y)
    rows = [horizon_rows(y, times, base, origins, h) for h in range(1, model.horizon + 1)]
    delta = model.booster.predict(np.vstack(rows), num_iteration=model.best_iteration)
    level = np.tile(y[origins], model.horizon)
    return np.maximum(level + delta, 0.0).reshape(model.horizon, len(origins)).T
