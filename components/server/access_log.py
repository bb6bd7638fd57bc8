"""Structured request logs: one JSON line per request on the `helios.access` logger."""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

import flask
from flask import g, request

LOGGER_NAME = "helios.access"
log = logging.getLogger(LOGGER_NAME)


def _user_name() -> str | None:
    from components.server.auth import current_user

    try:
        user = current_user()
    except RuntimeError:
        return None
    return user.name if user else None


def access_record(status: int) -> dict[str, Any]:
    """The log record of the current request, finished with HTTP status."""
    started = g.get("helios_started_s")
    duration_ms = round((time.perf_counter() - started) * 1000, 1) if started is not None else None
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "method": request.method,
        "path": request.path[:500],
        "status": status,
        "duration_ms": duration_ms,
        "user": _user_name(),
        "remote": request.remote_addr,
    }


def _start() -> None:
    g.helios_started_s = time.perf_counter()


def _finish(response: flask.Response) -> flask.Response:
    log.info(json.dumps(access_record(response.status_code), ensure_ascii=False))
    g.helios_logged = True
    return response


def _failed(exc: BaseException | None) -> None:
    if exc is not None and not g.get("helios_logged"):
        log.info(json.dumps(access_record(500), ensure_ascii=False))


def _ensure_handler() -> None:
    """Log to stderr (gunicorn's error log) unless the host application configured the logger already."""
    if log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def install_access_log(server: flask.Flask) -> None:
    """Log every request of server as one JSON line (time, method, path, status, duration_ms, user, remote)."""
    _ensure_handler()
    server.before_request_funcs.setdefault(None, []).insert(0, _start)
    server.after_request(_finish)
    server.teardown_request(_failed)
