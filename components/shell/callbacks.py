"""Shell callbacks: URL <-> filter bar, drop-down options, navigation links, figure rendering and CSV downloads."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import dash_bootstrap_components as dbc
from dash import MATCH, Dash, Input, Output, State, ctx, dcc, no_update

from analytics.csv_safety import csv_text
from analytics.filters import empty_state, page_params, query_params, to_query
from analytics.store import DatasetError
from components.charts import figures
from components.charts import registry as charts
from components.datasets import access
from components.shell import controls

log = logging.getLogger(__name__)

FILTER_INPUTS = (
    (controls.DATASET, "value"),
    (controls.CLUSTERS, "value"),
    (controls.VCS, "value"),
    (controls.RANGE, "value"),
    (controls.DATES, "start_date"),
    (controls.DATES, "end_date"),
    (controls.TIME_MODE, "value"),
    (controls.KIND, "value"),
    (controls.STATES, "value"),
    (controls.GPU_MIN, "value"),
    (controls.GPU_MAX, "value"),
    (controls.USERS, "value"),
)
OPTION_OUTPUTS = (
    (controls.CLUSTERS, "options"),
    (controls.VCS, "options"),
    (controls.USERS, "options"),
    (controls.DATES, "min_date_allowed"),
    (controls.DATES, "max_date_allowed"),
    (controls.TIME_MODE, "options"),
)


def state_to_controls(state: dict[str, Any]) -> list:
    """The filter-bar values showing a filter state, in FILTER_INPUTS order."""
    return [
        state["dataset"],
        state["clusters"],
        state["vcs"],
        state["range"],
        state["start"],
        state["end"],
        state["time"],
        state["job_kind"],
        state["states"],
        state["gpu_min"],
        state["gpu_max"],
        state["users"],
    ]


def _joined(value: Any) -> str:
    """A drop-down's value (a list of names) as one comma-separated URL parameter."""
    items = value if isinstance(value, list) else [value] if value else []
    return ",".join(str(v) for v in items if isinstance(v, str | int | float))


def _gpu_text(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
        return str(int(value))
    return "" if value in (None, "") else str(value)[:100]


def controls_to_params(values: list, trigger: Any = None) -> dict[str, str]:
    """The query parameters of the filter-bar values (in FILTER_INPUTS order); picking days clears the range."""
    dataset, clusters, vcs, span, start, end, mode, kind, states, gpu_min, gpu_max, users = values
    if trigger == controls.DATES:
        span = None
    return {
        "ds": str(dataset or "")[:200],
        "cluster": _joined(clusters),
        "vc": _joined(vcs),
        "user": _joined(users),
        "state": _joined(states),
        "range": str(span or "")[:100],
        "start": "" if span else str(start or "")[:10],
        "end": "" if span else str(end or "")[:10],
        "time": str(mode or "")[:100],
        "kind": str(kind or "all")[:100],
        "gmin": _gpu_text(gpu_min),
        "gmax": _gpu_text(gpu_max),
    }


def controls_to_state(values: list, trigger: Any = None) -> tuple[dict[str, Any], list[str]]:
    """The filter state of the filter-bar values (in FILTER_INPUTS order), checked against its dataset, and the
    problems found in them."""
    state, problems, _ = access.read_params(controls_to_params(values, trigger))
    return state, [p.replace("URL parameter", "filter") for p in problems]


WANT_JS = """function (spec, shown) {
    if (!shown || !spec || spec[%(drawn)s]) { return window.dash_clientside.no_update; }
    var seen = {%(viewport)s: Math.round(window.innerWidth)};
    if (window.HELIOS_TEXT_SAMPLE_PX) { seen[%(text)s] = window.HELIOS_TEXT_SAMPLE_PX; }
    return Object.assign({}, spec, seen);
}"""  # a shown card's spec, to be drawn by the server, unless laid out with its figure: the reader's width and font

MAX_USER_MATCHES = 50  # users the user drop-down offers per search, besides the chosen ones
USER_SEARCH_CHARS = 100  # of what the reader types in it

# sync_url's outputs, in the order it returns them
SYNC_OUTPUTS = (
    (controls.URL, "search"),
    (controls.FILTER_STATE, "data"),
    (controls.NAV_QUERY, "data"),
    (controls.URL_ALERT, "children"),
    *FILTER_INPUTS,
    *OPTION_OUTPUTS,
)


def _alerts(problems: list[str]) -> list:
    return [dbc.Alert(p, color="warning", className="py-1 small mb-2 url-problem") for p in problems]


def url_answer(search: str | None) -> tuple:
    """sync_url's answer to a URL's query string (the URL unchanged): its filter state in the bar and stores, the
    drop-down options, a note naming each parameter that cannot be used."""
    state, problems, _ = access.read_params(query_params(search))
    shown = state_to_controls(state)
    options = filter_options(state["dataset"], state["clusters"], state["users"])
    return (no_update, state, to_query(state), _alerts(problems), *shown, *options)


def sync_url(search: str | None, reset_clicks: int | None, *values: Any) -> tuple:
    """Keep URL and filter bar in step, sending drop-down options with the values they must contain; every value
    the URL or the bar gives that cannot be used is named in a note."""
    trigger = ctx.triggered_id
    if trigger in (None, controls.URL):
        return url_answer(search)
    names = access.dataset_names()
    alert, show = [], True
    if trigger == controls.FILTER_RESET:
        state = empty_state(values[0] or access.default_dataset(names))
    elif trigger == controls.DATASET:
        state = empty_state(controls_to_state(list(values))[0]["dataset"])
    else:
        state, problems = controls_to_state(list(values), trigger)
        show = bool(problems) or trigger in (controls.RANGE, controls.DATES)
        alert = _alerts(problems)
    shown = state_to_controls(state) if show else [no_update] * len(FILTER_INPUTS)
    options = filter_options(state["dataset"], state["clusters"], state["users"])
    return (to_query(state, page_params(search)), state, to_query(state), alert, *shown, *options)


def filter_options(dataset: str | None, clusters: list[str] | None, users: list[str] | None = None) -> tuple:
    """The choices of the cluster, VC and user drop-downs (of users, the chosen ones: the others are found by a search,
    search_users), the date bounds and the time modes for a dataset (running disabled, saying why, on a dataset
    without start times)."""
    if not dataset:
        return [], [], [], None, None, controls.TIME_OPTIONS
    try:
        opts = access.dataset_options(dataset)
        first, last = access.dataset_period(dataset)
        no_running = access.known_values(dataset).no_running
    except DatasetError:
        return [], [], [], None, None, controls.TIME_OPTIONS
    chosen = set(clusters or [])
    vcs = sorted({vc for c, vc in opts["cluster_vcs"] if not chosen or c in chosen})
    picked = user_matches(opts["users"], "", users)
    return opts["clusters"], vcs, picked, first, last, controls.time_options(no_running)


def user_matches(names: list[str], search: str, chosen: Any) -> list[str]:
    """The chosen users that are among names (every one: the drop-down drops a value that is not a choice), then up to
    MAX_USER_MATCHES others whose name contains search (in any case; none for an empty search)."""
    known = set(names)
    listed = chosen[: len(names)] if isinstance(chosen, list) else []  # no more can be chosen than there are
    picked = list(dict.fromkeys(u for u in listed if isinstance(u, str) and u in known))
    needle = search.strip().casefold()[:USER_SEARCH_CHARS]
    if not needle:
        return picked
    found = (n for n in names if needle in n.casefold() and n not in picked)
    return picked + list(itertools.islice(found, MAX_USER_MATCHES))


def search_users(search: Any, chosen: Any, state: Any):
    """The user drop-down's choices for what the reader types: the chosen users and the first matches (a dataset's
    users can be thousands: they are not all sent)."""
    dataset = state.get("dataset") if isinstance(state, dict) else None
    if not isinstance(search, str) or not search.strip() or not isinstance(dataset, str):
        return no_update
    try:
        names = access.dataset_options(dataset)["users"]
    except access.USER_ERRORS:
        return no_update
    return user_matches(names, search, chosen)


def render_figure(spec: dict[str, Any] | None):
    """Draw the figure a shown card's spec names into its slot, or a figure carrying the problem as a message."""
    if not isinstance(spec, dict) or spec.get(charts.DRAWN):
        return no_update  # laid out with its figure
    name = str(spec.get("name"))
    try:
        figure = charts.render_cached(spec)
    except access.USER_ERRORS as exc:
        log.info("figure %s: %s", name[:80], exc)
        figure = figures.empty_figure(str(exc))
    return controls.figure_graph(name, figure)


def download_csv(n_clicks: int | None, spec: dict[str, Any]):
    """Send the data behind a figure card as CSV (nothing for a chart its dataset cannot draw: the card says why)."""
    if not n_clicks:
        return no_update
    try:
        if charts.not_in_trace(spec):
            return no_update
        _, df = charts.render(spec)
    except access.USER_ERRORS:
        return no_update
    return dcc.send_string(csv_text(df), f"helios-{spec['name']}.csv")


def register(app: Dash) -> None:
    """Register the shell callbacks on app."""
    # No initial call, as Dash's pages router: a page's HTML is laid out with their answers to its URL
    # (layout.requested_layout); on the bare shell, the Location reads the URL as it mounts, which calls them.
    app.callback(
        *[Output(cid, prop) for cid, prop in SYNC_OUTPUTS],
        Input(controls.URL, "search"),
        Input(controls.FILTER_RESET, "n_clicks"),
        *[Input(cid, prop) for cid, prop in FILTER_INPUTS],
        prevent_initial_call=True,
    )(sync_url)
    app.callback(
        Output(controls.USERS, "options", allow_duplicate=True),
        Input(controls.USERS, "search_value"),
        State(controls.USERS, "value"),
        State(controls.FILTER_STATE, "data"),
        prevent_initial_call=True,
    )(search_users)
    # The links are set in the browser from the query string the filter callback sends: no request of their own.
    links = [controls.nav_link_id(label) for _, label in controls.pages()]
    app.clientside_callback(
        controls.nav_links_js(),
        *[Output(link, "href") for link in links],
        *[Output(link, "active") for link in links],
        Input(controls.NAV_QUERY, "data"),
        Input(controls.URL, "pathname"),
    )
    app.callback(Output(controls.FILTER_BAR, "style"), Input(controls.URL, "pathname"), prevent_initial_call=True)(
        controls.filter_bar_style
    )
    # Filters start folded on phones (< 768 px wide) and open elsewhere; the button toggles them.
    app.clientside_callback(
        "function(n, isOpen) { return n ? !isOpen : window.innerWidth >= 768; }",
        Output(controls.FILTER_COLLAPSE, "is_open"),
        Input(controls.FILTER_TOGGLE, "n_clicks"),
        State(controls.FILTER_COLLAPSE, "is_open"),
    )
    # A card's figure is asked for once it is shown, unless it was laid out with it: decided in the browser, so
    # that cards below the first screen and cards drawn from the cache send no request. A figure is asked for at the
    # viewport's width and the reader's font now (a page's HTML is laid out before the first visit's cookies exist).
    keys = {"drawn": charts.DRAWN, "viewport": charts.VIEWPORT, "text": charts.TEXT}
    app.clientside_callback(
        WANT_JS % {k: json.dumps(v) for k, v in keys.items()},
        Output({"type": controls.WANT, "name": MATCH}, "data"),
        Input({"type": controls.SPEC, "name": MATCH}, "data"),
        Input({"type": controls.SHOWN, "name": MATCH}, "data"),
    )
    app.callback(
        Output({"type": controls.SLOT, "name": MATCH}, "children"),
        Input({"type": controls.WANT, "name": MATCH}, "data"),
        prevent_initial_call=True,
    )(render_figure)
    app.callback(
        Output({"type": controls.CSV_DOWNLOAD, "name": MATCH}, "data"),
        Input({"type": controls.CSV_BUTTON, "name": MATCH}, "n_clicks"),
        State({"type": controls.SPEC, "name": MATCH}, "data"),
        prevent_initial_call=True,
    )(download_csv)
