"""The shell's widgets: navbar, global filter bar and figure cards, with every component id in one place."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import dash
import dash_bootstrap_components as dbc
import flask
from dash import Dash, Input, Output, State, dcc, html, no_update

from analytics import schema
from analytics.filters import JOB_KINDS, RANGES, RUNNING, SUBMITTED, query_params, to_query
from components.charts import decimate, margins
from components.charts import registry as charts
from components.datasets import access

# Shell ids.
URL = "url"
URL_ALERT = "url-alert"
FILTER_STATE = "filter-state"
NAV_LINKS = "nav-links"
NAV_QUERY = "nav-query"  # the filter query string every page link carries (set with the filter state)
FILTER_BAR = "filter-bar"
FILTER_TOGGLE = "filter-toggle"
FILTER_COLLAPSE = "filter-collapse"
FILTER_RESET = "filter-reset"
DATA_AS_OF = "data-as-of"
WINDOW_NOTE = "window-note"
# Filter controls, in the order of the filter bar.
DATASET = "f-dataset"
CLUSTERS = "f-clusters"
VCS = "f-vcs"
RANGE = "f-range"
DATES = "f-dates"
TIME_MODE = "f-time"
KIND = "f-kind"
STATES = "f-states"
GPU_MIN = "f-gpu-min"
GPU_MAX = "f-gpu-max"
USERS = "f-users"
# Pattern-matching ids of figure cards: {"type": GRAPH, "name": <figure name>} and friends.
GRAPH = "graph"
SPEC = "graph-spec"
SLOT = "graph-slot"  # the Div a card's Graph is drawn into
SHOWN = "graph-shown"  # True once the card is in view (assets/lazy_figures.js): its figure is asked for then
WANT = "graph-want"  # the spec of a shown card not laid out with its figure: what the server draws
LAZY_ATTR = "data-lazy-shown"  # on a lazy card or section: its shown store's id, for assets/lazy_figures.js
LAZY_TOKEN = "data-lazy-token"  # new with every layout, so that a card laid out again is asked for again
# A section below the first screen (a table) is built once it scrolls into view: {"type": LAZY_BODY, "name": ...}
# is filled by its page's callback on {"type": LAZY_SHOWN, "name": ...}.
LAZY_SHOWN = "lazy-shown"
LAZY_BODY = "lazy-body"
CSV_BUTTON = "csv-button"
CSV_DOWNLOAD = "csv-download"
CACHED_FIGURES = "helios_cached_figures"  # flask.g: the list noting_cached_figures gives, while it lasts

KIND_LABELS = {"all": "All jobs", "gpu": "GPU jobs", "cpu": "CPU jobs"}
KIND_OPTIONS = [{"label": KIND_LABELS[kind], "value": kind} for kind in JOB_KINDS]
RANGE_OPTIONS = [{"label": label, "value": key} for key, label in RANGES.items()]
TIME_OPTIONS = [{"label": "submitted in it", "value": SUBMITTED}, {"label": "running in it", "value": RUNNING}]


def time_options(no_running: str | None) -> list[dict[str, Any]]:
    """The time modes of the filter bar, running disabled (its label saying why) when no_running gives a reason."""
    if not no_running:
        return TIME_OPTIONS
    disabled = {"label": f"running in it (not in this trace: {no_running})", "value": RUNNING, "disabled": True}
    return [TIME_OPTIONS[0], disabled]


JOB_PATH = "/jobs/"  # + job id: the job page


def job_href(job_id: Any, dataset: str, cluster: str) -> str:
    """The link to one job's page."""
    return f"{JOB_PATH}{job_id}?{urlencode({'ds': dataset, 'cluster': cluster})}"


def nav_href(path: str, state: dict[str, Any]) -> str:
    """The link to a page that keeps the current filters."""
    return path + to_query(state)


def pages() -> list[tuple[str, str]]:
    """(path, name) of every registered Dash page of the menu (not those registered with nav=False), in menu order."""
    registry = sorted(dash.page_registry.values(), key=lambda p: (p.get("order") is None, p.get("order") or 0))
    return [(p["path"], p["name"]) for p in registry if p.get("nav", True)]


def filter_bar_style(pathname: str | None) -> dict[str, str] | None:
    """The filter bar hidden on a page registered with filters=False (its own form, or no job filters)."""
    page = next((p for p in dash.page_registry.values() if p["path"] == pathname), {})
    return {"display": "none"} if page.get("filters") is False else None


def nav_links(state: dict[str, Any], pathname: str | None = "/") -> list:
    """The navbar's page links, each carrying the filter query string, the current page's highlighted."""
    return [
        dbc.NavItem(dbc.NavLink(label, href=nav_href(path, state), active=path == pathname, id=nav_link_id(label)))
        for path, label in pages()
    ]


def nav_link_id(label: str) -> str:
    """The id of the navbar's link to the page labelled label."""
    return f"nav-{label.lower()}"


NAV_LINKS_JS = """function (query, pathname) {
    var paths = %s;
    var hrefs = paths.map(function (p) { return p + (query || ""); });
    return hrefs.concat(paths.map(function (p) { return p === pathname; }));
}"""  # the navbar's links from the filter query string and the page's path: every href, then every active flag


def nav_links_js() -> str:
    """The clientside function that sets the navbar's links (NAV_LINKS_JS with the pages' paths)."""
    return NAV_LINKS_JS % json.dumps([path for path, _ in pages()])


def navbar(state: dict[str, Any]) -> dbc.Navbar:
    """The top navigation bar with the brand and the page links."""
    return dbc.Navbar(
        dbc.Container(
            [
                dbc.NavbarBrand("Helios Dashboard", href=nav_href("/", state), className="fw-semibold"),
                dbc.Nav(nav_links(state), id=NAV_LINKS, pills=True, navbar=True, className="flex-row flex-wrap"),
            ],
            fluid=True,
            className="gap-2 flex-wrap",
        ),
        color="dark",
        dark=True,
        expand=True,
        className="mb-2 py-1",
    )


def _labelled(label: str, control, width: dict[str, int]) -> dbc.Col:
    return dbc.Col([dbc.Label(label, className="small text-muted mb-0"), control], **width, className="mb-2")


def date_range(cid: str, **props: Any) -> dcc.DatePickerRange:
    """A full-width day range picker showing ISO dates."""
    return dcc.DatePickerRange(id=cid, display_format="YYYY-MM-DD", className="w-100", **props)


def filter_bar(state: dict[str, Any], datasets: list[str]) -> html.Div:
    """The global filter bar; its values are set from the URL by the shell callbacks."""
    wide, narrow = {"xs": 12, "md": 6, "xl": 3}, {"xs": 6, "md": 3, "xl": 1}
    pick = {"xs": 12, "md": 6, "xl": 2}
    row = dbc.Row(
        [
            _labelled(
                "Dataset", dcc.Dropdown(id=DATASET, options=datasets, value=state["dataset"], clearable=False), pick
            ),
            _labelled("Clusters", dcc.Dropdown(id=CLUSTERS, multi=True, placeholder="all clusters"), pick),
            _labelled("VCs", dcc.Dropdown(id=VCS, multi=True, placeholder="all VCs"), pick),
            _labelled(
                "Time range",
                dcc.Dropdown(id=RANGE, options=RANGE_OPTIONS, placeholder="custom days", clearable=True),
                pick,
            ),
            _labelled(
                "Between (days)",
                html.Div(
                    [
                        date_range(
                            DATES, clearable=True, start_date_placeholder_text="start", end_date_placeholder_text="end"
                        ),
                        html.Div(
                            [
                                html.Span("jobs", className="small text-muted me-2"),
                                dbc.RadioItems(
                                    id=TIME_MODE,
                                    options=TIME_OPTIONS,
                                    value=SUBMITTED,
                                    inline=True,
                                    className="small d-inline-block",
                                ),
                            ],
                            title="Submitted in it: jobs submitted in the window. Running in it: jobs that ran at "
                            "some time in it (started before its end, ended after its start).",
                        ),
                    ]
                ),
                {"xs": 12, "md": 6, "xl": 4},
            ),
            _labelled(
                "Jobs",
                dbc.RadioItems(id=KIND, options=KIND_OPTIONS, value="all", inline=True, className="pt-1"),
                {"xs": 12, "md": 6, "xl": 4},
            ),
            _labelled(
                "States",
                dcc.Dropdown(id=STATES, options=list(schema.STATES), multi=True, placeholder="all states"),
                pick,
            ),
            _labelled("GPUs ≥", dbc.Input(id=GPU_MIN, type="number", min=0, step=1, debounce=True), narrow),
            _labelled("GPUs ≤", dbc.Input(id=GPU_MAX, type="number", min=0, step=1, debounce=True), narrow),
            _labelled("User", dcc.Dropdown(id=USERS, multi=True, placeholder="all users (type to find one)"), wide),
            dbc.Col(
                dbc.Button("Reset filters", id=FILTER_RESET, color="secondary", outline=True, size="sm"),
                xs=12,
                md="auto",
                className="mb-2 d-flex align-items-end",
            ),
        ],
        className="g-2",
    )
    toggle = dbc.Button("Filters", id=FILTER_TOGGLE, color="link", size="sm", className="d-md-none px-0")
    return html.Div(
        [toggle, dbc.Collapse(row, id=FILTER_COLLAPSE, is_open=True)],
        id=FILTER_BAR,
        className="filter-bar border-bottom mb-3",
    )


def graph_config(name: str) -> dict[str, Any]:
    """Plotly modebar settings: PNG download named after the figure; no plotly logo, no cloud or Chart Studio link."""
    return {
        "displaylogo": False,
        "responsive": True,
        "showSendToCloud": False,
        "showEditInChartStudio": False,
        "toImageButtonOptions": {"format": "png", "filename": f"helios-{name}", "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d", "sendDataToCloud", "editInChartStudio"],
    }


def figure_graph(name: str, figure: dict[str, Any] | None = None) -> dcc.Graph:
    """The Graph of a figure card, filling its slot's height."""
    return dcc.Graph(
        id={"type": GRAPH, "name": name},
        config=graph_config(name),
        style={"height": "100%"},
        **({"figure": figure} if figure is not None else {}),
    )


@contextmanager
def noting_cached_figures() -> Iterator[list[str]]:
    """Within it, the names of the eager figure cards laid out with their cached figure are added to the list it
    gives."""
    noted: list[str] = []
    before = flask.g.get(CACHED_FIGURES)
    setattr(flask.g, CACHED_FIGURES, noted)
    try:
        yield noted
    finally:
        setattr(flask.g, CACHED_FIGURES, before)


def _cookie(name: str) -> str | None:
    value = flask.request.cookies.get(name) if flask.has_request_context() else None
    return value[:16] if value else None


def viewport_px() -> int:
    """The width of the reader's viewport (the cookie assets/viewport.js sets), bounded; the default without."""
    return decimate.viewport_width(_cookie(decimate.VIEWPORT_COOKIE))


def figure_card(
    name: str,
    state: dict[str, Any],
    height_px: int = 380,
    extra: dict | None = None,
    lazy: bool = True,
    wide: bool = False,
) -> html.Div:
    """A card holding one figure, its loading spinner, its CSV download button and its data spec; a lazy card asks
    for its figure when it scrolls into view, an eager one (the first screen) at once or laid out with it when it
    is cached. A wide card takes its row's whole width (wide_row), another half of it from the lg breakpoint on."""
    spec = {"name": name, "state": state, **(extra or {}), charts.VIEWPORT: viewport_px(), charts.WIDE: wide}
    spec[charts.TEXT] = _cookie(margins.TEXT_COOKIE)
    missing = _not_in_trace(spec)
    figure = None if lazy else charts.cached_figure(spec)
    if figure is not None:
        spec[charts.DRAWN] = True
        noted = flask.g.get(CACHED_FIGURES) if flask.has_request_context() else None
        if noted is not None:
            noted.append(name)
    shown_id = {"type": SHOWN, "name": name}
    slot = html.Div(
        [figure_graph(name, figure)] if figure is not None else [],
        id={"type": SLOT, "name": name},
        className="figure-slot",
        style={"height": f"{height_px}px"},
    )
    card = dbc.Card(
        [
            dbc.CardBody(
                [
                    dcc.Store(id={"type": SPEC, "name": name}, data=spec),
                    dcc.Store(id=shown_id, data=not lazy),
                    dcc.Store(id={"type": WANT, "name": name}),
                    dcc.Loading(slot, type="circle", delay_show=150),
                    html.Div(
                        [
                            dbc.Button(
                                "CSV",
                                id={"type": CSV_BUTTON, "name": name},
                                size="sm",
                                color="secondary",
                                outline=True,
                                disabled=bool(missing),
                                title=missing or "Download this figure's data as CSV",
                            ),
                            dcc.Download(id={"type": CSV_DOWNLOAD, "name": name}),
                        ],
                        className="text-end",
                    ),
                ],
                className="p-2",
            )
        ],
        className="h-100 shadow-sm",
    )
    return html.Div(card, className="h-100", **(lazy_marks(shown_id) if lazy else {}))


def _not_in_trace(spec: dict[str, Any]) -> str | None:
    """Why a card's chart has nothing to draw or download on its dataset (None when it has, or the dataset is
    unknown: the figure says so)."""
    try:
        return charts.not_in_trace(spec)
    except access.USER_ERRORS:
        return None


def lazy_marks(shown_id: dict[str, str]) -> dict[str, str]:
    """The attributes by which assets/lazy_figures.js sets the store shown_id to True once the element is in view."""
    return {LAZY_ATTR: json.dumps(shown_id, sort_keys=True), LAZY_TOKEN: uuid.uuid4().hex[:12]}


def dash_id(component_id: dict[str, str]) -> str:
    """A pattern-matching id as dash-renderer writes it (its stringifyId: keys sorted, no spaces)."""
    return json.dumps(component_id, sort_keys=True, separators=(",", ":"))


def lazy_section(name: str, height_px: int) -> html.Div:
    """A placeholder of height_px for a section below the first screen, filled by a callback on its LAZY_SHOWN store
    (see lazy_body_callback) once it scrolls into view."""
    shown_id = {"type": LAZY_SHOWN, "name": name}
    body_id = {"type": LAZY_BODY, "name": name}
    body = html.Div(id=body_id, style={"minHeight": f"{height_px}px"})
    # the spinner covers the section while it is built, not while a callback inside it runs (a grid's next page)
    loading = dcc.Loading(body, type="dot", delay_show=150, target_components={dash_id(body_id): "children"})
    return html.Div([dcc.Store(id=shown_id, data=False), loading], **lazy_marks(shown_id))


def lazy_body_callback(app: Dash, name: str, build: Callable[[dict[str, Any]], Any]) -> None:
    """Fill the lazy section name with build(the page's filter state) once it is shown."""
    app.callback(
        Output({"type": LAZY_BODY, "name": name}, "children"),
        Input({"type": LAZY_SHOWN, "name": name}, "data"),
        State(URL, "search"),
        prevent_initial_call=True,
    )(lambda shown, search: lazy_body(build, shown, search))


def lazy_body(build: Callable[[dict[str, Any]], Any], shown: Any, search: Any):
    """build(the filter state of the page's URL, checked as the page's own layout checks it) once shown is True."""
    if shown is not True:
        return no_update
    state, _, _ = access.read_params(query_params(search if isinstance(search, str) else None))
    try:
        return build(state)
    except access.USER_ERRORS as exc:
        return dbc.Alert(f"This table cannot be built: {str(exc)[:200]}", color="warning")


def figure_request(spec: dict[str, Any]) -> dict[str, Any]:
    """The request body the browser posts to /_dash-update-component for a shown card's figure."""
    slot, want = ({"type": t, "name": spec["name"]} for t in (SLOT, WANT))
    return {
        "output": dash_id({"name": ["MATCH"], "type": SLOT}) + ".children",
        "outputs": {"id": slot, "property": "children"},
        "inputs": [{"id": want, "property": "data", "value": spec}],
        "state": [],
        "changedPropIds": [dash_id(want) + ".data"],
    }


def figure_of(response: dict[str, Any], name: str) -> dict[str, Any]:
    """The figure in the response to figure_request (the Graph its slot is filled with)."""
    slot = dash_id({"name": name, "type": SLOT})
    return response["response"][slot]["children"]["props"]["figure"]


def grid(cards: list, cols: dict[str, int] | None = None) -> dbc.Row:
    """Lay out cards in a responsive grid (one column on phones)."""
    widths = cols or {"xs": 12, "lg": 6}
    return dbc.Row([dbc.Col(card, **widths, className="mb-3") for card in cards], className="g-3")


def wide_row(name: str, state: dict[str, Any], height_px: int = 380, lazy: bool = True) -> dbc.Row:
    """A row holding one wide figure card, as wide as the page."""
    return grid([figure_card(name, state, height_px, lazy=lazy, wide=True)], {"xs": 12})


def page_header(title: str, subtitle: str = "") -> html.Div:
    """A page title with a one-line explanation."""
    return html.Div([html.H4(title, className="mb-0"), html.P(subtitle, className="text-muted small mb-2")])
