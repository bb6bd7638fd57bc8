"""HTTP error answers: a request for an unknown Dash asset bundle is a 404, not a server error."""

from __future__ import annotations

import flask
from dash.exceptions import DependencyException


def _unknown_bundle(exc: DependencyException) -> flask.Response:
    return flask.Response("not found\n", status=404, mimetype="text/plain")


def install_error_handlers(server: flask.Flask) -> None:
    """Answer requests for unregistered component bundles with 404."""
    server.register_error_handler(DependencyException, _unknown_bundle)
