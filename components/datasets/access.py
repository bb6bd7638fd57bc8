"""The datasets as the pages see them: the app's data folder, and the study queries through the shared cache.

Keys carry the dataset version and the filter's cache key, so a replaced dataset is never answered from the cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

import polars as pl
from flask import current_app

from analytics import capabilities, queries, store
from analytics.db import QueryError
from analytics.filters import (
    JobFilter,
    Known,
    check_dataset,
    check_known,
    has_checked_values,
    parse_params,
    resolve_range,
    to_filter,
)
from analytics.queries import catalog, job, users
from analytics.scheduler import scheduler_config
from analytics.slurm_config import SlurmConfigError
from components.server import derive
from components.server.cache import cached, peek
from components.server.settings import Settings
from sim.slurm.knobs import knob_values

USER_ERRORS = (ValueError, QueryError, store.DatasetError)  # what bad filters, queries or dataset names raise


def settings() -> Settings:
    """The settings of the app serving the current request."""
    return current_app.config["HELIOS_SETTINGS"]


def list_datasets() -> list[store.Dataset]:
    """All datasets of the app's data folder."""
    return store.list_datasets(settings().data_dir)


def open_dataset(name: str) -> store.Dataset:
    """Open dataset name from the app's data folder (raises store.DatasetError when absent)."""
    return store.open_dataset(name, settings().data_dir)


def dataset_names() -> list[str]:
    """The names of the datasets in the app's data folder."""
    return [d.name for d in list_datasets()]


def default_dataset(names: list[str]) -> str:
    """The configured default dataset when it is among names, else the first one, else ''."""
    preferred = settings().default_dataset
    if preferred in names:
        return preferred
    return names[0] if names else ""


def dataset_key(kind: str, ds: store.Dataset, *parts: str) -> str:
    """The cache key of a value of kind computed from one version of a dataset (and parts)."""
    return ":".join((kind, ds.name, ds.version, *parts))


def selection_key(kind: str, ds: store.Dataset, flt: JobFilter, *parts: str) -> str:
    """The cache key of a value of kind computed from the jobs a filter selects in one version of a dataset."""
    return dataset_key(kind, ds, flt.cache_key(), *parts)


def _of_dataset(kind: str, name: str, compute: Callable[[store.Dataset], Any], *parts: str) -> Any:
    ds = open_dataset(name)
    return cached(dataset_key(kind, ds, *parts), lambda: compute(ds))


def _of_selection(
    kind: str, state: dict[str, Any], compute: Callable[[store.Dataset, JobFilter], Any], *parts: str
) -> Any:
    ds, flt = open_dataset(state["dataset"]), to_filter(state)
    derive.soon(ds)
    return cached(selection_key(kind, ds, flt, *parts), lambda: compute(ds, flt))


def _options(kwargs: dict[str, Any]) -> str:
    return ",".join(f"{k}={kwargs[k]}" for k in sorted(kwargs))


def query(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state, through the cache."""
    fn = queries.QUERIES[name]
    return _of_selection(f"q:{name}", state, lambda ds, flt: fn(ds, flt, **kwargs), _options(kwargs))


def query_if_cached(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame | None:
    """query(name, state, **kwargs) when it is cached, None when it is not (nothing is computed)."""
    key = selection_key(f"q:{name}", open_dataset(state["dataset"]), to_filter(state), _options(kwargs))
    return peek(key)


def query_uncached(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state without caching its (large) result."""
    return queries.QUERIES[name](open_dataset(state["dataset"]), to_filter(state), **kwargs)


def query_between(name: str, state: dict[str, Any], start: datetime, end: datetime, **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state with its time window narrowed to [start, end), uncached."""
    flt = dataclasses.replace(to_filter(state), start=start, end=end)
    return queries.QUERIES[name](open_dataset(state["dataset"]), flt, **kwargs)


def derived(name: str, state: dict[str, Any], compute: Callable[[], Any]) -> Any:
    """Cache a value derived from queries of a filter state under name."""
    return _of_selection(f"d:{name}", state, lambda _ds, _flt: compute())


def derived_if_cached(name: str, state: dict[str, Any]) -> Any:
    """The value derived(name, state, ...) cached, None when it is not cached yet."""
    return peek(selection_key(f"d:{name}", open_dataset(state["dataset"]), to_filter(state)))


def dataset_options(name: str) -> dict[str, list[str]]:
    """The clusters, (cluster, VC) pairs and users of a dataset, for the filter drop-downs."""
    return _of_dataset("opts", name, catalog.filter_options)


def dataset_period(name: str) -> tuple[str | None, str | None]:
    """First and last submit day of a dataset as ISO dates."""
    return _of_dataset("period", name, catalog.submit_days)


def recent_days(name: str, cluster: str, n_days: int) -> tuple[str | None, str | None]:
    """The last n_days submit days of a cluster up to its last busy day, as ISO dates (None, None without GPU jobs)."""
    return _of_dataset("recent", name, lambda ds: catalog.recent_days(ds, cluster, n_days), cluster, str(n_days))


def active_users(state: dict[str, Any]) -> pl.DataFrame:
    """Distinct users per cluster among the jobs a filter state selects (columns cluster, active_users)."""
    return _of_selection("users", state, queries.active_users)


def user_jobs(state: dict[str, Any]) -> pl.DataFrame:
    """The one selected user's jobs (a repeatable sample when there are many), empty unless one user is selected."""
    if len(state.get("users") or []) != 1:
        return pl.DataFrame()
    return _of_selection("userjobs", state, users.user_jobs_sample)


def data_as_of(name: str) -> str | None:
    """The time of a dataset's newest record (submit, start or end), `YYYY-MM-DD HH:MM`."""
    return _of_dataset("asof", name, catalog.newest_record)


def cluster_names(name: str) -> list[str]:
    """A dataset's clusters in the order its metadata lists them."""
    return _of_dataset("clusters", name, catalog.cluster_names)


def gpu_vcs(name: str, cluster: str) -> list[str]:
    """The VCs of a dataset's cluster that have GPU jobs."""
    return _of_dataset("gpuvcs", name, lambda ds: catalog.gpu_vcs(ds, cluster), cluster)


def missing_feature(name: str, needs: tuple[str, ...]) -> str | None:
    """'Not in this trace: ...' when dataset name lacks a needed feature (analytics.capabilities), else None."""
    if not needs:
        return None
    return capabilities.not_in_trace(open_dataset(name).meta, needs)


def dataset_capabilities(name: str) -> dict[str, Any]:
    """The columns, features and pages dataset name supports (analytics.capabilities.capabilities)."""
    return capabilities.capabilities(open_dataset(name).meta)


def last_submit(name: str) -> datetime | None:
    """The latest submit time of dataset name: where its relative time ranges end."""
    return _of_dataset("lastsubmit", name, catalog.last_submit)


def known_values(name: str) -> Known:
    """What dataset name holds for checking a filter state: clusters, VCs, users, days, start times."""

    def compute(ds: store.Dataset) -> Known:
        opts, (first, last) = catalog.filter_options(ds), catalog.submit_days(ds)
        starts = capabilities.column_status(ds.meta)["start_time"]
        return Known(
            clusters=tuple(opts["clusters"]),
            cluster_vcs=tuple((c, vc) for c, vc in opts["cluster_vcs"]),
            users=tuple(opts["users"]),
            first_day=first,
            last_day=last,
            no_running=starts["note"] if starts["status"] == capabilities.ABSENT else None,
        )

    return _of_dataset("known", name, compute)


def read_params(params: dict[str, str]) -> tuple[dict[str, Any], list[str], str | None]:
    """The filter state of query parameters checked against its dataset: the state, each value ignored and why, and
    the sentence naming the window of a relative time range (None without one)."""
    names = dataset_names()
    default = default_dataset(names)
    state, problems = parse_params(params, default)
    problems += check_dataset(state, names, default)
    if not state["dataset"]:
        return state, problems, None
    try:
        if has_checked_values(state):
            problems += check_known(state, known_values(state["dataset"]))
        note = resolve_range(state, last_submit(state["dataset"]), datetime.now()) if state["range"] else None
    except store.DatasetError:
        return state, problems, None
    return state, problems, note


def job_records(name: str, job_id: int, cluster: str | None) -> pl.DataFrame:
    """Every column of the jobs with this id in dataset name (of one cluster when given)."""
    return _of_dataset("job", name, lambda ds: job.job_records(ds, job_id, cluster), str(job_id), cluster or "")


def _job_key(record: dict[str, Any]) -> tuple[str, str]:
    return record["cluster"], str(record["job_id"])


def job_wait_holders(name: str, record: dict[str, Any]) -> pl.DataFrame:
    """The GPU jobs of a job's VC that held GPUs while it waited, most GPUs first."""
    return _of_dataset("jobwait", name, lambda ds: job.wait_holders(ds, record), *_job_key(record))


def job_user_around(name: str, record: dict[str, Any]) -> pl.DataFrame:
    """A job's user's other jobs nearest to it in submit time."""
    return _of_dataset("jobuser", name, lambda ds: job.user_jobs_around(ds, record), *_job_key(record))


def vc_activity(name: str, cluster: str, vc: str, start: datetime, end: datetime, every: str) -> pl.DataFrame:
    """Per bucket of `every` over [start, end): a VC's running GPUs and capacity, and its queued jobs at the bucket's
    start."""

    def compute(ds: store.Dataset) -> pl.DataFrame:
        flt = JobFilter(clusters=(cluster,), vcs=(vc,), start=start, end=end)
        util = queries.QUERIES["utilization_resampled"](ds, flt, every=every)
        times = util["time"].to_list()
        return util.join(job.queued_jobs(ds, cluster, vc, times), on="time", how="left")

    return _of_dataset("vcact", name, compute, cluster, vc, start.isoformat(), end.isoformat(), every)


def captured_knobs(name: str) -> dict[str, int] | None:
    """The Slurm twin's knobs as the dataset's captured scheduler configuration sets them (None: none captured, or
    the stored one cannot be read)."""
    try:
        config = scheduler_config(open_dataset(name))
    except (store.DatasetError, SlurmConfigError):
        return None
    return knob_values(config) if config is not None else None
