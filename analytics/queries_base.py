"""Helpers shared by the study queries: the time window, the clusters in play and the daily GPU capacity."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl

from analytics import db, schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.store import Dataset

WHOLE_CLUSTER_VC = "*"  # a vc_gpus row for the whole cluster's capacity, not split by VC
PERIOD_SCHEMA = {"start": schema.TIMESTAMP, "end": schema.TIMESTAMP}
CAPACITY_SCHEMA = {"cluster": pl.String(), "date": pl.Date(), "total_gpu_num": pl.Int64()}


def empty(columns: dict[str, pl.DataType]) -> pl.DataFrame:
    """An empty frame with the given column names and dtypes."""
    return pl.DataFrame(schema=columns)


def job_predicate(flt: JobFilter, *extra: str, window: bool = True) -> tuple[str, list]:
    """The filter's SQL predicate ANDed with fixed extra conditions, and its bound parameters."""
    where, params = flt.where(window=window)
    return " AND ".join((where, *extra)), params


def dataset_clusters(ds: Dataset, flt: JobFilter) -> list[str]:
    """Sorted clusters present in the dataset's jobs or capacity table, restricted to the filter's clusters."""
    sql = "SELECT DISTINCT cluster FROM jobs UNION SELECT DISTINCT cluster FROM vc_gpus"
    found = set(db.run(sql, ds=ds)["cluster"].drop_nulls().to_list())
    if flt.clusters:
        found &= set(flt.clusters)
    return sorted(found)


def _day_start(value: date | datetime) -> datetime:
    return datetime(value.year, value.month, value.day)


def period_bounds(ds: Dataset, flt: JobFilter) -> tuple[datetime, datetime] | None:
    """The [start, end) window the time series cover: the filter's, else the capacity table's days, else the jobs'."""
    clusters = dataset_clusters(ds, flt)
    if not clusters:
        return None
    marks = ", ".join("?" * len(clusters))
    cap = db.run(f"SELECT min(date) AS lo, max(date) AS hi FROM vc_gpus WHERE cluster IN ({marks})", clusters, ds=ds)
    lo, hi = cap.row(0)
    if lo is None:
        sql = (
            "SELECT min(submit_time) AS lo, max(coalesce(end_time, submit_time)) AS hi "
            f"FROM jobs WHERE cluster IN ({marks})"
        )
        lo, hi = db.run(sql, clusters, ds=ds).row(0)
    if lo is None:
        return None
    start = flt.start or _day_start(lo)
    end = flt.end or _day_start(hi) + timedelta(days=1)
    return (start, end) if start < end else None


def period(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """One row, start and end: the [start, end) window the time series cover."""
    bounds = period_bounds(ds, flt)
    if bounds is None:
        return empty(PERIOD_SCHEMA)
    return pl.DataFrame({"start": [bounds[0]], "end": [bounds[1]]}, schema=PERIOD_SCHEMA)


def daily_capacity(ds: Dataset, flt: JobFilter, clusters: list[str], vcs: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per cluster and day, the GPUs of the selected VCs (whole-cluster `*` rows when no VC is selected)."""
    if not clusters:
        return empty(CAPACITY_SCHEMA)
    marks = ", ".join("?" * len(clusters))
    vcs = vcs or flt.vcs
    if vcs:
        sql = (
            f"SELECT cluster, date, sum(gpus)::BIGINT AS total_gpu_num FROM vc_gpus WHERE cluster IN ({marks}) "
            f"AND vc IN ({', '.join('?' * len(vcs))}) GROUP BY cluster, date ORDER BY cluster, date"
        )
        return db.run(sql, [*clusters, *vcs], ds=ds)
    sql = (
        "SELECT cluster, date, (CASE WHEN bool_or(vc = ?) THEN sum(gpus) FILTER (WHERE vc = ?) "
        f"ELSE sum(gpus) END)::BIGINT AS total_gpu_num FROM vc_gpus WHERE cluster IN ({marks}) "
        "GROUP BY cluster, date ORDER BY cluster, date"
    )
    return db.run(sql, [WHOLE_CLUSTER_VC, WHOLE_CLUSTER_VC, *clusters], ds=ds)


def mean_capacity(ds: Dataset, flt: JobFilter, clusters: list[str]) -> pl.DataFrame:
    """Per cluster, the mean daily GPU capacity over the days of the period, truncated to a whole number."""
    bounds = period_bounds(ds, flt)
    cap = daily_capacity(ds, flt, clusters)
    if bounds is not None:
        day = pl.col("date")
        cap = cap.filter((day >= bounds[0].date()) & (day.cast(schema.TIMESTAMP) < bounds[1]))
    return cap.group_by("cluster").agg(pl.col("total_gpu_num").mean().cast(pl.Int64).alias("gpu_num"))
