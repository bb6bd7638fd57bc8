"""`/healthz`: liveness plus checks of the data folder and the query cache (FileSystemCache folder or Redis).

Always HTTP 200 while the process answers (add `?ready=1` for 503 when degraded). Body:
  anonymous requests:  {"status": "ok" | "degraded"}
  authenticated users (or anyone when auth is off and HELIOS_HEALTH_DETAILS=1):
      {"status": ..., "checks": {"process": {...}, "data_dir": {...}, "cache": {...}}, "user": NAME}
Each check is {"ok": bool, ...facts, "error": "one line"} (error only when not ok).
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import flask

from analytics import store
from components.server import auth
from components.server.settings import Settings

log = logging.getLogger(__name__)

EXTENSION = "helios_health"
REDIS_TIMEOUT_S = 1.0
Check = Callable[[], dict[str, Any]]


def check_data_dir(path: Path) -> dict[str, Any]:
    """Whether the data folder can be listed, with its dataset count."""
    try:
        names = [p.name for p in path.iterdir()]
    except OSError as exc:
        return {
            "ok": False,
            "path": str(path),
            "error": f"cannot list the data folder ({exc.strerror or exc})",
        }
    datasets = len(store.list_datasets(path)) if names else 0
    return {"ok": True, "path": str(path), "datasets": datasets}


def check_cache_dir(path: Path) -> dict[str, Any]:
    """Whether the FileSystemCache folder can be written (a probe file is created and removed)."""
    probe = path / f".healthz-{uuid.uuid4().hex}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return {
            "ok": False,
            "backend": "filesystem",
            "error": f"cache folder not writable ({exc.strerror or exc})",
        }
    return {"ok": True, "backend": "filesystem", "path": str(path)}


def _redis_connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(REDIS_TIMEOUT_S)
        sock.connect(unquote(parts.path))
        return sock
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(f"unsupported Redis URL scheme {parts.scheme!r}")
    address = (parts.hostname or "localhost", parts.port or 6379)
    sock = socket.create_connection(address, timeout=REDIS_TIMEOUT_S)
    if parts.scheme == "rediss":
        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
    return sock


def _resp_command(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_line(sock: socket.socket) -> str:
    buf = b""
    while not buf.endswith(b"\r\n") and len(buf) < 4096:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("connection closed by Redis")
        buf += chunk
    return buf.decode(errors="replace").strip()


def redis_ping(url: str) -> None:
    """Send AUTH (when the URL has a password) and PING over RESP, raising OSError/ValueError unless PONG."""
    parts = urlsplit(url)
    with _redis_connect(url) as sock:
        if parts.password:
            user = [unquote(parts.username)] if parts.username else []
            sock.sendall(_resp_command("AUTH", *user, unquote(parts.password)))
            reply = _read_line(sock)
            if not reply.startswith("+OK"):
                raise ConnectionError(f"AUTH refused: {reply[:200]}")
        sock.sendall(_resp_command("PING"))
        reply = _read_line(sock)
    if reply != "+PONG":
        raise ConnectionError(f"unexpected reply to PING: {reply[:200]}")


def redacted(url: str) -> str:
    """The URL with any password replaced by ***."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def check_redis(url: str) -> dict[str, Any]:
    """Whether Redis answers PING within REDIS_TIMEOUT_S, with the round-trip time."""
    t0 = time.perf_counter()
    try:
        redis_ping(url)
    except (OSError, ValueError) as exc:
        message = f"Redis unreachable ({exc}): workers fall back to their local cache"
        return {"ok": False, "backend": "redis", "url": redacted(url), "error": message}
    ping_ms = round((time.perf_counter() - t0) * 1000, 1)
    return {"ok": True, "backend": "redis", "url": redacted(url), "ping_ms": ping_ms}


def default_checks(settings: Settings) -> dict[str, Check]:
    """The data-folder and cache checks of the app's settings (Redis when redis_url is set)."""
    data_dir = settings.data_dir or store.data_dir()
    cache: Check = (
        (lambda: check_redis(settings.redis_url))
        if settings.redis_url
        else (lambda: check_cache_dir(settings.cache_dir))
    )
    return {"data_dir": lambda: check_data_dir(data_dir), "cache": cache}


class HealthState:
    """The checks of one server, its start time, and the last status (to log changes once per worker)."""

    def __init__(self, checks: Mapping[str, Check], public_details: bool):
        self.checks = dict(checks)
        self.public_details = public_details
        self.started = time.monotonic()
        self.last_status = "ok"
        self._lock = threading.Lock()

    def run(self) -> dict[str, dict[str, Any]]:
        """Run every check, turning an unexpected exception into a failed check."""
        uptime_s = round(time.monotonic() - self.started)
        results = {"process": {"ok": True, "pid": os.getpid(), "uptime_s": uptime_s}}
        for name, check in self.checks.items():
            try:
                results[name] = check()
            except Exception as exc:  # a broken check must not break the health endpoint
                results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return results

    def note(self, status: str, results: dict[str, dict[str, Any]]) -> None:
        """Log when the status changes (degraded with the failing checks' errors, or recovered)."""
        with self._lock:
            changed, self.last_status = status != self.last_status, status
        if changed and status == "ok":
            log.info("health recovered: all checks pass")
        elif changed:
            errors = "; ".join(f"{k}: {v.get('error')}" for k, v in results.items() if not v.get("ok"))
            log.warning("health degraded: %s", errors)


def _show_details(state: HealthState) -> bool:
    if auth.auth_enabled():
        user = auth.current_user()
        return user is not None
    return state.public_details


def health_view() -> flask.Response:
    """Answer /healthz with the status, plus the checks for users allowed to see them."""
    state: HealthState = flask.current_app.extensions[EXTENSION]
    results = state.run()
    status = "ok" if all(r.get("ok") for r in results.values()) else "degraded"
    state.note(status, results)
    body: dict[str, Any] = {"status": status}
    if _show_details(state):
        user = auth.current_user()
        body.update(checks=results, user=user.name if user else None)
    resp = flask.jsonify(body)
    resp.headers["Cache-Control"] = "no-store"
    if status != "ok" and flask.request.args.get("ready") == "1":
        resp.status_code = 503
    return resp


def install_health(
    server: flask.Flask, checks: Settings | Mapping[str, Check], public_details: bool | None = None
) -> None:
    """Serve /healthz on server from app settings (default checks) or a mapping of named check callables."""
    if isinstance(checks, Settings):
        checks = default_checks(checks)
    if public_details is None:
        public_details = os.environ.get("HELIOS_HEALTH_DETAILS", "0").lower() in ("1", "true", "yes")
    server.extensions[EXTENSION] = HealthState(checks, public_details)
    server.add_url_rule(auth.HEALTH_PATH, "helios_healthz", health_view, methods=["GET", "HEAD"])
