"""What-if page: scheduling and CES scenarios over a window of the trace, compared with the recorded one."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, html

from analytics.filters import flat_params
from analytics.store import DatasetError
from components.datasets import access
from components.shell.layout import data_as_of
from components.whatif import callbacks, sweep
from components.whatif import form as whatif_form
from components.whatif.state import default_form, form_from_params

# filters=False: the page has its own dataset, cluster and window; the shell hides the global filter bar
# charts=False: its charts come with a run (components/server/transfer.py: plotly.js is not loaded at once)
dash.register_page(
    __name__, path="/whatif", name="What-if", title="Helios Dashboard · What-if", order=6, filters=False, charts=False
)

DEFAULT_WINDOW_DAYS = 7  # the default window: the cluster's last week up to its last busy day


def initial_form(params: dict[str, str]) -> tuple[dict, list[str], dict, list[str]]:
    """The page's form from URL parameters over sensible defaults: (form, datasets, scope, problems); the scope (the
    dataset's clusters and days, the form cluster's VCs) as the form's callbacks give it for the form's values."""
    names = access.dataset_names()
    dataset = params.get("ds") or access.default_dataset(names)
    base = default_form(dataset)
    if dataset in names:
        clusters = access.cluster_names(dataset)  # a dataset that cannot be read: the page says so (layout)
        first, last = access.dataset_period(dataset)
        cluster = params.get("cluster") or (clusters[0] if clusters else "")
        start, end = access.recent_days(dataset, cluster, DEFAULT_WINDOW_DAYS) if cluster in clusters else (None, None)
        start = max(filter(None, (start, first)), default=None)  # not before the dataset's first day
        base = default_form(dataset, cluster, start, end or last)
    form, problems = form_from_params(params, base)
    known = form["dataset"] if form["dataset"] in names else None
    clusters, first, last = whatif_form.scope_options(known)
    vcs = whatif_form.vc_options(known, form["cluster"])
    twin = access.captured_knobs(known) if known else None
    scope = {"clusters": clusters, "vcs": vcs, "first": first, "last": last, "twin": twin}
    return form, names, scope, problems


def layout(**params: Any) -> html.Div:
    """The what-if page for URL query parameters (a scenario with run=1 starts at once)."""
    flat = flat_params(params)
    try:
        form, names, scope, problems = initial_form(flat)
    except DatasetError as exc:
        return html.Div([html.H4("What-if"), dbc.Alert(str(exc), color="danger")])
    if not names:
        return html.Div(
            [
                html.H4("What-if"),
                dbc.Alert(["No dataset yet. Build one with ", html.Code("helios demo"), "."], color="warning"),
            ]
        )
    as_of = data_as_of(form["dataset"]) if form["dataset"] in names else None
    page = whatif_form.layout(form, names, scope, flat.get("run") == "1", problems, as_of)
    return html.Div([page, sweep.section(flat)])


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    callbacks.register(app)
