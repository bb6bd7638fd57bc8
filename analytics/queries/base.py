"""Helpers shared by the study queries: the time window, the clusters in play and the daily GPU capacity."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl

from analytics import schema
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import colstore
from analytics.store import Dataset

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
    found = set(colstore.columns(ds).clusters())
    if flt.clusters:
        found &= set(flt.clusters)
    return sorted(found)


def _day_start(value: date | datetime) -> datetime:
    return datetime(value.year, value.month, value.day)


def _job_time_range(cols: colstore.JobColumns, clusters: list[str]) -> tuple[datetime | None, datetime | None]:
    """Earliest submit and latest end (else submit) time of the jobs of `clusters`."""
    spans = [cols.time_range[c] for c in clusters if c in cols.time_range]
    if not spans:
        return None, None
    return colstore.from_us(min(lo for lo, _ in spans)), colstore.from_us(max(hi for _, hi in spans))


def period_bounds(ds: Dataset, flt: JobFilter) -> tuple[datetime, datetime] | None:
    """The [start, end) window the time series cover: the filter's, else the capacity table's days, else the jobs'."""
    clusters = dataset_clusters(ds, flt)
    if not clusters:
        return None
    cols = colstore.columns(ds)
    days = cols.vc_gpus.filter(pl.col("cluster").is_in(clusters))["date"]
    lo, hi = days.min(), days.max()
    if lo is None:
        lo, hi = _job_time_range(cols, clusters)
    if lo is None:
        return None
    start = flt.start or _day_start(lo)  # type: ignore[arg-type]
    end = flt.end or _day_start(hi) + timedelta(days=1)  # type: ignore[arg-type]
    return (start, end) if start < end else None


def period(ds: Dataset, flt: JobFilter = NO_FILTER) -> pl.DataFrame:
    """One row, start and end: the [start, end) window the time series cover."""
    bounds = period_bounds(ds, flt)
    if bounds is None:
        return empty(PERIOD_SCHEMA)
    return pl.DataFrame({"start": [bounds[0]], "end": [bounds[1]]}, schema=PERIOD_SCHEMA)


def _sum_or_null(values: pl.Expr) -> pl.Expr:
    """The sum of the non-null values, null when there are none (SQL's sum)."""
    return pl.when(values.count() > 0).then(values.sum())


def daily_capacity(ds: Dataset, flt: JobFilter, clusters: list[str], vcs: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per cluster and day, the GPUs of the selected VCs (whole-cluster `*` rows when no VC is selected)."""
    if not clusters:
        return empty(CAPACITY_SCHEMA)
    caps = colstore.columns(ds).vc_gpus.filter(pl.col("cluster").is_in(clusters))
    gpus = pl.col("gpus").cast(pl.Int64)
    vcs = vcs or flt.vcs
    if vcs:
        caps, total = caps.filter(pl.col("vc").is_in(list(vcs))), _sum_or_null(gpus)
    else:
        whole = pl.col("vc") == schema.WHOLE_CLUSTER_VC
        total = pl.when(whole.any()).then(_sum_or_null(gpus.filter(whole))).otherwise(_sum_or_null(gpus))
    out = caps.group_by("cluster", "date").agg(total.alias("total_gpu_num")).sort("cluster", "date")
    return out.cast(CAPACITY_SCHEMA)  # type: ignore[arg-type]


def mean_capacity(ds: Dataset, flt: JobFilter, clusters: list[str]) -> pl.DataFrame:
    """Per cluster, the mean daily GPU capacity over the days of the period (mean_gpu_num) and truncated to a whole
    number (gpu_num, as helios_cluster_summary.csv has it)."""
    bounds = period_bounds(ds, flt)
    cap = daily_capacity(ds, flt, clusters)
    if bounds is not None:
        day = pl.col("date")
        cap = cap.filter((day >= bounds[0].date()) & (day.cast(schema.TIMESTAMP) < bounds[1]))
    mean = pl.col("total_gpu_num").mean()
    return cap.group_by("cluster").agg(mean.alias("mean_gpu_num"), mean.cast(pl.Int64).alias("gpu_num"))
