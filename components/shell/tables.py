"""Tables of the pages: AG Grids sortable and filterable on every column, paginated, exported to CSV safely, each
number shown in human units (charts.units) while sorting and filtering on its exact value, shown on hover."""

from __future__ import annotations

import json
from typing import Any

import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import polars as pl
from dash import Dash, Input, Output, html

from analytics.csv_safety import FORMULA_START
from components.charts import units

TEXT_SUFFIX = "__text"
EXACT_SUFFIX = "__exact"
PAGE_SIZE = 20
# The grid's CSV export writes the exact values (not the human text) and quotes a text cell a spreadsheet would
# run as a formula, like the server downloads (analytics.csv_safety).
CSV_SAFE_CELL = {"function": f"heliosCsvCell(params, {json.dumps(FORMULA_START)})"}
UNIT_HINTS: dict[str, str] = {
    "duration": "shown in h/min/s; sort and filter in seconds",
    "gpu_time": "shown in GPU-hours; sort and filter in GPU-seconds",
    "gpu_hours": "GPU-hours",
    "energy": "kWh",
    "size": "bytes",
    "count": "",
    "percent": "%",
}


def human(kind: str, value: float | None) -> html.Span:
    """value in human units (charts.units kind) with its exact value as the hover title."""
    text, exact = units.show(kind, value)
    return html.Span(text, title=exact, className="not-in-trace text-muted" if text == units.NOT_IN_TRACE else None)


def human_rows(df: pl.DataFrame, kinds: dict[str, str]) -> list[dict[str, Any]]:
    """df's rows as dicts, each column of kinds (column -> units kind) with its human text and exact hover text."""
    rows = df.to_dicts()
    for row in rows:
        for col, kind in kinds.items():
            if col in row:
                row[col + TEXT_SUFFIX], row[col + EXACT_SUFFIX] = units.show(kind, row[col])
    return rows


def column(field: str, header: str, kind: str | None = None, **extra: Any) -> dict[str, Any]:
    """A column sortable and filterable on its exact value; with a units kind, displayed in human units (the exact
    value on hover)."""
    col: dict[str, Any] = {
        "field": field,
        "headerName": header,
        "sortable": True,
        "filter": "agNumberColumnFilter" if kind else "agTextColumnFilter",
        "filterParams": {"buttons": ["reset"], "maxNumConditions": 1},
        "minWidth": 110,
    }
    if kind:
        text, exact = field + TEXT_SUFFIX, field + EXACT_SUFFIX
        col |= {
            "valueFormatter": {"function": f"heliosText(params, {json.dumps(text)})"},
            "tooltipValueGetter": {"function": f"heliosText(params, {json.dumps(exact)})"},
            "headerTooltip": f"{header} ({UNIT_HINTS[kind]})" if UNIT_HINTS[kind] else header,
            "type": "rightAligned",
        }
    return col | extra


def data_grid(grid_id: str, columns: list[dict[str, Any]], file_name: str, **props: Any) -> dag.AgGrid:
    """A client-side AG Grid: sortable, filterable, paginated ({PAGE_SIZE} rows), CSV-exportable (exact values,
    formula-like text quoted)."""
    options = {
        "pagination": True,
        "paginationPageSize": PAGE_SIZE,
        "paginationPageSizeSelector": [10, 20, 50, 100],
        "suppressCellFocus": True,
        "tooltipShowDelay": 300,
        "enableCellTextSelection": True,
    } | props.pop("dashGridOptions", {})
    defaults = {"resizable": True, "flex": 1, "wrapHeaderText": True, "autoHeaderHeight": True}
    defaults |= {"useValueFormatterForExport": False} | props.pop("defaultColDef", {})
    return dag.AgGrid(
        id=grid_id,
        columnDefs=columns,
        rowData=props.pop("rowData", []),
        defaultColDef=defaults,
        dashGridOptions=options,
        csvExportParams={"fileName": file_name, "processCellCallback": CSV_SAFE_CELL},
        style=props.pop("style", {"height": "480px", "width": "100%"}),
        **props,
    )


def table_header(title: str, csv_id: str) -> html.Div:
    """A table's title with its CSV button."""
    return html.Div(
        [
            html.H5(title, className="mb-0 me-auto"),
            dbc.Button("CSV", id=csv_id, size="sm", color="secondary", outline=True, title="the table as CSV"),
        ],
        className="d-flex align-items-center mb-2",
    )


def register_export(app: Dash, grid_id: str, csv_id: str, optional: bool = False) -> None:
    """Export grid_id to CSV when csv_id is clicked (optional: the two may be missing from the page's layout)."""
    app.callback(
        Output(grid_id, "exportDataAsCsv"), Input(csv_id, "n_clicks"), prevent_initial_call=True, optional=optional
    )(lambda _n: True)
