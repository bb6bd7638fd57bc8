"""The job explorer's grid: AG Grid's infinite row model over every job matching the filters, with CSV export."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import polars as pl
from dash import Dash, Input, Output, State, dcc, html, no_update

from analytics import capabilities
from analytics.filters import JobFilter, to_filter, to_params
from analytics.queries import explorer as explorer_queries
from analytics.store import Dataset
from components.datasets import access
from components.explorer import export
from components.server.cache import cached
from components.shell import controls, tables

SPEC = "jobs-spec"
GRID = "jobs-grid"
EXPORT = "jobs-export"
STATUS = "jobs-status"
ABSENT = "jobs-absent"
SECTION = "jobs-explorer"  # its lazy section (controls.lazy_section)
GRID_HEIGHT_PX = 520
SECTION_HEIGHT_PX = GRID_HEIGHT_PX + 40
HEADERS: dict[str, str] = {
    "job_id": "job id",
    "job_name": "job name",
    "gpu_num": "GPUs",
    "gpu_type": "GPU type",
    "cpu_num": "CPUs",
    "node_num": "nodes",
    "submit_time": "submitted",
    "start_time": "started",
    "end_time": "ended",
    "duration": "duration",
    "queue": "queue",
    "qos": "QOS",
    "timelimit_s": "time limit",
}
HUMAN_KINDS: dict[str, str] = {"duration": "duration", "queue": "duration", "timelimit_s": "duration"}


def column_defs(columns: tuple[str, ...] = explorer_queries.COLUMNS) -> list[dict[str, Any]]:
    """AG Grid column definitions of columns with readable headers and the right filter per column type; a job id
    links to its job page (the JobLink renderer of assets/dashAgGridComponentFunctions.js)."""
    defs = []
    for col in columns:
        kind = "agNumberColumnFilter" if col in explorer_queries.NUMBER_COLUMNS else "agTextColumnFilter"
        if col in explorer_queries.DATE_COLUMNS:
            kind = "agDateColumnFilter"
        filter_params = {"maxNumConditions": 1, "buttons": ["reset"]}
        width = (
            170 if col in explorer_queries.DATE_COLUMNS else 135 if col in ("state", "job_name", "gpu_type") else 110
        )
        human = tables.column(col, HEADERS.get(col, col), HUMAN_KINDS[col]) if col in HUMAN_KINDS else {}
        defs.append(
            human
            | {
                "field": col,
                "headerName": HEADERS.get(col, col),
                "filter": kind,
                "filterParams": filter_params,
                "minWidth": width,
                **({"cellRenderer": "JobLink"} if col == "job_id" else {}),
            }
        )
    return defs


def page_rows(ds: Dataset, flt: JobFilter, request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """One block of rows for AG Grid's infinite row model, and the total number of matching rows (cached)."""
    start, limit = explorer_queries.block_bounds(request)
    fmodel, smodel = request.get("filterModel"), request.get("sortModel")
    grid_filter, grid_sort = json.dumps(fmodel, sort_keys=True), json.dumps(smodel, sort_keys=True)
    rows_key = access.selection_key("rows", ds, flt, grid_filter, grid_sort, str(start), str(limit))
    rows = cached(rows_key, lambda: _json_rows(explorer_queries.page(ds, flt, fmodel, smodel, start, limit)))
    total = cached(
        access.selection_key("count", ds, flt, grid_filter), lambda: explorer_queries.count_rows(ds, flt, fmodel)
    )
    return rows, total


def _json_rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    dates = [c for c in explorer_queries.DATE_COLUMNS if c in df.columns]
    dated = df.with_columns(pl.col(c).dt.strftime("%Y-%m-%d %H:%M:%S") for c in dates)
    return tables.human_rows(dated, HUMAN_KINDS)


def section(state: dict[str, Any]) -> html.Div:
    """The job explorer, built once it scrolls into view (see body): a server-side AG Grid over every job matching
    the filters, with CSV export."""
    return html.Div(
        [dcc.Store(id=SPEC, data=state), controls.lazy_section(SECTION, SECTION_HEIGHT_PX)], className="mt-2"
    )


def absent_note(ds: Dataset) -> html.Span | None:
    """What the dataset's jobs lack (the columns the explorer leaves out), with why, or None."""
    status = capabilities.column_status(ds.meta)
    absent = [c for c in explorer_queries.COLUMNS if status[c]["status"] == capabilities.ABSENT]
    if not absent:
        return None
    words = ", ".join(capabilities.COLUMN_WORDS.get(c, c) for c in absent)
    why = "; ".join(status[c]["note"] for c in absent)
    return html.Span(f"not in this trace: {words}", id=ABSENT, title=why, className="text-muted small me-2")


def body(state: dict[str, Any]) -> list:
    """The job explorer's title, what its dataset lacks, row count, CSV link and grid for a filter state."""
    ds = access.open_dataset(state["dataset"])
    return [
        html.Div(
            [
                html.H5("Job explorer", className="mb-0 me-auto"),
                absent_note(ds),
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
            columnDefs=column_defs(explorer_queries.shown_columns(ds)),
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
                "tooltipShowDelay": 300,
                "context": {"dataset": state["dataset"], "jobPath": controls.JOB_PATH},
            },
            style={"height": f"{GRID_HEIGHT_PX}px", "width": "100%"},
        ),
    ]


def export_href(state: dict[str, Any], filter_model: dict | None, sort_model: list | None) -> str:
    """The CSV export link for the dashboard filters plus the grid's own filter and sort."""
    params = to_params(state)
    if filter_model:
        params["grid_filter"] = json.dumps(filter_model, separators=(",", ":"))
    if sort_model:
        params["grid_sort"] = json.dumps(sort_model, separators=(",", ":"))
    return export.EXPORT_PATH + ("?" + urlencode(params) if params else "")


def get_rows(request: dict[str, Any] | None, state: dict[str, Any]):
    """Answer one AG Grid block request from DuckDB, and refresh the export link and row count."""
    if not request:
        return no_update, no_update, no_update
    if not isinstance(request, dict):
        return {"rowData": [], "rowCount": 0}, no_update, "⚠ the grid request must be an object"
    try:
        rows, total = page_rows(access.open_dataset(state["dataset"]), to_filter(state), request)
    except access.USER_ERRORS as exc:
        return {"rowData": [], "rowCount": 0}, no_update, f"⚠ {exc}"
    href = export_href(state, request.get("filterModel"), request.get("sortModel"))
    return {"rowData": rows, "rowCount": total}, href, f"{total:,} jobs"


def register(app: Dash) -> None:
    """Register the explorer's build and row-block callbacks on app."""
    controls.lazy_body_callback(app, SECTION, body)
    app.callback(
        Output(GRID, "getRowsResponse"),
        Output(EXPORT, "href"),
        Output(STATUS, "children"),
        Input(GRID, "getRowsRequest"),
        State(SPEC, "data"),
        optional=True,  # the grid is built once it scrolls into view
        prevent_initial_call=True,  # the grid asks for its first block itself
    )(get_rows)
