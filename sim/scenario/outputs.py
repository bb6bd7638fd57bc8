"""What a what-if scenario outputs: per-job records, timelines, CDFs, per-VC means, comparison rows, predictor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from sim import metrics
from sim.estimators import quality
from sim.model import SimResult, Workload
from sim.scenario.config import RECORDED

CDF_POINTS = 200
TIMELINE_STEP_S = 600
DENSITY_BINS = 40


@dataclass(frozen=True, eq=False)
class ScenarioResult:
    """All outputs of a scenario (picklable: plain values and Polars frames)."""

    config: dict[str, Any]
    window: tuple[str, str]
    jobs: int
    vc_nodes: dict[str, int]
    summary: pl.DataFrame  # one row per scheme: recorded and each policy
    per_vc: pl.DataFrame  # scheme, vc, jobs, avg_jct_s, avg_queue_s
    cdf: pl.DataFrame  # scheme, metric (jct_s | queue_s), value_s, fraction
    timeline: pl.DataFrame  # scheme, time, used_gpus, queued_jobs, capacity_gpus
    records: pl.DataFrame  # per job and scheme
    predictor: dict[str, Any]
    ladder: pl.DataFrame | None
    ces: dict[str, Any] | None
    stage_s: dict[str, float]
    importance: dict[str, float] | None = None  # LightGBM's gain share (%) per feature, when LightGBM ran


def sim_records(result: SimResult, scheme: str) -> pl.DataFrame:
    """Per-job outcome of a simulation (without node lists), in workload row order."""
    w = result.workload
    n = len(w)
    start, end, queue = np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    preempt = np.zeros(n, np.int64)
    for r in result.vcs.values():
        start[r.rows], end[r.rows], queue[r.rows], preempt[r.rows] = (
            r.start_s,
            r.end_s,
            r.queue_s,
            r.preemptions,
        )
    return _records_frame(w, scheme, start, end, queue, preempt)


def recorded_records(w: Workload) -> pl.DataFrame | None:
    """What really happened, in the sim_records layout (None when no start time was recorded)."""
    rec = w.recorded_start_s
    if rec is None or not (rec >= 0).any():
        return None
    placed = rec >= 0
    end = np.where(placed, rec + w.duration_s, -1)
    queue = np.where(placed, rec - w.submit_s, -1)
    frame = _records_frame(w, RECORDED, rec.astype(np.int64), end, queue, np.zeros(len(w), np.int64))
    if w.recorded_ended is None or w.recorded_ended.all():
        return frame
    # A job still running when the trace was cut has no real end: no recorded JCT (its start and queue stand).
    ended = pl.Series(w.recorded_ended)
    return frame.with_columns(pl.when(ended).then(pl.col("jct_s")).alias("jct_s"))


def _records_frame(w: Workload, scheme: str, start, end, queue, preempt) -> pl.DataFrame:
    names = np.asarray(w.vc_names, dtype=object)
    placed = start >= 0
    return pl.DataFrame(
        {
            "scheme": scheme,
            "job_id": w.job_id,
            "vc": names[w.vc_index].tolist() if len(w) else [],
            "gpu_num": w.gpu_num,
            "submit_s": w.submit_s,
            "duration_s": w.duration_s,
            "predicted_s": w.predicted_s,
            "start_s": start,
            "end_s": end,
            "queue_s": queue,
            "jct_s": np.where(placed, end - w.submit_s, -1),
            "preemptions": preempt,
            "placed": placed,
        },
        schema_overrides={"scheme": pl.String, "vc": pl.String},
    ).with_columns(pl.when(pl.col("placed")).then(pl.col("jct_s")).alias("jct_s"))


def timeline_grid(span_s: int) -> np.ndarray:
    """The seconds at which timelines are sampled: every TIMELINE_STEP_S from 0 past span_s."""
    return np.arange(0, max(span_s, 1) + TIMELINE_STEP_S, TIMELINE_STEP_S, dtype=np.int64)


def _step_sum(times: np.ndarray, deltas: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Value at each grid point of the step function that jumps by deltas at times (jumps at t count at t)."""
    order = np.argsort(times, kind="stable")
    t, level = times[order], np.cumsum(deltas[order])
    pos = np.searchsorted(t, grid, side="right") - 1
    return np.where(pos >= 0, level[np.maximum(pos, 0)], 0)


def records_timeline(records: pl.DataFrame, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPUs in use and jobs waiting at each grid second, from per-job submit/start/end times."""
    ran = records.filter(pl.col("placed") & (pl.col("end_s") > pl.col("start_s")))
    s, e, g = (ran.get_column(c).to_numpy() for c in ("start_s", "end_s", "gpu_num"))
    used = _step_sum(np.concatenate([s, e]), np.concatenate([g, -g]), grid)
    placed = records.filter(pl.col("placed"))
    sub, st = placed.get_column("submit_s").to_numpy(), placed.get_column("start_s").to_numpy()
    ones = np.ones(sub.shape[0], dtype=np.int64)
    queued = _step_sum(np.concatenate([sub, st]), np.concatenate([ones, -ones]), grid)
    return used, queued


def engine_timeline(result: SimResult, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPUs in use and jobs waiting at each grid second, summed over VCs, from the engine's event samples."""
    used = np.zeros(grid.shape[0], dtype=np.int64)
    queued = np.zeros(grid.shape[0], dtype=np.int64)
    for r in result.vcs.values():
        if r.timeline_t_s.shape[0] == 0:
            continue
        pos = np.searchsorted(r.timeline_t_s, grid, side="right") - 1
        ok = pos >= 0
        used += np.where(ok, r.timeline_used_gpus[np.maximum(pos, 0)], 0)
        queued += np.where(ok, r.timeline_queued_jobs[np.maximum(pos, 0)], 0)
    return used, queued


def timeline_frame(scheme: str, t0: datetime, grid: np.ndarray, used, queued, capacity: int) -> pl.DataFrame:
    """One scheme's timeline rows: GPUs in use, jobs waiting and capacity at each grid second from t0."""
    return pl.DataFrame(
        {
            "scheme": scheme,
            "time": [t0 + timedelta(seconds=int(s)) for s in grid.tolist()],
            "used_gpus": used.astype(np.int64),
            "queued_jobs": queued.astype(np.int64),
            "capacity_gpus": capacity,
        },
        schema_overrides={"scheme": pl.String},
    )


def cdf_points(records: pl.DataFrame, scheme: str) -> pl.DataFrame:
    """JCT and queue-delay CDFs of placed jobs as CDF_POINTS quantiles each."""
    placed = records.filter(pl.col("placed"))
    fractions = np.linspace(0.0, 1.0, CDF_POINTS)
    parts = []
    for metric in ("jct_s", "queue_s"):
        values = np.sort(placed.get_column(metric).to_numpy().astype(np.float64))
        if values.shape[0] == 0:
            continue
        parts.append(
            pl.DataFrame(
                {
                    "scheme": scheme,
                    "metric": metric,
                    "value_s": np.quantile(values, fractions),
                    "fraction": fractions,
                }
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame()


def per_vc_means(records: pl.DataFrame) -> pl.DataFrame:
    """Jobs, average JCT and average queue delay per scheme and VC (placed jobs)."""
    return (
        records.filter(pl.col("placed"))
        .group_by("scheme", "vc")
        .agg(
            pl.len().alias("jobs"),
            pl.col("jct_s").mean().alias("avg_jct_s"),
            pl.col("queue_s").mean().alias("avg_queue_s"),
        )
        .sort("scheme", "vc")
    )


def summary_row(records: pl.DataFrame, used: np.ndarray, capacity_gpus: int, span_points: int) -> dict:
    """The comparison-table row of one scheme: metrics.summarize's overall figures plus the utilisation."""
    row = metrics.summarize(records)["all"]
    busy = used[:span_points].astype(np.float64)
    row["gpu_util_pct"] = round(float(busy.mean() / capacity_gpus * 100), 1) if capacity_gpus else None
    return row


def with_factors(rows: list[dict]) -> pl.DataFrame:
    """The comparison table of rows with each scheme's speed-up factors against the record and against FIFO."""
    table = pl.DataFrame(rows)
    factors = []
    for reference in (RECORDED, "fifo"):
        ref = table.filter(pl.col("scheme") == reference)
        for col in ("avg_jct_s", "avg_queue_s"):
            name = f"{col.removesuffix('_s')}_x_vs_{reference}"
            if ref.height and ref[col][0]:
                factors.append((pl.lit(ref[col][0]) / pl.col(col)).round(2).alias(name))
            else:
                factors.append(pl.lit(None, dtype=pl.Float64).alias(name))
    return table.with_columns(factors)


def predictor_quality(name: str, predicted_s: np.ndarray, true_s: np.ndarray) -> dict[str, Any]:
    """MAE, median APE and rank correlation, plus a log-log density of predicted vs actual durations."""
    q = quality(predicted_s, true_s.astype(np.float64))
    x = np.log10(np.maximum(true_s.astype(np.float64), 1.0))
    y = np.log10(np.maximum(predicted_s, 1.0))
    top = float(max(x.max(initial=0.0), y.max(initial=0.0), 1.0))
    edges = np.linspace(0.0, top, DENSITY_BINS + 1)
    counts, _, _ = np.histogram2d(x, y, bins=[edges, edges])
    centres = (edges[:-1] + edges[1:]) / 2
    density = pl.DataFrame(
        {
            "log10_actual_s": np.repeat(centres, DENSITY_BINS),
            "log10_predicted_s": np.tile(centres, DENSITY_BINS),
            "jobs": counts.ravel().astype(np.int64),
        }
    ).filter(pl.col("jobs") > 0)
    return {"name": name, **{k: round(v, 3) for k, v in q.items()}, "density": density}
