"""Gunicorn settings for `gunicorn -c gunicorn.conf.py app:server`, each from an environment variable."""

import os


def _int_env(name: str, default: int) -> int:
    """An integer environment variable, with a one-line error naming it when it is not a whole number."""
    raw = os.environ.get(name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"gunicorn.conf.py: {name}={raw!r} is not a whole number") from None


bind = f"{os.environ.get('HELIOS_BIND_HOST', '0.0.0.0')}:{_int_env('PORT', 8050)}"
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
reload = False  # never in production: `make run` / `helios serve --debug` is the development server
