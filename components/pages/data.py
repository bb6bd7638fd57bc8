"""Data page: the datasets present, their period, size, source, attribution and data-quality report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, dcc, html

from analytics.capabilities import ABSENT, DERIVED, REAL, capabilities, capacity_disabled
from analytics.ingest.quality import summary_lines
from analytics.store import Dataset
from components.charts import units
from components.datasets import access
from components.datasets import admin as data_admin
from components.server.auth import has_role
from components.shell.controls import page_header

# filters=False: the page lists every dataset; the shell hides the global filter bar
dash.register_page(__name__, path="/data", name="Data", title="Helios Dashboard · Data", order=5, filters=False)


def folder_size_bytes(path: Path) -> int:
    """Total size of the files in a dataset folder (and its monthly jobs folder)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _text(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "–"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _count(value: Any) -> str:
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k} {_count(v)}" for k, v in value.items()) + ")"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _row_counts(meta: dict[str, Any]) -> str:
    counts = meta.get("row_counts") or {}
    if isinstance(counts, dict):
        return "; ".join(f"{k.replace('_', ' ')}: {_count(v)}" for k, v in counts.items()) or "–"
    return _text(counts)


def _period(meta: dict[str, Any]) -> str:
    period = meta.get("period")
    if isinstance(period, dict) and {"start", "end"} <= set(period):
        return f"{period['start']} → {period['end']}"
    return _text(period)


def quality_block(quality: Any) -> html.Div:
    """The data-quality report of a dataset: its summary lines, with the full report folded below."""
    if not quality:
        return html.P("No data-quality report recorded.", className="text-muted small mb-0")
    try:
        lines = summary_lines(quality)
    except (KeyError, TypeError, IndexError):
        lines = ["(report in an unexpected format, shown in full below)"]
    raw = html.Details(
        [html.Summary("full report", className="small"), html.Pre(json.dumps(quality, indent=2, default=str))],
        className="quality-json small",
    )
    return html.Div([html.Ul([html.Li(line) for line in lines], className="small mb-1"), raw])


def _works_list(caps: dict[str, Any]) -> html.Ul:
    """Each page and experiment with a tick, or a cross and the reason it does not apply to this dataset."""
    items = []
    for page, problem in caps["pages"].items():
        mark = html.Span("✗ " if problem else "✓ ", className="text-danger" if problem else "text-success")
        items.append(html.Li([mark, html.B(page), f": {problem}" if problem else ""]))
    return html.Ul(items, className="small list-unstyled mb-2 works-with")


def _columns_line(caps: dict[str, Any]) -> html.Div:
    """The job columns grouped by status: real, derived (with how, on hover) and absent."""
    cols = caps["columns"]

    def names(status: str) -> list:
        return [
            html.Span(c, title=cols[c]["note"], className=f"col-{status} me-2")
            for c in cols
            if cols[c]["status"] == status
        ]

    return html.Div(
        [
            html.Div([html.Span("real: ", className="text-muted"), *names(REAL)]),
            html.Div([html.Span("derived: ", className="text-muted"), *(names(DERIVED) or ["none"])]),
            html.Div([html.Span("not in this trace: ", className="text-muted"), *(names(ABSENT) or ["none"])]),
        ],
        className="small mb-2 columns-status",
    )


def _capacity(meta: dict[str, Any]) -> str:
    disabled = capacity_disabled(meta)
    if disabled:
        return "none given, so these views are disabled: " + "; ".join(disabled)
    return _text(meta.get("capacity_source"))


def _last_refresh(meta: dict[str, Any]) -> str:
    refreshes = meta.get("refreshes") or []
    if not refreshes:
        return "–"
    last = refreshes[-1]
    return f"{last.get('at')} from {last.get('source')} ({len(refreshes)} refreshes logged)"


def dataset_card(ds: Dataset) -> dbc.Card:
    """Everything known about one dataset."""
    meta = ds.meta
    facts = [
        ("source", _text(meta.get("source"))),
        ("format", _text(meta.get("format"))),
        ("clusters", _text(meta.get("clusters"))),
        ("period", _period(meta)),
        ("data as of", _text(access.data_as_of(ds.name))),
        ("last refresh", _last_refresh(meta)),
        ("GPU capacity", _capacity(meta)),
        ("rows", _row_counts(meta)),
        ("size on disk", units.size_bytes(folder_size_bytes(ds.path))),
        ("version", ds.version),
    ]
    return dbc.Card(
        [
            dbc.CardHeader(html.H5(ds.name, className="mb-0")),
            dbc.CardBody(
                [
                    html.Dl(
                        [el for k, v in facts for el in (html.Dt(k), html.Dd(v))],
                        className="stat-list small",
                    ),
                    html.H6("Works with"),
                    _works_list(capabilities(meta)),
                    html.H6("Columns"),
                    _columns_line(capabilities(meta)),
                    html.H6("Attribution"),
                    dcc.Markdown(_text(meta.get("attribution")), className="small"),
                    html.H6("Data quality"),
                    quality_block(meta.get("quality")),
                ]
            ),
        ],
        className="mb-3 shadow-sm",
    )


def layout(**_params: Any) -> html.Div:
    """The data page (it ignores the filters)."""
    header = page_header("Data", "The datasets in the data folder, where they come from and how clean they are.")
    datasets = access.list_datasets()
    admin = [data_admin.section([d.name for d in datasets]) if has_role("admin") else data_admin.placeholders()]
    if not datasets:
        empty = dbc.Alert(["No dataset yet: run ", html.Code("helios demo"), " or upload one."], color="warning")
        return html.Div([header, empty, *admin])
    return html.Div([header, *admin, dbc.Row([dbc.Col(dataset_card(d), xs=12, xl=6) for d in datasets])])


def register_callbacks(app: Dash) -> None:
    """Register the admin upload and delete callbacks on app."""
    data_admin.register(app)
