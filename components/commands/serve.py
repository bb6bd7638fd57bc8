"""`helios serve`: run the dashboard with Flask's development server (use gunicorn, see Procfile, in production)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    """Build the app and serve it until interrupted."""
    from app import app

    app.run(host=args.host, port=args.port, debug=args.debug, dev_tools_ui=args.debug, dev_tools_props_check=args.debug)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `serve` sub-command."""
    p = subparsers.add_parser("serve", help="serve the dashboard on http://HOST:PORT")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port to listen on (default 8050)")
    p.add_argument("--debug", action="store_true", help="hot reload and Dash dev tools (never in production)")
    p.set_defaults(func=run)
