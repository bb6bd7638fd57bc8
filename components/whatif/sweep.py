"""The what-if page's sweep mode: run a grid of scenarios on Dask and chart one metric over it."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import urlencode

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
import polars as pl
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate
from plotly.io.json import to_json_plotly

from analytics.filters import query_params
from components.charts import units
from components.charts.figures import empty_figure, style
from components.server.background import poll_interval_ms
from components.server.runs import RunCancelled, RunError, job_caller, run_in_subprocess, run_token
from components.server.settings import Settings
from components.shell.controls import graph_config
from components.whatif import form as ids
from components.whatif import labels
from components.whatif.figures import SCHEME_DASH, scheme_color
from components.whatif.run import SCENARIO_ERRORS, cancel_request, results_cache
from components.whatif.state import form_to_config, form_to_params
from sim.scenario import RECORDED, TWIN, ScenarioError, config_to_dict, open_request
from sim.sweep import CES_METRICS, parse_grid, run_sweep, sweep_scheduler, sweepable

X_PARAM = "whatif-sweep-x"
X_VALUES = "whatif-sweep-x-values"
Y_PARAM = "whatif-sweep-y"
Y_VALUES = "whatif-sweep-y-values"
METRIC = "whatif-sweep-metric"
RUN = "whatif-sweep-run"
CANCEL = "whatif-sweep-cancel"
PROGRESS = "whatif-sweep-progress"
STATUS = "whatif-sweep-status"
GRAPH = "whatif-sweep-graph"
GRAPH_PX = 420
ERROR = "whatif-sweep-error"
AUTORUN = "whatif-sweep-autorun"
REQUEST = "whatif-sweep-request"  # {"token": ...}: one per press of Run sweep, which Cancel names
METRICS: tuple[str, ...] = (
    "avg_jct_s",
    "avg_queue_s",
    "p95_jct_s",
    "p99_queue_s",
    "avg_bounded_slowdown",
    "gpu_util_pct",
    *CES_METRICS,
)
NONE = "(none)"
# URL parameters of the sweep (beside the form's): parameter, its values, second parameter, its values, metric;
# AUTORUN_KEY=1 (sweep=1) runs it (or shows it from the cache) when the page opens.
URL_KEYS: dict[str, str] = {"sx": X_PARAM, "sxv": X_VALUES, "sy": Y_PARAM, "syv": Y_VALUES, "sm": METRIC}
AUTORUN_KEY = "sweep"
DEFAULTS: dict[str, str] = {"sx": "load_factor", "sxv": "0.8,1.0,1.2", "sy": "policy", "syv": "fifo,sjf,qssf"}
DEFAULTS["sm"] = "avg_jct_s"
MAX_VALUES_CHARS = 200


def settings_from_params(params: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The sweep settings of URL parameters over the defaults, and what was wrong with them (checked as a run checks
    them: known parameter and metric names, values the grid parser accepts)."""
    chosen, problems = dict(DEFAULTS), []
    names = {"sx": tuple(sweepable()), "sy": (NONE, *sweepable()), "sm": METRICS}
    for key, allowed in names.items():
        if key in params:
            if params[key] in allowed:
                chosen[key] = params[key]
            else:
                problems.append(f"URL parameter {key}={params[key][:60]!r} must be one of {', '.join(allowed)}")
    for key in ("sxv", "syv"):
        if key in params:
            chosen[key] = params[key][:MAX_VALUES_CHARS]  # kept in the form, so the user can mend it
    if any(k in params for k in URL_KEYS):
        try:
            grid_of(chosen["sx"], chosen["sxv"], chosen["sy"], chosen["syv"])
        except (ScenarioError, ValueError) as exc:
            problems.append(f"URL sweep values: {exc}")
    return chosen, problems


def _option(name: str, label: str, tip: str) -> dict:
    return {"label": label, "value": name, "title": tip}


def section(params: dict[str, str] | None = None) -> dbc.Card:
    """The sweep controls (from the URL's sweep parameters, their problems named), progress and chart."""
    chosen, problems = settings_from_params(params or {})
    options = [_option(p, labels.parameter_label(p), labels.parameter_help(p)) for p in sweepable()]
    metrics = [_option(m, labels.metric_label(m), labels.metric_help(m)) for m in METRICS]
    second = [_option(NONE, NONE, "sweep one parameter"), *options]

    def col(label: str, control, width: int) -> dbc.Col:
        return dbc.Col([html.Label(label, className="small text-muted mb-0 d-block"), control], md=width)

    controls = dbc.Row(
        [
            col("Sweep parameter", dcc.Dropdown(id=X_PARAM, options=options, value=chosen["sx"]), 3),
            col("its values", dbc.Input(id=X_VALUES, value=chosen["sxv"], size="sm"), 2),
            col("second parameter", dcc.Dropdown(id=Y_PARAM, options=second, value=chosen["sy"]), 3),
            col("its values", dbc.Input(id=Y_VALUES, value=chosen["syv"], size="sm"), 2),
            col("metric", dcc.Dropdown(id=METRIC, options=metrics, value=chosen["sm"], clearable=False), 2),
        ],
        className="g-2 mb-2",
    )
    buttons = dbc.Row(
        [
            dbc.Col(dbc.Button("Run sweep", id=RUN, size="sm", color="primary"), width="auto"),
            dbc.Col(
                dbc.Button("Cancel", id=CANCEL, size="sm", color="secondary", outline=True, disabled=True),
                width="auto",
            ),
            dbc.Col(dbc.Progress(id=PROGRESS, value=0, striped=True, animated=False), md=True),
            dbc.Col(html.Span(id=STATUS, className="small text-muted"), width="auto"),
        ],
        className="g-2 align-items-center mb-2",
    )
    note = html.Div(
        "Each grid point is the scenario of the form above with the swept values, run as one task on Dask "
        "(a local cluster, or the scheduler at DASK_SCHEDULER_ADDRESS).",
        className="small text-muted mb-2",
    )
    alerts = [dbc.Alert(p, color="warning", className="py-1 small mb-2") for p in problems]
    body = [
        html.H6("Sweep", className="mb-1"),
        note,
        controls,
        buttons,
        html.Div(alerts, id=ERROR),
        dcc.Store(id=AUTORUN, data=(params or {}).get(AUTORUN_KEY) == "1" and not problems),
        dcc.Store(id=REQUEST),
        _graph(),
    ]
    return dbc.Card(dbc.CardBody(body, className="p-2"), className="mt-3 shadow-sm")


def _graph() -> html.Div:
    """Where the sweep's chart goes: a note until a sweep is run (a page that opens with a chart loads and runs
    plotly.js)."""
    note = html.Div("Run a sweep to chart a metric over the grid.", className="text-muted small")
    centred = "d-flex align-items-center justify-content-center border rounded"
    return html.Div(note, id=GRAPH, className=centred, style={"height": f"{GRAPH_PX}px"})


def sweep_graph(figure) -> dcc.Graph:
    """A sweep's chart, in place of the note."""
    return dcc.Graph(figure=figure, config=graph_config("whatif-sweep"), style={"height": f"{GRAPH_PX}px"})


def grid_of(x: str | None, x_values: str | None, y: str | None, y_values: str | None) -> dict:
    """The grid the sweep controls describe (one or two parameters)."""
    if not x or not (x_values or "").strip():
        raise ScenarioError("choose a sweep parameter and its values")
    items = [f"{x}={x_values}"]
    if y and y != NONE:
        if y == x:
            raise ScenarioError("the two sweep parameters must differ")
        items.append(f"{y}={y_values or ''}")
    return parse_grid(items)


def sweep_rows(frame: pl.DataFrame, grid: dict, metric: str) -> pl.DataFrame:
    """The rows that carry metric: the CES rows for CES metrics, else the simulated (swept) policies."""
    if metric in CES_METRICS:
        return frame.filter(pl.col("scheme") == "ces")
    rows = frame.filter(pl.col("scheme") != RECORDED)
    if "policy" in grid:
        rows = rows.filter(pl.col("scheme") == pl.col("policy"))
    return rows


def sweep_figure(frame: pl.DataFrame, grid: dict, metric: str) -> go.Figure:
    """A line per scheme over one parameter (the Slurm twin's too, as the reference), or a heatmap over two (the
    first swept policy's values)."""
    names = [n for n in grid if n != "policy"] or ["policy"]
    label = labels.metric_label(metric)
    title = f"{label} over {' × '.join(labels.parameter_label(n) for n in grid)}"
    rows = sweep_rows(frame, grid, metric) if frame.height else frame
    if rows.is_empty() or metric not in rows.columns:
        return empty_figure(f"No {label} in the sweep results.", title)
    rows, unit = _in_display_unit(rows, metric)
    axis_title = f"{label} ({unit})" if unit else label
    x = names[0]
    if len(names) == 1:
        fig = go.Figure()
        for scheme in rows["scheme"].unique(maintain_order=True).to_list():
            part = rows.filter(pl.col("scheme") == scheme)
            fig.add_trace(
                go.Scatter(
                    x=[str(v) for v in part[x].to_list()],
                    y=part[metric],
                    customdata=part["_shown"],
                    hovertemplate="%{x}: %{customdata}<extra>%{fullData.name}</extra>",
                    name=scheme,
                    mode="lines+markers",
                    line={"color": scheme_color(scheme), "dash": SCHEME_DASH.get(scheme, "solid")},
                )
            )
        return style(fig, title, labels.parameter_label(x), axis_title)
    y = names[1]
    policies = rows.filter(pl.col("scheme") != TWIN)["scheme"]  # the baseline is a reference, not what was swept
    scheme = policies[0] if policies.len() else rows["scheme"][0]
    part = rows.filter(pl.col("scheme") == scheme)
    xs = [str(v) for v in grid[x]]
    ys = [str(v) for v in grid[y]]
    lookup = {(str(a), str(b)): v for a, b, v in part.select(x, y, metric).iter_rows()}
    z = [[lookup.get((a, b)) for a in xs] for b in ys]
    fig = go.Figure(go.Heatmap(x=xs, y=ys, z=z, colorscale="Viridis", colorbar={"title": {"text": axis_title}}))
    return style(fig, f"{title} ({scheme})", labels.parameter_label(x), labels.parameter_label(y))


def _in_display_unit(rows: pl.DataFrame, metric: str) -> tuple[pl.DataFrame, str]:
    """rows with a duration metric in the unit that reads best (hours, days, ...) and every value's human text in
    `_shown`; the unit's name ('' for other metrics)."""
    kind = labels.METRICS[metric].kind if metric in labels.METRICS else ""

    def text(value: float | None) -> str:
        return units.show(kind, value).text if kind else f"{value:,.3g}" if value is not None else "–"

    shown = rows.with_columns(pl.col(metric).map_elements(text, return_dtype=pl.String).alias("_shown"))
    if kind != "duration":
        return shown, ""
    divisor_s, unit = units.duration_scale(float(rows[metric].max() or 0))
    return shown.with_columns(pl.col(metric) / divisor_s), unit


def sweep_key(scenario_key: str, grid: dict, metric: str) -> str:
    """The results-cache key of a sweep: its scenario's key (dataset version included), grid and metric."""
    text = json.dumps([scenario_key, grid, metric], sort_keys=True, default=str)
    return "sweep:" + hashlib.sha256(text.encode()).hexdigest()


def sweep_job(config_data: dict, grid: dict, metric: str, settings: Settings, report) -> dict:
    """Run the sweep on Dask (or take it from the results cache) and return its figure as JSON (runs in a spawned
    subprocess)."""
    request = open_request(config_data, settings.data_dir)
    cache, key = results_cache(settings), sweep_key(request.key, grid, metric)
    hit = cache.get(key)
    if hit is not None:
        return {**hit, "cached": True}
    jobs, vc_gpus = request.inputs()
    scheduler = sweep_scheduler(request.dataset, request.config, grid)
    frame = run_sweep(request.config, grid, jobs, vc_gpus, progress=report, scheduler=scheduler)
    figure = sweep_figure(frame, grid, metric)
    out = {"figure": json.loads(to_json_plotly(figure)), "rows": frame.height}
    cache.set(key, out)
    return {**out, "cached": False}


def new_request(n_clicks) -> dict:
    """A press of 'Run sweep' (clicked, or by a URL with sweep=1) as a request with a new run token."""
    if not n_clicks:
        raise PreventUpdate
    return {"token": run_token()}


def run_sweep_job(
    set_progress, request, x, xv, y, yv, metric, policy_values, energy_values, twin_values, *values, settings
):
    """The background job of a sweep request: validate, run the grid in a subprocess (or take it from the cache),
    return the chart."""
    if not request:
        raise PreventUpdate
    try:
        grid = grid_of(x, xv, y, yv)
        config = form_to_config(ids.form_of(list(values), policy_values, energy_values, twin_values))
    except (ScenarioError, ValueError) as exc:
        return no_update, "", dbc.Alert(str(exc), color="danger", className="py-1 small")

    def progress(fraction: float, message: str) -> None:
        set_progress((round(fraction * 100), message))

    try:
        out = run_in_subprocess(
            sweep_job,
            (config_to_dict(config), grid, metric, settings),
            progress,
            settings=settings,
            expected=SCENARIO_ERRORS,
            caller=job_caller("sweep", str(request.get("token", ""))),
        )
    except RunCancelled:
        return no_update, ids.CANCELLED_STATUS, None
    except RunError as exc:
        return no_update, "", dbc.Alert(str(exc), color="danger", className="py-1 small")
    return sweep_graph(out["figure"]), f"{out['rows']} rows" + (", from cache" if out["cached"] else ""), None


def kept_params(search: str | None) -> dict[str, str]:
    """The sweep's part of a page URL (its settings and sweep=1), which a run keeps when it writes the URL."""
    return {k: v for k, v in query_params(search or "").items() if k in URL_KEYS or k == AUTORUN_KEY}


def sweep_url(n_clicks, x, xv, y, yv, metric, policy_values, energy_values, twin_values, search, *values) -> str:
    """The URL of the page with the form and the sweep settings (sweep=1: opening it shows this sweep)."""
    if not n_clicks:
        raise PreventUpdate
    before = query_params(search)
    try:
        params = form_to_params(ids.form_of(list(values), policy_values, energy_values, twin_values))
    except (ScenarioError, ValueError, TypeError, KeyError):
        params = {k: v for k, v in before.items() if k not in URL_KEYS}
    if before.get("run") != "1":
        params.pop("run", None)
    settings_now = {"sx": x, "sxv": xv, "sy": y, "syv": yv, "sm": metric}
    params.update({k: str(v) for k, v in settings_now.items() if v is not None}, **{AUTORUN_KEY: "1"})
    return "?" + urlencode(params, safe=",")


def register(app: Dash, settings: Settings, manager, form_states: list[State]) -> None:
    """Register the sweep's background callback on app."""
    sweep_states = [State(cid, "value") for cid in URL_KEYS.values()]
    ces_states = [State({"type": t, "name": ALL}, "value") for t in (ids.CES_POLICY, ids.CES_ENERGY, ids.TWIN)]
    app.callback(
        Output(ids.URL, "search", allow_duplicate=True),
        Input(RUN, "n_clicks"),
        *sweep_states,
        *ces_states,
        State(ids.URL, "search"),
        *form_states,
        prevent_initial_call=True,
    )(sweep_url)
    app.callback(Output(REQUEST, "data"), Input(RUN, "n_clicks"), prevent_initial_call=True)(new_request)
    app.callback(
        Output(STATUS, "children", allow_duplicate=True),
        Input(CANCEL, "n_clicks"),
        State(REQUEST, "data"),
        prevent_initial_call=True,
    )(lambda n, request: cancel_request(n, request, settings))
    app.callback(
        Output(GRAPH, "children"),
        Output(STATUS, "children"),
        Output(ERROR, "children"),
        Input(REQUEST, "data"),
        State(X_PARAM, "value"),
        State(X_VALUES, "value"),
        State(Y_PARAM, "value"),
        State(Y_VALUES, "value"),
        State(METRIC, "value"),
        State({"type": ids.CES_POLICY, "name": ALL}, "value"),
        State({"type": ids.CES_ENERGY, "name": ALL}, "value"),
        State({"type": ids.TWIN, "name": ALL}, "value"),
        *form_states,
        background=True,
        manager=manager,
        interval=poll_interval_ms(),
        progress=[Output(PROGRESS, "value"), Output(PROGRESS, "label")],
        progress_default=[0, ""],
        running=[
            (Output(RUN, "disabled"), True, False),
            (Output(CANCEL, "disabled"), False, True),
            (Output(PROGRESS, "animated"), True, False),  # a bar animated while idle kept a sixth of a core busy
        ],
        cancel=[Input(CANCEL, "n_clicks")],
        prevent_initial_call=True,
    )(lambda *args: run_sweep_job(*args, settings=settings))
    # A URL with sweep=1 presses Run sweep once the page is drawn (it shows from the cache a sweep run before).
    app.clientside_callback(
        "(autorun) => autorun ? 1 : window.dash_clientside.no_update",
        Output(RUN, "n_clicks"),
        Input(AUTORUN, "data"),
    )
