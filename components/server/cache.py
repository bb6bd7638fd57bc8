"""The query-result cache shared by the workers (files, or Redis when configured) with a per-worker fallback."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cachelib import SimpleCache
from flask import current_app
from flask_caching import Cache

from components.server.settings import Settings

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
        config = {
            "CACHE_TYPE": "RedisCache",
            "CACHE_REDIS_URL": settings.redis_url,
            # A stalled Redis must not stall the pages: give up after 2 s and serve from the local cache.
            "CACHE_OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
        }
    else:
        # A folder of its own: FileSystemCache counts, prunes and clears every file it finds in it.
        queries_dir = str(settings.cache_dir / "queries")
        config = {"CACHE_TYPE": "FileSystemCache", "CACHE_DIR": queries_dir, "CACHE_THRESHOLD": 5000}
    config.update(CACHE_DEFAULT_TIMEOUT=settings.cache_timeout_s, CACHE_KEY_PREFIX="helios:")
    cache.init_app(server, config=config)


def cached(key: str, compute: Callable[[], Any]) -> Any:
    """Return the cached value of key, computing and storing it on a miss."""
    value = _cache_get(key)
    if value is None:
        t0 = time.perf_counter()
        value = compute()
        log.info("computed %s in %.0f ms", key, (time.perf_counter() - t0) * 1000)
        _cache_set(key, value)
    return value


def peek(key: str) -> Any:
    """The cached value of key, None when it is not cached (nothing is computed)."""
    return _cache_get(key)


def parallel(*thunks: Callable[[], Any]) -> list[Any]:
    """Run independent queries on threads (DuckDB and Polars release the GIL), each inside this app's context."""
    app = current_app._get_current_object()

    def run(thunk: Callable[[], Any]) -> Any:
        with app.app_context():
            return thunk()

    with ThreadPoolExecutor(max_workers=len(thunks)) as pool:
        return list(pool.map(run, thunks))


def _bound() -> bool:
    """Whether the shared cache is set up on the current app (an app without init_cache uses the local one)."""
    return "cache" in current_app.extensions


def remember(key: str, value: Any, timeout_s: int) -> None:
    """Store a small fact under key for timeout_s in the shared cache (the local one when it is down or absent)."""
    if not _bound():
        _local.set(key, value, timeout=timeout_s)
        return
    try:
        cache.set(key, value, timeout=timeout_s)
    except _backend_errors() as exc:
        _shared_failed(exc)
        _local.set(key, value, timeout=timeout_s)


def recall(key: str) -> Any:
    """The fact stored under key, or None."""
    return _cache_get(key) if _bound() else _local.get(key)
