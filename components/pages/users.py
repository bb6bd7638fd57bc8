"""Users page: how concentrated usage is, how often users' jobs complete, a leaderboard and a per-user view."""

from __future__ import annotations

from typing import Any

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import polars as pl
from dash import Dash, Input, Output, dcc, html, no_update

from components.datasets import access
from components.shell import controls
from components.shell.controls import figure_card, grid
from components.shell.layout import page_layout

dash.register_page(__name__, path="/users", name="Users", title="Helios Dashboard · Users", order=3)

SPEC = "users-spec"
BOARD = "users-board"
BOARD_CSV = "users-board-csv"
LEADERBOARD_ROWS = 500
BOARD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("user", "user"),
    ("cluster", "cluster"),
    ("gpu_hours", "GPU-hours"),
    ("job_num", "jobs"),
    ("gpu_job_num", "GPU jobs"),
    ("mean_gpu_queue_s", "mean GPU-job queue (s)"),
    ("completion_pct", "GPU jobs completed (%)"),
)


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """One user's view when exactly one user is selected, else the concentration figures; then the leaderboard."""
    if len(state["users"]) == 1:
        return [user_view(state), leaderboard(state)]
    return [
        grid([figure_card("conc_gpu", state), figure_card("conc_cpu", state)]),
        grid([figure_card("conc_queue", state), figure_card("completion_hist", state)]),
        leaderboard(state),
    ]


layout = page_layout(
    "Users",
    "How much of the GPU time, CPU-only time and GPU queueing time the heaviest users hold, and how often "
    "users' GPU jobs complete. Click a user in the leaderboard to open their view.",
    body,
)


def user_view(state: dict[str, Any]) -> html.Div:
    """One user's jobs over time and their own distributions."""
    user = state["users"][0]
    return html.Div(
        [
            html.H5(["User ", html.Code(user)], className="mt-1"),
            grid([figure_card("user_jobs", state, 420)], {"xs": 12}),
            grid([figure_card("duration_gpu", state), figure_card("gpu_num_jobs", state)]),
            grid([figure_card("queue_cdf", state), figure_card("state_by_gpu", state)]),
            html.Hr(),
        ],
        className="user-view",
    )


def leaderboard(state: dict[str, Any]) -> html.Div:
    """The user leaderboard table (top users by GPU-hours)."""
    cols = [
        {"field": f, "headerName": h, "sortable": True, "filter": f in ("user", "cluster"), "minWidth": 110}
        for f, h in BOARD_COLUMNS
    ]
    for col in cols[2:]:
        col["valueFormatter"] = {"function": "params.value == null ? '' : d3.format(',')(params.value)"}
    cols[0]["cellClass"] = "link-cell"
    return html.Div(
        [
            dcc.Store(id=SPEC, data=state),
            html.Div(
                [
                    html.H5(f"Leaderboard (top {LEADERBOARD_ROWS} by GPU-hours)", className="mb-0 me-auto"),
                    dbc.Button("CSV", id=BOARD_CSV, size="sm", color="secondary", outline=True),
                ],
                className="d-flex align-items-center mb-2",
            ),
            dcc.Loading(
                dag.AgGrid(
                    id=BOARD,
                    columnDefs=cols,
                    rowData=[],
                    defaultColDef={"resizable": True, "flex": 1},
                    dashGridOptions={"pagination": True, "paginationPageSize": 20, "suppressCellFocus": True},
                    csvExportParams={"fileName": "helios-user-leaderboard.csv"},
                    style={"height": "480px", "width": "100%"},
                ),
                type="dot",
                delay_show=150,
            ),
        ]
    )


def leaderboard_rows(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaderboard rows: GPU-hours, jobs, mean GPU-job queue and completion rate per (cluster, user)."""
    users = access.query("user_table", state)
    if users.is_empty():
        return []
    return (
        users.select(
            "user",
            "cluster",
            (pl.col("total_gpu_time") / 3600).round(1).alias("gpu_hours"),
            "job_num",
            "gpu_job_num",
            pl.col("avg_gpu_pend_time").round(1).alias("mean_gpu_queue_s"),
            (pl.col("completed_gpu_percent") * 100).round(1).alias("completion_pct"),
        )
        .sort("gpu_hours", descending=True)
        .head(LEADERBOARD_ROWS)
        .to_dicts()
    )


def fill_board(state: dict[str, Any]):
    """Fill the leaderboard for a filter state."""
    try:
        return leaderboard_rows(state)
    except access.USER_ERRORS:
        return []


def open_user(cell: dict[str, Any] | None):
    """Filter the dashboard to the user whose name was clicked."""
    if not cell or cell.get("colId") != "user" or not cell.get("value"):
        return no_update
    return [cell["value"]]


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    app.callback(Output(BOARD, "rowData"), Input(SPEC, "data"))(fill_board)
    app.callback(
        Output(controls.USERS, "value", allow_duplicate=True),
        Input(BOARD, "cellClicked"),
        prevent_initial_call=True,
    )(open_user)
    app.callback(Output(BOARD, "exportDataAsCsv"), Input(BOARD_CSV, "n_clicks"), prevent_initial_call=True)(
        lambda _n: True
    )
