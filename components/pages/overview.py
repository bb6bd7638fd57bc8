"""Overview page: one card per cluster and the cluster summary table of the study."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
import polars as pl
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html

from components.charts import registry as charts
from components.charts import units
from components.datasets import access
from components.server import cache as query_cache
from components.shell import tables
from components.shell.layout import page_layout

# charts=False: it opens without a chart (components/server/transfer.py: plotly.js is not loaded at once)
dash.register_page(__name__, path="/", name="Overview", title="Helios Dashboard · Overview", order=0, charts=False)

SPEC = "overview-spec"
CARDS = "overview-cards"
TABLE = "overview-table"
CSV = "overview-csv"
UTIL = "overview-util"
LAID_OUT = "overview-laid-out"  # True when the page was laid out with its cards (all of them cached)
WANT = "overview-want"  # the filter state, set in the browser when the cards must be asked of the server
# column -> (header, units kind); fractions are shown as percentages
SUMMARY_COLUMNS: dict[str, tuple[str, str | None]] = {
    "id": ("cluster", None),
    "gpu_num": ("GPUs", "count"),
    "job_num": ("jobs", "count"),
    "cpu_job_num": ("CPU jobs", "count"),
    "gpu_job_num": ("GPU jobs", "count"),
    "avg_run_time_cpu": ("mean CPU-job run", "duration"),
    "avg_run_time_gpu": ("mean GPU-job run", "duration"),
    "avg_que_time_cpu": ("mean CPU-job queue", "duration"),
    "avg_que_time_gpu": ("mean GPU-job queue", "duration"),
    "avg_gpu_num": ("mean GPUs per GPU job", "count"),
    "med_run_time_cpu": ("median CPU-job run", "duration"),
    "med_run_time_gpu": ("median GPU-job run", "duration"),
    "med_que_time_cpu": ("median CPU-job queue", "duration"),
    "med_que_time_gpu": ("median GPU-job queue", "duration"),
    "med_gpu_num": ("median GPUs per GPU job", "count"),
    "complete_rate": ("completed", "percent"),
    "cancel_rate": ("cancelled", "percent"),
    "fail_rate": ("failed", "percent"),
    "complete_rate_cpu": ("CPU jobs completed", "percent"),
    "cancel_rate_cpu": ("CPU jobs cancelled", "percent"),
    "fail_rate_cpu": ("CPU jobs failed", "percent"),
    "complete_rate_gpu": ("GPU jobs completed", "percent"),
    "cancel_rate_gpu": ("GPU jobs cancelled", "percent"),
    "fail_rate_gpu": ("GPU jobs failed", "percent"),
    "complete_gpu_time": ("completed GPU time", "gpu_time"),
    "cancel_gpu_time": ("cancelled GPU time", "gpu_time"),
    "fail_gpu_time": ("failed GPU time", "gpu_time"),
}


def body(state: dict[str, Any], _params: dict[str, Any]) -> list:
    """The cluster cards and the cluster summary table: laid out with the page when all they show is cached, else
    filled by callbacks (the cards and table, then the slower mean utilisation)."""
    cached = laid_out(state)
    cards, columns, rows = cached if cached is not None else ([], [], [])
    return [
        dcc.Store(id=SPEC, data=state),
        dcc.Store(id=LAID_OUT, data=cached is not None),
        dcc.Store(id=WANT),
        dcc.Loading(html.Div(cards, id=CARDS, className="mb-3"), type="dot", delay_show=150),
        tables.table_header("Cluster summary", CSV),
        tables.data_grid(
            TABLE,
            columns,
            "helios-cluster-summary.csv",
            rowData=rows,
            dashGridOptions={"domLayout": "autoHeight"},
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

    def compute() -> dict[str, float]:
        util = access.query("utilization_resampled", state, every=charts.HOURLY)
        means = util.group_by("cluster").agg((pl.col("gpu_utilization").mean() * 100).alias("pct"))
        return dict(means.iter_rows())

    return access.derived("overview_utilization", state, compute)


def laid_out(state: dict[str, Any]):
    """The cards (their mean utilisation filled in), the table's columns and rows for a filter state when all of them
    are cached; None when something must be computed (the page then asks for them by callbacks)."""
    try:
        cards = access.derived_if_cached("overview_cards", state)
        summary = access.query_if_cached("cluster_summary", state)
        caps = access.dataset_capabilities(state["dataset"])
        # a trace without utilisation shows "not in this trace" in its place: nothing to wait for
        means = {} if caps["features"]["utilisation"] else access.derived_if_cached("overview_utilization", state)
    except access.USER_ERRORS:
        return None  # the callback says what is wrong
    if cards is None or summary is None or means is None or cards.is_empty():
        return None
    return card_row(cards, caps, means), *summary_table(summary)


def _absent(problem: str) -> html.Span:
    return html.Span("not in this trace", title=problem, className="text-muted not-in-trace")


def _card(row: dict[str, Any], caps: dict[str, Any], means: dict[str, float] | None) -> dbc.Card:
    features = caps["features"]

    def needs(feature: str, value: Any) -> Any:
        return _absent(features[feature]) if features[feature] else value

    pending = html.Span("…", id={"type": UTIL, "cluster": row["cluster"]})  # filled by fill_utilization
    util = pending if means is None else html.Span(units.percent(means.get(row["cluster"])))
    items = [
        (
            "GPUs",
            tables.human("count", row["gpu_num"]) if row["gpu_num"] is not None else _absent("no GPU capacity table"),
        ),
        ("jobs", tables.human("count", row["job_num"])),
        ("GPU jobs", tables.human("count", row["gpu_job_num"])),
        *([("unfinished jobs", tables.human("count", row["unfinished_jobs"]))] if row["unfinished_jobs"] else []),
        ("mean GPU utilisation", needs("utilisation", util)),
        ("active users", needs("users", tables.human("count", row["active_users"]))),
        ("completion rate", needs("final_states", tables.human("percent", row["completion_pct"]))),
        ("GPU time", needs("durations", tables.human("gpu_hours", row["gpu_hours"]))),
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
    return card_row(cards, access.dataset_capabilities(state["dataset"]), None), *summary_table(summary)


def card_row(cards: pl.DataFrame, caps: dict[str, Any], means: dict[str, float] | None) -> dbc.Row:
    """A card per cluster, with its mean utilisation from means, or a placeholder fill_utilization fills when None."""
    cols = [dbc.Col(_card(r, caps, means), xs=12, sm=6, xl=3, className="mb-3") for r in cards.to_dicts()]
    return dbc.Row(cols, className="g-3")


def summary_table(summary: pl.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary table's columns and rows: each number in human units over its exact value, rates in %."""
    rates = [c for c, (_, kind) in SUMMARY_COLUMNS.items() if kind == "percent" and c in summary.columns]
    summary = summary.with_columns(pl.col(c) * 100 for c in rates)
    known = {c: SUMMARY_COLUMNS.get(c, (c, None)) for c in summary.columns}
    cols = [tables.column(c, header, kind, pinned="left" if c == "id" else None) for c, (header, kind) in known.items()]
    rows = tables.human_rows(summary, {c: kind for c, (_, kind) in known.items() if kind})
    return cols, rows


def fill_utilization(_cards: Any, state: dict[str, Any]) -> list[str]:
    """Fill each card's mean utilisation once the cards are drawn (it needs the slower hourly utilisation series)."""
    ids = [o["id"]["cluster"] for o in ctx.outputs_list]
    try:
        means = mean_utilization(state)
    except access.USER_ERRORS:
        return ["–"] * len(ids)
    return [units.percent(means.get(c)) for c in ids]


def register_callbacks(app: Dash) -> None:
    """Register this page's callbacks on app."""
    # Cards laid out with the page send no request: decided in the browser.
    app.clientside_callback(
        "function (laidOut, state) { return laidOut ? window.dash_clientside.no_update : state; }",
        Output(WANT, "data"),
        Input(LAID_OUT, "data"),
        State(SPEC, "data"),
    )
    app.callback(
        Output(CARDS, "children"),
        Output(TABLE, "columnDefs"),
        Output(TABLE, "rowData"),
        Input(WANT, "data"),
        prevent_initial_call=True,
    )(render)
    app.callback(
        Output({"type": UTIL, "cluster": ALL}, "children"),
        Input(CARDS, "children"),
        State(SPEC, "data"),
        prevent_initial_call=True,  # cards laid out with the page have their utilisation
    )(fill_utilization)
    tables.register_export(app, TABLE, CSV)
