"""One CES experiment: forecast busy nodes, run the power policy over a window, account for energy."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl

from sim.ces.energy import EnergyParams, account
from sim.ces.forecast_artifact import fit_artifact, predict_artifact, recursive_forecast
from sim.ces.forecast_honest import fit_honest, forecast_matrix
from sim.ces.policy import PolicyParams, PolicyTrace, run_policy, window_means
from sim.ces.series import STEP, STEPS_PER_DAY, NodeSeries, SeriesError

MODES = ("honest", "artifact", "recursive")


@dataclass(frozen=True)
class CesConfig:
    """What to run: forecaster mode (or given predictions), window [start, end), policy and energy."""

    mode: str = "honest"
    start: datetime | None = None
    end: datetime | None = None
    policy: PolicyParams = field(default_factory=PolicyParams)
    energy: EnergyParams = field(default_factory=EnergyParams)
    predictions: pl.DataFrame | None = None  # columns time, active: replaces the forecaster
    artifact_features: str = "philly"  # feature set of the artifact and recursive modes: philly or helios


@dataclass(frozen=True)
class Forecast:
    """What the policy consumes per step, the per-step prediction for the timeline, and the errors."""

    fut_mean: np.ndarray
    fut2_mean: np.ndarray
    prediction: np.ndarray
    errors: dict[str, float]


@dataclass(frozen=True)
class CesResult:
    """Metrics (the CLI's JSON) and the step-by-step timeline."""

    metrics: dict[str, float | int | str | None]
    timeline: pl.DataFrame


def default_window(series: NodeSeries) -> tuple[datetime, datetime]:
    """The last 14 complete days of the series."""
    end = (series.time[-1] + np.timedelta64(STEP)).astype("datetime64[D]").astype("datetime64[us]")
    return (end - np.timedelta64(14, "D")).astype(datetime), end.astype(datetime)


def window_bounds(series: NodeSeries, start: datetime, end: datetime) -> tuple[int, int]:
    """Positions [lo, hi) of the bins in [start, end), rejecting empty windows and windows with empty bins."""
    lo, hi = series.index_of(start), series.index_of(end)
    if hi <= lo:
        raise SeriesError(f"window {start} .. {end} holds no 10-minute bin of the series")
    gaps = np.flatnonzero(np.isnan(series.active[lo:hi]) | np.isnan(series.total[lo:hi]))
    if len(gaps):
        first = series.time[lo + gaps[0]].astype(datetime)
        raise SeriesError(f"window {start} .. {end} has {len(gaps)} empty 10-minute bins (first at {first})")
    return lo, hi


def smape(prediction: np.ndarray, actual: np.ndarray) -> float:
    """Symmetric mean absolute percentage error in percent, as the artifact computes it (0/0 counts as 0)."""
    scale = np.abs(prediction) + np.abs(actual)
    zeros = np.zeros_like(scale, dtype=np.float64)
    ratio = np.divide(np.abs(prediction - actual), scale, out=zeros, where=scale > 0)
    return float(200.0 * np.mean(ratio))


def rmse(prediction: np.ndarray, actual: np.ndarray) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((prediction - actual) ** 2)))


def _from_point_forecast(prediction: np.ndarray, actual: np.ndarray, params: PolicyParams) -> Forecast:
    floored = np.floor(prediction)
    return Forecast(
        fut_mean=window_means(floored, params.future),
        fut2_mean=window_means(floored, 2 * params.future),
        prediction=prediction,
        errors={"rmse": rmse(prediction, actual), "smape": smape(prediction, actual)},
    )


def given_forecast(series: NodeSeries, lo: int, hi: int, table: pl.DataFrame, params: PolicyParams):
    """Use a given `time, active` forecast for the window bins (every bin must be present)."""
    times = pl.DataFrame({"time": series.time[lo:hi]}).with_columns(pl.col("time").cast(pl.Datetime("us")))
    joined = times.join(table.select("time", "active"), on="time", how="left")
    missing = joined.filter(pl.col("active").is_null())
    if missing.height:
        raise SeriesError(f"predictions lack {missing.height} window bins (first: {missing['time'][0]})")
    return _from_point_forecast(joined["active"].to_numpy(), series.active[lo:hi], params)


def artifact_forecast(
    series: NodeSeries, lo: int, hi: int, params: PolicyParams, feature_set: str = "philly"
) -> tuple[Forecast, dict]:
    """The artifact's leaky LightGBM forecast, with its fit log."""
    fit = fit_artifact(series.slice(0, lo), series.time[lo], feature_set)
    prediction = predict_artifact(fit, series.slice(lo, hi))
    log = dict(best_iteration=fit.best_iteration, initial_score=fit.initial_score, valid_rmse=fit.valid_rmse)
    log["artifact_features"] = feature_set
    return _from_point_forecast(prediction, series.active[lo:hi], params), log


def _horizon_errors(matrix: np.ndarray, y: np.ndarray, origins: np.ndarray, hi: int, future: int) -> dict:
    steps = np.arange(1, future + 1)
    targets = origins[:, None] + steps[None, :]
    ok = targets < hi
    pred = matrix[:, :future][ok]
    actual = y[targets[ok]]
    persistence = np.broadcast_to(y[origins][:, None], targets.shape)[ok]
    return {
        "rmse": rmse(pred, actual),
        "smape": smape(pred, actual),
        "rmse_1step": rmse(matrix[:-1, 0], y[origins[1:]]),
        "rmse_persistence": rmse(persistence, actual),
    }


def honest_forecast(series: NodeSeries, lo: int, hi: int, params: PolicyParams) -> tuple[Forecast, dict]:
    """A forecast made at each decision step from data up to that step, for the next 2*future steps."""
    horizon = 2 * params.future - 1
    model = fit_honest(series.slice(0, lo), series.time[lo], max(horizon, 1))
    first = max(lo - 1, 0)  # one origin earlier for the one-step forecast of the first window step
    both = forecast_matrix(model, series, np.arange(first, hi))
    matrix, origins = both[lo - first :], np.arange(lo, hi)
    windows = np.column_stack([series.active[origins], np.floor(matrix[:, :horizon])])
    one_step = both[:-1, 0] if lo > 0 else np.r_[np.nan, matrix[:-1, 0]]
    errors = _horizon_errors(matrix, series.active, origins, hi, params.future)
    forecast = Forecast(
        fut_mean=windows[:, : params.future].mean(axis=1),
        fut2_mean=windows.mean(axis=1),
        prediction=one_step,
        errors=errors,
    )
    return forecast, {"best_iteration": model.best_iteration}


def recursive_artifact_forecast(
    series: NodeSeries, lo: int, hi: int, params: PolicyParams, feature_set: str = "philly"
):
    """The artifact's model fed its own forecasts instead of future truth: its forecast without the leak."""
    fit = fit_artifact(series.slice(0, lo), series.time[lo], feature_set)
    origins = np.arange(lo, hi)
    matrix = recursive_forecast(fit, series, origins, 2 * params.future)
    windows = np.floor(matrix)
    errors = _horizon_errors(matrix[:, 1:], series.active, origins, hi, params.future)
    forecast = Forecast(
        fut_mean=windows[:, : params.future].mean(axis=1),
        fut2_mean=windows.mean(axis=1),
        prediction=matrix[:, 0],
        errors=errors,
    )
    return forecast, {"best_iteration": fit.best_iteration, "artifact_features": feature_set}


def make_forecast(series: NodeSeries, lo: int, hi: int, config: CesConfig) -> tuple[Forecast, dict]:
    """Dispatch to the given predictions, the artifact forecaster or the honest one."""
    if config.predictions is not None:
        return given_forecast(series, lo, hi, config.predictions, config.policy), {}
    if config.mode == "artifact":
        return artifact_forecast(series, lo, hi, config.policy, config.artifact_features)
    if config.mode == "honest":
        return honest_forecast(series, lo, hi, config.policy)
    if config.mode == "recursive":
        return recursive_artifact_forecast(series, lo, hi, config.policy, config.artifact_features)
    raise ValueError(f"unknown mode {config.mode!r}; expected one of {', '.join(MODES)}")


def _ratio_mean_pct(num: np.ndarray, den: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nanmean(np.where(den > 0, num / den, np.nan)) * 100)


def policy_metrics(total: np.ndarray, running: np.ndarray, trace: PolicyTrace) -> dict[str, float | int]:
    """The artifact's printed metrics plus the capacity shortfall."""
    days = len(total) / STEPS_PER_DAY
    nonzero = trace.change[trace.change != 0]
    rises = trace.change[trace.change > 0]
    return {
        "original_used_pct": _ratio_mean_pct(running, total),
        "optimized_used_pct": _ratio_mean_pct(running, trace.active),
        "poweroff_mean_nodes": float(np.mean(total - trace.active)),
        "daily_change_times": len(nonzero) / days,
        "daily_increase_times": len(rises) / days,
        "change_times": len(nonzero),
        "increase_times": len(rises),
        "increase_mean_nodes": float(rises.mean()) if len(rises) else 0.0,
        "change_mean_nodes": float(np.abs(nonzero).mean()) if len(nonzero) else 0.0,
        "change_median_nodes": float(np.median(np.abs(nonzero))) if len(nonzero) else 0.0,
        "mean_running_nodes": float(running.mean()),
        "mean_active_nodes": float(trace.active.mean()),
        "lack_node_steps": int(trace.lack.sum()),
        "lack_steps": int((trace.lack > 0).sum()),
        "lack_max_nodes": int(trace.lack.max(initial=0)),
    }


def jobs_waiting(times: np.ndarray, lack: np.ndarray, job_starts: np.ndarray | None) -> int | None:
    """GPU jobs starting in a step where demand exceeded the powered nodes (None without jobs)."""
    if job_starts is None:
        return None
    starts = job_starts.astype("datetime64[us]")
    pos = np.searchsorted(times, starts, side="right") - 1
    inside = (pos >= 0) & (starts < times[-1] + np.timedelta64(STEP))
    return int(np.sum(lack[pos[inside]] > 0))


def timeline_frame(series: NodeSeries, lo: int, hi: int, forecast: Forecast, trace: PolicyTrace):
    """The step-by-step timeline (time, total, running, prediction, active, poweroff, change, lack)."""
    total = np.floor(series.total[lo:hi]).astype(np.int64)
    return pl.DataFrame(
        {
            "time": series.time[lo:hi],
            "total": total,
            "running": np.floor(series.active[lo:hi]).astype(np.int64),
            "prediction": forecast.prediction,
            "active": trace.active,
            "poweroff": total - trace.active,
            "change": trace.change,
            "lack": trace.lack,
            "forecast_mean": forecast.fut_mean,
        }
    )


def run_ces(series: NodeSeries, config: CesConfig, job_starts: np.ndarray | None = None) -> CesResult:
    """Forecast, run the policy over the window and return the metrics and the timeline."""
    t0 = time.perf_counter()
    default_start, default_end = default_window(series)
    lo, hi = window_bounds(series, config.start or default_start, config.end or default_end)
    forecast, fit_log = make_forecast(series, lo, hi, config)
    total = np.floor(series.total[lo:hi])
    running = np.floor(series.active[lo:hi])
    trace = run_policy(total, running, forecast.fut_mean, forecast.fut2_mean, config.policy)
    metrics: dict[str, float | int | str | None] = {
        "mode": "predictions" if config.predictions is not None else config.mode,
        "window_start": str(series.time[lo].astype(datetime)),
        "window_end": str((series.time[hi - 1] + np.timedelta64(STEP)).astype(datetime)),
        "steps": hi - lo,
        "total_nodes_mean": float(total.mean()),
    }
    metrics |= policy_metrics(total, running, trace)
    metrics |= forecast.errors
    metrics |= account(total, running, trace.active, config.energy)
    metrics["lack_wait_node_hours"] = float(trace.lack.sum()) * config.energy.wakeup_s / 3600
    metrics["lack_jobs_waiting"] = jobs_waiting(series.time[lo:hi], trace.lack, job_starts)
    metrics |= fit_log
    metrics["wall_s"] = time.perf_counter() - t0
    return CesResult(metrics=metrics, timeline=timeline_frame(series, lo, hi, forecast, trace))
