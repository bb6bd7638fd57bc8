"""The HTTP status of a dashboard page's address: 404 for a path that names no page (or a page that says its
variables name nothing, such as an unknown job id), so links checkers and crawlers see a missing page as missing."""

from __future__ import annotations

import re
import sys
from typing import Any

import dash
import flask

NOT_FOUND_MODULE = "not_found_404"


def _template_variables(template: str, path: str) -> dict[str, str] | None:
    """The variables of a path matching a page's path template (`/jobs/<job_id>`), None when it does not match."""
    pattern = "".join(
        f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("<") else re.escape(part)
        for part in re.split(r"(<[A-Za-z_]\w*>)", template.rstrip("/"))
    )
    found = re.fullmatch(pattern, path.rstrip("/") or "/")
    return found.groupdict() if found else None


def page_status(path: str, args: dict[str, Any]) -> int:
    """200 when a path (without the app's prefix) is a page that has what its address names, else 404."""
    for page in dash.page_registry.values():
        if page["module"].split(".")[-1] == NOT_FOUND_MODULE:
            continue
        variables = _template_variables(page["path_template"], path) if page.get("path_template") else None
        if variables is None and (path.rstrip("/") or "/") != (page["path"].rstrip("/") or "/"):
            continue
        status = getattr(sys.modules[page["module"]], "status", None)
        return status(**(variables or {}), **args) if status else 200
    return 404


def install_page_status(server: flask.Flask, routes_prefix: str) -> None:
    """Answer Dash's page addresses (its index and catch-all routes only) with their page's HTTP status."""
    endpoints = {routes_prefix, routes_prefix + "<path:path>"}

    @server.after_request
    def _status(response: flask.Response) -> flask.Response:
        if flask.request.endpoint in endpoints and response.status_code == 200:
            path = "/" + flask.request.path[len(routes_prefix) :].lstrip("/")
            response.status_code = page_status(path, flask.request.args.to_dict())
        return response


def run_first_request_setup(server: flask.Flask) -> None:
    """Run Dash's one-time set-up (callback map, pages router, validation layout) now rather than on the first
    request: done lazily it is not thread-safe, and first requests arriving together broke it (a 500, or a
    validation layout without the pages, so every page callback reported 'ID not found in layout')."""
    with server.test_request_context("/"):
        server.preprocess_request()
