"""The synthetic queue's daily VC capacities and the frames it reads and writes: each VC's GPUs per day counted from
second 0 of a cluster's schedule (midnight of its first submission), the seconds columns the queue runs on, and the
output rows of its start times.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import polars as pl

DAY_S = 86_400
_OUT_SCHEMA = {
    "job_id": pl.Int64,
    "cluster": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "queue": pl.Int64,
}


class DailyCapacity:
    """GPUs of one VC per day index (days past the last keep its GPUs)."""

    def __init__(self, gpus_by_day: Sequence[int]):
        self.gpus = [int(g) for g in gpus_by_day]
        self.last = len(self.gpus) - 1


def daily_capacities(vc_gpus: pl.DataFrame, cluster: str, t0: datetime) -> dict[str, DailyCapacity]:
    """Each VC of the cluster with its GPUs per day counted from t0's date (a day without a row keeps the last)."""
    rows = vc_gpus.filter(pl.col("cluster") == cluster).sort("date")
    out = {}
    for (vc,), part in rows.group_by(["vc"], maintain_order=True):
        day = np.array([(d - t0.date()).days for d in part.get_column("date").to_list()], dtype=np.int64)
        gpus = part.get_column("gpus").to_numpy()
        grid = np.zeros(max(int(day.max()), 0) + 1, dtype=np.int64)
        for d, g in zip(day.tolist(), gpus.tolist(), strict=True):
            grid[max(d, 0) :] = g
        out[vc] = DailyCapacity(grid.tolist())
    return out


def cluster_origin(jobs: pl.DataFrame) -> datetime:
    """Midnight of the first submission: second 0 of the schedule."""
    return datetime.combine(jobs.get_column("submit_time").min().date(), datetime.min.time())


def seconds_columns(t0: datetime) -> list[pl.Expr]:
    """Columns _dur (duration, null or negative as 0) and _sub (submit second from t0) that the schedulers use."""
    return [
        pl.col("duration").fill_null(0).clip(lower_bound=0).alias("_dur"),
        ((pl.col("submit_time") - pl.lit(t0)).dt.total_seconds()).alias("_sub"),
    ]


def schedule_frame(df: pl.DataFrame, cluster: str, t0: datetime, start_s: pl.Series) -> pl.DataFrame:
    """Output rows (job_id, cluster, start_time, end_time, queue) of df (with _sub and _dur) given start seconds
    (-1 = never started)."""
    started = start_s.replace(-1, None)
    start = pl.lit(t0) + pl.duration(seconds=started)
    return df.select(
        pl.col("job_id").cast(pl.Int64),
        pl.lit(cluster).alias("cluster"),
        start.alias("start_time"),
        (start + pl.duration(seconds=pl.col("_dur"))).alias("end_time"),
        (started - pl.col("_sub")).cast(pl.Int64).alias("queue"),
    ).cast(_OUT_SCHEMA)
