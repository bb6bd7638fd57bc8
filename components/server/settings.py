"""Typed settings of the web app, read from the environment only when the app is built."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from analytics.store import DEFAULT_DATASET
from components.server import hosts

REDIS_URL_ENV = "HELIOS_REDIS_URL"


@dataclass(frozen=True)
class Settings:
    """Where the data and the query cache live, and how the server behaves."""

    data_dir: Path | None = None  # None = analytics.store.data_dir() ($HELIOS_DATA_DIR or ./data)
    cache_dir: Path = Path(tempfile.gettempdir()) / f"helios-cache-{os.getuid()}"  # private to this user
    redis_url: str | None = None
    cache_timeout_s: int = 24 * 3600
    default_dataset: str = DEFAULT_DATASET
    max_runs: int = 2  # what-if runs and sweeps at once on this host
    max_runs_per_user: int = 1  # runs one signed-in user (or anonymous client address) may hold, and as many sweeps
    run_memory_mb: int = 6144  # memory one run may use before it is stopped
    run_timeout_s: int = 1800  # wall time one run may take before it is stopped
    # A run whose page stopped polling for this long is stopped. Above a minute: Chrome polls a tab hidden for five
    # minutes only once a minute.
    run_unpolled_s: int = 90
    proxy_count: int = 0  # reverse proxies in front whose X-Forwarded-For names the client (0: ignore the header)
    listen: tuple[str, ...] = ()  # where the server listens, as its launcher announced it (() = not known)
    allowed_hosts: tuple[str, ...] = ()  # HELIOS_ALLOWED_HOSTS: the Host names answered (() = the default ones)
    access_log: bool = True  # one JSON line per request on the helios.access logger (`make run` turns it off)

    @classmethod
    def from_env(cls) -> Settings:
        """Build settings from HELIOS_DATA_DIR, HELIOS_CACHE_DIR, HELIOS_REDIS_URL, HELIOS_CACHE_TIMEOUT_S, the run
        limits (HELIOS_MAX_RUNS, HELIOS_MAX_RUNS_PER_USER, HELIOS_RUN_*), HELIOS_PROXY_COUNT, HELIOS_ALLOWED_HOSTS,
        HELIOS_ACCESS_LOG and where the launcher said the server listens."""
        data = os.environ.get("HELIOS_DATA_DIR")
        return cls(
            data_dir=Path(data) if data else None,
            cache_dir=Path(os.environ.get("HELIOS_CACHE_DIR", str(cls.cache_dir))),
            redis_url=os.environ.get(REDIS_URL_ENV) or None,
            cache_timeout_s=int(os.environ.get("HELIOS_CACHE_TIMEOUT_S", str(cls.cache_timeout_s))),
            default_dataset=os.environ.get("HELIOS_DEFAULT_DATASET", cls.default_dataset),
            max_runs=_bounded_int("HELIOS_MAX_RUNS", cls.max_runs, 1, 64),
            max_runs_per_user=_bounded_int("HELIOS_MAX_RUNS_PER_USER", cls.max_runs_per_user, 1, 64),
            run_memory_mb=_bounded_int("HELIOS_RUN_MEMORY_MB", cls.run_memory_mb, 256, 1 << 20),
            run_timeout_s=_bounded_int("HELIOS_RUN_TIMEOUT_S", cls.run_timeout_s, 10, 7 * 86_400),
            run_unpolled_s=_bounded_int("HELIOS_RUN_UNPOLLED_S", cls.run_unpolled_s, 5, 86_400),
            proxy_count=_bounded_int("HELIOS_PROXY_COUNT", cls.proxy_count, 0, 8),
            listen=hosts.listen_addresses(),
            allowed_hosts=hosts.parse_allowed_hosts(os.environ.get(hosts.ALLOWED_HOSTS_ENV, "")),
            access_log=_flag("HELIOS_ACCESS_LOG", cls.access_log),
        )

    @property
    def host_names(self) -> tuple[str, ...]:
        """The Host names answered (any other gets 400): allowed_hosts, else the loopback names and the hosts the
        server listens on."""
        return self.allowed_hosts or hosts.default_hosts(self.listen)


def private_folder(path: Path) -> Path:
    """Create path as a folder only this user may use (0700), or refuse one that others own or may write: the
    caches below it are loaded as pickles, so nobody else may plant a file there."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise RuntimeError(
            f"cache folder {path} belongs to uid {info.st_uid}: set HELIOS_CACHE_DIR to a folder of yours"
        )
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path


def _bounded_int(name: str, default: int, low: int, high: int) -> int:
    """The integer environment variable name (default when unset), refused with a clear error outside [low, high]."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a whole number") from None
    if not low <= value <= high:
        raise ValueError(f"{name}={value}: expected {low} to {high}")
    return value


def _flag(name: str, default: bool) -> bool:
    """The on/off environment variable name (1/true/yes/on or 0/false/no/off; default when unset), refused with a
    clear error otherwise."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r}: expected 1 or 0")
