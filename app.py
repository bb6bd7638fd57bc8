"""The Dash app factory: `create_app(settings)` builds the dashboard; gunicorn serves `app:server`."""

from __future__ import annotations

import sys

import dash
from dash import Dash

from components.charts import margins
from components.explorer import export
from components.pages.status import install_page_status, run_first_request_setup
from components.server import cache as query_cache
from components.server import transfer
from components.server.access_log import install_access_log
from components.server.auth import AuthSettings, install_auth
from components.server.background import background_manager
from components.server.errors import install_error_handlers
from components.server.hardening import install_hardening
from components.server.health import install_health
from components.server.heartbeats import install_heartbeats
from components.server.hosts import check_anonymous_role, install_allowed_hosts
from components.server.preload import PreloadingDash
from components.server.settings import Settings, private_folder
from components.shell import callbacks
from components.shell import layout as shell


def create_app(settings: Settings | None = None) -> Dash:
    """Build the dashboard: pages, callbacks, query cache, CSV export, /healthz, request log, access control
    (anonymous admin refused unless the server listens on loopback only; Host names checked first) and compressed,
    cached answers."""
    settings = settings or Settings.from_env()
    auth_settings = AuthSettings.from_env()
    check_anonymous_role(auth_settings.anonymous_role, settings.listen)
    private_folder(settings.cache_dir)
    app = PreloadingDash(
        __name__,
        use_pages=True,
        pages_folder="components/pages",
        title="Helios Dashboard",
        update_title=None,
        # Dash's renderer checks callback ids against a validation layout sent in every page's HTML, and only its dev
        # tools show what it finds: tests/components/test_callback_ids.py makes that check once, in the suite.
        suppress_callback_exceptions=True,
        assets_path_ignore=[transfer.VENDOR_DIR],  # loaded on demand (components/server/transfer.py), not by the page
        meta_tags=[{"name": "viewport", "content": "width=device-width, initial-scale=1"}],
        background_callback_manager=background_manager(settings),
    )
    app.server.config["HELIOS_SETTINGS"] = settings
    query_cache.init_cache(app.server, settings)
    app.layout = shell.layout
    app.requested_layout = shell.requested_layout
    callbacks.register(app)
    # Dash imports every module of components/pages; each page that owns callbacks registers them here.
    for page in dash.page_registry.values():
        register = getattr(sys.modules[page["module"]], "register_callbacks", None)
        if register:
            register(app)
    app.server.add_url_rule(dash.get_relative_path(export.EXPORT_PATH), "jobs_csv", export.csv_view)
    install_health(app.server, settings)
    if settings.access_log:
        install_access_log(app.server)
    install_error_handlers(app.server)
    install_auth(app.server, auth_settings)
    install_hardening(app.server, settings)
    transfer.install_transfer(app)
    app.config.meta_tags.append(margins.text_sample_meta())  # the browser measures its font (assets/viewport.js)
    install_heartbeats(app.server)
    install_page_status(app.server, app.config.routes_pathname_prefix)
    run_first_request_setup(app.server)
    install_allowed_hosts(app.server, settings.host_names)  # last: it wraps every other layer
    return app


app = create_app()
server = app.server
