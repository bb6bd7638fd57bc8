"""Answers that are safe to expose: small request bodies (large ones for admin uploads only), security headers,
no caching of data, 400 for malformed Dash payloads, and the client's address behind a known number of proxies."""

from __future__ import annotations

import flask
from werkzeug.middleware.proxy_fix import ProxyFix

from components.server.auth import has_role
from components.server.settings import Settings

SMALL_BODY_BYTES = 8 * 1024**2  # every request but an admin's upload (gunicorn caps a URL at 8 KiB anyway)
DASH_UPDATE = "/_dash-update-component"
STATIC_PREFIXES = ("/assets/", "/_dash-component-suites/", "/_favicon.ico")
SECURITY_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'self'; form-action 'self'"
    ),
}


def _refuse(status: int, message: str) -> flask.Response:
    return flask.Response(message + "\n", status=status, mimetype="text/plain")


def _check_body() -> flask.Response | None:
    """413 for a large body unless it is an admin's Dash callback (an upload); 400 for a malformed Dash payload."""
    size = flask.request.content_length or 0
    is_update = flask.request.path == DASH_UPDATE
    if size > SMALL_BODY_BYTES and not (is_update and has_role("admin")):
        return _refuse(413, f"request body over {SMALL_BODY_BYTES} bytes")
    if is_update and flask.request.method == "POST":
        payload = flask.request.get_json(silent=True)
        if not isinstance(payload, dict) or not isinstance(payload.get("output"), str):
            return _refuse(400, "malformed callback request")
        if not isinstance(payload.get("inputs", []), list) or not isinstance(payload.get("state", []), list):
            return _refuse(400, "malformed callback request")
    return None


def _headers(response: flask.Response) -> flask.Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if not flask.request.path.startswith(STATIC_PREFIXES):
        response.headers["Cache-Control"] = "no-store"
    return response


def install_hardening(server: flask.Flask, settings: Settings) -> None:
    """Check request bodies after the access rules, add security and no-store headers to every answer, and take the
    client's address from X-Forwarded-For only as far as settings.proxy_count proxies wrote it (by default never:
    the header is the client's to forge)."""
    server.before_request(_check_body)
    server.after_request(_headers)
    if settings.proxy_count:
        server.wsgi_app = ProxyFix(server.wsgi_app, x_for=settings.proxy_count)
