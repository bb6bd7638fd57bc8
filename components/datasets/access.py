"""Cached access to the datasets and analytics.queries, keyed by dataset version and filter cache key."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import polars as pl
from cachelib import SimpleCache
from flask import current_app
from flask_caching import Cache

from analytics import db, queries, store
from components.server.settings import Settings
from components.shell.state import to_filter

log = logging.getLogger(__name__)

# One Cache object bound to each app by init_cache(); its backing store (files or Redis) is shared by workers.
cache = Cache()
# When the shared store fails (Redis stopped), each worker carries on with a small in-process cache.
_local = SimpleCache(threshold=500, default_timeout=600)
_failing: dict[str, bool] = {"shared": False}


def _backend_errors() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import RedisError
    except ImportError:
        return (OSError,)
    return (OSError, RedisError)


def _shared_failed(exc: BaseException) -> None:
    if not _failing["shared"]:
        log.warning("shared cache unavailable (%s): serving with this worker's local cache", exc)
    _failing["shared"] = True


def _cache_get(key: str) -> Any:
    try:
        value = cache.get(key)
    except _backend_errors() as exc:
        _shared_failed(exc)
        return _local.get(key)
    if _failing["shared"]:
        log.warning("shared cache reachable again")
        _failing["shared"] = False
    return value


def _cache_set(key: str, value: Any) -> None:
    try:
        cache.set(key, value)
    except _backend_errors() as exc:
        _shared_failed(exc)
        _local.set(key, value)


def init_cache(server, settings: Settings) -> None:
    """Bind the query cache to a Flask server: RedisCache when a Redis URL is set, else FileSystemCache."""
    if settings.redis_url:
        config = {"CACHE_TYPE": "RedisCache", "CACHE_REDIS_URL": settings.redis_url}
    else:
        # A folder of its own: FileSystemCache counts, prunes and clears every file it finds in it.
        queries_dir = str(settings.cache_dir / "queries")
        config = {"CACHE_TYPE": "FileSystemCache", "CACHE_DIR": queries_dir, "CACHE_THRESHOLD": 5000}
    config.update(CACHE_DEFAULT_TIMEOUT=settings.cache_timeout_s, CACHE_KEY_PREFIX="helios:")
    cache.init_app(server, config=config)


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


def cached(key: str, compute: Callable[[], Any]) -> Any:
    """Return the cached value of key, computing and storing it on a miss."""
    value = _cache_get(key)
    if value is None:
        t0 = time.perf_counter()
        value = compute()
        log.info("computed %s in %.0f ms", key, (time.perf_counter() - t0) * 1000)
        _cache_set(key, value)
    return value


def parallel(*thunks: Callable[[], Any]) -> list[Any]:
    """Run independent queries on threads (DuckDB and Polars release the GIL), each inside this app's context."""
    app = current_app._get_current_object()

    def run(thunk: Callable[[], Any]) -> Any:
        with app.app_context():
            return thunk()

    with ThreadPoolExecutor(max_workers=len(thunks)) as pool:
        return list(pool.map(run, thunks))


def _kwargs_key(kwargs: dict[str, Any]) -> str:
    return ",".join(f"{k}={kwargs[k]}" for k in sorted(kwargs))


def query(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state, through the cache."""
    ds = open_dataset(state["dataset"])
    flt = to_filter(state)
    fn = getattr(queries, name)
    key = f"q:{name}:{ds.name}:{ds.version}:{flt.cache_key()}:{_kwargs_key(kwargs)}"
    return cached(key, lambda: fn(ds, flt, **kwargs))


def query_uncached(name: str, state: dict[str, Any], **kwargs: Any) -> pl.DataFrame:
    """Run analytics.queries.<name> for a filter state without caching its (large) result."""
    return getattr(queries, name)(open_dataset(state["dataset"]), to_filter(state), **kwargs)


def derived(name: str, state: dict[str, Any], compute: Callable[[], Any]) -> Any:
    """Cache a value derived from queries of a filter state under name."""
    ds = open_dataset(state["dataset"])
    return cached(f"d:{name}:{ds.name}:{ds.version}:{to_filter(state).cache_key()}", compute)


def dataset_options(name: str) -> dict[str, list[str]]:
    """The clusters, (cluster, VC) pairs and users of a dataset, for the filter drop-downs."""
    ds = open_dataset(name)

    def compute() -> dict[str, list[str]]:
        pairs = ds.jobs().select("cluster", "vc").unique().collect()
        users = ds.jobs().select("user").drop_nulls().unique().collect()["user"].sort()
        return {
            "clusters": sorted(pairs["cluster"].unique().to_list()),
            "cluster_vcs": [[c, v] for c, v in pairs.drop_nulls().sort(["cluster", "vc"]).iter_rows()],
            "users": users.to_list(),
        }

    return cached(f"opts:{ds.name}:{ds.version}", compute)


def dataset_period(name: str) -> tuple[str | None, str | None]:
    """First and last submit day of a dataset as ISO dates."""
    ds = open_dataset(name)

    def compute() -> tuple[str | None, str | None]:
        row = ds.jobs().select(pl.col("submit_time").min().alias("a"), pl.col("submit_time").max().alias("b"))
        a, b = row.collect().row(0)
        return (a.date().isoformat() if a else None, b.date().isoformat() if b else None)

    return cached(f"period:{ds.name}:{ds.version}", compute)


USER_JOBS_SAMPLE = 5_000


def active_users(state: dict[str, Any]) -> pl.DataFrame:
    """Distinct users per cluster among the jobs a filter state selects (columns cluster, active_users)."""
    ds = open_dataset(state["dataset"])
    flt = to_filter(state)
    where, params = flt.where()
    sql = f'SELECT cluster, count(DISTINCT "user")::BIGINT AS active_users FROM jobs WHERE {where} GROUP BY cluster'
    return cached(f"users:{ds.name}:{ds.version}:{flt.cache_key()}", lambda: db.run(sql, params, ds=ds))


def user_jobs(state: dict[str, Any]) -> pl.DataFrame:
    """The one selected user's jobs (a repeatable random sample of USER_JOBS_SAMPLE when there are more), with
    their total count in column of_jobs; empty unless exactly one user is selected."""
    if len(state.get("users") or []) != 1:
        return pl.DataFrame()
    ds = open_dataset(state["dataset"])
    flt = to_filter(state)
    where, params = flt.where()

    def compute() -> pl.DataFrame:
        sql = (
            "WITH mine AS (SELECT cluster, job_id, vc, gpu_num, state, submit_time, duration, queue, "
            f"count(*) OVER () AS of_jobs FROM jobs WHERE {where}) "
            f"SELECT * FROM mine USING SAMPLE reservoir({USER_JOBS_SAMPLE} ROWS) REPEATABLE (7) ORDER BY submit_time"
        )
        return db.run(sql, params, ds=ds)

    return cached(f"userjobs:{ds.name}:{ds.version}:{flt.cache_key()}", compute)
