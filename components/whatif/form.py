"""The what-if page layout: scenario form, run/cancel with progress bar, results and the 'why wait' panel."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import dcc, html

from analytics import store
from components.datasets import access
from components.shell.controls import date_range, graph_config
from components.whatif.state import (
    FALLBACK_PRESET,
    MAX_CAPS_CHARS,
    account_caps,
    default_form,
    energy_defaults,
    merges,
    overrides,
    preset_defaults,
)
from sim import placers, policies
from sim.ces.energy import ENERGY_PARAMS, EnergyParams
from sim.ces.policy import POLICY_PARAMS, PRESETS, PolicyParams
from sim.ces.run import MODES
from sim.estimators import ESTIMATORS
from sim.scenario import RECORDED
from sim.scenario.config import LIMITS
from sim.slurm.knobs import ACCOUNT_GPUS, KNOBS, MERGE, account_of, merged_of

URL = "whatif-url"
AUTORUN = "whatif-autorun"
DATASET = "whatif-dataset"
CLUSTER = "whatif-cluster"
VCS = "whatif-vcs"
DATES = "whatif-dates"
POLICIES = "whatif-policies"
PLACER = "whatif-placer"
BACKFILL = "whatif-backfill"
ESTIMATOR = "whatif-estimator"
NOISE = "whatif-noise"
LOAD = "whatif-load"
CAPACITY = "whatif-capacity"
LADDER = "whatif-ladder"
TWIN_BASELINE = "whatif-twin-baseline"
CES_ENABLED = "whatif-ces-enabled"
CES_BODY = "whatif-ces-body"
CES_PRESET = "whatif-ces-preset"
CES_MODE = "whatif-ces-mode"
CES_SCHEDULE = "whatif-ces-schedule"
CES_POLICY = "whatif-ces-policy"  # pattern-matching type, one input per PolicyParams field
CES_ENERGY = "whatif-ces-energy"  # pattern-matching type, one input per EnergyParams field
TWIN = "whatif-twin"  # pattern-matching type, one input per knob of the Slurm twin (sim.slurm.knobs)
TWIN_BODY = "whatif-twin-body"
RUN = "whatif-run"
CANCEL = "whatif-cancel"
PROGRESS = "whatif-progress"
PROGRESS_WRAP = "whatif-progress-wrap"
ERROR = "whatif-error"
STATUS = "whatif-status"
CONFIG = "whatif-config"
CANCELLED = "whatif-cancelled"  # the token of the run the user cancelled
CANCELLED_STATUS = "cancelled"  # the status line of a cancelled run or sweep
RESULT = "whatif-result"
RESULTS = "whatif-results"
DOWNLOADS = "whatif-downloads"
DL_SUMMARY = "whatif-dl-summary"
DL_RECORDS = "whatif-dl-records"
DL_JSON = "whatif-dl-json"
DL_CES = "whatif-dl-ces"
DL_IMPORTANCE = "whatif-dl-importance"
DOWNLOAD = "whatif-download"
DOWNLOAD_IMPORTANCE = "whatif-download-importance"
WAIT_PANEL = "whatif-wait"
WAIT_SCHEME = "whatif-wait-scheme"
WAIT_JOB = "whatif-wait-job"
WAIT_GRAPH = "whatif-wait-graph"
WAIT_GRAPH_PX = 360
WAIT_TABLE = "whatif-wait-table"

PREDICTOR_LABELS = {
    "oracle": "oracle (true durations)",
    "noisy-oracle": "noisy oracle",
    "history": "user history",
    "lightgbm": "LightGBM (slow: fits in ~30 s+)",
}
HIDDEN = {"display": "none"}
FORM_CONTROLS = (  # (control id, property, the form dict's key) of every form control a run reads, in order
    (DATASET, "value", "dataset"),
    (CLUSTER, "value", "cluster"),
    (VCS, "value", "vcs"),
    (DATES, "start_date", "start"),
    (DATES, "end_date", "end"),
    (POLICIES, "value", "policies"),
    (PLACER, "value", "placer"),
    (BACKFILL, "value", "backfill"),
    (ESTIMATOR, "value", "estimator"),
    (NOISE, "value", "noise_level"),
    (LOAD, "value", "load_factor"),
    (CAPACITY, "value", "capacity_scale"),
    (LADDER, "value", "ladder"),
    (TWIN_BASELINE, "value", "twin_baseline"),
    (CES_ENABLED, "value", "ces_enabled"),
    (CES_PRESET, "value", "ces_preset"),
    (CES_MODE, "value", "ces_mode"),
    (CES_SCHEDULE, "value", "ces_schedule"),
)
FORM_STATES = tuple((cid, prop) for cid, prop, _ in FORM_CONTROLS)
FORM_FIELDS = tuple(field for _, _, field in FORM_CONTROLS)


_DEFAULTED = ("placer", "estimator", "noise_level", "load_factor", "capacity_scale", "ces_mode", "ces_schedule")


def _given(value: Any, default: Any) -> Any:
    """A control's value, or default when the control is empty."""
    return default if value in (None, "") else value


def form_of(
    values: list[Any], policy_values: list[Any], energy_values: list[Any], twin_values: list[Any] | None = None
) -> dict:
    """The form dict of the form's control values (FORM_STATES order), the CES parameter inputs and the Slurm twin's
    knob inputs."""
    given = dict(zip(FORM_FIELDS, values, strict=True))
    start, end = given["start"], given["end"]
    form = default_form(
        given["dataset"] or "",
        given["cluster"] or "",
        (start or None) and str(start)[:10],
        (end or None) and str(end)[:10],
    )
    form.update(
        vcs=given["vcs"] or [],
        policies=given["policies"] or [],
        backfill=bool(given["backfill"]),
        ladder=bool(given["ladder"]),
        ces_enabled=bool(given["ces_enabled"]),
        twin_baseline=_given(given["twin_baseline"], True),
        ces_preset=_given(given["ces_preset"], FALLBACK_PRESET),
        **{k: _given(given[k], form[k]) for k in _DEFAULTED},
        ces_policy=overrides(policy_values, POLICY_PARAMS),
        ces_energy=overrides(energy_values, ENERGY_PARAMS),
        twin=_twin_of(twin_values) if twin_values else {},
    )
    return form


def _twin_of(twin_values: list[Any]) -> dict[str, float]:
    """The twin's knobs of the section's inputs: one number per knob, then the account caps' and the merged
    partitions' texts."""
    texts = [*twin_values[len(KNOBS) :], "", ""]
    return {**overrides(twin_values[: len(KNOBS)], tuple(KNOBS)), **account_caps(texts[0]), **merges(texts[1])}


def _labelled(label: str, control, width: dict[str, Any], tip: str = "") -> dbc.Col:
    return dbc.Col(
        [html.Label(label, className="small text-muted mb-0 d-block", title=tip), control],
        **width,
        className="mb-2",
    )


def _number(cid, value, step: float, minimum: float, maximum: float | None = None) -> dbc.Input:
    return dbc.Input(id=cid, type="number", value=value, step=step, min=minimum, max=maximum, size="sm")


def scope_options(dataset: str | None) -> tuple:
    """Cluster choices and date bounds of the chosen dataset."""
    if not dataset:
        return [], None, None
    try:
        first, last = access.dataset_period(dataset)
        return access.cluster_names(dataset), first, last
    except store.DatasetError:
        return [], None, None


def vc_options(dataset: str | None, cluster: str | None) -> list[str]:
    """VC choices of the chosen cluster (none for a cluster the dataset does not have)."""
    if not dataset or not cluster:
        return []
    try:
        return access.gpu_vcs(dataset, cluster) if cluster in access.cluster_names(dataset) else []
    except store.DatasetError:
        return []


def ces_body_style(enabled: Any) -> dict | None:
    """The CES parameters' style: shown while CES is switched on."""
    return None if enabled else HIDDEN


def schedule_options(policies_run: list[str] | None) -> list[str]:
    """The schedules CES can replay on the nodes: the recorded one and every policy run."""
    return [RECORDED, *(policies_run or [])]


def policy_placeholders(preset: str | None) -> list[str]:
    """Each power-policy input's placeholder: the preset's value."""
    defaults = preset_defaults(preset or FALLBACK_PRESET)
    return [str(defaults[name]) for name in POLICY_PARAMS]


def scope_row(form: dict, datasets: list[str], scope: dict) -> dbc.Row:
    """Dataset, cluster, VCs and window (scope: the dataset's clusters, the cluster's VCs, first/last day)."""
    wide, narrow = {"xs": 12, "md": 6, "xl": 3}, {"xs": 12, "md": 6, "xl": 2}
    return dbc.Row(
        [
            _labelled(
                "Dataset",
                dcc.Dropdown(id=DATASET, options=datasets, value=form["dataset"], clearable=False),
                narrow,
            ),
            _labelled(
                "Cluster",
                dcc.Dropdown(id=CLUSTER, options=scope["clusters"], value=form["cluster"] or None, clearable=False),
                narrow,
            ),
            _labelled(
                "VCs",
                dcc.Dropdown(id=VCS, options=scope["vcs"], value=form["vcs"], multi=True, placeholder="all VCs"),
                wide,
            ),
            _labelled(
                "Window (submit days)",
                date_range(
                    DATES,
                    start_date=form["start"],
                    end_date=form["end"],
                    min_date_allowed=scope["first"],
                    max_date_allowed=scope["last"],
                ),
                {"xs": 12, "md": 6, "xl": 3},
            ),
        ],
        className="g-2",
    )


def policy_row(form: dict) -> dbc.Row:
    """Policies, placer, backfill, predictor and load/capacity knobs."""
    return dbc.Row(
        [
            _labelled(
                "Policies to compare",
                dbc.Checklist(id=POLICIES, options=list(policies.POLICIES), value=form["policies"], inline=True),
                {"xs": 12, "md": 6, "xl": 3},
            ),
            _labelled(
                "Placer",
                dcc.Dropdown(id=PLACER, options=list(placers.PLACERS), value=form["placer"]),
                {"xs": 6, "xl": 2},
            ),
            _labelled(
                "Backfill",
                dbc.Switch(id=BACKFILL, value=form["backfill"], label="EASY backfill"),
                {"xs": 6, "xl": 1},
            ),
            _labelled(
                "Duration predictor (QSSF)",
                dcc.Dropdown(
                    id=ESTIMATOR,
                    options=[{"label": PREDICTOR_LABELS.get(e, e), "value": e} for e in ESTIMATORS],
                    value=form["estimator"],
                    clearable=False,
                ),
                {"xs": 12, "md": 6, "xl": 2},
            ),
            _labelled(
                "Noise level",
                _number(NOISE, form["noise_level"], 0.1, *LIMITS["noise_level"]),
                {"xs": 4, "xl": 1},
                "noisy oracle only: 0 = exact, 1 = the artifact's error model",
            ),
            _labelled(
                "Load factor", _number(LOAD, form["load_factor"], 0.1, *LIMITS["load_factor"]), {"xs": 4, "xl": 1}
            ),
            _labelled(
                "VC capacity ×",
                _number(CAPACITY, form["capacity_scale"], 0.1, *LIMITS["capacity_scale"]),
                {"xs": 4, "xl": 1},
            ),
            _labelled(
                "Predictor ladder",
                dbc.Switch(id=LADDER, value=form["ladder"], label="QSSF × 4 predictors"),
                {"xs": 12, "md": 6, "xl": 1},
            ),
        ],
        className="g-2",
    )


def _param_inputs(kind: str, names: tuple[str, ...], values: dict, defaults: dict, cls: type) -> list:
    helps = {f: cls.__dataclass_fields__[f].metadata.get("help", "") for f in names}
    highs = {f: cls.__dataclass_fields__[f].metadata.get("max") for f in names}
    return [
        dbc.Col(
            [
                html.Label(name.replace("_", " "), className="small text-muted mb-0 d-block", title=helps[name]),
                dbc.Input(
                    id={"type": kind, "name": name},
                    type="number",
                    value=values.get(name),
                    placeholder=str(defaults[name]),
                    size="sm",
                    min=0,
                    max=highs[name],
                    step="any",
                ),
            ],
            xs=6,
            md=3,
            xl=1,
            className="mb-2",
        )
        for name in names
    ]


def ces_section(form: dict, policies_run: list[str]) -> html.Div:
    """The CES switch and, when on, its preset, mode, schedule and every policy and energy parameter."""
    schedules = schedule_options(policies_run)
    body = html.Div(
        [
            dbc.Row(
                [
                    _labelled(
                        "Preset",
                        dcc.Dropdown(id=CES_PRESET, options=sorted(PRESETS), value=form["ces_preset"], clearable=False),
                        {"xs": 6, "xl": 2},
                    ),
                    _labelled(
                        "Forecaster",
                        dcc.Dropdown(id=CES_MODE, options=list(MODES), value=form["ces_mode"], clearable=False),
                        {"xs": 6, "xl": 2},
                    ),
                    _labelled(
                        "Schedule replayed on nodes",
                        dcc.Dropdown(
                            id=CES_SCHEDULE,
                            options=schedules,
                            value=form["ces_schedule"] if form["ces_schedule"] in schedules else RECORDED,
                            clearable=False,
                        ),
                        {"xs": 12, "xl": 3},
                    ),
                ],
                className="g-2",
            ),
            html.Div("Power policy (empty = preset value)", className="small fw-semibold"),
            dbc.Row(
                _param_inputs(
                    CES_POLICY,
                    POLICY_PARAMS,
                    form["ces_policy"],
                    preset_defaults(form["ces_preset"]),
                    PolicyParams,
                ),
                className="g-2",
            ),
            html.Div("Energy accounting (empty = default)", className="small fw-semibold"),
            dbc.Row(
                _param_inputs(CES_ENERGY, ENERGY_PARAMS, form["ces_energy"], energy_defaults(), EnergyParams),
                className="g-2",
            ),
        ],
        id=CES_BODY,
        style=ces_body_style(form["ces_enabled"]),
    )
    switch = dbc.Switch(id=CES_ENABLED, value=form["ces_enabled"], label="Cluster energy saving (CES)")
    return html.Div([switch, body], className="border-top pt-2")


def _twin_text(name: str, label: str, value: str, placeholder: str, tip: str) -> dbc.Col:
    """A text input of the twin's section (its knobs named by account or partitions)."""
    control = dbc.Input(
        id={"type": TWIN, "name": name},
        type="text",
        value=value,
        placeholder=placeholder,
        size="sm",
        maxLength=MAX_CAPS_CHARS,
    )
    label_el = html.Label(label, className="small text-muted mb-0 d-block", title=tip)
    return dbc.Col([label_el, control], xs=12, md=6, xl=3, className="mb-2")


def twin_section(form: dict, captured: dict[str, int] | None) -> html.Details:
    """The Slurm twin's knobs, folded unless one is set: each empty input keeps the captured configuration's value
    (shown as its placeholder; captured None: the dataset has none)."""
    inputs = [
        dbc.Col(
            [
                html.Label(knob.slurm, className="small text-muted mb-0 d-block", title=f"twin knob {name}"),
                dbc.Input(
                    id={"type": TWIN, "name": name},
                    type="number",
                    value=form["twin"].get(name),
                    placeholder=str(captured[name]) if captured else "calibrated",
                    size="sm",
                    min=knob.low,
                    max=knob.high,
                    step=1,
                ),
            ],
            xs=6,
            md=3,
            xl=2,
            className="mb-2",
        )
        for name, knob in KNOBS.items()
    ]
    caps = ", ".join(f"{account_of(k)}={v:g}" for k, v in form["twin"].items() if account_of(k) is not None)
    merged = ", ".join("+".join(merged_of(k)) for k, v in form["twin"].items() if merged_of(k) is not None and v)
    inputs += [
        _twin_text(
            ACCOUNT_GPUS,
            "Account GPU caps (GrpTRES=gres/gpu)",
            caps,
            "account=GPUs, ...",
            "GPUs each named account may run at once, e.g. nlp=4, speech=8",
        ),
        _twin_text(
            MERGE,
            "Merged partitions",
            merged,
            "partition+partition, ...",
            "partitions whose jobs may run on the nodes of all of them, e.g. short+long",
        ),
    ]
    said = (
        "empty = as captured from the cluster"
        if captured
        else "no configuration captured: the twin is calibrated from the record (docs/twin.md)"
    )
    summary = html.Summary(f"Slurm twin: the baseline, and its settings for the slurm policy ({said})",
                           className="small fw-semibold")  # fmt: skip
    baseline = dbc.Switch(
        id=TWIN_BASELINE,
        value=form["twin_baseline"],
        label="Measure every policy against the Slurm twin's replay (off: against the policy closest to the record)",
        className="small mt-2 mb-0",
    )
    return html.Details(
        [summary, baseline, dbc.Row(inputs, className="g-2 mt-1")],
        id=TWIN_BODY,
        open=bool(form["twin"]) or not form["twin_baseline"],
        className="border-top pt-2 mb-2",
    )


def run_bar() -> dbc.Row:
    """Run and cancel buttons, the progress bar and the status line."""
    return dbc.Row(
        [
            dbc.Col(dbc.Button("Run scenario", id=RUN, color="primary", size="sm"), width="auto"),
            dbc.Col(
                dbc.Button("Cancel", id=CANCEL, color="secondary", outline=True, size="sm", disabled=True),
                width="auto",
            ),
            dbc.Col(
                html.Div(
                    dbc.Progress(id=PROGRESS, value=0, label="", striped=True, animated=True, style={"height": "22px"}),
                    id=PROGRESS_WRAP,
                    style=HIDDEN,
                ),
                xs=12,
                md=True,
            ),
            dbc.Col(html.Span(id=STATUS, className="small text-muted"), width="auto"),
        ],
        className="g-2 align-items-center mb-2",
    )


def downloads() -> html.Div:
    """Download buttons for the metrics and the per-job records."""
    button = {"size": "sm", "color": "secondary", "outline": True, "className": "me-2"}
    return html.Div(
        [
            html.Span("Download: ", className="small text-muted me-2"),
            dbc.Button("comparison CSV", id=DL_SUMMARY, **button),
            dbc.Button("per-job records CSV", id=DL_RECORDS, **button),
            dbc.Button("metrics JSON", id=DL_JSON, **button),
            dbc.Button("CES timeline CSV", id=DL_CES, **button),
            dbc.Button("feature importance CSV", id=DL_IMPORTANCE, style=HIDDEN, **button),
            dcc.Download(id=DOWNLOAD),
            dcc.Download(id=DOWNLOAD_IMPORTANCE),
        ],
        id=DOWNLOADS,
        style=HIDDEN,
        className="mb-3",
    )


def wait_graph(figure) -> dcc.Graph:
    """The chosen job's 'why wait' chart (the panel holds none until a job is chosen: a page that opens with a
    chart loads and runs plotly.js)."""
    return dcc.Graph(figure=figure, config=graph_config("why-wait"), style={"height": f"{WAIT_GRAPH_PX}px"})


def wait_panel() -> html.Div:
    """'Why did this job wait?': pick a long wait; see its queue position and who went first."""
    return html.Div(
        [
            html.H5("Why did this job wait?", className="mt-3"),
            dbc.Row(
                [
                    _labelled("Schedule", dcc.Dropdown(id=WAIT_SCHEME, clearable=False), {"xs": 12, "md": 3}),
                    _labelled(
                        "Job (longest waits first)",
                        dcc.Dropdown(id=WAIT_JOB, placeholder="pick a job"),
                        {"xs": 12, "md": 6},
                    ),
                ],
                className="g-2",
            ),
            dbc.Row(
                [
                    dbc.Col(html.Div(id=WAIT_GRAPH, style={"minHeight": f"{WAIT_GRAPH_PX}px"}), xs=12, lg=7),
                    dbc.Col(html.Div(id=WAIT_TABLE), xs=12, lg=5),
                ]
            ),
        ],
        id=WAIT_PANEL,
        style=HIDDEN,
    )


def layout(
    form: dict, datasets: list[str], scope: dict, autorun: bool, problems: list[str], as_of: Any = None
) -> html.Div:
    """The whole what-if page for a form state (autorun: run it as soon as the page loads; as_of: the dataset's
    freshness line)."""
    alerts = [dbc.Alert(p, color="warning", className="py-1 small mb-2") for p in problems]
    form_card = dbc.Card(
        dbc.CardBody(
            [
                scope_row(form, datasets, scope),
                policy_row(form),
                twin_section(form, scope.get("twin")),
                ces_section(form, form["policies"]),
            ]
        ),
        className="mb-2 shadow-sm",
    )
    return html.Div(
        [
            dcc.Location(id=URL, refresh=False),
            dcc.Store(id=AUTORUN, data=bool(autorun)),
            dcc.Store(id=CONFIG),
            dcc.Store(id=CANCELLED),
            dcc.Store(id=RESULT),
            html.H4("What-if", className="mb-0"),
            html.P(
                "Replay a window of the trace under other scheduling (and power) policies and compare with "
                "what really happened. The form is saved in the URL: share the link to share the scenario.",
                className="text-muted small mb-2",
            ),
            as_of,
            *alerts,
            form_card,
            run_bar(),
            html.Div(id=ERROR),
            downloads(),
            dcc.Loading(html.Div(id=RESULTS), type="dot", delay_show=300),
            wait_panel(),
        ]
    )
