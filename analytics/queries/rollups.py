"""Rollups: the answers the pages draw for a dataset as a whole (no filter), in its derived `rollups` part, and, when
it has several clusters, for each cluster alone (a filter on that one cluster and nothing else), in its
`cluster-rollups` part; computed once per dataset version (by whatever derives it, see analytics.queries.derive) and
read by every process instead of scanning the jobs again. Any other filtered view is computed from the jobs, so every
answer is exact: a rollup is the very frame the query returned when it was written."""

from __future__ import annotations

import functools
import hashlib
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
CLUSTER_ROLLUPS_PART = "cluster-rollups-2"  # each cluster's: a folder per cluster, named by its name's SHA-256
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


def stored(ds: Dataset, query: Query, options: Mapping[str, Any], flt: JobFilter = NO_FILTER) -> pl.DataFrame | None:
    """The rollup of query with options on ds under flt (the whole dataset, or one cluster alone), None when ds has
    none."""
    folder = _folder(ds, flt)
    path = None if folder is None else folder / _file_name(query, options)
    return pl.read_parquet(path) if path is not None and path.is_file() else None


def _folder(ds: Dataset, flt: JobFilter) -> Path | None:
    """Where the rollups of flt's view live: the whole dataset's, one cluster's (a filter on it alone), else None."""
    if flt == NO_FILTER:
        return store.derived_path(ds, ROLLUPS_PART)
    if len(flt.clusters) == 1 and flt == JobFilter(clusters=flt.clusters):
        return store.derived_path(ds, CLUSTER_ROLLUPS_PART) / _cluster_folder(flt.clusters[0])
    return None


def _cluster_folder(cluster: str) -> str:
    """A cluster's rollup folder name: any cluster name, however long, gives a safe one of 64 characters."""
    return hashlib.sha256(cluster.encode()).hexdigest()


def answered(query: Query) -> Query:
    """query, answering the whole dataset or one cluster alone from its rollup when there is one (the same frame it
    would compute); after a computed answer the process keeps at most colstore.MAX_RESIDENT_FILE_BYTES of column
    pages (the rest stays in the shared page cache)."""

    @functools.wraps(query)
    def answer(ds: Dataset, flt: JobFilter = NO_FILTER, **options: Any) -> pl.DataFrame:
        found = stored(ds, query, options, flt)
        if found is not None:
            return found
        try:
            return query(ds, flt, **options)
        finally:
            colstore.trim(ds)

    return answer


def write(ds: Dataset, queries: Mapping[str, Query]) -> Path | None:
    """Write ds's rollups of the whole dataset (once per version) by running the PAGE_QUERIES; their folder, or None
    when the dataset's folder cannot be written. A query that fails on this dataset gets no rollup (asked, it fails
    the same way)."""
    return store.derived_part(ds, ROLLUPS_PART, lambda folder: _build(ds, queries, [(folder, NO_FILTER)]))


def write_by_cluster(ds: Dataset, queries: Mapping[str, Query]) -> Path | None:
    """Write ds's rollups of each cluster alone (once per version; none when it has a single cluster), as write does."""

    def build(folder: Path) -> None:
        clusters = list(colstore.columns(ds).cats["cluster"].names)
        views = [(folder / _cluster_folder(c), JobFilter(clusters=(c,))) for c in clusters] if len(clusters) > 1 else []
        _build(ds, queries, views)

    return store.derived_part(ds, CLUSTER_ROLLUPS_PART, build)


def _build(ds: Dataset, queries: Mapping[str, Query], views: list[tuple[Path, JobFilter]]) -> None:
    """Each PAGE_QUERIES answer of each view (its folder, its filter) into that folder."""

    def one(name: str, options: dict[str, str], folder: Path, flt: JobFilter) -> None:
        try:
            frame = queries[name](ds, flt, **options)
        except Exception as exc:  # noqa: BLE001 - a rollup only saves time; the request path reports the error
            log.warning("dataset %s: no rollup of %s %s (%s): %s", ds.name, name, options, flt.cache_key(), exc)
            return
        finally:
            colstore.release(ds)  # each query scans most columns: their pages need not stay in this process
        frame.write_parquet(folder / _file_name(queries[name], options))

    with series.shared_grids():
        for folder, flt in views:
            folder.mkdir(parents=True, exist_ok=True)
            for name, options in PAGE_QUERIES:
                one(name, options, folder, flt)
