"""Background-callback manager: DiskcacheManager by default, CeleryManager on Redis with HELIOS_REDIS_URL.

A poll that meets a network error (a server worker restarting) is sent again by assets/poll_retry.js.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from components.server.settings import REDIS_URL_ENV, Settings

INTERVAL_ENV = "HELIOS_BG_INTERVAL_MS"
DEFAULT_INTERVAL_MS = 1000
JOB_EXPIRE_S = 3600


class BackgroundSetupError(RuntimeError):
    """The configured background-callback manager cannot be built (a package is missing)."""


def cache_dir(settings: Settings | None = None) -> Path:
    """The background jobs' diskcache folder: <settings' cache folder (default: the environment's)>/background."""
    path = Path((settings or Settings.from_env()).cache_dir) / "background"
    path.mkdir(parents=True, exist_ok=True)
    return path


def poll_interval_ms() -> int:
    """Background-callback polling interval from HELIOS_BG_INTERVAL_MS (default 1000 ms, at least 50)."""
    raw = os.environ.get(INTERVAL_ENV, str(DEFAULT_INTERVAL_MS))
    try:
        return max(50, int(raw))
    except ValueError as exc:
        raise BackgroundSetupError(f"{INTERVAL_ENV}={raw!r} is not a whole number of milliseconds") from exc


def _require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackgroundSetupError(
            f"background callbacks need the {package!r} package ({exc}); install it or unset {REDIS_URL_ENV}"
        ) from exc


def background_manager(settings: Settings | None = None):
    """A background-callback manager: CeleryManager on Redis if a Redis URL is set, else DiskcacheManager."""
    import dash

    redis_url = (settings or Settings.from_env()).redis_url
    if redis_url:
        celery = _require("celery", "celery")
        _require("redis", "redis")
        app = celery.Celery("helios", broker=redis_url, backend=redis_url)
        return dash.CeleryManager(app, expire=JOB_EXPIRE_S)
    diskcache = _require("diskcache", "diskcache")
    _require("multiprocess", "multiprocess")
    _require("psutil", "psutil")
    return dash.DiskcacheManager(diskcache.Cache(str(cache_dir(settings))), expire=JOB_EXPIRE_S)
