"""Rollups: the answers the pages draw for a dataset as a whole (no filter), computed once per dataset version into
its derived `rollups` part (at ingest, or by the first web worker that finds them missing) and read by every process
instead of scanning the jobs again. A filtered view is computed from the jobs as before, so every answer is exact:
a rollup is the very frame the query returned when it was written."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from analytics import store
from analytics.filters import NO_FILTER, JobFilter
from analytics.queries import colstore, series
from analytics.queries.jobs import POOLED_HELIOS, POOLED_OTHERS
from analytics.store import Dataset

log = logging.getLogger(__name__)
ROLLUPS_PART = "rollups-2"  # the number changes when a rollup's columns do (2: utilisation minima and maxima)
Query = Callable[..., pl.DataFrame]  # (ds, flt, **options) -> frame
# What the pages ask for a whole dataset: query name and options (the cards, charts and tables of every page).
PAGE_QUERIES: tuple[tuple[str, dict[str, str]], ...] = (
    ("cluster_summary", {}),
    ("job_states", {}),
    ("active_users", {}),
    ("period", {}),
    ("utilization_resampled", {"every": "1h"}),  # the time charts (thinned to their width), the cards' mean
    ("throughput_10min", {}),
    ("diurnal_utilization", {}),
    ("diurnal_submissions", {}),
    ("hour_weekday_submissions", {}),
    ("monthly_jobs", {}),
    ("monthly_utilization", {}),
    ("vc_utilization", {}),
    ("duration_cdf", {"kind": "gpu"}),
    ("duration_cdf", {"kind": "gpu", "pooled": POOLED_HELIOS}),
    ("duration_cdf", {"kind": "gpu", "pooled": POOLED_OTHERS}),
    ("duration_cdf", {"kind": "cpu"}),
    ("gpu_num_cdf", {"weight": "jobs"}),
    ("gpu_num_cdf", {"weight": "gpu_time"}),
    ("final_state_by_gpu_num", {}),
    ("final_state_cpu_vs_gpu", {}),
    ("gpu_time_share_by_state", {}),
    ("queue_cdf", {"kind": "gpu"}),
    ("user_table", {}),
    ("user_concentration", {"metric": "gpu_time"}),
    ("user_concentration", {"metric": "cpu_only_time"}),
    ("user_concentration", {"metric": "gpu_queue_time"}),
    ("user_completion_histogram", {}),
)


def _file_name(query: Query, options: Mapping[str, Any]) -> str:
    """The rollup file of query with options, its defaults filled in (so that a call naming a default finds it)."""
    bound = inspect.signature(query).bind(None, NO_FILTER, **options)
    bound.apply_defaults()
    full = dict(list(bound.arguments.items())[2:])
    return query.__name__ + "".join(f"-{key}={full[key]}" for key in sorted(full)) + ".parquet"


def stored(ds: Dataset, query: Query, options: Mapping[str, Any]) -> pl.DataFrame | None:
    """The rollup of query with options on the whole of ds, None when ds has none."""
    path = store.derived_path(ds, ROLLUPS_PART) / _file_name(query, options)
    return pl.read_parquet(path) if path.is_file() else None


def answered(query: Query) -> Query:
    """query, answering the whole dataset from its rollup when there is one (the same frame it would compute); after
    a computed answer the process keeps at most colstore.MAX_RESIDENT_FILE_BYTES of column pages (the rest stays in
    the shared page cache)."""

    @functools.wraps(query)
    def answer(ds: Dataset, flt: JobFilter = NO_FILTER, **options: Any) -> pl.DataFrame:
        if flt == NO_FILTER:
            found = stored(ds, query, options)
            if found is not None:
                return found
        try:
            return query(ds, flt, **options)
        finally:
            colstore.trim(ds)

    return answer


def write(ds: Dataset, queries: Mapping[str, Query]) -> Path | None:
    """Write ds's rollups (once per version) by running the PAGE_QUERIES on the whole dataset; their folder, or None
    when the dataset's folder cannot be written. A query that fails on this dataset gets no rollup (asked, it fails
    the same way)."""

    def one(name: str, options: dict[str, str], folder: Path) -> None:
        try:
            frame = queries[name](ds, NO_FILTER, **options)
        except Exception as exc:  # noqa: BLE001 - a rollup only saves time; the request path reports the error
            log.warning("dataset %s: no rollup of %s %s: %s", ds.name, name, options, exc)
            return
        finally:
            colstore.release(ds)  # each query scans most columns: their pages need not stay in this process
        frame.write_parquet(folder / _file_name(queries[name], options))

    def build(folder: Path) -> None:
        with series.shared_grids():
            for name, options in PAGE_QUERIES:
                one(name, options, folder)

    return store.derived_part(ds, ROLLUPS_PART, build)
