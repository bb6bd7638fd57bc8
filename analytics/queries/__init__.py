"""One function per metric/figure of the Helios study: (ds, flt, ...) -> polars.DataFrame (spec helios.md §2-3).

The implementations live in jobs (per-job statistics), series (per-minute and 10-minute series) and users (per-user
statistics), over the column store (colstore) or DuckDB (analytics.db); this package is the stable import point and
`QUERIES` the registry used by `helios query` and the dashboard: its functions answer a whole dataset, or one cluster
alone, from the dataset's rollups when it has them (`derive` writes them, with the column files and the pickers'
catalog).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from analytics import capabilities, store
from analytics.queries import catalog, colstore, rollups
from analytics.queries.base import period
from analytics.queries.jobs import (
    GPU_NUM_X,
    POW2_X_S,
    STATE_BUCKETS,
    SUMMARY_COLUMNS,
    cluster_summary,
    diurnal_submissions,
    duration_cdf,
    final_state_by_gpu_num,
    final_state_cpu_vs_gpu,
    gpu_num_cdf,
    gpu_time_share_by_state,
    hour_weekday_submissions,
    job_states,
    lacking_columns,
    monthly_jobs,
    queue_cdf,
)
from analytics.queries.series import (
    diurnal_utilization,
    monthly_utilization,
    throughput_10min,
    utilization_minutes,
    utilization_resampled,
    vc_utilization,
)
from analytics.queries.users import (
    CONCENTRATION_METRICS,
    HIST_BINS,
    user_completion_histogram,
    user_concentration,
    user_table,
)
from analytics.queries.users import active_users as _active_users
from analytics.store import Dataset

COMPUTED: dict[str, Callable[..., pl.DataFrame]] = {
    f.__name__: f
    for f in (
        cluster_summary,
        utilization_minutes,
        utilization_resampled,
        throughput_10min,
        monthly_jobs,
        monthly_utilization,
        diurnal_utilization,
        diurnal_submissions,
        hour_weekday_submissions,
        duration_cdf,
        gpu_num_cdf,
        final_state_by_gpu_num,
        final_state_cpu_vs_gpu,
        gpu_time_share_by_state,
        job_states,
        queue_cdf,
        user_table,
        user_concentration,
        user_completion_histogram,
        vc_utilization,
        period,
    )
}
QUERIES: dict[str, Callable[..., pl.DataFrame]] = {name: rollups.answered(f) for name, f in COMPUTED.items()}
active_users = rollups.answered(_active_users)

# What each query's answer is made of (analytics.capabilities.FEATURES): on a dataset without it the answer would be
# zeros or nothing, so `helios query` says "Not in this trace" instead. Queries not listed work on any dataset
# (cluster_summary and monthly_jobs leave the columns a dataset lacks empty: jobs.LEFT_EMPTY).
NEEDS: dict[str, tuple[str, ...]] = {
    "utilization_minutes": ("utilisation",),
    "utilization_resampled": ("utilisation",),
    "monthly_utilization": ("utilisation",),
    "diurnal_utilization": ("utilisation",),
    "throughput_10min": ("queueing",),  # starts, ends and dequeues beside the submissions
    "vc_utilization": ("vc_utilisation",),
    "duration_cdf": ("durations",),
    "final_state_by_gpu_num": ("final_states",),
    "final_state_cpu_vs_gpu": ("final_states",),
    "gpu_time_share_by_state": ("final_states",),
    "job_states": ("final_states",),
    "queue_cdf": ("queueing",),
    "user_table": ("users",),
    "user_concentration": ("users",),
    "user_completion_histogram": ("users", "final_states"),
}
# (query, option, value) -> what that option needs beyond the query's NEEDS.
OPTION_NEEDS: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("duration_cdf", "kind", "cpu"): ("cpu_jobs",),
    ("queue_cdf", "kind", "cpu"): ("cpu_jobs",),
    ("gpu_num_cdf", "weight", "gpu_time"): ("durations",),
    ("user_concentration", "metric", "cpu_only_time"): ("cpu_jobs",),
    ("user_concentration", "metric", "gpu_queue_time"): ("queueing",),
}


def needs(name: str, options: dict[str, str] | None = None) -> tuple[str, ...]:
    """The features query name needs with these options (NEEDS, then OPTION_NEEDS)."""
    extra = [
        f
        for (query, key, value), fs in OPTION_NEEDS.items()
        if query == name and (options or {}).get(key) == value
        for f in fs
    ]
    return tuple(dict.fromkeys([*NEEDS.get(name, ()), *extra]))


def not_in_trace(ds: Dataset, name: str, options: dict[str, str] | None = None) -> str | None:
    """'Not in this trace: ...' (the pages' sentence) when ds lacks what query name needs, else None."""
    return capabilities.not_in_trace(ds.meta, needs(name, options))


def left_empty(ds: Dataset, name: str) -> str:
    """The columns query name's answer leaves empty on ds because its trace lacks them, each group with why ('' when
    none; a query whose NEEDS ds lacks is not answered at all)."""
    lacking = lacking_columns(ds, name)
    return "; ".join(f"{', '.join(cols)} (not in this trace: {why})" for why, cols in lacking.items())


DERIVED_PARTS = (colstore.COLUMNS_PART, rollups.ROLLUPS_PART, catalog.CATALOG_PART, rollups.CLUSTER_ROLLUPS_PART)


def is_derived(ds: Dataset) -> bool:
    """Whether every derived part of ds is written."""
    return all(store.derived_path(ds, part).is_dir() for part in DERIVED_PARTS)


def derive(ds: Dataset, by_cluster: bool = True) -> None:
    """Write what every process of every host then only reads, once per dataset version: the column files, the
    rollups of the pages' queries, the pickers' catalog and (by_cluster) each cluster's own rollups; each skipped
    when present or the folder is read-only."""
    answers = {**COMPUTED, "active_users": _active_users}
    colstore.column_files(ds)
    rollups.write(ds, answers)
    catalog.write(ds)
    if by_cluster:
        rollups.write_by_cluster(ds, answers)


__all__ = [
    "COMPUTED",
    "CONCENTRATION_METRICS",
    "GPU_NUM_X",
    "HIST_BINS",
    "NEEDS",
    "OPTION_NEEDS",
    "POW2_X_S",
    "QUERIES",
    "STATE_BUCKETS",
    "SUMMARY_COLUMNS",
    "active_users",
    "derive",
    "is_derived",
    "left_empty",
    "needs",
    "not_in_trace",
    *QUERIES,
]
