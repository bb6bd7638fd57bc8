"""The `lightgbm` estimator: gradient-boosted trees on log duration from job, user-history and name features."""

from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np
import polars as pl

from sim.estimators.history import history_predict

MIN_TRAIN_ROWS = 200
_CATEGORICAL = ("user", "vc", "name_token")
_NUMERIC = ("gpu_num", "cpu_num", "node_num", "hour", "weekday")
_USER_STATS = ("user_mean_log_s", "user_prev_jobs", "user_last_log_s")
FEATURES: tuple[str, ...] = (*_CATEGORICAL, *_NUMERIC, *_USER_STATS)  # the model's columns, in order
_PARAMS = {
    "objective": "regression",
    "learning_rate": 0.05,
    "num_leaves": 63,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.9,
    "verbose": -1,
    "num_threads": 2,
    "deterministic": True,
}


def _base_features(df: pl.DataFrame) -> pl.DataFrame:
    token = pl.col("job_name").str.split_exact(" ", 0).struct.field("field_0") if "job_name" in df.columns else None
    return df.select(
        "user",
        "vc",
        (token.str.extract(r"^([A-Za-z]+)", 1) if token is not None else pl.lit(None, dtype=pl.String)).alias(
            "name_token"
        ),
        pl.col("gpu_num").cast(pl.Float64),
        pl.col("cpu_num").cast(pl.Float64),
        pl.col("node_num").cast(pl.Float64),
        pl.col("submit_time").dt.hour().cast(pl.Float64).alias("hour"),
        pl.col("submit_time").dt.weekday().cast(pl.Float64).alias("weekday"),
    )


def _user_stats_train(history: pl.DataFrame) -> pl.DataFrame:
    log_d = pl.col("duration").cast(pl.Float64).log1p()
    return history.select(
        log_d.cum_sum().shift(1).over("user").alias("_sum"),
        pl.int_range(pl.len()).over("user").cast(pl.Float64).alias("user_prev_jobs"),
        log_d.shift(1).over("user").alias("user_last_log_s"),
    ).select(
        (pl.col("_sum") / pl.col("user_prev_jobs")).alias("user_mean_log_s"),
        "user_prev_jobs",
        "user_last_log_s",
    )


def _user_stats_window(history: pl.DataFrame, window: pl.DataFrame) -> pl.DataFrame:
    log_d = pl.col("duration").cast(pl.Float64).log1p()
    per_user = history.group_by("user").agg(
        log_d.mean().alias("user_mean_log_s"),
        pl.len().cast(pl.Float64).alias("user_prev_jobs"),
        log_d.last().alias("user_last_log_s"),
    )
    joined = window.select("user").with_row_index("_row").join(per_user, on="user", how="left")
    return joined.sort("_row").select("user_mean_log_s", "user_prev_jobs", "user_last_log_s")


def _matrix(base: pl.DataFrame, stats: pl.DataFrame, codes: dict[str, dict[str, int]]) -> np.ndarray:
    cols = []
    for name in _CATEGORICAL:
        mapping = codes[name]
        cols.append(np.array([mapping.get(v, np.nan) for v in base.get_column(name).to_list()], dtype=np.float64))
    for name in _NUMERIC:
        cols.append(base.get_column(name).fill_null(float("nan")).to_numpy().astype(np.float64))
    for name in _USER_STATS:
        cols.append(stats.get_column(name).fill_null(float("nan")).to_numpy().astype(np.float64))
    return np.column_stack(cols)


def gain_shares_pct(model: lgb.Booster) -> dict[str, float] | None:
    """Each feature's share (%) of the model's total split gain (None when no split gained anything)."""
    gain = model.feature_importance(importance_type="gain").astype(np.float64)
    total = float(gain.sum())
    if total <= 0:
        return None
    return {name: float(g / total * 100.0) for name, g in zip(FEATURES, gain, strict=True)}


def lightgbm_fit_predict(
    history: pl.DataFrame, window: pl.DataFrame, seed: int = 0
) -> tuple[np.ndarray, dict[str, float] | None]:
    """`lightgbm_predict`'s predictions and the model's gain shares per feature (None on the fallback)."""
    past = history.filter(pl.col("duration").is_not_null())
    if past.height < MIN_TRAIN_ROWS:
        warnings.warn(f"only {past.height} past jobs: lightgbm falls back to the history estimator", stacklevel=2)
        return history_predict(history, window, seed), None
    base_train, base_window = _base_features(past), _base_features(window)
    codes = {
        name: {v: i for i, v in enumerate(base_train.get_column(name).drop_nulls().unique().sort().to_list())}
        for name in _CATEGORICAL
    }
    x_train = _matrix(base_train, _user_stats_train(past), codes)
    x_window = _matrix(base_window, _user_stats_window(past, window), codes)
    y = np.log1p(past.get_column("duration").clip(lower_bound=0).to_numpy().astype(np.float64))
    data = lgb.Dataset(x_train, y, categorical_feature=list(range(len(_CATEGORICAL))), free_raw_data=True)
    model = lgb.train({**_PARAMS, "seed": seed}, data, num_boost_round=300)
    return np.expm1(model.predict(x_window)).clip(min=0.0), gain_shares_pct(model)


def lightgbm_predict(history: pl.DataFrame, window: pl.DataFrame, seed: int = 0) -> np.ndarray:
    """Predicted durations from a LightGBM model fitted on the history jobs (falls back to `history` when few)."""
    return lightgbm_fit_predict(history, window, seed)[0]
