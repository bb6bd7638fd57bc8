"""What a refresh (`helios ingest --append`, `helios sync slurm`) keeps and recomputes besides the jobs themselves:
the capacity table over the grown period, and meta.json's totals, latest quality report and refresh log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import polars as pl

from analytics import schema, store
from analytics.ingest.capacity import daily_capacity, latest_capacity
from analytics.ingest.parse import TIME_FORMAT, first_last_day

MAX_REFRESHES_LOGGED = 50


def _time_text(value: Any) -> str | None:
    return value.strftime(TIME_FORMAT) if value is not None else None


def job_totals(jobs: pl.LazyFrame, vc_gpu_rows: int) -> dict[str, Any]:
    """meta.json's clusters, period (first and last submit) and row counts of a jobs table."""
    per_cluster = dict(jobs.group_by("cluster").len().sort("cluster").collect().rows())
    period = jobs.select(pl.col("submit_time").min().alias("start"), pl.col("submit_time").max().alias("end"))
    start, end = period.collect().row(0)
    return {
        "clusters": sorted(per_cluster),
        "period": {"start": _time_text(start), "end": _time_text(end)},
        "row_counts": {"jobs": sum(per_cluster.values()), "jobs_per_cluster": per_cluster, "vc_gpus": vc_gpu_rows},
    }


def merged_capacity(stored: pl.DataFrame, batch: pl.DataFrame, jobs: pl.DataFrame) -> pl.DataFrame:
    """The stored capacity, with the days it lacks up to the batch's last day filled from the batch's capacity
    (a capacity file given with this refresh), else from the stored table's last day."""
    first, last = jobs.select(first_last_day("submit_time", "end_time")).row(0)
    clusters = sorted(set(jobs["cluster"].unique()) | set(stored["cluster"].unique()))
    if stored.height:
        first, last = min(first, stored["date"].min()), max(last, stored["date"].max())  # type: ignore[type-var]
    added = []
    for cluster in clusters:
        capacity = latest_capacity(batch, cluster, "batch") or latest_capacity(stored, cluster, "stored")
        if capacity is None:
            continue
        days = daily_capacity(capacity, cluster, first, last)
        known = stored.filter(pl.col("cluster") == cluster).select("date").unique()
        added.append(days.join(known, on="date", how="anti"))
    return schema.conform_vc_gpus(pl.concat([stored, *added])) if added else stored


def refreshed_meta(
    batch_meta: dict[str, Any], previous: dict[str, Any] | None, vc_gpu_rows: int
) -> Callable[[pl.LazyFrame], dict[str, Any]]:
    """A function of the refreshed jobs giving meta.json: the batch's facts and quality report, the totals of the
    whole dataset, and the refresh log (the last MAX_REFRESHES_LOGGED refreshes)."""
    log = list((previous or {}).get("refreshes", []))
    entry = {
        "at": datetime.now().strftime(TIME_FORMAT),
        "source": batch_meta.get("source"),
        "rows_read": batch_meta["quality"]["rows_in"],
        "jobs": batch_meta["quality"]["rows_out"],
    }

    def meta_for(jobs: pl.LazyFrame) -> dict[str, Any]:
        kept = {k: v for k, v in (previous or {}).items() if k not in batch_meta and k != store.MONTHLY_PARTS}
        refreshes = [*log, entry][-MAX_REFRESHES_LOGGED:]
        return {**kept, **batch_meta, **job_totals(jobs, vc_gpu_rows), "refreshes": refreshes}

    return meta_for
