"""SimResult -> per-job records, timelines and per-VC / overall JCT, queue, slowdown and utilisation metrics."""

from __future__ import annotations

from itertools import chain

import numpy as np
import polars as pl
import pyarrow as pa

from sim.model import SimResult, Workload

SLOWDOWN_BOUND_S = 10  # bounded slowdown = max(1, jct / max(duration, 10 s))


def job_records(result: SimResult) -> pl.DataFrame:
    """One row per simulated job: submit, start, end, queue, jct, preemptions, priority and placement nodes."""
    w = result.workload
    parts = []
    for vc, r in result.vcs.items():
        rows = r.rows
        parts.append(
            pl.DataFrame(
                {
                    "job_id": w.job_id[rows],
                    "vc": [vc] * rows.shape[0],
                    "gpu_num": w.gpu_num[rows],
                    "submit_s": w.submit_s[rows],
                    "duration_s": w.duration_s[rows],
                    "predicted_s": w.predicted_s[rows],
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "queue_s": r.queue_s,
                    "preemptions": r.preemptions,
                    "priority": r.priority,
                    "nodes": _list_column(r.nodes),
                }
            )
        )
    if not parts:
        return pl.DataFrame()
    out = pl.concat(parts).with_columns(
        pl.when(pl.col("start_s") >= 0).then(pl.col("end_s") - pl.col("submit_s")).alias("jct_s"),
        (pl.col("start_s") >= 0).alias("placed"),
    )
    return out.sort(["submit_s", "job_id"])


def _list_column(nodes: list[tuple[int, ...]]) -> pl.Series:
    """A List(Int32) column built from flat values and offsets (NOTE: far faster than from Python lists)."""
    lengths = np.fromiter((len(n) for n in nodes), dtype=np.int32, count=len(nodes))
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int32)])
    values = np.fromiter(chain.from_iterable(nodes), dtype=np.int32, count=int(offsets[-1]))
    return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))).alias("nodes")


def timelines(result: SimResult) -> pl.DataFrame:
    """GPUs in use and jobs waiting per VC after every event (a step function of time)."""
    parts = [
        pl.DataFrame(
            {
                "vc": [vc] * r.timeline_t_s.shape[0],
                "t_s": r.timeline_t_s,
                "used_gpus": r.timeline_used_gpus,
                "queued_jobs": r.timeline_queued_jobs,
                "capacity_gpus": [result.workload.vc_nodes[k] * result.config.gpus_per_node] * r.timeline_t_s.shape[0],
            }
        )
        for k, (vc, r) in enumerate(result.vcs.items())
    ]
    return pl.concat(parts) if parts else pl.DataFrame()


def _summary_exprs() -> list[pl.Expr]:
    jct, queue = pl.col("jct_s"), pl.col("queue_s")
    slowdown = pl.max_horizontal(pl.lit(1.0), jct / pl.max_horizontal(pl.col("duration_s"), pl.lit(SLOWDOWN_BOUND_S)))
    return [
        pl.len().alias("jobs"),
        jct.mean().alias("avg_jct_s"),
        jct.median().alias("median_jct_s"),
        jct.quantile(0.95, "linear").alias("p95_jct_s"),
        jct.quantile(0.99, "linear").alias("p99_jct_s"),
        queue.mean().alias("avg_queue_s"),
        queue.median().alias("median_queue_s"),
        queue.quantile(0.95, "linear").alias("p95_queue_s"),
        queue.quantile(0.99, "linear").alias("p99_queue_s"),
        slowdown.mean().alias("avg_bounded_slowdown"),
        pl.col("preemptions").sum().alias("preemptions"),
    ]


def _utilisation_pct(tl: pl.DataFrame) -> float | None:
    if tl.height < 2:
        return None
    t = tl.get_column("t_s").to_numpy()
    used = tl.get_column("used_gpus").to_numpy()
    span = t[-1] - t[0]
    cap = int(tl.get_column("capacity_gpus")[0])
    if span <= 0 or cap <= 0:
        return None
    return float((used[:-1] * np.diff(t)).sum() / (cap * span) * 100.0)


def _row_dict(row: dict) -> dict:
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}


def summarize(records: pl.DataFrame, tl: pl.DataFrame | None = None) -> dict:
    """Overall and per-VC metrics of placed jobs: {"all": {...}, "vcs": {vc: {...}}}, times in s."""
    placed = records.filter(pl.col("placed"))
    overall = _row_dict(placed.select(_summary_exprs()).row(0, named=True))
    per_vc = {}
    for row in placed.group_by("vc").agg(_summary_exprs()).sort("vc").iter_rows(named=True):
        vc = row.pop("vc")
        if tl is not None and tl.height:
            row["gpu_util_pct"] = _utilisation_pct(tl.filter(pl.col("vc") == vc))
        per_vc[vc] = _row_dict(row)
    unplaced = records.filter(~pl.col("placed")).group_by("vc").len()
    for vc, n in unplaced.iter_rows():
        per_vc.setdefault(vc, {"jobs": 0})["unplaceable"] = n
    overall["unplaceable"] = int(records.height - placed.height)
    return {"all": overall, "vcs": per_vc}


def recorded_records(workload: Workload) -> pl.DataFrame | None:
    """What really happened (recorded start times) in the job_records layout, or None when none were recorded."""
    rec = workload.recorded_start_s
    if rec is None or not (rec >= 0).any():
        return None
    names = np.asarray(workload.vc_names, dtype=object)
    df = pl.DataFrame(
        {
            "job_id": workload.job_id,
            "vc": names[workload.vc_index].tolist(),
            "submit_s": workload.submit_s,
            "duration_s": workload.duration_s,
            "start_s": rec,
        }
    ).filter(pl.col("start_s") >= 0)
    return df.with_columns(
        (pl.col("start_s") - pl.col("submit_s")).alias("queue_s"),
        (pl.col("start_s") + pl.col("duration_s") - pl.col("submit_s")).alias("jct_s"),
        pl.lit(0, dtype=pl.Int64).alias("preemptions"),
        pl.lit(True).alias("placed"),
    )
