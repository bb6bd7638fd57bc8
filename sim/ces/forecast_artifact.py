"""The artifact's LightGBM busy-node forecaster (CES_Philly.py, CES_Helios.py), reproduced exactly.

Feature set "philly" is CES_Philly.py's 16 columns. Feature set "helios" (CES_Helios.py) appends two categorical
columns, holiday and event, in that order: an assumption, since the artifact's Helios node file is absent and
the column order of its model input cannot be checked.

Its test features read the actual test series, so a "prediction" for step i+k uses values up to i+k-6: the
look-ahead leak of spec §5. Use `sim.ces.forecast_honest` for a forecast available at decision time.
"""

from __future__ import annotations

from dataclasses import dataclass

import chinese_calendar
import lightgbm as lgb
import numpy as np

from sim.ces.rolling import rolling_mean, rolling_median, rolling_std, shift
from sim.ces.series import STEPS_PER_DAY, NodeSeries

LGB_PARAMS = {"metric": "rmse", "bagging_fraction": 0.85, "bagging_freq": 1, "verbose": -1, "num_threads": 1}
NUM_BOOST_ROUND = 10_000
EARLY_STOPPING_ROUNDS = 200
LAG_STEPS = STEPS_PER_DAY // 24  # 6 steps = 1 hour (the artifact's comment says "1 day")
ROLLING_WINDOWS = (STEPS_PER_DAY // 48, STEPS_PER_DAY // 24)  # 3 and 6 steps
THREE_HOURS = STEPS_PER_DAY // 8  # 18 steps
NEEDS_HISTORY = "the series needs a training month and a validation month before --start"
FEATURE_NAMES = (
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "dayofweek",
    "dayofyear",
    "week",
    "rolling_day_mean_3",
    "rolling_day_median_3",
    "rolling_day_std_3",
    "rolling_day_mean_6",
    "rolling_day_median_6",
    "rolling_day_std_6",
    "3h_ago",
    "3h_ago_soft",
)
HELIOS_FEATURE_NAMES = (*FEATURE_NAMES, "holiday", "event")
FEATURE_SETS = {"philly": FEATURE_NAMES, "helios": HELIOS_FEATURE_NAMES}
CATEGORICAL = {"philly": [], "helios": ["holiday", "event"]}
HELIOS_PRESETS = ("venus", "earth", "saturn", "uranus")
# CES_Helios.py's conference deadlines: ECCV, NeurIPS and AAAI 2020.
EVENT_DEADLINES = np.array(["2020-03-06", "2020-06-06", "2020-09-10"], dtype="datetime64[us]")
EVENT_DAYS = np.timedelta64(10, "D")


@dataclass(frozen=True)
class ArtifactFit:
    """A fitted artifact model and its fit log."""

    booster: lgb.Booster
    best_iteration: int
    initial_score: float
    valid_rmse: float
    train_rows: int
    feature_set: str = "philly"


def calendar_features(times: np.ndarray) -> np.ndarray:
    """year, month, day, hour, minute, dayofweek (Monday=0), dayofyear and ISO week, as float64."""
    days = times.astype("datetime64[D]")
    years = times.astype("datetime64[Y]")
    months = times.astype("datetime64[M]")
    minutes_of_day = (times - days).astype("timedelta64[m]").astype(np.int64)
    dow = (days.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday
    thursday = days + (3 - dow).astype("timedelta64[D]")
    iso_week = (thursday - thursday.astype("datetime64[Y]")).astype(np.int64) // 7 + 1
    cols = [
        years.astype(np.int64) + 1970,
        months.astype(np.int64) % 12 + 1,
        (days - months).astype(np.int64) + 1,
        minutes_of_day // 60,
        minutes_of_day % 60,
        dow,
        (days - years).astype(np.int64) + 1,
        iso_week,
    ]
    return np.column_stack(cols).astype(np.float64)


def lag_features(y: np.ndarray) -> np.ndarray:
    """The artifact's rolling and 3-hour-ago features of series y, computed on y alone (positional shifts)."""
    lagged = shift(y, LAG_STEPS)
    cols = []
    for p in ROLLING_WINDOWS:
        cols += [rolling_mean(lagged, p), rolling_median(lagged, p), rolling_std(lagged, p)]
    soft = 0.5 * shift(y, THREE_HOURS) + 0.25 * (shift(y, THREE_HOURS + 1) + shift(y, THREE_HOURS - 1))
    cols += [shift(y, THREE_HOURS), soft]
    return np.column_stack(cols)


def feature_set_for(preset: str) -> str:
    """The artifact's feature set for a CES policy preset: helios for the Helios clusters, else philly."""
    return "helios" if preset in HELIOS_PRESETS else "philly"


def _check_feature_set(feature_set: str) -> None:
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"unknown artifact feature set {feature_set!r}; expected one of {', '.join(FEATURE_SETS)}")


def holiday_feature(times: np.ndarray) -> np.ndarray:
    """1.0 where chinese_calendar.is_holiday (weekends and official holidays, not swapped workdays), else 0.0."""
    days, inverse = np.unique(times.astype("datetime64[D]"), return_inverse=True)
    try:
        flags = [chinese_calendar.is_holiday(day) for day in days.astype(object)]
    except NotImplementedError as exc:
        raise ValueError(f"holiday feature: {exc}") from exc
    return np.asarray(flags, dtype=np.float64)[inverse]


def event_feature(times: np.ndarray) -> np.ndarray:
    """1.0 within the 10 days before a 2020 conference deadline, else 0.0."""
    # "Within the 10 days before D" is read as D - 10 days 00:00 <= ts < D 00:00.
    t = times.astype("datetime64[us]")[:, None]
    inside = (t >= EVENT_DEADLINES - EVENT_DAYS) & (t < EVENT_DEADLINES)
    return inside.any(axis=1).astype(np.float64)


def extra_features(times: np.ndarray, feature_set: str) -> list[np.ndarray]:
    """The columns a feature set appends after the 16 Philly ones (none for philly)."""
    _check_feature_set(feature_set)
    return [holiday_feature(times), event_feature(times)] if feature_set == "helios" else []


def artifact_features(series: NodeSeries, feature_set: str = "philly") -> np.ndarray:
    """The float64 model input columns of a feature set, in the artifact's order, for every bin of series."""
    extra = extra_features(series.time, feature_set)
    return np.column_stack([calendar_features(series.time), lag_features(series.active), *extra])


def _month_start(ts: np.datetime64) -> np.datetime64:
    return ts.astype("datetime64[M]").astype("datetime64[us]")


def split_rows(train: NodeSeries, test_start: np.datetime64) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the training rows and the validation rows (the calendar month before test_start's)."""
    valid_lo = _month_start(_month_start(test_start) - np.timedelta64(1, "D"))
    valid_hi = _month_start(test_start)
    is_valid = (train.time >= valid_lo) & (train.time < valid_hi)
    return train.time < valid_lo, is_valid


def _train_dataset(x: np.ndarray, label: np.ndarray, feature_set: str) -> lgb.Dataset:
    if not CATEGORICAL[feature_set]:
        return lgb.Dataset(x, label, free_raw_data=False)
    names = list(FEATURE_SETS[feature_set])
    return lgb.Dataset(x, label, feature_name=names, categorical_feature=CATEGORICAL[feature_set], free_raw_data=False)


def fit_artifact(train: NodeSeries, test_start: np.datetime64, feature_set: str = "philly") -> ArtifactFit:
    """Fit the artifact's LightGBM model on the series before test_start (missing labels trained as 0)."""
    x = artifact_features(train, feature_set)
    is_train, is_valid = split_rows(train, test_start)
    if not is_train.any() or not is_valid.any():
        raise ValueError(NEEDS_HISTORY)
    label = np.nan_to_num(train.active, nan=0.0)
    dtrain = _train_dataset(x[is_train], label[is_train], feature_set)
    dvalid = lgb.Dataset(x[is_valid], label[is_valid], reference=dtrain)
    evals: dict = {}
    booster = lgb.train(
        LGB_PARAMS,
        dtrain,
        num_boost_round=NUM_BOOST_ROUND,
        valid_sets=[dvalid],
        callbacks=[lgb.early_stopping(EARLY_STOPPING_ROUNDS, verbose=False), lgb.record_evaluation(evals)],
    )
    best = booster.best_iteration
    return ArtifactFit(
        booster=booster,
        best_iteration=best,
        initial_score=float(label[is_train].mean()),
        valid_rmse=float(evals["valid_0"]["rmse"][best - 1]),
        train_rows=int(is_train.sum()),
        feature_set=feature_set,
    )


def predict_artifact(fit: ArtifactFit, test: NodeSeries) -> np.ndarray:
    """The artifact's predictions for the test bins, features computed on the test series alone (leaky)."""
    return fit.booster.predict(artifact_features(test, fit.feature_set), num_iteration=fit.best_iteration)


def _row_lag_features(values: np.ndarray, at: int) -> np.ndarray:
    """The artifact's lag features of the target at column `at` of per-origin value rows (plain std)."""
    cols = []
    for p in ROLLING_WINDOWS:
        window = values[:, at - LAG_STEPS - p + 1 : at - LAG_STEPS + 1]
        cols += [window.mean(axis=1), np.median(window, axis=1), window.std(axis=1, ddof=1)]
    ago = values[:, at - THREE_HOURS]
    soft = 0.5 * ago + 0.25 * (values[:, at - THREE_HOURS - 1] + values[:, at - THREE_HOURS + 1])
    return np.column_stack([*cols, ago, soft])


def recursive_forecast(fit: ArtifactFit, series: NodeSeries, origins: np.ndarray, horizon: int) -> np.ndarray:
    """The artifact's model made honest: steps 0..horizon-1 ahead of each origin, unknown lags self-fed."""
    past = THREE_HOURS + 1
    values = np.full((len(origins), past + horizon), np.nan)
    values[:, : past + 1] = series.active[origins[:, None] + np.arange(-past, 1)[None, :]]
    out = np.empty((len(origins), horizon))
    for k in range(horizon):
        times = series.time[origins] + k * np.timedelta64(10, "m")
        extra = extra_features(times, fit.feature_set)
        x = np.column_stack([calendar_features(times), _row_lag_features(values, past + k), *extra])
        out[:, k] = fit.booster.predict(x, num_iteration=fit.best_iteration)
        if k > 0:
            values[:, past + k] = out[:, k]
    return out
