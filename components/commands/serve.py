"""`helios serve`: run the dashboard with Flask's development server, for people working on the code (`make dev`);
`make run` and production use gunicorn (gunicorn.conf.py)."""

from __future__ import annotations

import argparse
import os

from analytics.commands.common import fail
from components.server import hosts


def run(args: argparse.Namespace) -> int:
    """Build the app and serve it until interrupted; refuse anonymous admin on an address that is not loopback."""
    hosts.announce([hosts.address_text(args.host, args.port)])
    try:
        hosts.check_anonymous_role(os.environ.get(hosts.ANONYMOUS_ROLE_ENV, ""), hosts.listen_addresses())
    except hosts.UnsafeServing as exc:
        return fail(str(exc))
    from app import app

    # The dev tools' version check asks plotly.com, which the page's CSP refuses (two console errors per page).
    app.run(
        host=args.host,
        port=args.port,
        debug=args.debug,
        dev_tools_ui=args.debug,
        dev_tools_props_check=args.debug,
        dev_tools_disable_version_check=True,
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `serve` sub-command."""
    p = subparsers.add_parser(
        "serve",
        help="serve the dashboard on http://HOST:PORT with Flask's development server (`make run`: gunicorn)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port to listen on (default 8050)")
    p.add_argument("--debug", action="store_true", help="hot reload and Dash dev tools (`make dev`)")
    p.set_defaults(func=run)
