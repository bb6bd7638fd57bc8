"""Jobs page: duration, GPU-count, final-state and queueing distributions, and the job explorer."""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash

from components.explorer import grid as explorer_grid
from components.shell.controls import figure_card, grid
from components.shell.layout import page_layout

dash.register_page(__name__, path="/jobs", name="Jobs", title="Helios Dashboard · Jobs", order=2)


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """The jobs page's figures and the job explorer for a filter state."""
    return [
        grid([figure_card("duration_gpu", state, lazy=False), figure_card("duration_cpu", state, lazy=False)]),
        grid([figure_card("gpu_num_jobs", state, lazy=False), figure_card("gpu_num_time", state, lazy=False)]),
        grid([figure_card("state_by_gpu", state), figure_card("state_cpu_gpu", state)]),
        grid([figure_card("queue_cdf", state)]),
        explorer_grid.section(state),
    ]


layout = page_layout(
    "Jobs",
    "How long jobs run and wait, how many GPUs they ask for and how they end (log axes as in the paper), "
    "and every job in the explorer below.",
    body,
)


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    explorer_grid.register(app)
