"""Job page (/jobs/<job_id>): one job's whole record, its timeline over its VC's GPUs and queue, the jobs that held
its VC's GPUs while it waited, and its user's other jobs around it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import dash
import dash_bootstrap_components as dbc
from dash import dcc, html

from analytics import capabilities, schema
from analytics.filters import empty_state, flat_params
from components.charts import units
from components.charts.timeline import job_timeline_figure, wait_end
from components.datasets import access
from components.explorer import grid as explorer_grid
from components.shell import controls
from components.shell.layout import data_as_of, dataset_problem

dash.register_page(
    __name__,
    path_template=controls.JOB_PATH + "<job_id>",
    name="Job",
    title="Helios Dashboard · Job",
    nav=False,
    description="One job: its record, timeline, why it waited and its user's other jobs.",
)

MAX_JOB_ID = 2**63 - 1
MAX_WINDOW = timedelta(days=400)  # the longest stretch of the VC's activity drawn around a job
STEPS: tuple[tuple[str, timedelta], ...] = tuple(
    (every, step)
    for every, step in (
        ("1m", timedelta(minutes=1)),
        ("5m", timedelta(minutes=5)),
        ("10m", timedelta(minutes=10)),
        ("30m", timedelta(minutes=30)),
        ("1h", timedelta(hours=1)),
        ("6h", timedelta(hours=6)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(days=7)),
    )
)
MAX_POINTS = 500
TIME_COLUMNS = ("submit_time", "start_time", "end_time")
SECONDS_COLUMNS = ("duration", "queue")
LABELS: dict[str, str] = {**explorer_grid.HEADERS, "duration": "run time", "queue": "queueing delay"}


def human_seconds(seconds: float | None) -> str:
    """A duration in human units (units.duration), "—" for a job that has none yet (not started, not ended)."""
    return "—" if seconds is None else units.duration(seconds)


def plural(n: int, word: str) -> str:
    """`1 GPU`, `2 GPUs`."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def parse_job_id(text: Any) -> int | None:
    """A job id of the URL as an integer, None when it is not one."""
    text = str(text or "")
    if not text.isdigit() or len(text) > 19 or int(text) > MAX_JOB_ID:
        return None
    return int(text)


def _request(job_id: Any, params: dict[str, Any]) -> tuple[dict[str, Any], int | None, str | None]:
    """The filter state, job id and cluster a job page's URL asks for."""
    flat = flat_params(params)
    state = access.read_params(flat)[0]
    cluster = flat.get("cluster") or None
    return state, parse_job_id(job_id), cluster


def status(job_id: Any = None, **params: Any) -> int:
    """The HTTP status of a job page: 404 when the URL names no job of the dataset, else 200."""
    try:
        state, number, cluster = _request(job_id, params)
        if number is None or dataset_problem(state):
            return 404
        return 200 if access.job_records(state["dataset"], number, cluster).height else 404
    except access.USER_ERRORS:
        return 404


def layout(job_id: Any = None, **params: Any) -> html.Div:
    """The page of one job, the candidates when its id is in several clusters, or why there is none."""
    state, number, cluster = _request(job_id, params)
    problem = dataset_problem(state)
    if problem:
        return html.Div([controls.page_header("Job"), problem])
    dataset = state["dataset"]
    if number is None:
        return not_found(f"{str(job_id)[:40]!r} is not a job id (a whole number).", dataset)
    records = access.job_records(dataset, number, cluster)
    if records.is_empty():
        where = f" of cluster {cluster}" if cluster else ""
        return not_found(f"No job {number}{where} in dataset {dataset}.", dataset)
    if records.height > 1:
        return candidates(number, dataset, records["cluster"].to_list())
    return job_view(dataset, records.row(0, named=True))


def not_found(message: str, dataset: str) -> html.Div:
    """The answer for a job that does not exist, with the way back to the explorer."""
    return html.Div(
        [
            controls.page_header("Job not found"),
            dbc.Alert(message, color="warning", id="job-missing"),
            dcc.Link("Find jobs in the explorer", href=f"/jobs?{urlencode({'ds': dataset})}"),
        ]
    )


def candidates(job_id: int, dataset: str, clusters: list[str]) -> html.Div:
    """The clusters that have a job with this id, each a link to its page."""
    return html.Div(
        [
            controls.page_header(f"Job {job_id}", f"Job id {job_id} exists in {len(clusters)} clusters: pick one."),
            html.Ul(
                [html.Li(_job_link(job_id, dataset, c, f"{c} · job {job_id}")) for c in clusters],
                id="job-candidates",
            ),
        ]
    )


def job_view(dataset: str, record: dict[str, Any]) -> html.Div:
    """Everything about one job."""
    columns = access.dataset_capabilities(dataset)["columns"]
    title = f"Job {record['job_id']}"
    subtitle = f"{record['cluster']} · VC {record['vc']} · {record['state'] or 'state not recorded'}"
    explorer = f"/jobs?{urlencode({'ds': dataset, 'cluster': record['cluster'], 'vc': record['vc']})}"
    return html.Div(
        [
            controls.page_header(title, subtitle),
            data_as_of(dataset),
            dbc.Row(
                [
                    dbc.Col([html.H5("Record"), record_table(record, columns)], xs=12, lg=4, className="mb-3"),
                    dbc.Col([html.H5("Timeline"), timeline(dataset, record, columns)], xs=12, lg=8, className="mb-3"),
                ]
            ),
            html.H5("Why it waited"),
            wait_section(dataset, record),
            html.H5(["Other jobs of user ", html.Code(record["user"])] if record["user"] else "Other jobs of its user"),
            user_section(dataset, record),
            dcc.Link(f"All jobs of VC {record['vc']} in the explorer", href=explorer, className="small"),
        ],
        id="job-page",
    )


def _value(record: dict[str, Any], col: str, columns: dict[str, dict[str, str]]) -> Any:
    """A record's value in human units, or why it is missing."""
    value = record[col]
    if columns.get(col, {}).get("status") == capabilities.ABSENT:
        return html.Span(f"not in this trace ({columns[col]['note']})", className="text-muted")
    if value is None:
        missing = "never started" if col in ("start_time", "queue") and record["start_time"] is None else "not recorded"
        return html.Span(missing, className="text-muted")
    if col in TIME_COLUMNS:
        return f"{value:%Y-%m-%d %H:%M:%S}"
    if col in SECONDS_COLUMNS:
        return f"{human_seconds(value)} ({value:,} s)"
    if col == "state":
        return f"{value} ({'unfinished' if schema.state_group(value) == schema.UNFINISHED else 'final'})"
    return f"{value:g}" if isinstance(value, float) else str(value)


def record_table(record: dict[str, Any], columns: dict[str, dict[str, str]]) -> dbc.Table:
    """The job's every column, in human units."""
    rows = [
        html.Tr([html.Th(LABELS.get(col, col), className="text-nowrap"), html.Td(_value(record, col, columns))])
        for col in schema.JOB_COLUMNS
    ]
    return dbc.Table(html.Tbody(rows), size="sm", bordered=False, className="small mb-0", id="job-record")


def run_end(record: dict[str, Any]) -> datetime | None:
    """When the job stopped holding its GPUs: its end time, else start + duration (None when it never started)."""
    if record["start_time"] is None:
        return None
    return record["end_time"] or record["start_time"] + timedelta(seconds=record["duration"] or 0)


def window(record: dict[str, Any], trace_end: datetime | None) -> tuple[datetime, datetime, str]:
    """The stretch of time drawn around a job (its wait and run, padded, at most MAX_WINDOW; an unfinished job that
    never started waits to the trace's end) and the step of its buckets."""
    first = record["submit_time"]
    last = run_end(record) or wait_end(record, trace_end) or first
    pad = max(timedelta(minutes=30), (last - first) / 5)
    start, end = first - pad, min(last + pad, first - pad + MAX_WINDOW)
    every = next((e for e, step in STEPS if (end - start) / step <= MAX_POINTS), STEPS[-1][0])
    return start.replace(second=0, microsecond=0), end, every


def timeline(dataset: str, record: dict[str, Any], columns: dict[str, dict[str, str]]) -> Any:
    """The job's submit, start and end over its VC's running GPUs and queue length around that time."""
    if columns["start_time"]["status"] == capabilities.ABSENT:
        note = f"No timeline: {columns['start_time']['note']}, so when this job ran is not in this trace."
        return dbc.Alert(note, color="secondary", className="small")
    newest = access.data_as_of(dataset)
    start, end, every = window(record, datetime.strptime(newest, "%Y-%m-%d %H:%M") if newest else None)

    def drawn() -> dict[str, Any]:
        activity = access.vc_activity(dataset, record["cluster"], record["vc"], start, end, every)
        return job_timeline_figure(activity, record, run_end(record), (start, end)).to_plotly_json()

    # NOTE: cached per dataset version and job (the figure took ~70 ms to build)
    name = f"job-timeline:{record['cluster']}:{record['job_id']}:{start:%Y%m%d%H%M}:{end:%Y%m%d%H%M}:{every}"
    fig = access.derived(name, empty_state(dataset), drawn)
    caption = (
        f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M}, mean per {every} bucket; shaded: waiting (orange), "
        "running (green)."
    )
    graph = dcc.Graph(id="job-timeline", figure=fig, config=controls.graph_config("job-timeline"))
    return html.Div([graph, html.P(caption, className="text-muted small mb-0")])


def _job_link(job_id: Any, dataset: str, cluster: str, text: str = "") -> dcc.Link:
    return dcc.Link(text or str(job_id), href=controls.job_href(job_id, dataset, cluster), className="job-link")


def _table(head: list[str], rows: list[list[Any]], table_id: str) -> html.Div:
    return html.Div(
        dbc.Table(
            [
                html.Thead(html.Tr([html.Th(h, className="text-nowrap") for h in head])),
                html.Tbody([html.Tr([html.Td(c, className="text-nowrap") for c in row]) for row in rows]),
            ],
            size="sm",
            striped=True,
            hover=True,
            className="small mb-1",
            id=table_id,
        ),  # fmt: skip
        className="table-responsive",
    )


def _when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value is not None else "—"


def wait_section(dataset: str, record: dict[str, Any]) -> html.Div:
    """The jobs of the same VC that held GPUs while this one waited, most GPUs first, each linked."""
    until = wait_end(record, None)
    if until is None and record["state"] not in schema.UNFINISHED_STATES:
        return html.P("It has no start time, so when it waited is not recorded.", className="text-muted small")
    waited = (until - record["submit_time"]).total_seconds() if until else None
    if record["start_time"] is not None and waited is not None and waited <= 0:
        return html.P("It started as soon as it was submitted: no wait.", className="small", id="job-no-wait")
    holders = access.job_wait_holders(dataset, record)
    if record["start_time"] is not None:
        span = f"waited {human_seconds(waited)}"
    elif waited is not None:
        span = f"waited {human_seconds(waited)} and left the queue without starting"
    else:
        span = "has not started by the trace's end"
    if holders.is_empty():
        text = f"It {span}, and no GPU job of VC {record['vc']} was running meanwhile."
        return html.P(text, className="small", id="job-wait-summary")
    n, gpus = int(holders["n_holders"][0]), int(holders["holders_gpu_num"][0])
    text = (
        f"It {span} (submitted {_when(record['submit_time'])}, asking for {plural(record['gpu_num'], 'GPU')}). "
        f"Meanwhile {plural(n, 'GPU job')} of VC {record['vc']} held GPUs ({plural(gpus, 'GPU')} between them, "
        "not all at once)" + (f"; the {holders.height} with the most GPUs:" if n > holders.height else ":")
    )
    rows = [
        [
            _job_link(h["job_id"], dataset, record["cluster"]),
            h["user"] or "—",
            h["gpu_num"],
            _when(h["start_time"]),
            _when(h["end_time"]),
            human_seconds(h["held_s"]),
            h["state"] or "—",
        ]
        for h in holders.iter_rows(named=True)
    ]
    head = ["job", "user", "GPUs", "started", "ends", "held during the wait", "state"]
    return html.Div([html.P(text, className="small", id="job-wait-summary"), _table(head, rows, "job-wait-table")])


def user_section(dataset: str, record: dict[str, Any]) -> html.Div:
    """The user's other jobs nearest in submit time, each linked."""
    if not record["user"]:
        return html.P("This trace records no users.", className="text-muted small")
    around = access.job_user_around(dataset, record)
    if around.is_empty():
        return html.P("The user has no other job on this cluster.", className="text-muted small")
    rows = [
        [
            _job_link(j["job_id"], dataset, record["cluster"]),
            j["vc"],
            j["gpu_num"],
            _when(j["submit_time"]),
            human_seconds(j["queue"]),
            human_seconds(j["duration"]),
            j["state"] or "—",
        ]
        for j in around.iter_rows(named=True)
    ]
    head = ["job", "VC", "GPUs", "submitted", "waited", "ran", "state"]
    user_link = f"/users?{urlencode({'ds': dataset, 'cluster': record['cluster'], 'user': record['user']})}"
    return html.Div(
        [
            html.P(
                [f"The {len(rows)} submitted nearest to this one. ", dcc.Link("The user's page", href=user_link)],
                className="small",
            ),
            _table(head, rows, "job-user-table"),
        ]
    )
