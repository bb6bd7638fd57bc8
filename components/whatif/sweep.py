"""The what-if page's sweep mode: run a grid of scenarios on Dask and chart one metric over it."""

from __future__ import annotations

import json

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
import polars as pl
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate
from plotly.io.json import to_json_plotly

from components.charts.figures import empty_figure, style
from components.server.background import poll_interval_ms
from components.server.runs import RunError, job_caller, run_in_subprocess
from components.server.settings import Settings
from components.shell.controls import graph_config
from components.whatif import form as ids
from components.whatif.figures import scheme_color
from components.whatif.run import SCENARIO_ERRORS
from components.whatif.state import form_to_config
from sim.scenario import RECORDED, ScenarioError, config_to_dict, open_request
from sim.sweep import CES_METRICS, parse_grid, run_sweep, sweepable

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
ERROR = "whatif-sweep-error"
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


def section() -> dbc.Card:
    """The sweep controls, progress and chart."""
    params = list(sweepable())

    def col(label: str, control, width: int) -> dbc.Col:
        return dbc.Col([html.Label(label, className="small text-muted mb-0 d-block"), control], md=width)

    controls = dbc.Row(
        [
            col("Sweep parameter", dcc.Dropdown(id=X_PARAM, options=params, value="load_factor"), 3),
            col("its values", dbc.Input(id=X_VALUES, value="0.8,1.0,1.2", size="sm"), 2),
            col("second parameter", dcc.Dropdown(id=Y_PARAM, options=[NONE, *params], value="policy"), 3),
            col("its values", dbc.Input(id=Y_VALUES, value="fifo,sjf,qssf", size="sm"), 2),
            col(
                "metric",
                dcc.Dropdown(id=METRIC, options=list(METRICS), value="avg_jct_s", clearable=False),
                2,
            ),
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
            dbc.Col(dbc.Progress(id=PROGRESS, value=0, striped=True, animated=True), md=True),
            dbc.Col(html.Span(id=STATUS, className="small text-muted"), width="auto"),
        ],
        className="g-2 align-items-center mb-2",
    )
    note = html.Div(
        "Each grid point is the scenario of the form above with the swept values, run as one task on Dask "
        "(a local cluster, or the scheduler at DASK_SCHEDULER_ADDRESS).",
        className="small text-muted mb-2",
    )
    body = [
        html.H6("Sweep", className="mb-1"),
        note,
        controls,
        buttons,
        html.Div(id=ERROR),
        _graph(),
    ]
    return dbc.Card(dbc.CardBody(body, className="p-2"), className="mt-3 shadow-sm")


def _graph() -> dcc.Graph:
    blank = empty_figure("Run a sweep to chart a metric over the grid.", "Sweep")
    return dcc.Graph(id=GRAPH, figure=blank, config=graph_config("whatif-sweep"), style={"height": "420px"})


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
    """A line per scheme over one parameter, or a heatmap over two (the first scheme's values)."""
    names = [n for n in grid if n != "policy"] or ["policy"]
    title = f"{metric} over {' × '.join(grid)}"
    rows = sweep_rows(frame, grid, metric) if frame.height else frame
    if rows.is_empty() or metric not in rows.columns:
        return empty_figure(f"No {metric} in the sweep results.", title)
    x = names[0]
    if len(names) == 1:
        fig = go.Figure()
        for scheme in rows["scheme"].unique(maintain_order=True).to_list():
            part = rows.filter(pl.col("scheme") == scheme)
            fig.add_trace(
                go.Scatter(
                    x=[str(v) for v in part[x].to_list()],
                    y=part[metric],
                    name=scheme,
                    mode="lines+markers",
                    line={"color": scheme_color(scheme)},
                )
            )
        return style(fig, title, x, metric)
    y = names[1]
    scheme = rows["scheme"][0]
    part = rows.filter(pl.col("scheme") == scheme)
    xs = [str(v) for v in grid[x]]
    ys = [str(v) for v in grid[y]]
    lookup = {(str(a), str(b)): v for a, b, v in part.select(x, y, metric).iter_rows()}
    z = [[lookup.get((a, b)) for a in xs] for b in ys]
    fig = go.Figure(go.Heatmap(x=xs, y=ys, z=z, colorscale="Viridis", colorbar={"title": metric}))
    return style(fig, f"{title} ({scheme})", x, y)


def sweep_job(config_data: dict, grid: dict, metric: str, settings: Settings, report) -> dict:
    """Run the sweep on Dask and return its figure as JSON (runs in a spawned subprocess)."""
    request = open_request(config_data, settings.data_dir)
    jobs, vc_gpus = request.inputs()
    frame = run_sweep(request.config, grid, jobs, vc_gpus, progress=report)
    figure = sweep_figure(frame, grid, metric)
    return {"figure": json.loads(to_json_plotly(figure)), "rows": frame.height}


def run_sweep_job(set_progress, n_clicks, x, xv, y, yv, metric, policy_values, energy_values, *values, settings):
    """The background job of 'Run sweep': validate, run the grid in a subprocess, return the chart."""
    if not n_clicks:
        raise PreventUpdate
    try:
        grid = grid_of(x, xv, y, yv)
        config = form_to_config(ids.form_of(list(values), policy_values, energy_values))
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
            caller=job_caller(),
        )
    except RunError as exc:
        return no_update, "", dbc.Alert(str(exc), color="danger", className="py-1 small")
    return out["figure"], f"{out['rows']} rows", None


def register(app: Dash, settings: Settings, manager, form_states: list[State]) -> None:
    """Register the sweep's background callback on app."""
    app.callback(
        Output(GRAPH, "figure"),
        Output(STATUS, "children"),
        Output(ERROR, "children"),
        Input(RUN, "n_clicks"),
        State(X_PARAM, "value"),
        State(X_VALUES, "value"),
        State(Y_PARAM, "value"),
        State(Y_VALUES, "value"),
        State(METRIC, "value"),
        State({"type": ids.CES_POLICY, "name": ALL}, "value"),
        State({"type": ids.CES_ENERGY, "name": ALL}, "value"),
        *form_states,
        background=True,
        manager=manager,
        interval=poll_interval_ms(),
        progress=[Output(PROGRESS, "value"), Output(PROGRESS, "label")],
        progress_default=[0, ""],
        running=[(Output(RUN, "disabled"), True, False), (Output(CANCEL, "disabled"), False, True)],
        cancel=[Input(CANCEL, "n_clicks")],
        prevent_initial_call=True,
    )(lambda *args: run_sweep_job(*args, settings=settings))
