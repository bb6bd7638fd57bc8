"""The Data page's admin tools: upload a trace (ingested in the background) and delete a dataset after confirming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dash_bootstrap_components as dbc
from dash import Dash, Input, Output, State, dcc, html, no_update

from analytics import store
from analytics.capabilities import COLUMN_WORDS
from analytics.ingest.quality import KIND_DESCRIPTIONS
from components.datasets import uploads
from components.server.auth import has_role
from components.server.background import poll_interval_ms
from components.server.runs import RunError, run_in_subprocess
from components.server.settings import Settings

UPLOAD = "data-upload"
FORMAT = "data-upload-format"
NAME = "data-upload-name"
REQUEST = "data-upload-request"
STATUS = "data-upload-status"
PROGRESS = "data-upload-progress"
DELETE_NAME = "data-delete-name"
DELETE = "data-delete"
CONFIRM = "data-delete-confirm"
DELETE_STATUS = "data-delete-status"
NOT_ALLOWED = "not allowed: the admin role is required"
UPLOAD_ERRORS = (uploads.UploadError,)  # what an ingest reports as a user-facing reason


def section(dataset_names: list[str]) -> dbc.Card:
    """The upload and delete controls (shown to admins only)."""
    limit_mb = uploads.max_upload_bytes() / 2**20
    upload = dcc.Upload(
        html.Div(
            ["Drop a trace here or ", html.A("choose a file"), f" (.zip, .csv or a sacct .txt, up to {limit_mb:g} MiB)"]
        ),
        id=UPLOAD,
        multiple=False,
        className="upload-box border rounded p-3 text-center small mb-2",
    )
    fields = dbc.Row(
        [
            dbc.Col(
                dcc.Dropdown(
                    id=FORMAT, options=list(uploads.UPLOAD_FORMATS), value=uploads.UPLOAD_FORMATS[0], clearable=False
                ),
                md=4,
            ),
            dbc.Col(dbc.Input(id=NAME, placeholder="dataset name, e.g. helios-2020", maxLength=64), md=8),
        ],
        className="g-2 mb-2",
    )
    delete = dbc.InputGroup(
        [
            dbc.Select(id=DELETE_NAME, options=[{"label": n, "value": n} for n in dataset_names]),
            dbc.Button("Delete dataset", id=DELETE, color="danger", outline=True),
        ],
        size="sm",
    )
    return dbc.Card(
        dbc.CardBody(
            [
                html.H5("Manage datasets"),
                fields,
                upload,
                dbc.Progress(id=PROGRESS, value=0, label="", className="mb-2"),
                html.Div(id=STATUS, className="small mb-3"),
                dcc.Store(id=REQUEST),
                delete,
                dcc.ConfirmDialog(id=CONFIRM),
                html.Div(id=DELETE_STATUS, className="small mt-2"),
            ]
        ),
        className="mb-3 shadow-sm",
    )


def placeholders() -> html.Div:
    """The admin controls' ids, hidden and inert, for a non-admin's page (their callbacks refuse non-admins anyway)."""
    return html.Div(
        [
            dcc.Upload(id=UPLOAD, disabled=True),
            dcc.Dropdown(id=FORMAT, options=[]),
            dbc.Input(id=NAME, disabled=True),
            dbc.Progress(id=PROGRESS, value=0),
            html.Div(id=STATUS),
            dcc.Store(id=REQUEST),
            dbc.Select(id=DELETE_NAME, options=[]),
            dbc.Button(id=DELETE, disabled=True),
            dcc.ConfirmDialog(id=CONFIRM),
            html.Div(id=DELETE_STATUS),
        ],
        hidden=True,
    )


def _alert(text: str, color: str) -> dbc.Alert:
    return dbc.Alert(text, color=color, className="py-1 small mb-0")


def stage(contents: str | None, filename: str | None, fmt: str | None, name: str | None, settings: Settings):
    """Check the uploader's role, the size, format and name, and stage the file for the background ingest."""
    if not contents:
        return no_update, no_update
    if not has_role("admin"):
        return None, _alert(NOT_ALLOWED, "danger")
    try:
        raw = uploads.decode_upload(contents, filename or "", uploads.max_upload_bytes())
        request = uploads.stage_upload(raw, filename or "", fmt or "", (name or "").strip(), settings.cache_dir)
    except uploads.UploadError as exc:
        return None, _alert(str(exc), "danger")
    return request, _alert(f"ingesting {request['filename']} as {request['name']} …", "info")


def ingest_job(set_progress, request: dict[str, Any] | None, settings: Settings):
    """The background ingest: progress while it runs, then the data-quality report or a one-line error."""
    if not request:
        return no_update

    def report(fraction: float, label: str) -> None:
        set_progress((round(fraction * 100), label))

    data_dir = Path(settings.data_dir or store.data_dir())
    # The background job is a fork of the web worker, where Polars' thread pool can hang: ingest in a spawned child.
    job = (request, settings.cache_dir, data_dir)
    try:
        dataset = run_in_subprocess(uploads.ingest_staged, job, report, settings=settings, expected=UPLOAD_ERRORS)
    except RunError as exc:
        uploads.discard_staged(request, settings.cache_dir)
        return _alert(f"upload failed, nothing was changed: {exc}", "danger")
    done = _alert(f"dataset {dataset.name} is ready (version {dataset.version}); reload the page to see it", "success")
    return html.Div([done, html.H6("Data quality", className="mt-2"), quality_list(dataset.meta.get("quality"))])


ISSUE_ACTIONS: dict[str, str] = {"dropped": "left out", "kept": "kept", "fixed": "corrected"}


def _issue_text(kind: str, issue: dict[str, Any]) -> str:
    """One kind of data problem in words: how many, what, what was done, and a first example (file name only)."""
    what = issue.get("description") or KIND_DESCRIPTIONS.get(kind, kind.replace("_", " "))
    action = ISSUE_ACTIONS.get(str(issue.get("action")), str(issue.get("action")))
    text = f"{issue['count']:,} × {what}: {action}"
    example = (issue.get("examples") or [None])[0]
    if isinstance(example, dict):
        text += f" (e.g. {Path(str(example.get('file', ''))).name} row {example.get('row')}: {example.get('detail')})"
    return text + "."


def quality_list(quality: Any) -> html.Ul | html.P:
    """The ingest's data-quality report in plain words: rows read and kept, each kind of problem and what was done,
    values missing per field (no raw report, no server paths)."""
    if not isinstance(quality, dict) or not quality:
        return html.P("No data-quality report recorded.", className="text-muted small mb-0")
    items = [html.Li(f"{quality.get('rows_in', 0):,} rows read, {quality.get('rows_out', 0):,} kept.")]
    for kind, issue in (quality.get("issues") or {}).items():
        if isinstance(issue, dict) and issue.get("count"):
            items.append(html.Li(_issue_text(kind, issue)))
    absent = set(quality.get("absent_columns") or [])
    missing = {c: n for c, n in (quality.get("null_counts") or {}).items() if n and c not in absent}
    if missing:
        text = "; ".join(f"{n:,} without {COLUMN_WORDS.get(c, c)}" for c, n in missing.items())
        items.append(html.Li(f"Jobs with a missing value: {text}."))
    return html.Ul(items, className="small mb-1")


def ask_delete(n_clicks: int | None, name: str | None):
    """Open the confirmation dialog naming the dataset to delete."""
    if not n_clicks or not name:
        return no_update, no_update
    return True, f"Delete dataset {name}? Its files are removed for everyone."


def delete(submit_clicks: int | None, name: str | None, settings: Settings):
    """Delete the chosen dataset once confirmed, admins only."""
    if not submit_clicks:
        return no_update
    if not has_role("admin"):
        return _alert(NOT_ALLOWED, "danger")
    try:
        uploads.delete_dataset(name or "", Path(settings.data_dir or store.data_dir()))
    except uploads.UploadError as exc:
        return _alert(str(exc), "danger")
    return _alert(f"dataset {name} deleted; reload the page", "success")


def register(app: Dash) -> None:
    """Register the upload and delete callbacks on app (and sweep staged uploads left by a stopped server)."""
    settings: Settings = app.server.config["HELIOS_SETTINGS"]
    uploads.sweep_stale(settings.cache_dir)
    # Dash posts the upload base64-encoded inside JSON: cap request bodies a little above that size.
    app.server.config["MAX_CONTENT_LENGTH"] = uploads.max_upload_bytes() * 4 // 3 + 2**20
    app.callback(
        Output(REQUEST, "data"),
        Output(STATUS, "children"),
        Input(UPLOAD, "contents"),
        State(UPLOAD, "filename"),
        State(FORMAT, "value"),
        State(NAME, "value"),
        prevent_initial_call=True,
    )(lambda *a: stage(*a, settings=settings))
    app.callback(
        Output(STATUS, "children", allow_duplicate=True),
        Input(REQUEST, "data"),
        background=True,
        interval=poll_interval_ms(),
        progress=[Output(PROGRESS, "value"), Output(PROGRESS, "label")],
        progress_default=[0, ""],
        prevent_initial_call=True,
    )(lambda set_progress, request: ingest_job(set_progress, request, settings))
    app.callback(
        Output(CONFIRM, "displayed"),
        Output(CONFIRM, "message"),
        Input(DELETE, "n_clicks"),
        State(DELETE_NAME, "value"),
        prevent_initial_call=True,
    )(ask_delete)
    app.callback(
        Output(DELETE_STATUS, "children"),
        Input(CONFIRM, "submit_n_clicks"),
        State(DELETE_NAME, "value"),
        prevent_initial_call=True,
    )(lambda *a: delete(*a, settings=settings))
