"""What-if page callbacks: options, URL state, background run (progress, cancel), results, downloads."""

from __future__ import annotations

import json
from datetime import datetime

import dash_bootstrap_components as dbc
from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate
from plotly.io.json import to_json_plotly

from analytics.csv_safety import csv_text
from components.charts import units
from components.datasets import access
from components.server.background import background_manager, poll_interval_ms
from components.server.runs import RunCancelled, RunError, job_caller, run_in_subprocess, run_token
from components.server.settings import Settings
from components.shell import controls
from components.shell.controls import graph_config
from components.whatif import figures as wf
from components.whatif import form as ids
from components.whatif import labels
from components.whatif import sweep as whatif_sweep
from components.whatif.run import SCENARIO_ERRORS, cancel_request, get_or_run, metrics_json, results_cache
from components.whatif.state import form_to_config, form_to_search
from sim.scenario import RECORDED, TWIN, ScenarioResult, config_to_dict, open_request
from sim.slurm.calibrate import CAPTURED

RUNNING = "running…"
LOST_RUN = "the run stopped without a result (the server worker was restarted?) — run it again"


# --- results ---


def _graph(name: str, figure, height_px: int = 380) -> dcc.Graph:
    return dcc.Graph(
        id=f"whatif-graph-{name}",
        figure=figure,
        config=graph_config(name),
        style={"height": f"{height_px}px"},
    )


def _card(title: str, body) -> dbc.Card:
    return dbc.Card(dbc.CardBody([html.H6(title, className="mb-2"), body], className="p-2"), className="mb-3 shadow-sm")


_ERROR_NAMES = {"mae_s": "mean absolute error", "median_ape_pct": "median relative error"}


def _predictor_text(predictor: dict) -> html.Div:
    none = predictor.get("none") or {}
    lines = [
        html.Div(
            [
                html.Span(f"MAE {units.duration(predictor.get('mae_s'))}", className="me-3"),
                html.Span(f"median relative error {predictor.get('median_ape_pct', 0):,.0f} %", className="me-3"),
                html.Span(f"Spearman ρ {predictor.get('spearman', float('nan')):.3f}", id="whatif-spearman"),
            ]
        ),
        html.Div(
            f"Against “none” (every job 1 s): MAE {units.duration(none.get('mae_s'))}, median relative error "
            f"{none.get('median_ape_pct', 0):,.0f} %.",
            className="text-muted",
        ),
    ]
    worse = predictor.get("worse_than_none") or []
    if worse:
        names = " and ".join(_ERROR_NAMES[k] for k in worse)
        lines.append(
            dbc.Alert(
                f"The {predictor.get('name')} predictor is worse than “none” (every job 1 s) on its {names}: "
                "weigh what QSSF gains with it against QSSF with “none” (the predictor ladder).",
                color="warning",
                className="py-1 px-2 mt-2 mb-0",
                id="whatif-predictor-warning",
            )
        )
    return html.Div(lines, className="small mb-2")


def _baseline_intro(result: ScenarioResult, replay: dict) -> list:
    """What the baseline is: the Slurm twin (captured or calibrated, with its rules), else the closest policy."""
    name = wf.scheme_label(replay["baseline"])
    if replay["baseline"] == TWIN and result.twin:
        source = result.twin["source"]
        how = (
            "the configuration captured from the cluster's Slurm"
            if source == CAPTURED
            else "no configuration was captured, so it is calibrated from the record"
        )
        return [
            html.Div(
                f"Baseline: the Slurm twin, the cluster's own scheduler replayed as it was ({how}). Every policy is "
                "measured against its replay, and its own error against the record (below) is the band around "
                "each change: a change inside the band cannot be told from the twin's error.",
                className="small mb-1",
            ),
            html.Ul([html.Li(rule) for rule in result.twin["rules"]], className="small mb-2", id="whatif-twin-rules"),
        ]
    closest = sorted(replay["distance"].items(), key=lambda kv: kv[1])
    ranking = ", ".join(f"{wf.scheme_label(s)} {d:.2f}" for s, d in closest)
    return [
        html.Div(
            f"Baseline: {name}, of the policies run the closest to what was recorded (mean absolute log ratio of "
            f"mean and median queue and mean JCT, plus the utilisation gap: {ranking}). The others are compared "
            "with it.",
            className="small mb-2",
        )
    ]


def _far_advice(baseline: str) -> str:
    """What to do with a baseline far from the record."""
    if baseline == TWIN:
        return (
            "The twin does not reproduce this cluster's record: read each policy's change against the twin with its "
            "band, not against the record."
        )
    return (
        "The simulator does not reproduce this cluster's record, so compare the policies with each other, not with "
        "the record."
    )


def _replay_card(result: ScenarioResult) -> dbc.Card | None:
    """How far the baseline's replay (the Slurm twin's, else the closest policy's) is from the record, first of the
    results."""
    replay = result.replay
    if replay is None:
        return None
    name = wf.scheme_label(replay["baseline"])
    body: list = [*_baseline_intro(result, replay), wf.replay_table(replay)]
    if replay["far"]:
        body.append(
            dbc.Alert(
                f"The replay of {name} is far from what really happened: {'; '.join(replay['why'])}. "
                + _far_advice(replay["baseline"]),
                color="danger",
                className="py-1 px-2 small mb-2",
                id="whatif-replay-warning",
            )
        )
    waiting = dict(result.summary.select("scheme", "waiting_at_end").iter_rows()) if result.summary.height else {}
    if any(waiting.values()):
        counts = ", ".join(f"{wf.scheme_label(s)} {n:,}" for s, n in waiting.items())
        body.append(
            html.Div(
                f"Jobs still waiting when the window ends are left out of the queue and JCT figures: {counts}.",
                className="small text-muted",
                id="whatif-waiting",
            )
        )
    title = "The Slurm twin against the record" if replay["baseline"] == TWIN else "How far to trust this replay"
    return _card(title, html.Div(body))


def _ratio_lines(result: ScenarioResult) -> html.Ul | None:
    sentences = wf.ratio_sentences(result.summary, result.baseline)
    return html.Ul([html.Li(t) for t in sentences], className="small mb-2", id="whatif-ratios") if sentences else None


def _importance_row(importance: dict[str, float] | None) -> dbc.Row | None:
    if importance is None:
        return None
    figure = wf.importance_figure(wf.importance_frame(importance))
    return dbc.Row([dbc.Col(_graph("importance", figure, 340), lg=6)], className="g-3")


def results_children(result: ScenarioResult) -> list:
    """Everything the page shows for a scenario result."""
    nodes = sum(result.vc_nodes.values())
    window = f"{result.window[0]} → {result.window[1]}, {result.jobs:,} GPU jobs on {nodes} nodes"
    children: list = [html.Div(window, className="small text-muted mb-1", id="whatif-window")]
    replay = _replay_card(result)
    if replay is not None:
        children.append(replay)
    if result.summary.height:
        table = html.Div([_ratio_lines(result), wf.comparison_table(result.summary)])
        children += [
            _card("Comparison with what really happened", table),
            dbc.Row(
                [
                    dbc.Col(_graph("jct-cdf", wf.cdf_figure(result.cdf, "jct_s", "Job completion time CDF")), lg=6),
                    dbc.Col(_graph("queue-cdf", wf.cdf_figure(result.cdf, "queue_s", "Queueing delay CDF")), lg=6),
                ],
                className="g-3",
            ),
            dbc.Row(
                [
                    dbc.Col(_graph("vc-queue", wf.per_vc_queue_figure(result.per_vc)), lg=6),
                    dbc.Col(
                        _graph(
                            "timeline",
                            wf.timeline_figure(wf.thinned_timeline(result.timeline, controls.viewport_px())),
                            460,
                        ),
                        lg=6,
                    ),
                ],
                className="g-3",
            ),
        ]
    pred = result.predictor
    children.append(
        _card(
            "Duration predictor",
            html.Div(
                [
                    _predictor_text(pred),
                    dbc.Row(
                        [
                            dbc.Col(_graph("density", wf.density_figure(pred["density"], pred["name"])), lg=6),
                            dbc.Col(_graph("ladder", wf.ladder_figure(result.ladder)), lg=6),
                        ]
                    ),
                    _importance_row(result.importance),
                ]
            ),
        )
    )
    if result.ces is not None:
        children.append(
            _card(
                "Cluster energy saving",
                html.Div(
                    [
                        wf.ces_numbers(result.ces["metrics"]),
                        _graph("ces", wf.ces_figure(wf.thinned_ces(result.ces["timeline"], controls.viewport_px()))),
                    ]
                ),
            )
        )
    return children


def _shown(result: ScenarioResult, key: str, seconds: float, cached: bool) -> tuple:
    status = f"{'from cache' if cached else 'ran'} in {seconds:.1f} s"
    return results_children(result), {"key": key, "cached": cached}, status


# --- callbacks ---


def one_line(exc: Exception, max_chars: int = 300) -> str:
    """An exception's message on one line, cut to max_chars characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def start_run(n_clicks, policy_values, energy_values, twin_values, *values, settings: Settings, search: str = ""):
    """Validate the form, put it in the URL (search: the page's URL before, whose sweep part is kept); show a cached
    result at once, else start the background run."""
    if not n_clicks:
        raise PreventUpdate
    try:
        form = ids.form_of(list(values), policy_values, energy_values, twin_values)
        request = open_request(form_to_config(form), settings.data_dir)
    except (*access.USER_ERRORS, TypeError) as exc:
        return (
            no_update,
            dbc.Alert(one_line(exc), color="danger", className="py-1 small"),
            no_update,
            no_update,
            no_update,
            "",
        )
    search = form_to_search(form, whatif_sweep.kept_params(search))
    hit = results_cache(settings).get(request.key)
    if hit is not None:
        return search, None, no_update, *_shown(hit, request.key, 0.0, True)
    return (
        search,
        None,
        {"config": config_to_dict(request.config), "token": run_token()},
        no_update,
        no_update,
        RUNNING,
    )


def render_scenario(config_data: dict, settings: Settings, report) -> dict:
    """Run (or fetch) a scenario and render it as plain JSON {children, meta, status}, in a subprocess."""
    request = open_request(config_data, settings.data_dir)
    result, seconds, cached = get_or_run(request, results_cache(settings), report)
    children, meta, status = _shown(result, request.key, seconds, cached)
    return {"children": json.loads(to_json_plotly(children)), "meta": meta, "status": status}


def run_job(set_progress, request: dict | None, settings: Settings) -> tuple:
    """The background job: run the scenario in a subprocess, reporting progress, and return its rendering."""
    if not request:
        raise PreventUpdate

    def progress(fraction: float, message: str) -> None:
        set_progress((round(fraction * 100), message))

    try:
        out = run_in_subprocess(
            render_scenario,
            (request["config"], settings),
            progress,
            settings=settings,
            expected=SCENARIO_ERRORS,
            caller=job_caller("run", str(request.get("token", ""))),
        )
    except RunCancelled:
        return no_update, no_update, ids.CANCELLED_STATUS, None
    except RunError as exc:
        return no_update, no_update, "", dbc.Alert(str(exc), color="danger", className="py-1 small")
    return out["children"], out["meta"], out["status"], None


def lost_run_js(settle_ms: int = 500) -> str:
    """JS showing LOST_RUN when Run re-enables on an uncancelled run whose status still says running."""
    # Dash ends a vanished job (its worker was killed) without any output, leaving the status line as it was.
    alert = {"type": "Alert", "namespace": "dash_bootstrap_components"}
    alert["props"] = {"children": LOST_RUN, "color": "danger", "className": "py-1 small"}
    return f"""async (disabled, request, cancelled) => {{
    const skip = window.dash_clientside.no_update;
    if (disabled || !request || request.token === cancelled) return [skip, skip];
    await new Promise((resolve) => setTimeout(resolve, {settle_ms}));  // let a result or error land first
    const status = document.getElementById({json.dumps(ids.STATUS)});
    if (!status || status.innerText !== {json.dumps(RUNNING)}) return [skip, skip];
    return ["failed", {json.dumps(alert)}];
}}"""


def _cached_result(meta: dict | None, settings: Settings) -> ScenarioResult | None:
    if not meta or not meta.get("key"):
        return None
    return results_cache(settings).get(meta["key"])


def show_panels(meta: dict | None) -> tuple:
    """Show the downloads and the 'why wait' panel once a result is on the page."""
    style = None if meta else ids.HIDDEN
    return style, style


def wait_schemes(meta: dict | None, settings: Settings) -> tuple:
    """The schedules offered by the 'why wait' panel (the first simulated policy first)."""
    result = _cached_result(meta, settings)
    if result is None or result.records.is_empty():
        return [], None
    schemes = wf.ordered_schemes(result.records)
    first = next((s for s in schemes if s != RECORDED), schemes[0] if schemes else None)
    return schemes, first


def wait_jobs(scheme: str | None, meta: dict | None, settings: Settings) -> tuple:
    """The longest waits under scheme as drop-down options, the longest chosen."""
    result = _cached_result(meta, settings)
    if result is None or not scheme:
        return [], None
    top = wf.longest_waits(result.records, scheme)
    options = [
        {
            "label": " · ".join(
                (
                    f"job {r['job_id']}",
                    r["vc"],
                    f"{r['gpu_num']} GPUs",
                    f"waited {units.duration(r['queue_s'])}",
                )
            ),
            "value": r["job_id"],
        }
        for r in top.iter_rows(named=True)
    ]
    return options, options[0]["value"] if options else None


def wait_view(job_id, scheme: str | None, meta: dict | None, settings: Settings) -> tuple:
    """The chosen job's queue position in the recorded and simulated schedules, and the jobs ahead of it."""
    result = _cached_result(meta, settings)
    if result is None or job_id is None or not scheme:
        return None, None
    t0 = datetime.fromisoformat(result.window[0])
    schemes = [s for s in (RECORDED, scheme) if s in set(result.records["scheme"].unique().to_list())]
    figure = wf.wait_figure(result.records, int(job_id), t0, list(dict.fromkeys(schemes)))
    dataset, cluster = result.config.get("dataset", ""), result.config.get("cluster", "")
    href = (lambda ahead_id: controls.job_href(ahead_id, dataset, cluster)) if dataset and cluster else None
    return ids.wait_graph(figure), wf.ahead_table(result.records, scheme, int(job_id), href=href)


def download(n_summary, n_records, n_json, n_ces, meta: dict | None, settings: Settings):
    """Send the comparison table, the per-job records, the metrics or the CES timeline of the shown result."""
    result = _cached_result(meta, settings)
    if result is None or not ctx.triggered_id:
        raise PreventUpdate
    stem = f"helios-whatif-{meta['key'][:8]}"
    if ctx.triggered_id == ids.DL_SUMMARY:
        named = result.summary.rename({c: labels.download_header(c) for c in result.summary.columns})
        return dcc.send_string(csv_text(named), f"{stem}-comparison.csv")
    if ctx.triggered_id == ids.DL_RECORDS:
        return dcc.send_string(csv_text(result.records), f"{stem}-jobs.csv")
    if ctx.triggered_id == ids.DL_JSON:
        return dcc.send_string(metrics_json(result), f"{stem}-metrics.json")
    if result.ces is None:
        raise PreventUpdate
    return dcc.send_string(csv_text(result.ces["timeline"]), f"{stem}-ces-timeline.csv")


def download_importance(n_clicks, meta: dict | None, settings: Settings):
    """Send LightGBM's feature importance of the shown result as CSV."""
    result = _cached_result(meta, settings)
    if not n_clicks or result is None or result.importance is None:
        raise PreventUpdate
    frame = wf.importance_frame(result.importance)
    return dcc.send_string(csv_text(frame), f"helios-whatif-{meta['key'][:8]}-feature-importance.csv")


def importance_button_style(meta: dict | None, settings: Settings) -> dict | None:
    """Show the feature-importance download only when the shown result has a LightGBM model."""
    result = _cached_result(meta, settings)
    return None if result is not None and result.importance is not None else ids.HIDDEN


def register(app: Dash, settings: Settings | None = None, manager=None) -> None:
    """Register the what-if callbacks on app (the background run uses manager, else background_manager())."""
    settings = settings or app.server.config.get("HELIOS_SETTINGS") or Settings.from_env()
    manager = manager or getattr(app, "_background_manager", None) or background_manager(settings)
    form_states = [State(cid, prop) for cid, prop in ids.FORM_STATES]
    app.callback(
        Output(ids.URL, "search"),
        Output(ids.ERROR, "children"),
        Output(ids.CONFIG, "data"),
        Output(ids.RESULTS, "children", allow_duplicate=True),
        Output(ids.RESULT, "data", allow_duplicate=True),
        Output(ids.STATUS, "children", allow_duplicate=True),
        Input(ids.RUN, "n_clicks"),
        State(ids.URL, "search"),
        State({"type": ids.CES_POLICY, "name": ALL}, "value"),
        State({"type": ids.CES_ENERGY, "name": ALL}, "value"),
        State({"type": ids.TWIN, "name": ALL}, "value"),
        *form_states,
        prevent_initial_call=True,
    )(lambda n_clicks, search, *a: start_run(n_clicks, *a, settings=settings, search=search))
    # A URL with run=1 presses Run once the page is drawn, in the browser: a page opened without it sends no request.
    app.clientside_callback(
        "(autorun) => autorun ? 1 : window.dash_clientside.no_update",
        Output(ids.RUN, "n_clicks"),
        Input(ids.AUTORUN, "data"),
    )
    app.callback(
        Output(ids.RESULTS, "children"),
        Output(ids.RESULT, "data"),
        Output(ids.STATUS, "children"),
        Output(ids.ERROR, "children", allow_duplicate=True),
        Input(ids.CONFIG, "data"),
        background=True,
        manager=manager,
        interval=poll_interval_ms(),
        progress=[Output(ids.PROGRESS, "value"), Output(ids.PROGRESS, "label")],
        progress_default=[0, ""],
        running=[
            (Output(ids.RUN, "disabled"), True, False),
            (Output(ids.CANCEL, "disabled"), False, True),
            (Output(ids.PROGRESS_WRAP, "style"), {"display": "block"}, ids.HIDDEN),
        ],
        cancel=[Input(ids.CANCEL, "n_clicks")],
        prevent_initial_call=True,
    )(lambda set_progress, request: run_job(set_progress, request, settings))
    app.callback(
        Output(ids.STATUS, "children", allow_duplicate=True),
        Input(ids.CANCEL, "n_clicks"),
        State(ids.CONFIG, "data"),
        prevent_initial_call=True,
    )(lambda n, request: cancel_request(n, request, settings))
    app.clientside_callback(
        "(n, request) => (n && request) ? request.token : window.dash_clientside.no_update",
        Output(ids.CANCELLED, "data"),
        Input(ids.CANCEL, "n_clicks"),
        State(ids.CONFIG, "data"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        lost_run_js(),
        Output(ids.STATUS, "children", allow_duplicate=True),
        Output(ids.ERROR, "children", allow_duplicate=True),
        Input(ids.RUN, "disabled"),
        State(ids.CONFIG, "data"),
        State(ids.CANCELLED, "data"),
        prevent_initial_call=True,
    )
    _register_panels(app, settings)
    _register_form(app, settings)
    whatif_sweep.register(app, settings, manager, form_states)


def _register_panels(app: Dash, settings: Settings) -> None:
    # The result store is empty in the layout and the panels start hidden: they change only once a result arrives,
    # so a page load sends none of these requests (three in a row before).
    app.callback(
        Output(ids.DOWNLOADS, "style"),
        Output(ids.WAIT_PANEL, "style"),
        Input(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(show_panels)
    app.callback(
        Output(ids.WAIT_SCHEME, "options"),
        Output(ids.WAIT_SCHEME, "value"),
        Input(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda meta: wait_schemes(meta, settings))
    app.callback(
        Output(ids.WAIT_JOB, "options"),
        Output(ids.WAIT_JOB, "value"),
        Input(ids.WAIT_SCHEME, "value"),
        State(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda scheme, meta: wait_jobs(scheme, meta, settings))
    app.callback(
        Output(ids.WAIT_GRAPH, "children"),
        Output(ids.WAIT_TABLE, "children"),
        Input(ids.WAIT_JOB, "value"),
        State(ids.WAIT_SCHEME, "value"),
        State(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda job, scheme, meta: wait_view(job, scheme, meta, settings))
    app.callback(
        Output(ids.DOWNLOAD, "data"),
        Input(ids.DL_SUMMARY, "n_clicks"),
        Input(ids.DL_RECORDS, "n_clicks"),
        Input(ids.DL_JSON, "n_clicks"),
        Input(ids.DL_CES, "n_clicks"),
        State(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda a, b, c, d, meta: download(a, b, c, d, meta, settings))
    app.callback(
        Output(ids.DOWNLOAD_IMPORTANCE, "data"),
        Input(ids.DL_IMPORTANCE, "n_clicks"),
        State(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda n, meta: download_importance(n, meta, settings))
    app.callback(
        Output(ids.DL_IMPORTANCE, "style"),
        Input(ids.RESULT, "data"),
        prevent_initial_call=True,
    )(lambda meta: importance_button_style(meta, settings))


def _register_form(app: Dash, settings: Settings) -> None:
    # The page is laid out with what each of these gives for its first values (components/pages/whatif.py,
    # initial_form; ids.layout): they answer the reader's changes only.
    app.callback(
        Output(ids.CLUSTER, "options"),
        Output(ids.DATES, "min_date_allowed"),
        Output(ids.DATES, "max_date_allowed"),
        Input(ids.DATASET, "value"),
        prevent_initial_call=True,
    )(ids.scope_options)
    app.callback(
        Output(ids.VCS, "options"),
        Input(ids.DATASET, "value"),
        Input(ids.CLUSTER, "value"),
        prevent_initial_call=True,
    )(ids.vc_options)
    app.callback(
        Output(ids.CES_BODY, "style"),
        Input(ids.CES_ENABLED, "value"),
        prevent_initial_call=True,
    )(ids.ces_body_style)
    app.callback(
        Output(ids.CES_SCHEDULE, "options"),
        Input(ids.POLICIES, "value"),
        prevent_initial_call=True,
    )(ids.schedule_options)
    app.callback(
        Output({"type": ids.CES_POLICY, "name": ALL}, "placeholder"),
        Input(ids.CES_PRESET, "value"),
        prevent_initial_call=True,
    )(ids.policy_placeholders)
