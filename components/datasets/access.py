"""The datasets as the pages see them: the app's data folder, and the study queries through the shared cache.

Keys carry the dataset version and the filter's cache key, so a replaced dataset is never answered from the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
from flask import current_app

from analytics import queries, store
from analytics.filters import to_filter
from analytics.queries import catalog, users
from components.server.cache import cached
from components.server.settings import Settings


def settings() -> Settings:
    """The settings of the app serving the current request."""
    return current_app.config["HELIOS_SETTINGS"]


def list_datasets() -> list[store.Dataset]:
    """All datasets of the app's data folder."""
    return store.list_datasets(settings().data_dir)


def open_dataset(name: str) -> store.Dataset:
    """Open dataset name from the app's data folder (raises store.DatasetError when absent)."""
    return store.open_dataset(name, settings().data_dir)


def default_dataset(names: list[str], preferred: str) -> str:
    """The preferred dataset when present, else the first one, else ''."""
    if preferred in names:
        return preferred
    return names[0] if names else ""


def _kwargs_key(kwargs: dict[str, Any]) -> str:
    return ",".join(f"{k}={kwargs[k]}" for k in sorted(kwargs))


def query(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state, through the cache."""
    ds = open_dataset(state["dataset"])
    flt = to_filter(state)
    fn = queries.QUERIES[name]
    key = f"q:{name}:{ds.name}:{ds.version}:{flt.cache_key()}:{_kwargs_key(kwargs)}"
    return cached(key, lambda: fn(ds, flt, **kwargs))


def query_uncached(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state without caching its (large) result."""
    return queries.QUERIES[name](open_dataset(state["dataset"]), to_filter(state), **kwargs)


def derived(name: str, state: dict[str, Any], compute: Callable[[], Any]) -> Any:
    """Cache a value derived from queries of a filter state under name."""
    ds = open_dataset(state["dataset"])
    return cached(f"d:{name}:{ds.name}:{ds.version}:{to_filter(state).cache_key()}", compute)


def dataset_options(name: str) -> dict[str, list[str]]:
    """The clusters, (cluster, VC) pairs and users of a dataset, for the filter drop-downs."""
    ds = open_dataset(name)
    return cached(f"opts:{ds.name}:{ds.version}", lambda: catalog.filter_options(ds))


def dataset_period(name: str) -> tuple[str | None, str | None]:
    """First and last submit day of a dataset as ISO dates."""
    ds = open_dataset(name)
    return cached(f"period:{ds.name}:{ds.version}", lambda: catalog.submit_days(ds))


def active_users(state: dict[str, Any]) -> pl.DataFrame:
    """Distinct users per cluster among the jobs a filter state selects (columns cluster, active_users)."""
    ds, flt = open_dataset(state["dataset"]), to_filter(state)
    return cached(f"users:{ds.name}:{ds.version}:{flt.cache_key()}", lambda: users.active_users(ds, flt))


def user_jobs(state: dict[str, Any]) -> pl.DataFrame:
    """The one selected user's jobs (a repeatable sample when there are many), empty unless one user is selected."""
    if len(state.get("users") or []) != 1:
        return pl.DataFrame()
    ds, flt = open_dataset(state["dataset"]), to_filter(state)
    return cached(f"userjobs:{ds.name}:{ds.version}:{flt.cache_key()}", lambda: users.user_jobs_sample(ds, flt))


def cluster_names(name: str) -> list[str]:
    """A dataset's clusters in the order its metadata lists them."""
    ds = open_dataset(name)
    return cached(f"clusters:{ds.name}:{ds.version}", lambda: catalog.cluster_names(ds))


def gpu_vcs(name: str, cluster: str) -> list[str]:
    """The VCs of a dataset's cluster that have GPU jobs."""
    ds = open_dataset(name)
    return cached(f"gpuvcs:{ds.name}:{ds.version}:{cluster}", lambda: catalog.gpu_vcs(ds, cluster))
