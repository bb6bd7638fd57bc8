"""Data page, in plain words: each dataset's size, time span and clusters, its scheduler's configuration, what its
jobs record and lack, which pages and experiments work with it, its data quality and attribution; the admin's upload
and delete."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Dash, dcc, html

from analytics.capabilities import ABSENT, COLUMN_WORDS, DERIVED, REAL, capabilities, capacity_disabled
from analytics.scheduler import CONFIG_KEY, capture_info, config_summary, scheduler_config
from analytics.slurm_config import SlurmConfigError
from analytics.store import Dataset
from components.datasets import access
from components.datasets import admin as data_admin
from components.server.auth import has_role
from components.shell import tables
from components.shell.controls import page_header
from components.whatif.state import default_form, form_to_search
from sim.slurm.calibrate import RULES

# filters=False: the page lists every dataset; the shell hides the global filter bar
# charts=False: it opens without a chart (components/server/transfer.py: plotly.js is not loaded at once)
dash.register_page(
    __name__, path="/data", name="Data", title="Helios Dashboard · Data", order=5, filters=False, charts=False
)


def folder_size_bytes(path: Path) -> int:
    """Total size of the files in a dataset folder (and its monthly jobs folder)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# What each source format is, in plain words (the format ids are the ingest's `--format` names).
FORMAT_NAMES: dict[str, str] = {
    "helios": "the Helios trace (SenseTime's GPU datacenter, SC'21)",
    "helios-synth": "a synthetic trace shaped like Helios (generated, not recorded)",
    "synthetic": "a synthetic trace (generated, not recorded)",
    "philly": "the Microsoft Philly job list (2017)",
    "alibaba-openb": "the Alibaba GPU cluster pod list (openb, 2023)",
    "slurm": "Slurm accounting records (sacct)",
    "csv": "a scheduler's job records read through a column mapping",
}
REVISION_HINT = "changes whenever the data changes; saved results are kept per revision"


def _muted(text: str) -> html.Span:
    return html.Span(text, className="text-muted")


def _words(columns: list[str]) -> str:
    return ", ".join(COLUMN_WORDS.get(c, c.replace("_", " ")) for c in columns) or "none"


def _day(stamp: Any) -> str:
    return str(stamp)[:10] if stamp else "not in this trace"


def span_line(meta: dict[str, Any], size_bytes: int) -> html.P:
    """The dataset in one line: jobs, clusters, time span and size on disk, each exact on hover."""
    counts = meta.get("row_counts") or {}
    period = meta.get("period") or {}
    n_clusters = len(meta.get("clusters") or [])
    plural = "" if n_clusters == 1 else "s"
    parts: list = [tables.human("count", counts.get("jobs")), f" jobs on {n_clusters} cluster{plural}, submitted "]
    if period.get("start") and period.get("end"):
        start, end = datetime.fromisoformat(period["start"]), datetime.fromisoformat(period["end"])
        parts += [f"{start:%d %b %Y} → {end:%d %b %Y} (", tables.human("duration", (end - start).total_seconds()), ")"]
    else:
        parts.append("at times not in this trace")
    parts += ["; ", tables.human("size", size_bytes), " on disk."]
    return html.P(parts, className="mb-2 data-span")


def _per_cluster(meta: dict[str, Any]) -> list:
    per = (meta.get("row_counts") or {}).get("jobs_per_cluster") or {}
    out: list = []
    for cluster, n in per.items():
        out += [", " if out else "", f"{cluster} ", tables.human("count", n)]
    return out or [_muted("–")]


def _source(meta: dict[str, Any]) -> str:
    """Where the jobs come from, without server paths: the file's name, or how they were generated."""
    generator = meta.get("generator")
    if isinstance(generator, dict):
        return f"generated (seed {generator.get('seed')}, scale {generator.get('scale')})"
    source = str(meta.get("source") or "")
    return Path(source).name if source else "–"


def _capacity(meta: dict[str, Any]) -> str:
    disabled = capacity_disabled(meta)
    if disabled:
        return "none given, so these views are disabled: " + "; ".join(disabled)
    if meta.get("capacity_scope") == "cluster" and meta.get("total_gpus"):
        return f"{meta['total_gpus']:,} GPUs for the whole cluster (not per virtual cluster)"
    days = (meta.get("row_counts") or {}).get("vc_gpus")
    return "GPUs of each virtual cluster, day by day" + (f" ({days:,} VC-days)" if isinstance(days, int) else "")


def _last_refresh(meta: dict[str, Any]) -> str:
    refreshes = meta.get("refreshes") or []
    if not refreshes:
        return "never (written once)"
    last = refreshes[-1]
    return f"{last.get('at')} from {Path(str(last.get('source') or '')).name} ({len(refreshes)} refreshes)"


def scheduler_section(ds: Dataset) -> html.Div:
    """The scheduler configuration captured with the dataset in one line, with what the model leaves out, or why
    there is none."""
    info = capture_info(ds.meta)
    try:
        config = scheduler_config(ds)
    except SlurmConfigError as exc:
        return _scheduler_note(f"The stored scheduler configuration cannot be read ({exc}).")
    if config is None:
        if info.get("error"):  # named by file, without the server's folder
            error = str(info["error"]).replace(f"{info.get('source')}/", "")
            return _scheduler_note(f"No scheduler configuration captured: {error}.")
        if ds.meta.get("format") != "slurm":
            return _scheduler_note("Not in this trace.")
        return _scheduler_note(
            "No scheduler configuration captured (helios ingest --slurm-config DIR or helios sync slurm)."
        )
    as_of = str(info.get("as_of") or "").replace("T", " ")
    origin = f" (Slurm {info.get('slurm_version')}, as of {as_of})" if as_of else ""
    parts: list = [html.P(f"{config_summary(config)}{origin}.", className="small mb-1 scheduler-summary")]
    if config.not_modelled:
        items = [html.Li(note) for note in config.not_modelled]
        parts += [html.Div("Not modelled by the what-if's slurm policy:", className="small text-muted"),
                  html.Ul(items, className="small text-muted mb-2 scheduler-not-modelled")]  # fmt: skip
    return html.Div(parts, className="scheduler-config")


def _scheduler_note(text: str) -> html.Div:
    return html.Div(html.P(text, className="small text-muted mb-2"), className="scheduler-config")


FIT_DAYS = 7  # the days a calibrated twin's fit link replays, the trace's last


def calibration_section(ds: Dataset, caps: dict[str, Any]) -> html.Div | None:
    """For a dataset without a captured configuration that the what-if replays: how its Slurm twin is calibrated
    from the record, and per cluster a link that replays the twin alone over the trace's last FIT_DAYS days and
    shows its fit (None when a configuration is captured or the twin cannot run)."""
    features = caps["features"]
    if features.get("whatif") or features.get("queueing") or ds.meta.get(CONFIG_KEY):
        return None
    period = ds.meta.get("period") or {}
    end = str(period.get("end") or "")[:10]
    if not end:
        return None
    start = str(date.fromisoformat(end) - timedelta(days=FIT_DAYS - 1))
    links = []
    for cluster in ds.meta.get("clusters") or []:
        form = {**default_form(ds.name, cluster, start, end), "policies": []}
        links += [dcc.Link(cluster, href=f"/whatif{form_to_search(form)}", className="twin-fit-link"), " "]
    return html.Div(
        [
            html.Div("The what-if's Slurm twin is calibrated from the record:", className="small"),
            html.Ul([html.Li(rule) for rule in RULES], className="small mb-1 twin-rules"),
            html.Div(
                [f"Its fit (its replay against the record) over the last {FIT_DAYS} days: ", *links],
                className="small mb-2",
            ),
        ],
        className="twin-calibration",
    )


def facts_list(ds: Dataset) -> html.Dl:
    """The dataset's facts in plain words: kind, jobs per cluster, newest record, refresh, capacity, source."""
    meta = ds.meta
    fmt = str(meta.get("format") or "")
    facts = [
        ("what it is", FORMAT_NAMES.get(fmt, f"a trace in the “{fmt}” format")),
        ("jobs per cluster", _per_cluster(meta)),
        ("newest record", access.data_as_of(ds.name) or "–"),
        ("last refresh", _last_refresh(meta)),
        ("GPU capacity", _capacity(meta)),
        ("source file", _source(meta)),
        (
            "revision",
            html.Span(ds.version, title="changes whenever the data changes; saved results are kept per revision"),
        ),
    ]
    return html.Dl([el for k, v in facts for el in (html.Dt(k), html.Dd(v))], className="stat-list small")


def _works_list(caps: dict[str, Any]) -> html.Ul:
    """Each page and experiment with a tick, or a cross and the reason it does not apply to this dataset."""
    items = []
    for page, problem in caps["pages"].items():
        mark = html.Span("✗ " if problem else "✓ ", className="text-danger" if problem else "text-success")
        items.append(html.Li([mark, html.B(page), f": not available, {problem}" if problem else ""]))
    return html.Ul(items, className="small list-unstyled mb-2 works-with")


def contents_list(caps: dict[str, Any]) -> html.Ul:
    """What the jobs record: the fields read from the source, those computed (how, on hover) and those it lacks."""
    cols = caps["columns"]

    def of(status: str) -> list[str]:
        return [c for c in cols if cols[c]["status"] == status]

    derived = [html.Span(COLUMN_WORDS.get(c, c), title=cols[c]["note"], className="col-derived") for c in of(DERIVED)]
    joined = [el for i, span in enumerate(derived) for el in ((", ",) if i else ()) + (span,)]
    return html.Ul(
        [
            html.Li([html.B("recorded: "), _words(of(REAL))]),
            html.Li([html.B("computed from other fields: "), *(joined or ["none"])]),
            html.Li([html.B("not in this trace: "), _words(of(ABSENT))]),
        ],
        className="small mb-2 columns-status",
    )


def dataset_card(ds: Dataset) -> dbc.Card:
    """Everything known about one dataset, in plain words."""
    meta = ds.meta
    caps = capabilities(meta)
    return dbc.Card(
        [
            dbc.CardHeader(html.H5(ds.name, className="mb-0")),
            dbc.CardBody(
                [
                    span_line(meta, folder_size_bytes(ds.path)),
                    facts_list(ds),
                    html.H6("Scheduler"),
                    scheduler_section(ds),
                    calibration_section(ds, caps),
                    html.H6("Works with"),
                    _works_list(caps),
                    html.H6("What the jobs record"),
                    contents_list(caps),
                    html.H6("Data quality"),
                    data_admin.quality_list(meta.get("quality")),
                    html.H6("Attribution"),
                    dcc.Markdown(str(meta.get("attribution") or "–"), className="small"),
                ]
            ),
        ],
        className="mb-3 shadow-sm",
        id=f"dataset-{ds.name}",
    )


def layout(**_params: Any) -> html.Div:
    """The data page (it ignores the filters)."""
    header = page_header(
        "Data",
        "The datasets you can look at: how big they are, what time they cover, what their jobs record and lack, "
        "and so which pages and what-if experiments work with each.",
    )
    datasets = access.list_datasets()
    admin = [data_admin.section([d.name for d in datasets]) if has_role("admin") else data_admin.placeholders()]
    if not datasets:
        empty = dbc.Alert(["No dataset yet: run ", html.Code("helios demo"), " or upload one."], color="warning")
        return html.Div([header, empty, *admin])
    return html.Div([header, *admin, dbc.Row([dbc.Col(dataset_card(d), xs=12, xl=6) for d in datasets])])


def register_callbacks(app: Dash) -> None:
    """Register the admin upload and delete callbacks on app."""
    data_admin.register(app)
