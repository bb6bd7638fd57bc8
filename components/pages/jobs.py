"""Jobs page: duration, GPU-count, final-state and queueing distributions, and the job explorer."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
from dash import Dash, Input, Output, State, dcc, html, no_update

from components.datasets import access as data
from components.explorer import grid as explorer
from components.shell.callbacks import USER_ERRORS
from components.shell.controls import figure_card, grid, page_header
from components.shell.layout import dataset_problem, page_state
from components.shell.state import to_filter, to_params

dash.register_page(__name__, path="/jobs", name="Jobs", title="Helios Dashboard · Jobs", order=2)

SPEC = "jobs-spec"
GRID = "jobs-grid"
EXPORT = "jobs-export"
STATUS = "jobs-status"
EXPORT_PATH = "/download/jobs.csv"


def layout(**params: Any) -> html.Div:
    """The jobs page for the filters in the URL."""
    state = page_state(params)
    header = page_header(
        "Jobs",
        "How long jobs run and wait, how many GPUs they ask for and how they end (log axes as in the paper), "
        "and every job in the explorer below.",
    )
    problem = dataset_problem(state)
    if problem:
        return html.Div([header, problem])
    return html.Div(
        [
            header,
            grid([figure_card("duration_gpu", state), figure_card("duration_cpu", state)]),
            grid([figure_card("gpu_num_jobs", state), figure_card("gpu_num_time", state)]),
            grid([figure_card("state_by_gpu", state), figure_card("state_cpu_gpu", state)]),
            grid([figure_card("queue_cdf", state)]),
            explorer_section(state),
        ]
    )


def explorer_section(state: dict[str, Any]) -> html.Div:
    """The job explorer: a server-side AG Grid over every job matching the filters, with CSV export."""
    return html.Div(
        [
            dcc.Store(id=SPEC, data=state),
            html.Div(
                [
                    html.H5("Job explorer", className="mb-0 me-auto"),
                    html.Span(id=STATUS, className="text-muted small me-2"),
                    dbc.Button(
                        "Export CSV",
                        id=EXPORT,
                        href=export_href(state, None, None),
                        external_link=True,
                        size="sm",
                        color="secondary",
                        outline=True,
                        target="_blank",
                    ),
                ],
                className="d-flex align-items-center mb-2 flex-wrap gap-1",
            ),
            dag.AgGrid(
                id=GRID,
                columnDefs=explorer.column_defs(),
                defaultColDef={"sortable": True, "resizable": True, "minWidth": 90, "flex": 1},
                rowModelType="infinite",
                dashGridOptions={
                    "rowBuffer": 0,
                    "cacheBlockSize": 100,
                    "maxBlocksInCache": 20,
                    "infiniteInitialRowCount": 100,
                    "pagination": True,
                    "paginationPageSize": 100,
                    "paginationPageSizeSelector": False,
                },
                style={"height": "520px", "width": "100%"},
            ),
        ],
        className="mt-2",
    )


def export_href(state: dict[str, Any], filter_model: dict | None, sort_model: list | None) -> str:
    """The CSV export link for the dashboard filters plus the grid's own filter and sort."""
    params = to_params(state)
    if filter_model:
        params["grid_filter"] = json.dumps(filter_model, separators=(",", ":"))
    if sort_model:
        params["grid_sort"] = json.dumps(sort_model, separators=(",", ":"))
    return EXPORT_PATH + ("?" + urlencode(params) if params else "")


def get_rows(request: dict[str, Any] | None, state: dict[str, Any]):
    """Answer one AG Grid block request from DuckDB, and refresh the export link and row count."""
    if not request:
        return no_update, no_update, no_update
    if not isinstance(request, dict):
        return {"rowData": [], "rowCount": 0}, no_update, "⚠ the grid request must be an object"
    try:
        rows, total = explorer.page_rows(data.open_dataset(state["dataset"]), to_filter(state), request)
    except USER_ERRORS as exc:
        return {"rowData": [], "rowCount": 0}, no_update, f"⚠ {exc}"
    href = export_href(state, request.get("filterModel"), request.get("sortModel"))
    return {"rowData": rows, "rowCount": total}, href, f"{total:,} jobs"


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    app.callback(
        Output(GRID, "getRowsResponse"),
        Output(EXPORT, "href"),
        Output(STATUS, "children"),
        Input(GRID, "getRowsRequest"),
        State(SPEC, "data"),
    )(get_rows)
