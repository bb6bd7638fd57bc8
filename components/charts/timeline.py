"""The job page's timeline: one job's submit, start and end drawn over its VC's running GPUs and queue length."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics import schema

WAIT_COLOUR = "rgba(255, 159, 64, 0.18)"
RUN_COLOUR = "rgba(75, 192, 120, 0.18)"


def job_timeline_figure(
    activity: pl.DataFrame, record: dict[str, Any], run_end: datetime | None, span: tuple[datetime, datetime]
) -> go.Figure:
    """Two stacked panels sharing time over `span`: the VC's running GPUs against its capacity (when the trace has
    it), and its queued jobs; the job's wait (submit to start) and run (start to end, `run_end`) shaded, its submit,
    start and end marked."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.6, 0.4])
    if activity.height:
        fig.add_trace(_line(activity, "running_gpu_num", "running GPUs", "#1f77b4", fill=True), row=1, col=1)
        if activity["total_gpu_num"].is_not_null().any():
            fig.add_trace(_line(activity, "total_gpu_num", "VC capacity", "#555", dash="dash"), row=1, col=1)
        fig.add_trace(_line(activity, "queued_jobs", "queued jobs", "#d62728", fill=True), row=2, col=1)
    submit, start = record["submit_time"], record["start_time"]
    rects, lines, notes = [], [], []
    waited_until = wait_end(record, span[1])
    if waited_until is not None and waited_until > submit:
        rects.append(_shade(submit, min(waited_until, span[1]), WAIT_COLOUR, "waiting", notes))
    if start is not None and run_end is not None and run_end > start and start < span[1]:
        rects.append(_shade(start, min(run_end, span[1]), RUN_COLOUR, "running", notes))
    marks: dict[datetime, list[str]] = {}
    for label, at in (("submitted", submit), ("started", start), ("ended", record.get("end_time"))):
        if at is not None and span[0] <= at <= span[1]:
            marks.setdefault(at, []).append(label)
    previous, shift = None, 0
    for at, labels in sorted(marks.items()):
        close = previous is not None and (at - previous) < (span[1] - span[0]) * 0.08
        shift = 14 - shift if close else 0  # labels of marks close together alternate between two lines
        previous = at
        lines.append({"type": "line", "x0": at, "x1": at, "line": {"width": 1, "color": "#333", "dash": "dot"}})
        notes.append(
            {"x": at, "y": 1.0, "yref": "paper", "yshift": shift, "text": ", ".join(labels), "showarrow": False,
             "yanchor": "bottom", "font": {"size": 11}}
        )  # fmt: skip
    fig.update_layout(
        # b: the room automargin gives the date ticks and the legend below them on a desktop, given at once so that
        # plotly draws the figure once (figures.bottom_margin_px)
        margin={"l": 55, "r": 10, "t": 44, "b": 78},
        legend={"orientation": "h", "y": -0.12},
        hovermode="x unified",
        template="plotly_white",
        # NOTE: marks across both panels as fig.add_vrect and add_vline draw them, given at once (~10 ms a call)
        shapes=[panel for shape in (*rects, *lines) for panel in _across_panels(shape)],
        annotations=notes,
    )
    fig.update_xaxes(range=list(span))
    fig.update_yaxes(title_text=f"GPUs of VC {record['vc']}", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="jobs queued", rangemode="tozero", row=2, col=1)
    return fig


def wait_end(record: dict[str, Any], trace_end: datetime | None) -> datetime | None:
    """When a job stopped waiting: its start, else its end (it left the queue unstarted), else the trace's end for an
    unfinished job (still queued), else None (not recorded)."""
    if record["start_time"] is not None or record["end_time"] is not None:
        return record["start_time"] or record["end_time"]
    return trace_end if record["state"] in schema.UNFINISHED_STATES else None


def _line(df: pl.DataFrame, col: str, name: str, colour: str, *, fill: bool = False, dash: str = "solid") -> go.Scatter:
    return go.Scatter(
        x=df["time"].to_list(),
        y=df[col].to_list(),
        name=name,
        mode="lines",
        line={"color": colour, "width": 1.5, "dash": dash, "shape": "hv"},
        fill="tozeroy" if fill else None,
    )


def _shade(x0: datetime, x1: datetime, colour: str, label: str, notes: list[dict]) -> dict:
    """A shaded span from x0 to x1, its label added to notes."""
    notes.append(
        {"x": x0 + (x1 - x0) / 2, "y": 0.5, "yref": "paper", "text": label, "showarrow": False,
         "font": {"size": 11, "color": "#666"}}
    )  # fmt: skip
    return {"type": "rect", "x0": x0, "x1": x1, "fillcolor": colour, "line": {"width": 0}, "layer": "below"}


def _across_panels(shape: dict) -> list[dict]:
    """shape drawn over the whole height of each of the two panels."""
    return [{**shape, "xref": x, "yref": f"{y} domain", "y0": 0, "y1": 1} for x, y in (("x", "y"), ("x2", "y2"))]
