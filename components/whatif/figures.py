"""Pure figure and table builders of the what-if results: each takes part of a ScenarioResult."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import dash_bootstrap_components as dbc
import numpy as np
import plotly.graph_objects as go
import polars as pl
from dash import dcc, html
from plotly.subplots import make_subplots

from components.charts import decimate, units
from components.charts.figures import PALETTE, duration_axis, empty_figure, epoch_ms, range_points, steps_note, style
from components.whatif import labels
from sim.scenario import RECORDED, TWIN
from sim.scenario.outputs import TIMELINE_STEP_S

SCHEME_ORDER: tuple[str, ...] = (RECORDED, TWIN, "fifo", "sjf", "srtf", "qssf", "las", "slurm")
SCHEME_COLORS: dict[str, str] = {
    RECORDED: "#000000",
    "fifo": PALETTE[3],
    "sjf": PALETTE[1],
    "srtf": PALETTE[2],
    "qssf": PALETTE[0],
    "las": PALETTE[5],
    TWIN: PALETTE[4],
    "slurm": "#7F7F7F",
}
SCHEME_DASH: dict[str, str] = {RECORDED: "dot", TWIN: "dash"}  # the record and the baseline drawn apart
TABLE_METRICS: tuple[str, ...] = (
    "jobs",
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_queue_s",
    "median_queue_s",
    "p95_queue_s",
    "p99_queue_s",
    "avg_bounded_slowdown",
    "gpu_util_pct",
    "unplaceable",
    "waiting_at_end",
    "avg_jct_x_vs_recorded",
    "avg_jct_x_vs_baseline",
    "avg_queue_x_vs_recorded",
    "avg_queue_x_vs_baseline",
    "gpu_util_pp_vs_baseline",
)
TOP_VCS = 10
CES_NUMBERS: tuple[tuple[str, str, str], ...] = (
    ("original_used_pct", "Used nodes, always on", "%"),
    ("optimized_used_pct", "Used nodes, CES", "%"),
    ("poweroff_mean_nodes", "Nodes off (mean)", "nodes"),
    ("energy_saved_kwh", "Energy saved", "kWh"),
    ("energy_saved_pct", "Energy saved", "%"),
    ("cost_saved", "Cost saved", "currency"),
    ("co2_saved_kg", "CO₂ saved", "kg"),
    ("lack_node_steps", "Shortfall", "node-steps"),
    ("lack_max_nodes", "Worst shortfall", "nodes"),
    ("daily_change_times", "Power changes", "per day"),
)


def scheme_color(scheme: str) -> str:
    """The fixed colour of a scheme (recorded or a policy)."""
    return SCHEME_COLORS.get(scheme, PALETTE[6])


def ordered_schemes(df: pl.DataFrame) -> list[str]:
    """The schemes of a frame in display order: SCHEME_ORDER first, any others after them by name."""
    present = set(df.get_column("scheme").unique().to_list())
    return [s for s in SCHEME_ORDER if s in present] + sorted(present - set(SCHEME_ORDER))


def metric_cell(name: str, value: float | None) -> html.Td:
    """A metric's table cell in human units, its exact value on hover."""
    if value is None:
        return html.Td("–", className="text-nowrap")
    kind = labels.METRICS[name].kind
    if kind:
        text, exact = units.show(kind, value)
    else:
        text, exact = (f"{value:.2f}×" if "_x_" in name else f"{value:,.2f}"), f"{value:.6g}"
    return html.Td(text, title=exact, className="text-nowrap")


def comparison_table(summary: pl.DataFrame) -> dbc.Table:
    """The recorded baseline and each policy: JCT, queue, slowdown, utilisation and improvement factors (what each
    means on hover of its header)."""
    names = [n for n in TABLE_METRICS if n in summary.columns]
    # NOTE: headers wrap (17 columns); cells stay on one line so numbers never break
    head = html.Thead(
        html.Tr(
            [
                html.Th("scheme", className="align-bottom"),
                *(
                    html.Th(labels.metric_label(n), title=labels.metric_help(n), className="align-bottom metric-head")
                    for n in names
                ),
            ]
        )
    )
    rows = []
    for row in summary.iter_rows(named=True):
        cells = [html.Td(row["scheme"]), *(metric_cell(n, row[n]) for n in names)]
        rows.append(html.Tr(cells, id=f"whatif-row-{row['scheme']}"))
    table = dbc.Table([head, html.Tbody(rows)], bordered=False, hover=True, size="sm", responsive=True, striped=True)
    table.className = "small"
    return table


SCHEME_LABELS = {RECORDED: "recorded", TWIN: "Slurm twin", "slurm": "Slurm twin with knobs"}


def scheme_label(scheme: str) -> str:
    """A scheme's name as the page writes it (FIFO, QSSF, recorded, Slurm twin)."""
    return SCHEME_LABELS.get(scheme, scheme.upper())


def ratio_phrase(ratio: float | None, what: str, reference: str) -> str:
    """'0.13× FIFO's mean queue, 7.8× shorter': a ratio (scheme / reference) with its direction."""
    if ratio is None or not np.isfinite(ratio):
        return f"{reference}'s {what}: no ratio"
    if abs(ratio - 1) < 0.005:
        return f"{ratio:.2f}× {reference}'s {what}, the same"
    if ratio <= 0:
        return f"0× {reference}'s {what}: none at all"
    direction = f"{_times(1 / ratio)}× shorter" if ratio < 1 else f"{_times(ratio)}× longer"
    return f"{_times(ratio)}× {reference}'s {what}, {direction}"


def _times(value: float) -> str:
    """A factor with two significant digits, whole above 100 (0.13, 7.8, 690)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.2g}"


def ratio_sentences(summary: pl.DataFrame, baseline: str | None) -> list[str]:
    """One sentence per simulated scheme other than the baseline: its mean queue and JCT against the baseline's,
    and where the baseline has an error band, the range each change spans within it."""
    if baseline is None or "avg_queue_x_vs_baseline" not in summary.columns:
        return []
    name = scheme_label(baseline)
    out = []
    for row in summary.iter_rows(named=True):
        if row["scheme"] in ("recorded", baseline):
            continue
        queue = ratio_phrase(row["avg_queue_x_vs_baseline"], "mean queue", name) + _band(row, "avg_queue", name)
        jct = ratio_phrase(row["avg_jct_x_vs_baseline"], "mean JCT", name) + _band(row, "avg_jct", name)
        out.append(f"{scheme_label(row['scheme'])}: {queue}; {jct}{_util_change(row, name)}.")
    return out


def _band(row: dict, metric: str, name: str) -> str:
    """' (0.50–5.6× within {name}'s own error: not told apart from it)', or '' without a band."""
    low, high = row.get(f"{metric}_x_vs_baseline_lo"), row.get(f"{metric}_x_vs_baseline_hi")
    if low is None or high is None:
        return ""
    verdict = "not told apart from it" if low <= 1 <= high else "beyond it"
    return f" ({_times(low)}–{_times(high)}× within {name}'s own error: {verdict})"


def _util_change(row: dict, name: str) -> str:
    """'; utilisation −1.9 points against {name}'s (−3.1 to −0.7)', or '' when not known."""
    change = row.get("gpu_util_pp_vs_baseline")
    if change is None:
        return ""
    low, high = row.get("gpu_util_pp_vs_baseline_lo"), row.get("gpu_util_pp_vs_baseline_hi")
    band = "" if low is None or high is None else f" ({low:+.1f} to {high:+.1f} within its error)"
    return f"; utilisation {change:+.1f} points against {name}'s{band}"


def _replay_value(value: float | None, metric: str) -> str:
    if value is None:
        return "–"
    if metric.startswith("start order"):
        return f"{value:.3f}"
    return f"{value:.1f} %" if metric == "GPU utilisation" else units.duration(value)


def replay_table(replay: dict) -> dbc.Table:
    """The baseline's replay beside the record: each metric's recorded and replayed value and their ratio."""
    head = html.Thead(
        html.Tr(
            [
                html.Th(h)
                for h in ("", "recorded", f"replayed ({scheme_label(replay['baseline'])})", "replayed ÷ recorded")
            ]
        )
    )
    rows = [
        html.Tr(
            [
                html.Td(line["metric"]),
                html.Td(_replay_value(line["recorded"], line["metric"])),
                html.Td(_replay_value(line["replayed"], line["metric"])),
                html.Td("–" if line["ratio"] is None else f"{line['ratio']:.2f}×"),
            ]
        )
        for line in replay["lines"]
    ]
    return dbc.Table([head, html.Tbody(rows)], size="sm", bordered=False, className="small mb-2", id="whatif-replay")


def cdf_figure(cdf: pl.DataFrame, metric: str, title: str) -> go.Figure:
    """CDF of JCT or queue delay per scheme on a log time axis."""
    part = cdf.filter(pl.col("metric") == metric) if cdf.height else cdf
    if part.is_empty():
        return empty_figure("No jobs ran.", title)
    fig = go.Figure()
    for scheme in ordered_schemes(part):
        rows = part.filter(pl.col("scheme") == scheme)
        x = np.maximum(rows["value_s"].to_numpy(), 1.0)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=rows["fraction"].to_numpy() * 100,
                customdata=[units.duration(v) for v in rows["value_s"].to_list()],
                hovertemplate="≤ %{customdata}<br>%{y:.1f} % of jobs<extra>%{fullData.name}</extra>",
                name=scheme,
                mode="lines",
                line={"color": scheme_color(scheme), "dash": SCHEME_DASH.get(scheme, "solid")},
            )
        )
    duration_axis(fig, 1, float(max(part["value_s"].max() or 1, 60)))
    fig.update_yaxes(range=[0, 100])
    return style(fig, title, "time (log scale; 0 shown at 1 s)", "% of jobs")


def per_vc_queue_figure(per_vc: pl.DataFrame) -> go.Figure:
    """Average queue per VC and scheme: the top VCs by FIFO (else first) queue plus 'all' (paper Fig. 13)."""
    title = "Average queueing delay per VC"
    if per_vc.is_empty():
        return empty_figure("No jobs ran.", title)
    schemes = ordered_schemes(per_vc)
    ranking = "fifo" if "fifo" in schemes else schemes[0]
    top = per_vc.filter(pl.col("scheme") == ranking).sort("avg_queue_s", descending=True).head(TOP_VCS)["vc"].to_list()
    overall = per_vc.group_by("scheme").agg(
        ((pl.col("avg_queue_s") * pl.col("jobs")).sum() / pl.col("jobs").sum()).alias("avg_queue_s")
    )
    fig = go.Figure()
    for scheme in schemes:
        rows = per_vc.filter(pl.col("scheme") == scheme)
        lookup = dict(zip(rows["vc"].to_list(), rows["avg_queue_s"].to_list(), strict=True))
        lookup["all"] = overall.filter(pl.col("scheme") == scheme)["avg_queue_s"][0]
        names = [*top, "all"]
        values = [lookup.get(v) for v in names]
        fig.add_trace(
            go.Bar(
                x=names,
                y=values,
                name=scheme,
                marker_color=scheme_color(scheme),
                customdata=[units.duration(v) for v in values],
                hovertemplate="%{x}: %{customdata}<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(barmode="group")
    positive = per_vc.filter(pl.col("avg_queue_s") > 0)["avg_queue_s"]
    duration_axis(fig, float(positive.min() or 1), float(max(positive.max() or 1, 60)), axis="y")
    return style(fig, title, "VC", "mean queue (log scale)")


SAMPLE_EVERY = "10m"  # the step of the simulator's timelines (sim.scenario.outputs.TIMELINE_STEP_S, CES's series)
SAMPLE_WORDS = "10-minute sample"
TIMELINE_RANGE = {"queued_jobs": ("queued_jobs", "queued_jobs"), "util_pct": ("util_pct", "util_pct")}
CES_LINES: tuple[tuple[str, str, str, str], ...] = (  # column, name, colour, dash
    ("total", "total", PALETTE[6], "dash"),
    ("active", "powered on", PALETTE[3], "solid"),
    ("running", "running", PALETTE[0], "solid"),
    ("prediction", "predicted", PALETTE[1], "dot"),
)
CES_GROUP = "ces"


def thinned_timeline(timeline: pl.DataFrame, viewport_px: int) -> pl.DataFrame:
    """A run's timeline (scheme, time, used_gpus, queued_jobs, capacity_gpus every 10 minutes) as its half-width
    chart draws it: per scheme and bucket of about a pixel, the lowest and highest queue and utilisation (%)."""
    if timeline.is_empty():
        return timeline
    util = (pl.col("used_gpus") / pl.max_horizontal(pl.col("capacity_gpus"), 1) * 100).alias("util_pct")
    width_px = decimate.plot_width_px(viewport_px, lg_share=0.5)
    return decimate.thin(timeline.with_columns(util), width_px, TIMELINE_RANGE, "scheme", SAMPLE_EVERY)


def _thinned_line(rows: pl.DataFrame, series: str) -> dict:
    """The x and y of a thinned series' line (each bucket's lowest then highest value)."""
    bucket, values, _ = range_points(rows, series)
    return {"x": epoch_ms(rows["time"])[bucket], "y": values.astype(np.float32)}


def timeline_figure(timeline: pl.DataFrame) -> go.Figure:
    """Jobs waiting (top) and GPU utilisation (bottom) over the window, per scheme (thinned_timeline's frame)."""
    title = "Queue length and GPU utilisation over time"
    if timeline.is_empty():
        return empty_figure("No timeline.", title)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for scheme in ordered_schemes(timeline):
        rows = timeline.filter(pl.col("scheme") == scheme)
        color, dash = scheme_color(scheme), SCHEME_DASH.get(scheme, "solid")
        common = {"mode": "lines", "name": scheme, "legendgroup": scheme, "line": {"color": color, "dash": dash}}
        fig.add_trace(go.Scatter(**_thinned_line(rows, "queued_jobs"), **common), row=1, col=1)
        fig.add_trace(go.Scatter(**_thinned_line(rows, "util_pct"), showlegend=False, **common), row=2, col=1)
    fig.update_xaxes(type="date")
    fig.update_yaxes(title_text="jobs waiting", row=1, col=1)
    fig.update_yaxes(title_text="GPU utilisation %", row=2, col=1)
    return style(fig, title + steps_note(timeline, SAMPLE_WORDS, TIMELINE_STEP_S))


def density_figure(density: pl.DataFrame, name: str) -> go.Figure:
    """Predicted vs actual duration as a log-log density, with the perfect-prediction diagonal."""
    title = f"Predicted vs actual duration ({name})"
    if density.is_empty():
        return empty_figure("No predictions.", title)
    fig = go.Figure(
        go.Scatter(
            x=10 ** density["log10_actual_s"].to_numpy(),
            y=10 ** density["log10_predicted_s"].to_numpy(),
            mode="markers",
            marker={
                "size": 7,
                "symbol": "square",
                "color": np.log10(density["jobs"].to_numpy() + 1),
                "colorscale": "Blues",
                "showscale": True,
                "colorbar": {"title": "log10 jobs"},
            },
            text=[f"{n:,} jobs" for n in density["jobs"].to_list()],
            customdata=[
                (units.duration(10**a), units.duration(10**p))
                for a, p in density.select("log10_actual_s", "log10_predicted_s").iter_rows()
            ],
            hovertemplate="actual %{customdata[0]}<br>predicted %{customdata[1]}<br>%{text}<extra></extra>",
            showlegend=False,
        )
    )
    top = float(10 ** max(density["log10_actual_s"].max(), density["log10_predicted_s"].max()))
    fig.add_trace(go.Scatter(x=[1, top], y=[1, top], mode="lines", line={"color": "#9ca3af", "dash": "dash"}))
    duration_axis(fig, 1, max(top, 60))
    duration_axis(fig, 1, max(top, 60), axis="y")
    fig.update_layout(showlegend=False)
    return style(fig, title, "actual duration (log scale)", "predicted duration (log scale)")


def ladder_figure(ladder: pl.DataFrame | None) -> go.Figure:
    """QSSF's average JCT with each predictor, from perfect (oracle) to no information."""
    title = "QSSF average JCT by predictor quality"
    if ladder is None or ladder.is_empty():
        return empty_figure("Enable 'predictor ladder' to compare predictors.", title)
    labels = [
        f"{p}<br>ρ={r:.2f}" if r is not None else p
        for p, r in zip(ladder["predictor"].to_list(), ladder["spearman"].to_list(), strict=True)
    ]
    divisor_s, unit = units.duration_scale(float(ladder["avg_jct_s"].max() or 0))
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=ladder["avg_jct_s"] / divisor_s,
            customdata=[units.duration(v) for v in ladder["avg_jct_s"].to_list()],
            hovertemplate="%{x}<br>mean JCT %{customdata}<extra></extra>",
            marker_color=PALETTE[0],
            name="mean JCT",
        )
    )
    return style(fig, title, "predictor (Spearman ρ with true duration)", f"mean JCT ({unit})")


def importance_frame(importance: dict[str, float] | None) -> pl.DataFrame:
    """LightGBM's gain share (%) per feature as a frame (feature, gain_pct), the largest first."""
    if not importance:
        return pl.DataFrame(schema={"feature": pl.String, "gain_pct": pl.Float64})
    frame = pl.DataFrame({"feature": list(importance), "gain_pct": list(importance.values())})
    return frame.sort("gain_pct", descending=True, maintain_order=True)


def importance_figure(importance: pl.DataFrame) -> go.Figure:
    """LightGBM's gain share per feature as horizontal bars, the largest on top."""
    title = "LightGBM feature importance (gain)"
    if importance.is_empty():
        return empty_figure("No LightGBM model was fitted.", title)
    rows = importance.sort("gain_pct", maintain_order=True)  # Plotly draws the first bar at the bottom
    fig = go.Figure(
        go.Bar(
            x=rows["gain_pct"].to_list(),
            y=rows["feature"].to_list(),
            orientation="h",
            marker_color=PALETTE[0],
            hovertemplate="%{y}: %{x:.1f} % of the total gain<extra></extra>",
        )
    )
    fig.update_yaxes(type="category")
    fig.update_layout(showlegend=False)
    return style(fig, title, "gain (share of total, %)", "feature")


def thinned_ces(timeline: pl.DataFrame, viewport_px: int) -> pl.DataFrame:
    """The CES timeline (time and CES_LINES' columns every 10 minutes) as its full-width chart draws it: per bucket of
    about a pixel, each line's lowest and highest value."""
    if timeline.is_empty():
        return timeline
    lines = {col: (col, col) for col, *_ in CES_LINES}
    one = timeline.with_columns(pl.lit(CES_GROUP).alias(CES_GROUP))
    return decimate.thin(one, decimate.plot_width_px(viewport_px), lines, CES_GROUP, SAMPLE_EVERY)


def ces_figure(timeline: pl.DataFrame) -> go.Figure:
    """Running, predicted, powered-on and total nodes over the CES window (paper Figs. 14/15; thinned_ces' frame)."""
    title = "CES: nodes over time"
    if timeline.is_empty():
        return empty_figure("No CES timeline.", title)
    fig = go.Figure()
    for col, name, color, dash in CES_LINES:
        fig.add_trace(
            go.Scatter(**_thinned_line(timeline, col), name=name, mode="lines", line={"color": color, "dash": dash})
        )
    fig.update_xaxes(type="date")
    return style(fig, title + steps_note(timeline, SAMPLE_WORDS, TIMELINE_STEP_S), "", "nodes")


def _ces_value(key: str, value: float | None, unit: str) -> tuple[str, str]:
    """A CES number as shown (energy in kWh/MWh, shares in %) and exactly, for its hover."""
    if value is None:
        return "–", ""
    kind = labels.METRICS[key].kind if key in labels.METRICS else ""
    if kind in ("energy", "percent"):
        return units.show(kind, value)
    shown = f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
    return f"{shown} {unit}", f"{value} {unit}"


def ces_numbers(metrics: dict) -> dbc.Row:
    """The CES outcome as a row of small number cards."""
    cards = []
    for key, label, unit in CES_NUMBERS:
        text, exact = _ces_value(key, metrics.get(key), unit)
        body = [
            html.Div(label, className="small text-muted", title=labels.metric_help(key)),
            html.Div(text, className="fw-semibold", title=exact),
        ]
        cards.append(dbc.Col(dbc.Card(dbc.CardBody(body, className="p-2"), id=f"whatif-ces-{key}"), xs=6, md=3, xl=2))
    return dbc.Row(cards, className="g-2 mb-2")


def longest_waits(records: pl.DataFrame, scheme: str, limit: int = 20) -> pl.DataFrame:
    """The jobs that waited longest under scheme."""
    return (
        records.filter((pl.col("scheme") == scheme) & pl.col("placed"))
        .sort(["queue_s", "job_id"], descending=[True, False])
        .head(limit)
        .select("job_id", "vc", "gpu_num", "duration_s", "queue_s")
    )


def jobs_ahead(records: pl.DataFrame, scheme: str, job_id: int) -> tuple[dict, pl.DataFrame]:
    """Job job_id under scheme and the jobs of its VC that waited with it and started before it."""
    mine = records.filter((pl.col("scheme") == scheme) & (pl.col("job_id") == job_id))
    if mine.is_empty():
        return {}, pl.DataFrame()
    job = mine.row(0, named=True)
    ahead = records.filter(
        (pl.col("scheme") == scheme)
        & (pl.col("vc") == job["vc"])
        & pl.col("placed")
        & (pl.col("job_id") != job_id)
        & (pl.col("submit_s") < job["start_s"])
        & (pl.col("start_s") > job["submit_s"])
        & (pl.col("start_s") <= job["start_s"])
    )
    return job, ahead


def queue_position(job: dict, ahead: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Step function of the jobs ahead of job that are still waiting, from its submit to its start."""
    if not job:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sub, st = ahead["submit_s"].to_numpy(), ahead["start_s"].to_numpy()
    times = np.unique(np.concatenate([[job["submit_s"], job["start_s"]], np.clip(sub, job["submit_s"], None), st]))
    times = times[(times >= job["submit_s"]) & (times <= job["start_s"])]
    waiting = [(int(((sub <= t) & (st > t)).sum())) for t in times.tolist()]
    return times, np.asarray(waiting, dtype=np.int64)


def wait_figure(records: pl.DataFrame, job_id: int, t0: datetime, schemes: list[str]) -> go.Figure:
    """The chosen job's queue position over time (jobs ahead of it still waiting) in each scheme."""
    title = f"Why did job {job_id} wait? Jobs ahead of it, still waiting"
    fig = go.Figure()
    for scheme in schemes:
        job, ahead = jobs_ahead(records, scheme, job_id)
        times, waiting = queue_position(job, ahead)
        if times.shape[0] == 0:
            continue
        x = [t0 + timedelta(seconds=int(s)) for s in times.tolist()]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=waiting,
                name=f"{scheme}: waited {units.duration(job['queue_s'])}",
                mode="lines",
                line={"shape": "hv", "color": scheme_color(scheme)},
            )
        )
    if not fig.data:
        return empty_figure("Pick a job from the table of longest waits.", title)
    return style(fig, title, "", "jobs ahead, waiting")


def ahead_table(
    records: pl.DataFrame, scheme: str, job_id: int, limit: int = 15, href: Callable[[int], str] | None = None
) -> dbc.Table:
    """The largest jobs (GPU time) that started ahead of job_id under scheme, each linked to href(its id) if given
    (a simulated job keeps its id in the trace)."""
    _, ahead = jobs_ahead(records, scheme, job_id)
    if ahead.is_empty():
        return dbc.Table([html.Tbody(html.Tr(html.Td("No job started ahead of it while it waited.")))], size="sm")
    top = ahead.with_columns((pl.col("gpu_num") * pl.col("duration_s")).alias("gpu_s")).sort("gpu_s", descending=True)
    head = html.Thead(html.Tr([html.Th(c) for c in ("job", "GPUs", "duration", "submitted +", "started +")]))
    rows = [
        html.Tr(
            [
                html.Td(dcc.Link(str(r["job_id"]), href=href(r["job_id"])) if href else r["job_id"]),
                html.Td(r["gpu_num"]),
                html.Td(units.duration(r["duration_s"])),
                html.Td(units.duration(r["submit_s"])),
                html.Td(units.duration(r["start_s"])),
            ]
        )
        for r in top.head(limit).iter_rows(named=True)
    ]
    caption = html.Caption(f"{ahead.height} jobs of the VC started ahead of it under {scheme}; largest first")
    return dbc.Table([caption, head, html.Tbody(rows)], size="sm", striped=True)
