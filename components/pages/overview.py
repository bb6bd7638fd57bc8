"""Overview page: one card per cluster and the cluster summary table of the study."""

from __future__ import annotations

from typing import Any

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
import polars as pl
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html

from components.charts import registry as charts
from components.datasets import access
from components.server import cache as query_cache
from components.shell.layout import page_layout

dash.register_page(__name__, path="/", name="Overview", title="Helios Dashboard · Overview", order=0)

SPEC = "overview-spec"
CARDS = "overview-cards"
TABLE = "overview-table"
CSV = "overview-csv"
UTIL = "overview-util"
SUMMARY_HEADERS: dict[str, str] = {
    "id": "cluster",
    "gpu_num": "GPUs",
    "job_num": "jobs",
    "cpu_job_num": "CPU jobs",
    "gpu_job_num": "GPU jobs",
    "avg_run_time_cpu": "mean CPU-job run (s)",
    "avg_run_time_gpu": "mean GPU-job run (s)",
    "avg_que_time_cpu": "mean CPU-job queue (s)",
    "avg_que_time_gpu": "mean GPU-job queue (s)",
    "avg_gpu_num": "mean GPUs per GPU job",
    "med_run_time_cpu": "median CPU-job run (s)",
    "med_run_time_gpu": "median GPU-job run (s)",
    "med_que_time_cpu": "median CPU-job queue (s)",
    "med_que_time_gpu": "median GPU-job queue (s)",
    "med_gpu_num": "median GPUs per GPU job",
    "complete_rate": "completed (fraction)",
    "cancel_rate": "cancelled (fraction)",
    "fail_rate": "failed (fraction)",
    "complete_rate_cpu": "CPU completed (fraction)",
    "cancel_rate_cpu": "CPU cancelled (fraction)",
    "fail_rate_cpu": "CPU failed (fraction)",
    "complete_rate_gpu": "GPU completed (fraction)",
    "cancel_rate_gpu": "GPU cancelled (fraction)",
    "fail_rate_gpu": "GPU failed (fraction)",
    "complete_gpu_time": "completed GPU time (GPU·s)",
    "cancel_gpu_time": "cancelled GPU time (GPU·s)",
    "fail_gpu_time": "failed GPU time (GPU·s)",
}


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """The cluster cards (filled by a callback) and the cluster summary table."""
    return [
        dcc.Store(id=SPEC, data=state),
        dcc.Loading(html.Div(id=CARDS, className="mb-3"), type="dot", delay_show=150),
        html.Div(
            [
                html.H5("Cluster summary", className="mb-0 me-auto"),
                dbc.Button("CSV", id=CSV, size="sm", color="secondary", outline=True),
            ],
            className="d-flex align-items-center mb-2",
        ),
        dag.AgGrid(
            id=TABLE,
            columnDefs=[],
            rowData=[],
            defaultColDef={"resizable": True, "sortable": True, "wrapHeaderText": True, "autoHeaderHeight": True},
            dashGridOptions={"domLayout": "autoHeight", "suppressCellFocus": True},
            csvExportParams={"fileName": "helios-cluster-summary.csv"},
            style={"width": "100%"},
        ),
    ]


layout = page_layout(
    "Overview", "Each cluster at a glance, and the per-cluster summary table of the Helios study.", body
)


def cluster_cards(state: dict[str, Any]) -> pl.DataFrame:
    """Per-cluster card figures: GPUs, jobs, GPU jobs, unfinished jobs, active users, completion rate, GPU-hours."""

    def compute() -> pl.DataFrame:
        summary, active, states = query_cache.parallel(
            lambda: access.query("cluster_summary", state),
            lambda: access.active_users(state),
            lambda: access.query("job_states", state),
        )
        summary = summary.filter(pl.col("id") != "total")
        return (
            summary.select(
                pl.col("id").alias("cluster"),
                "gpu_num",
                "job_num",
                "gpu_job_num",
                (pl.col("complete_rate") * 100).alias("completion_pct"),
            )
            .join(
                states.select("cluster", "unfinished_jobs", (pl.col("gpu_time") / 3600).alias("gpu_hours")),
                on="cluster",
                how="left",
            )
            .join(active, on="cluster", how="left")
        )

    return access.derived("overview_cards", state, compute)


def mean_utilization(state: dict[str, Any]) -> dict[str, float]:
    """Mean GPU utilisation (%) per cluster over the selected window (from the hourly utilisation series)."""
    util = access.query("utilization_resampled", state, every=charts.COARSE_EVERY)
    means = util.group_by("cluster").agg((pl.col("gpu_utilization").mean() * 100).alias("pct"))
    return dict(means.iter_rows())


def _fmt(value: Any, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def _absent(problem: str) -> html.Span:
    return html.Span("not in this trace", title=problem, className="text-muted not-in-trace")


def _card(row: dict[str, Any], caps: dict[str, Any]) -> dbc.Card:
    features = caps["features"]

    def needs(feature: str, value: Any) -> Any:
        return _absent(features[feature]) if features[feature] else value

    util = html.Span("…", id={"type": UTIL, "cluster": row["cluster"]})
    items = [
        ("GPUs", _fmt(row["gpu_num"], "{:,}") if row["gpu_num"] is not None else _absent("no GPU capacity table")),
        ("jobs", _fmt(row["job_num"], "{:,}")),
        ("GPU jobs", _fmt(row["gpu_job_num"], "{:,}")),
        *([("unfinished jobs", _fmt(row["unfinished_jobs"], "{:,}"))] if row["unfinished_jobs"] else []),
        ("mean GPU utilisation", needs("utilisation", util)),
        ("active users", needs("users", _fmt(row["active_users"], "{:,}"))),
        ("completion rate", needs("final_states", _fmt(row["completion_pct"], "{:.1f} %"))),
        (
            "GPU-hours",
            needs("durations", _fmt(row["gpu_hours"], "{:,.0f}" if (row["gpu_hours"] or 0) >= 10 else "{:.2f}")),
        ),
    ]
    return dbc.Card(
        dbc.CardBody(
            [
                html.H5(row["cluster"], className="card-title mb-2"),
                html.Dl(
                    [el for label, value in items for el in (html.Dt(label), html.Dd(value))],
                    className="stat-list mb-0",
                ),
            ]
        ),
        className="h-100 shadow-sm cluster-card",
    )


def render(state: dict[str, Any]):
    """The cluster cards, the summary table's columns and rows for a filter state."""
    try:
        cards = cluster_cards(state)
        summary = access.query("cluster_summary", state)
    except access.USER_ERRORS as exc:
        return dbc.Alert(str(exc), color="danger"), [], []
    if cards.is_empty():
        return dbc.Alert("No jobs match the current filters.", color="info"), [], []
    caps = access.dataset_capabilities(state["dataset"])
    card_cols = [dbc.Col(_card(r, caps), xs=12, sm=6, xl=3, className="mb-3") for r in cards.to_dicts()]
    row = dbc.Row(card_cols, className="g-3")
    cols = [
        {"field": c, "headerName": SUMMARY_HEADERS.get(c, c), "pinned": "left" if c == "id" else None, "minWidth": 110}
        for c in summary.columns
    ]
    return row, cols, summary.to_dicts()


def fill_utilization(_cards: Any, state: dict[str, Any]) -> list[str]:
    """Fill each card's mean utilisation once the cards are drawn (it needs the slower per-minute series)."""
    ids = [o["id"]["cluster"] for o in ctx.outputs_list]
    try:
        means = mean_utilization(state)
    except access.USER_ERRORS:
        return ["–"] * len(ids)
    return [_fmt(means.get(c), "{:.1f} %") for c in ids]


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    app.callback(
        Output({"type": UTIL, "cluster": ALL}, "children"),
        Input(CARDS, "children"),
        State(SPEC, "data"),
    )(fill_utilization)
    app.callback(
        Output(CARDS, "children"),
        Output(TABLE, "columnDefs"),
        Output(TABLE, "rowData"),
        Input(SPEC, "data"),
    )(render)
    app.callback(Output(TABLE, "exportDataAsCsv"), Input(CSV, "n_clicks"), prevent_initial_call=True)(lambda _n: True)
