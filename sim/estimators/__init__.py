"""Duration predictors, all fitted before the run on jobs submitted before the window only (no look-ahead).

Each estimator maps (history, window) job frames to one predicted duration in seconds per window row; the engine
only ever sees the resulting column. `quality` scores predictions against the true durations.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from sim.estimators.history import history_predict
from sim.estimators.lgbm import lightgbm_predict

Estimator = Callable[[pl.DataFrame, pl.DataFrame, int], np.ndarray]


class EstimateError(ValueError):
    """Bad estimator choice or malformed estimates file."""


def oracle_predict(history: pl.DataFrame, window: pl.DataFrame, seed: int = 0) -> np.ndarray:
    """The true durations."""
    return window.get_column("duration").fill_null(0).to_numpy().astype(np.float64)


def noisy_oracle_predict(history: pl.DataFrame, window: pl.DataFrame, seed: int = 0) -> np.ndarray:
    """The artifact's `philly_estimate.py` error model on the true durations, seeded and cast to int."""
    true_s = oracle_predict(history, window)
    rng = np.random.default_rng(seed)
    n = true_s.shape[0]
    u = rng.random(n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    bands = [(0.5, 0.1, 0.5), (0.7, 0.5, 1.0), (0.9, 1.0, 10.0), (1.01, 10.0, 100.0)]
    factor = 1.0 + rng.uniform(-1.0, 1.0, n) * 0.1
    low = 0.1
    for high, lo, hi in bands:
        band = (u > low) & (u <= high)
        factor = np.where(band, 1.0 + sign * rng.uniform(lo, hi, n), factor)
        low = high
    return np.trunc(true_s * factor)


ESTIMATORS: dict[str, Estimator] = {
    "oracle": oracle_predict,
    "noisy-oracle": noisy_oracle_predict,
    "history": history_predict,
    "lightgbm": lightgbm_predict,
}


def predict(name: str, history: pl.DataFrame, window: pl.DataFrame, seed: int = 0) -> np.ndarray:
    """Predicted durations (s) of the window jobs by the estimator registered as name."""
    if name not in ESTIMATORS:
        raise EstimateError(f"unknown estimator {name!r}; expected one of {', '.join(ESTIMATORS)}")
    return ESTIMATORS[name](history, window, seed)


def read_estimates(path: str | Path, window: pl.DataFrame) -> np.ndarray:
    """Predictions from a `job_id,predicted_duration_s` CSV, aligned to the window rows (kept as given)."""
    try:
        df = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise EstimateError(f"{path}: cannot read estimates: {exc}") from exc
    if not {"job_id", "predicted_duration_s"} <= set(df.columns):
        raise EstimateError(f"{path}: expected columns 'job_id,predicted_duration_s', found {','.join(df.columns)}")
    parsed = df.with_columns(
        pl.col("job_id").cast(pl.Int64, strict=False).alias("_id"),
        pl.col("predicted_duration_s").cast(pl.Float64, strict=False).alias("_pred"),
    )
    for col, parsed_col in (("job_id", "_id"), ("predicted_duration_s", "_pred")):
        bad = parsed.with_row_index("row", offset=2).filter(pl.col(parsed_col).is_null()).head(1)
        if bad.height:
            row, value = bad.get_column("row")[0], bad.get_column(col)[0]
            raise EstimateError(f"{path}: row {row}, column {col!r}: not a number: {value!r}")
    table = parsed.select(pl.col("_id").alias("job_id"), "_pred").unique("job_id", keep="last")
    joined = window.select("job_id").join(table, on="job_id", how="left", maintain_order="left")
    missing = joined.filter(pl.col("_pred").is_null()).height
    if missing:
        first = joined.filter(pl.col("_pred").is_null()).get_column("job_id")[0]
        raise EstimateError(f"{path}: no prediction for {missing} window job(s), e.g. job_id {first}")
    pred = joined.get_column("_pred").to_numpy()
    non_positive = int((pred <= 0).sum())
    if non_positive:
        warnings.warn(f"{path}: {non_positive} prediction(s) are <= 0 and are used as given", stacklevel=2)
    return pred


def quality(predicted_s: np.ndarray, true_s: np.ndarray) -> dict[str, float]:
    """MAE (s), median absolute percentage error (%) and Spearman rank correlation of predictions."""
    if predicted_s.shape[0] == 0:
        return {"mae_s": float("nan"), "median_ape_pct": float("nan"), "spearman": float("nan")}
    err = np.abs(predicted_s - true_s)
    ape = err / np.maximum(true_s, 1.0) * 100.0
    frame = pl.DataFrame({"p": predicted_s, "y": true_s.astype(np.float64)})
    rho = frame.select(pl.corr("p", "y", method="spearman")).item()
    return {
        "mae_s": float(err.mean()),
        "median_ape_pct": float(np.median(ape)),
        "spearman": float(rho) if rho is not None else float("nan"),
    }
