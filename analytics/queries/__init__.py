"""One function per metric/figure of the Helios study: (ds, flt, ...) -> polars.DataFrame (spec helios.md §2-3).

The implementations live in jobs (per-job statistics), series (per-minute and 10-minute series) and users (per-user
statistics), over the column store (colstore) or DuckDB (analytics.db); this package is the stable import point and
`QUERIES` the registry used by `helios query` and the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

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

QUERIES: dict[str, Callable[..., pl.DataFrame]] = {
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

__all__ = [
    "CONCENTRATION_METRICS",
    "GPU_NUM_X",
    "HIST_BINS",
    "POW2_X_S",
    "QUERIES",
    "STATE_BUCKETS",
    "SUMMARY_COLUMNS",
    *QUERIES,
]
