"""The capacity check of scheduled start times: GPUs in use never above the VC's capacity that day."""

from __future__ import annotations

import polars as pl

from analytics.fidelity.base import Check
from analytics.store import Dataset


def claims_capacity_consistency(ds: Dataset) -> bool:
    """Whether the dataset's meta.json says its GPU-job start times respect the VC capacities."""
    return bool((ds.meta.get("start_times") or {}).get("capacity_consistent"))


def daily_peak_gpus(jobs: pl.LazyFrame, vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """Per VC and day of vc_gpus, the most GPUs its GPU jobs held at any second of the day (column peak_gpus): a sweep
    over job starts and ends (ends first at equal times) and each day's midnight; times after the last capacity day
    count on that day, days without a capacity row are left out."""
    gpu = jobs.filter(pl.col("gpu_num") > 0).select("cluster", "vc", "gpu_num", "start_time", "end_time").collect()
    days = vc_gpus.select("cluster", "vc", "date")
    first, last = days["date"].min(), days["date"].max()
    events = pl.concat(
        [
            gpu.select("cluster", "vc", pl.col("start_time").alias("t"), pl.col("gpu_num").cast(pl.Int64).alias("d")),
            gpu.select("cluster", "vc", pl.col("end_time").alias("t"), -pl.col("gpu_num").cast(pl.Int64).alias("d")),
            days.select(
                "cluster", "vc", pl.col("date").cast(pl.Datetime("us")).alias("t"), pl.lit(0, pl.Int64).alias("d")
            ),
        ]
    ).sort("cluster", "vc", "t", "d")
    swept = events.with_columns(
        pl.col("d").cum_sum().over("cluster", "vc").alias("busy"),
        pl.col("t").dt.date().clip(first, last).alias("date"),
    ).join(days, on=["cluster", "vc", "date"], how="inner")
    return swept.group_by("cluster", "vc", "date").agg(pl.col("busy").max().alias("peak_gpus"))


def peak_excess_gpus(jobs: pl.LazyFrame, vc_gpus: pl.DataFrame) -> pl.DataFrame:
    """Per cluster, the largest excess (GPUs) of GPUs in use in a VC over its capacity that day, at any second
    (daily_peak_gpus); VCs without capacity rows are not checked."""
    caps = vc_gpus.select("cluster", "vc", "date", pl.col("gpus").cast(pl.Int64))
    peaks = daily_peak_gpus(jobs, vc_gpus).join(caps, on=["cluster", "vc", "date"])
    return (
        peaks.group_by("cluster").agg((pl.col("peak_gpus") - pl.col("gpus")).max().alias("excess_gpus")).sort("cluster")
    )


def capacity_checks(ds: Dataset) -> list[Check]:
    """GPUs in use never above the VC's capacity of the day (for datasets whose start times claim it)."""
    df = peak_excess_gpus(ds.jobs(), ds.vc_gpus())
    out = []
    for cluster, excess in df.iter_rows():
        value = None if excess is None else float(excess)
        ok = value is not None and value <= 0
        out.append(Check(cluster, "peak GPUs in use minus VC capacity", 0.0, value, value, "≤ 0 GPUs", ok, "capacity"))
    return out
