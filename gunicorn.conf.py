"""Gunicorn settings for `gunicorn -c gunicorn.conf.py app:server`, each from an environment variable."""

import os

# Workers load Polars after they start, so this reaches its allocator (jemalloc): give freed pages back within a
# second instead of keeping them for ten (an explicit setting in the environment wins).
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:1000,muzzy_decay_ms:0")
MMAP_THRESHOLD_BYTES = 1 << 20  # the C heap serves larger blocks from their own mappings, unmapped when freed


def _int_env(name: str, default: int) -> int:
    """An integer environment variable, with a one-line error naming it when it is not a whole number."""
    raw = os.environ.get(name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"gunicorn.conf.py: {name}={raw!r} is not a whole number") from None


bind = f"{os.environ.get('HELIOS_BIND_HOST', '127.0.0.1')}:{_int_env('PORT', 8050)}"  # loopback unless told
workers = _int_env("WEB_CONCURRENCY", 2)
threads = _int_env("HELIOS_THREADS", 4)
timeout = _int_env("HELIOS_TIMEOUT", 120)
graceful_timeout = _int_env("HELIOS_GRACEFUL_TIMEOUT", 30)
keepalive = _int_env("HELIOS_KEEPALIVE", 5)
max_requests = _int_env("HELIOS_MAX_REQUESTS", 0)
max_requests_jitter = _int_env("HELIOS_MAX_REQUESTS_JITTER", 0)
limit_request_line = _int_env("HELIOS_LIMIT_REQUEST_LINE", 8190)
loglevel = os.environ.get("HELIOS_LOG_LEVEL", "info")
accesslog = None  # the app writes one JSON line per request on the helios.access logger
errorlog = "-"
reload = False  # never in production: `make dev` / `helios serve --debug` is the development server


def _listening(server) -> list[str]:
    """Every address the master listens on (binds given on the command line included), as hosts.announce takes them."""
    from components.server import hosts

    found = []
    for listener in server.LISTENERS:
        name = listener.sock.getsockname()
        found.append(hosts.address_text(*name[:2]) if isinstance(name, tuple) else f"{hosts.UNIX_PREFIX}{name}")
    # With reuse_port each worker binds on its own: then the configured addresses are all there is to go by.
    for address in server.cfg.address if not found else ():
        is_tcp = isinstance(address, tuple)
        found.append(hosts.address_text(*address) if is_tcp else f"{hosts.UNIX_PREFIX}{address}")
    return found


def when_ready(server):
    """Before any worker starts: tell the app where the server listens (its default allowed Host names), and refuse
    to serve everyone as admin unless that is loopback only. Standard library only here: the master forks the
    workers, so it must not load Polars or start threads."""
    from components.server import hosts

    addresses = _listening(server)
    hosts.announce(addresses)
    try:
        hosts.check_anonymous_role(os.environ.get(hosts.ANONYMOUS_ROLE_ENV, ""), tuple(addresses))
    except hosts.UnsafeServing as exc:
        server.log.error("%s", exc)  # to gunicorn's error log, wherever it goes
        raise SystemExit(1) from None


def post_worker_init(worker):
    """Warm each new worker in the background: the default dataset's derived files exist and its columns are mapped
    before the first visitor asks, and any dataset version a request meets gets its missing derived files in the
    background (components.server.derive). Large C-heap blocks (NumPy's arrays) are returned to the system when
    freed."""
    import ctypes
    import ctypes.util
    import threading

    from components.server import derive

    m_mmap_threshold = -3  # glibc's mallopt parameter; fixing it also stops glibc from raising it after frees
    ctypes.CDLL(ctypes.util.find_library("c")).mallopt(m_mmap_threshold, MMAP_THRESHOLD_BYTES)
    derive.enable()
    threading.Thread(target=_warm_default_dataset, args=(worker.log,), name="helios-warm-up", daemon=True).start()


def _warm_default_dataset(log) -> None:
    """Derive the default dataset when needed and map its column files (components.server.derive.warm); a missing or
    broken dataset is only logged."""
    from analytics import store
    from components.server import derive

    name = os.environ.get("HELIOS_DEFAULT_DATASET", store.DEFAULT_DATASET)
    try:
        derive.warm(store.open_dataset(name))
    except Exception as exc:  # noqa: BLE001 - warm-up is best effort; requests report real errors themselves
        log.warning("warm-up of dataset %r skipped: %s", name, exc)
    else:
        log.info("warm-up: dataset %r ready", name)
