"""Users page: how concentrated usage is, how often users' jobs complete, a leaderboard and a per-user view."""

from __future__ import annotations

from typing import Any

import dash
import polars as pl
from dash import Dash, Input, Output, html

from components.datasets import access
from components.shell import controls, tables
from components.shell.controls import figure_card, grid, wide_row
from components.shell.layout import page_layout

dash.register_page(__name__, path="/users", name="Users", title="Helios Dashboard · Users", order=3)

BOARD = "users-board"
BOARD_CSV = "users-board-csv"
BOARD_SECTION = "users-leaderboard"  # its lazy section (controls.lazy_section)
BOARD_HEIGHT_PX = 530  # its title and its grid (tables.data_grid)
LEADERBOARD_ROWS = 500
# (field, header, units kind or None for text)
BOARD_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("user", "user", None),
    ("cluster", "cluster", None),
    ("gpu_time_s", "GPU time", "gpu_time"),
    ("job_num", "jobs", "count"),
    ("gpu_job_num", "GPU jobs", "count"),
    ("mean_gpu_queue_s", "mean GPU-job queue", "duration"),
    ("completion_pct", "GPU jobs completed", "percent"),
)
BOARD_KINDS: dict[str, str] = {field: kind for field, _, kind in BOARD_COLUMNS if kind}


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """One user's view when exactly one user is selected, else the concentration figures; then the leaderboard."""
    if len(state["users"]) == 1:
        return [user_view(state), leaderboard()]
    return [
        grid([figure_card("conc_gpu", state, lazy=False), figure_card("conc_cpu", state, lazy=False)]),
        grid([figure_card("conc_queue", state, lazy=False), figure_card("completion_hist", state, lazy=False)]),
        leaderboard(),
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
            wide_row("user_jobs", state, 420, lazy=False),
            grid([figure_card("duration_gpu", state), figure_card("gpu_num_jobs", state)]),
            grid([figure_card("queue_cdf", state), figure_card("state_by_gpu", state)]),
            html.Hr(),
        ],
        className="user-view",
    )


def leaderboard() -> html.Div:
    """The user leaderboard, built once it scrolls into view (see board)."""
    return controls.lazy_section(BOARD_SECTION, BOARD_HEIGHT_PX)


def board(state: dict[str, Any]) -> list:
    """The user leaderboard table (top users by GPU time) for a filter state: sortable, filterable, paginated, CSV."""
    cols = [tables.column(field, header, kind) for field, header, kind in BOARD_COLUMNS]
    cols[0] |= {"cellClass": "link-cell", "headerTooltip": "click a user to open their view"}
    return [
        tables.table_header(f"Leaderboard (top {LEADERBOARD_ROWS} by GPU time)", BOARD_CSV),
        tables.data_grid(BOARD, cols, "helios-user-leaderboard.csv", rowData=fill_board(state)),
    ]


def leaderboard_rows(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaderboard rows: GPU time, jobs, mean GPU-job queue and completion rate per (cluster, user), each number
    with its human text and exact hover text."""
    users = access.query("user_table", state)
    if users.is_empty():
        return []
    board = (
        users.select(
            "user",
            "cluster",
            pl.col("total_gpu_time").alias("gpu_time_s"),
            "job_num",
            "gpu_job_num",
            pl.col("avg_gpu_pend_time").alias("mean_gpu_queue_s"),
            (pl.col("completed_gpu_percent") * 100).alias("completion_pct"),
        )
        .sort("gpu_time_s", descending=True)
        .head(LEADERBOARD_ROWS)
    )
    return tables.human_rows(board, BOARD_KINDS)


def fill_board(state: dict[str, Any]):
    """Fill the leaderboard for a filter state."""
    try:
        return leaderboard_rows(state)
    except access.USER_ERRORS:
        return []


# A click on a user's name filters the dashboard to that user; in the browser, so that the leaderboard's appearance
# (which Dash reports as an input of this callback) costs no request.
OPEN_USER_JS = """function (cell) {
    var name = cell && cell.colId === "user" ? cell.value : null;
    return name ? [[name], [name]] : [window.dash_clientside.no_update, window.dash_clientside.no_update];
}"""  # the user drop-down's value and its choices (it holds only chosen and searched users; a value must be a choice)


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    controls.lazy_body_callback(app, BOARD_SECTION, board)
    app.clientside_callback(
        OPEN_USER_JS,
        Output(controls.USERS, "value", allow_duplicate=True),
        Output(controls.USERS, "options", allow_duplicate=True),
        Input(BOARD, "cellClicked", allow_optional=True),  # the leaderboard is built once it scrolls into view
        prevent_initial_call=True,
    )
    tables.register_export(app, BOARD, BOARD_CSV, optional=True)
