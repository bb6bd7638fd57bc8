"""The job page's timeline: one job's submit, start and end drawn over its VC's running GPUs and queue length."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

WAIT_COLOUR = "rgba(255, 159, 64, 0.18)"
RUN_COLOUR = "rgba(75, 192, 120, 0.18)"


def job_timeline_figure(activity: pl.DataFrame, record: dict[str, Any], run_end: datetime | None) -> go.Figure:
    """Two stacked panels sharing time: the VC's running GPUs against its capacity, and its queued jobs; the job's
    wait (submit to start) and run (start to end, `run_end`) shaded, its submit, start and end marked."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.6, 0.4])
    if activity.height:
        fig.add_trace(_line(activity, "running_gpu_num", "running GPUs", "#1f77b4", fill=True), row=1, col=1)
        fig.add_trace(_line(activity, "total_gpu_num", "VC capacity", "#555", dash="dash"), row=1, col=1)
        fig.add_trace(_line(activity, "queued_jobs", "queued jobs", "#d62728", fill=True), row=2, col=1)
    submit, start = record["submit_time"], record["start_time"]
    if start is not None and start > submit:
        _shade(fig, submit, start, WAIT_COLOUR, "waiting")
    if start is not None and run_end is not None and run_end > start:
        _shade(fig, start, run_end, RUN_COLOUR, "running")
    for label, at in (("submitted", submit), ("started", start), ("ended", record.get("end_time"))):
        if at is not None:
            fig.add_vline(x=at, line={"width": 1, "color": "#333", "dash": "dot"})
            fig.add_annotation(
                x=at, y=1.0, yref="paper", text=label, showarrow=False, yanchor="bottom", font={"size": 11}
            )
    fig.update_layout(
        margin={"l": 55, "r": 10, "t": 30, "b": 30},
        legend={"orientation": "h", "y": -0.12},
        hovermode="x unified",
        template="plotly_white",
    )
    fig.update_yaxes(title_text=f"GPUs of VC {record['vc']}", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="jobs queued", rangemode="tozero", row=2, col=1)
    return fig


def _line(df: pl.DataFrame, col: str, name: str, colour: str, *, fill: bool = False, dash: str = "solid") -> go.Scatter:
    return go.Scatter(
        x=df["time"].to_list(),
        y=df[col].to_list(),
        name=name,
        mode="lines",
        line={"color": colour, "width": 1.5, "dash": dash, "shape": "hv"},
        fill="tozeroy" if fill else None,
    )


def _shade(fig: go.Figure, x0: datetime, x1: datetime, colour: str, label: str) -> None:
    fig.add_vrect(x0=x0, x1=x1, fillcolor=colour, line_width=0, layer="below")
    fig.add_annotation(
        x=x0 + (x1 - x0) / 2, y=0.5, yref="paper", text=label, showarrow=False, font={"size": 11, "color": "#666"}
    )
