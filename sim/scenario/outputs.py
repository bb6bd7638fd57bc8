"""What a what-if scenario outputs: per-job records, timelines, CDFs, per-VC means, comparison rows, predictor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from sim import metrics
from sim.estimators import quality
from sim.model import SimResult, Workload
from sim.scenario.config import RECORDED

CDF_POINTS = 200
TIMELINE_STEP_S = 600
DENSITY_BINS = 40
# A replay is far from the record when its mean queue is this many times the recorded one (either way; queues
# offset by QUEUE_OFFSET_S so that a few seconds against none do not count), its mean JCT FAR_JCT_RATIO times, or
# its utilisation FAR_UTIL_PP points away.
FAR_QUEUE_RATIO = 3.0
FAR_JCT_RATIO = 1.5
FAR_UTIL_PP = 10.0
QUEUE_OFFSET_S = 60.0
START_ORDER = "start order (Kendall τ)"
REPLAY_METRICS: tuple[tuple[str, str], ...] = (
    ("avg_queue_s", "mean queue"),
    ("median_queue_s", "median queue"),
    ("gpu_util_pct", "GPU utilisation"),
    ("avg_jct_s", "mean JCT"),
    ("median_jct_s", "median JCT"),
)


@dataclass(frozen=True, eq=False)
class ScenarioResult:
    """All outputs of a scenario (picklable: plain values and Polars frames)."""

    config: dict[str, Any]
    window: tuple[str, str]
    jobs: int
    vc_nodes: dict[str, int]
    summary: pl.DataFrame  # one row per scheme: recorded and each policy
    per_vc: pl.DataFrame  # scheme, vc, jobs, avg_jct_s, avg_queue_s
    per_account: pl.DataFrame  # scheme, account (the VC where the trace has none), jobs, avg_queue_s
    cdf: pl.DataFrame  # scheme, metric (jct_s | queue_s), value_s, fraction
    timeline: pl.DataFrame  # scheme, time, used_gpus, queued_jobs, capacity_gpus
    records: pl.DataFrame  # per job and scheme
    predictor: dict[str, Any]
    ladder: pl.DataFrame | None
    ces: dict[str, Any] | None
    stage_s: dict[str, float]
    importance: dict[str, float] | None = None  # LightGBM's gain share (%) per feature, when LightGBM ran
    baseline: str | None = None  # the scheme the others are compared with: the twin, else the closest to the record
    replay: dict[str, Any] | None = None  # the baseline's replay against the record (replay_fidelity)
    twin: dict[str, Any] | None = None  # the twin's calibration: its source and rules (sim.slurm.calibrate)


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


def _grouping(w: Workload, vc: np.ndarray, name: str) -> list:
    """Per job the trace's account or partition, the VC where the trace has none."""
    col = getattr(w.scheduler, name, None) if w.scheduler is not None else None
    if col is None:
        return vc.tolist()
    return [str(c) or str(v) for c, v in zip(col, vc, strict=True)]


def _records_frame(w: Workload, scheme: str, start, end, queue, preempt) -> pl.DataFrame:
    names = np.asarray(w.vc_names, dtype=object)
    vc = names[w.vc_index] if len(w) else np.array([], dtype=object)
    placed = start >= 0
    user = w.scheduler.user.tolist() if w.scheduler is not None else [""] * len(w)
    return pl.DataFrame(
        {
            "scheme": scheme,
            "job_id": w.job_id,
            "user": user,
            "account": _grouping(w, vc, "account"),
            "partition": _grouping(w, vc, "partition"),
            "vc": vc.tolist(),
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
        schema_overrides={s: pl.String for s in ("scheme", "vc", "user", "account", "partition")},
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


JOBS_OUT_COLUMNS = ("scheme", "job_id", "user", "account", "partition", "gpu_num", "submit_time", "start_time")
JOBS_OUT_COLUMNS += ("end_time", "queue_s")


def replayed_jobs(records: pl.DataFrame, t0: datetime) -> pl.DataFrame:
    """Every scheme's jobs as `helios whatif --jobs-out` writes them: ids as in the trace, times as datetimes
    (null for a job that never started), queue seconds."""

    def at(col: str) -> pl.Expr:
        when = pl.lit(t0) + pl.duration(seconds=pl.col(col))
        return pl.when(pl.col(col) >= 0).then(when).otherwise(None)

    return records.with_columns(
        at("submit_s").alias("submit_time"),
        at("start_s").alias("start_time"),
        at("end_s").alias("end_time"),
        pl.when(pl.col("placed")).then(pl.col("queue_s")).alias("queue_s"),
    ).select(JOBS_OUT_COLUMNS)


def per_account_means(records: pl.DataFrame) -> pl.DataFrame:
    """Jobs and average queue delay per scheme and account (placed jobs)."""
    return (
        records.filter(pl.col("placed"))
        .group_by("scheme", "account")
        .agg(pl.len().alias("jobs"), pl.col("queue_s").mean().alias("avg_queue_s"))
        .sort("scheme", "account")
    )


def start_order_tau(recorded: pl.DataFrame | None, records: pl.DataFrame) -> float | None:
    """Kendall's τ (tau-b) between the recorded and the replayed start seconds of the jobs that started in both
    (None without a record or with fewer than two such jobs)."""
    if recorded is None:
        return None
    both = recorded.select("start_s").to_numpy()[:, 0], records.select("start_s").to_numpy()[:, 0]
    ok = (both[0] >= 0) & (both[1] >= 0)
    if ok.sum() < 2:
        return None
    tau = kendalltau(both[0][ok], both[1][ok]).statistic
    return None if not np.isfinite(tau) else round(float(tau), 4)


def summary_row(records: pl.DataFrame, busy_gpu_s: float, capacity_gpus: int, span_s: int, window_end_s: int) -> dict:
    """The comparison-table row of one scheme: metrics.summarize's figures over the jobs that started by the end of
    the window (those still waiting then are counted in waiting_at_end, not averaged in as huge waits), plus the
    utilisation: busy_gpu_s, the GPU-seconds run in [0, span_s), over the capacity's."""
    late = pl.col("placed") & (pl.col("start_s") > window_end_s)
    row = metrics.summarize(records.filter(~late))["all"]
    row["waiting_at_end"] = int(records.select(late.sum()).item())
    capacity_gpu_s = capacity_gpus * span_s
    row["gpu_util_pct"] = round(100.0 * busy_gpu_s / capacity_gpu_s, 1) if capacity_gpu_s > 0 else None
    return row


def records_gpu_s(records: pl.DataFrame, span_s: int) -> float:
    """GPU-seconds the placed jobs of records run in [0, span_s), to the second."""
    ran = records.filter(pl.col("placed") & (pl.col("end_s") > pl.col("start_s")))
    start, end, gpus = (ran.get_column(c).to_numpy() for c in ("start_s", "end_s", "gpu_num"))
    inside = np.clip(end, 0, span_s) - np.clip(start, 0, span_s)
    return float((inside * gpus).sum())


def engine_gpu_s(result: SimResult, span_s: int) -> float:
    """GPU-seconds in use in [0, span_s) by the engine's event samples (each holds until the next), to the second."""
    total = 0.0
    for r in result.vcs.values():
        t = np.clip(np.append(r.timeline_t_s, span_s), 0, span_s)
        total += float((np.diff(t) * r.timeline_used_gpus).sum()) if r.timeline_t_s.shape[0] else 0.0
    return total


def distance(row: dict, recorded: dict) -> float:
    """How far a scheme's row is from the recorded one: the mean absolute log ratio of its mean and median queue
    (offset by QUEUE_OFFSET_S) and mean JCT, and its utilisation difference as a fraction."""
    parts = [
        abs(np.log((row[k] + QUEUE_OFFSET_S) / (recorded[k] + QUEUE_OFFSET_S)))
        for k in ("avg_queue_s", "median_queue_s")
    ]
    parts.append(abs(np.log(max(row["avg_jct_s"], 1.0) / max(recorded["avg_jct_s"], 1.0))))
    parts.append(abs(row["gpu_util_pct"] - recorded["gpu_util_pct"]) / 100)
    return float(np.mean(parts))


def closest_to_record(rows: list[dict]) -> str | None:
    """The simulated scheme whose figures are closest to the recorded ones (distance); None without a record."""
    recorded = next((r for r in rows if r["scheme"] == RECORDED), None)
    simulated = [r for r in rows if r["scheme"] != RECORDED]
    best = nearest_row(simulated, recorded) if recorded is not None else None
    return None if best is None else simulated[best]["scheme"]


def nearest_row(rows: list[dict], recorded: dict) -> int | None:
    """The index of the row nearest the recorded one (distance; the first on ties, rows without a mean JCT left out),
    None when none can be compared (or the record has no finished job)."""
    usable = [k for k, r in enumerate(rows) if r.get("avg_jct_s") is not None]
    if not usable or recorded.get("avg_jct_s") is None:
        return None
    return min(usable, key=lambda k: distance(rows[k], recorded))


def _pair(rows: list[dict], baseline: str | None) -> tuple[dict | None, dict | None]:
    """The record's row and the baseline's (None where missing, or when the record has no finished job)."""
    by_scheme = {r["scheme"]: r for r in rows}
    recorded, replayed = by_scheme.get(RECORDED), by_scheme.get(baseline) if baseline else None
    if recorded is None or replayed is None or recorded.get("avg_jct_s") is None:
        return None, None
    return recorded, replayed


def _off_by(replayed: dict, recorded: dict) -> tuple[float, float]:
    """The replay's mean queue (offset by QUEUE_OFFSET_S) and mean JCT (at least 1 s) as ratios to the record's."""
    queue = (replayed["avg_queue_s"] + QUEUE_OFFSET_S) / (recorded["avg_queue_s"] + QUEUE_OFFSET_S)
    return queue, max(replayed["avg_jct_s"], 1.0) / max(recorded["avg_jct_s"], 1.0)


def error_band(rows: list[dict], baseline: str | None) -> dict[str, float] | None:
    """The baseline's own error against the record, the band around every change measured against it: a factor
    (>= 1) for the mean queue (offset by QUEUE_OFFSET_S) and the mean JCT, points for the utilisation (None without
    a record)."""
    recorded, replayed = _pair(rows, baseline)
    if recorded is None or replayed.get("avg_jct_s") is None:
        return None
    queue, jct = _off_by(replayed, recorded)
    util_pp = None
    if replayed.get("gpu_util_pct") is not None and recorded.get("gpu_util_pct") is not None:
        util_pp = abs(replayed["gpu_util_pct"] - recorded["gpu_util_pct"])
    return {"avg_queue_x": max(queue, 1 / queue), "avg_jct_x": max(jct, 1 / jct), "gpu_util_pp": util_pp}


def replay_fidelity(rows: list[dict], baseline: str) -> dict[str, Any] | None:
    """The baseline's replay beside the record: per metric the recorded and replayed values and their ratio (and
    Kendall's τ of the start order), its error band, the distance of every simulated scheme, and whether the replay
    is far from the record (and why)."""
    recorded, replayed = _pair(rows, baseline)
    if recorded is None:
        return None
    lines = []
    for key, label in REPLAY_METRICS:
        rec, rep = recorded.get(key), replayed.get(key)
        ratio = rep / rec if rec and rep is not None else None
        lines.append({"metric": label, "recorded": rec, "replayed": rep, "ratio": ratio})
    lines.append({"metric": START_ORDER, "recorded": None, "replayed": replayed.get("start_order_tau"), "ratio": None})
    queue, jct = _off_by(replayed, recorded)
    util = replayed["gpu_util_pct"] - recorded["gpu_util_pct"]
    why = []
    if max(queue, 1 / queue) > FAR_QUEUE_RATIO:
        why.append(f"its mean queue is {queue:.3g}× the recorded one (each + {QUEUE_OFFSET_S:g} s)")
    if max(jct, 1 / jct) > FAR_JCT_RATIO:
        why.append(f"its mean JCT is {jct:.3g}× the recorded one")
    if abs(util) > FAR_UTIL_PP:
        why.append(f"its utilisation is {util:+.1f} points off the recorded one")
    distances = {r["scheme"]: round(distance(r, recorded), 3) for r in rows if r["scheme"] != RECORDED}
    band = error_band(rows, baseline)
    return {"baseline": baseline, "lines": lines, "far": bool(why), "why": why, "distance": distances, "band": band}


def with_factors(rows: list[dict], baseline: str | None, band: dict[str, float] | None = None) -> pl.DataFrame:
    """The comparison table of rows with each scheme's mean JCT and queue as a ratio to the record's and to the
    baseline's (scheme / reference: below 1 is shorter), its utilisation's change in points against the baseline's,
    and with the baseline's error band each change's low and high ends (…_lo, …_hi; the queue's on queues offset by
    QUEUE_OFFSET_S, as the band's factor is)."""
    table = pl.DataFrame(rows)
    factors = []
    for reference, suffix in ((RECORDED, "recorded"), (baseline, "baseline")):
        ref = table.filter(pl.col("scheme") == reference) if reference else table.head(0)
        for col in ("avg_jct_s", "avg_queue_s"):
            name = f"{col.removesuffix('_s')}_x_vs_{suffix}"
            if ref.height and ref[col][0]:
                factors.append((pl.col(col) / pl.lit(ref[col][0])).round(3).alias(name))
            else:
                factors.append(pl.lit(None, dtype=pl.Float64).alias(name))
    ref = table.filter(pl.col("scheme") == baseline).row(0, named=True) if baseline else None
    util = ref.get("gpu_util_pct") if ref else None
    change = (pl.col("gpu_util_pct") - pl.lit(util)).round(1) if util is not None else pl.lit(None, pl.Float64)
    factors.append(change.alias("gpu_util_pp_vs_baseline"))
    return table.with_columns(factors).with_columns(_band_columns(band or {}, ref))


def _band_columns(band: dict[str, float], ref: dict | None) -> list[pl.Expr]:
    """Each change against the baseline (row ref) widened by the baseline's own error: low and high ends (null
    without a band). The queue's and the JCT's are ratios divided and multiplied by the error's factor, the
    utilisation's points less and plus the error's points."""
    ends: dict[str, tuple[pl.Expr, pl.Expr]] = {}
    queue_x, jct_x, util_pp = band.get("avg_queue_x"), band.get("avg_jct_x"), band.get("gpu_util_pp")
    if ref and queue_x:
        change = (pl.col("avg_queue_s") + QUEUE_OFFSET_S) / (ref["avg_queue_s"] + QUEUE_OFFSET_S)
        ends["avg_queue_x_vs_baseline"] = ((change / queue_x).round(3), (change * queue_x).round(3))
    if ref and jct_x:
        change = pl.col("avg_jct_s") / ref["avg_jct_s"]
        ends["avg_jct_x_vs_baseline"] = ((change / jct_x).round(3), (change * jct_x).round(3))
    if util_pp is not None:
        change = pl.col("gpu_util_pp_vs_baseline")
        ends["gpu_util_pp_vs_baseline"] = ((change - util_pp).round(1), (change + util_pp).round(1))
    none = pl.lit(None, pl.Float64)
    out = []
    for name in ("avg_queue_x_vs_baseline", "avg_jct_x_vs_baseline", "gpu_util_pp_vs_baseline"):
        low, high = ends.get(name, (none, none))
        out += [low.alias(f"{name}_lo"), high.alias(f"{name}_hi")]
    return out


def predictor_quality(name: str, predicted_s: np.ndarray, true_s: np.ndarray) -> dict[str, Any]:
    """MAE, median APE and rank correlation, the same errors of the trivial "none" predictor (every job 1 s) and the
    errors on which this predictor is worse than it, plus a log-log density of predicted vs actual durations."""
    q = quality(predicted_s, true_s.astype(np.float64))
    trivial = quality(np.ones_like(predicted_s, dtype=np.float64), true_s.astype(np.float64))
    worse = [k for k in ("mae_s", "median_ape_pct") if name != "none" and q[k] > trivial[k]]
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
    none = {k: round(v, 3) for k, v in trivial.items() if k != "spearman"}
    return {
        "name": name,
        **{k: round(v, 3) for k, v in q.items()},
        "none": none,
        "worse_than_none": worse,
        "density": density,
    }
